/* vm/vm_section.h: the VM section of a compiled .so (docs/FORMATS.md "The
 * VM section"): what the exporter (vm/compiler/vm_export.c, libkiln) writes
 * and the loader (vm_so.c, the runtime) reads.
 *
 * The section (global symbols kiln_vm_section_v1 .. kiln_vm_section_v1_end):
 * a fixed header (magic, format version, flags, sizes, an FNV-1a checksum),
 * a JSON descriptor (the model's inputs and outputs, the static part's
 * inputs and outputs by name, counts), and the ONNX bytes the dynamic part
 * converts from: the graph's inputs and outputs, its dynamic nodes only, and
 * only the initializers those nodes (or their bodies) read. */
#ifndef KILN_VM_SECTION_H
#define KILN_VM_SECTION_H

#include <stddef.h>
#include <stdint.h>

#include "vm/vm_internal.h"

#define SECTION_SYMBOL "kiln_vm_section_v1"
#define SECTION_END "kiln_vm_section_v1_end"
#define SECTION_MAGIC "KILNVM\r\n"
#define SECTION_VERSION 1u
#define FLAG_STATIC 1u /* the .so holds the static part (kiln_model_get) */

typedef struct section_header {
    char magic[8];
    uint32_t version;
    uint32_t flags;
    uint64_t desc_size; /* the JSON descriptor, right after the header */
    uint64_t onnx_size; /* the ONNX ModelProto, right after the descriptor */
    uint64_t checksum;  /* FNV-1a 64 of descriptor and ONNX bytes */
} section_header;

static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The names the descriptor lists: the VM's model inputs and outputs. */
static inline const char *vm_in_name(const void *vm, int i)
{
    return ((const kiln_vm *)vm)->in_vi[i]->name;
}
static inline const char *vm_out_name(const void *vm, int i)
{
    const char *n = ((const kiln_vm *)vm)->out_vi[i]->name;
    return n ? n : "";
}

#endif
