/* vm/vm.h: the VM for ONNX models whose shapes depend on run-time data
 * (docs/VM.md).
 *
 * kiln's ops take shape parameters (a Reshape's shape, a Slice's starts, a
 * Resize's sizes, ...) as attributes. When such an input is run-time data the
 * model has no static graph, and kiln_onnx_load fails on that node with "must
 * be a constant". The VM runs such a model anyway:
 *
 * - at create, the ONNX graph is split in two (one classifying import). The
 *   dynamic part is every node
 *   whose conversion needs a parameter that is data, and every node that
 *   depends on one of those; the static part is the rest. The static part
 *   is imported as usual and compiled into a .so (or, with `reference`, run
 *   by the reference executor); its outputs are the model's outputs it
 *   computes plus every value the dynamic part reads.
 * - at run, after the static part, the VM runs the dynamic nodes one by one:
 *   for each, the values of its inputs are known, so the node is converted
 *   by the importer with its parameter inputs bound to their run-time values
 *   (a one-node graph, shapes static) and run by the reference kernels.
 *   These one-node graphs are cached per shape class (every input's dtype and
 *   shape, and the bound parameters' values): a run whose shapes and
 *   parameters were seen before converts nothing and allocates nothing.
 *   NonZero, Compress, NonMaxSuppression, TopK and RoiAlign run as the VM's
 *   own kernels instead (vm_kernels.c: output extents from the values, no
 *   conversion), and a heavy Gemm/MatMul/Conv class is compiled.
 *
 * A model whose graph inputs have symbolic (dim_param) or unknown dims is
 * accepted too: create imports nothing; each input-shape class (the shapes
 * of all inputs at a run) gets a VM of its own, built as above with the
 * inputs' shapes bound (its static part compiled through the object cache),
 * at the first run of that class. The 4 most recently used are kept: a run
 * of a class seen before imports, compiles and allocates nothing.
 *
 * It lives in the runtime library with the ONNX importer it converts nodes
 * with; compiling (a .onnx model's static part, a heavy node's class) is
 * libkiln's, handed in as kiln_vm_options.compile: kiln_vm_create,
 * kiln_vm_create_buffer and kiln_vm_load (libkiln) set it, and
 * kiln_vm_open, kiln_vm_open_buffer and kiln_vm_open_so (the runtime) take
 * it from the options. A .so that kiln_vm_export wrote runs with the
 * runtime alone (kiln_vm_open_so: heavy classes on reference kernels).
 * Not thread-safe: one run at a time per VM. */
#ifndef KILN_VM_VM_H
#define KILN_VM_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "kiln/profile.h"
#include "kiln/runtime.h"
#include "kiln/vm.h"



/* Opens the .onnx model at `path` (opts may be NULL). Fails like
 * kiln_onnx_load on anything but data parameters; a model that imports as a
 * static graph works too (everything is static then). libkiln: compiles
 * with kiln_vm_compile_graph unless opts->compile is set. */
kiln_status kiln_vm_create(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                           kiln_error *err);
/* The same from the bytes of an ONNX ModelProto (copied: data may be freed
 * on return). base_dir is where external data files are looked up (NULL:
 * the current directory). */
kiln_status kiln_vm_create_buffer(const void *data, size_t size, const char *base_dir,
                                  const kiln_vm_options *opts, kiln_vm **out, kiln_error *err);
/* libkiln's compiler for the VM (kiln_vm_compile_fn): kiln_compile into a
 * temporary .so, then kiln_module_load. */
kiln_status kiln_vm_compile_graph(const kiln_graph *g, const char *cache_dir, const char *target,
                                  const char *records, int num_threads, kiln_module **out,
                                  kiln_error *err);


/* What runs where: nodes of the ONNX graph in the dynamic part, whether a
 * static part exists and whether it is compiled. */
/* Steps of one run, for profilers (`kiln profile`): running steps 0..n-1 once,
 * in order, is kiln_vm_run. Step 0 is the VM's own (inputs checked and handed
 * to the static part), then the static part's steps (compiled kernels, or
 * reference nodes), then one per data-dependent node: a VM kernel, a node
 * converted per shape class, If/Loop/Scan (bodies included) or a sequence op.
 * Strings live as long as the VM; `shapes` (may be NULL) gets the step's
 * argument shapes (for a data-dependent node, its inputs at the last run).
 * With symbolic input dims, the steps are those of the last run's input-shape
 * class (before any run: step 0 only), and step 0 picks the class; a batch
 * run in chunks (vm_batch.c) has each chunk's steps followed by one that
 * joins its outputs ("vm: a chunk's outputs joined", kind "vm"). */
typedef struct kiln_vm_step_info {
    const char *name, *op;
    const char *kind;    /* "vm", "compiled", "reference", "vm kernel", "vm converted",
                            "vm compiled" (a heavy node's class, compiled),
                            "vm control flow", "vm sequence", "vm fused" (read by its
                            reader, not run), "vm view" (its input's data renamed) */
    const char *layouts; /* compiled steps; NULL otherwise */
    double flops;        /* 0 if unknown */
    uint64_t workload_hash;
} kiln_vm_step_desc;
int kiln_vm_num_steps(const kiln_vm *vm);
kiln_status kiln_vm_step_info(const kiln_vm *vm, int i, kiln_vm_step_desc *info, char *shapes,
                              size_t size);
kiln_status kiln_vm_run_step(kiln_vm *vm, int i, kiln_error *err);
/* How many carried values of the Loop at step i its body only appends to
 * (accumulators, vm_flow.c); 0 for any other step. */
int kiln_vm_step_accumulators(const kiln_vm *vm, int i);


/* vm/compiler/vm_profile.c (libkiln): `kiln profile` for a VM, on the
 * inputs set. kiln_vm_profile: kiln_profile_module
 * over the VM's steps (kiln_vm_step_info: its own rows, the static part's
 * kernels, one row per data-dependent node), after one run that fixes the
 * steps' shapes; the report's executor is "vm", opts->model names it (NULL:
 * "model.onnx"). kiln_vm_report_describe is that description (one run, then
 * target and steps) for the CLI's own report. */
kiln_status kiln_vm_profile(kiln_vm *vm, const kiln_profile_options *opts, kiln_profile **out,
                            kiln_error *err);
struct kiln_report;
kiln_status kiln_vm_report_describe(kiln_vm *vm, struct kiln_report *r, kiln_error *err);

/* vm_so.c: a model the VM runs as one compiled .so (docs/VM.md "One .so",
 * docs/FORMATS.md "The VM section"). kiln_vm_export splits the ONNX model
 * as create does and writes out_path: the static part compiled as
 * kiln_compile compiles a graph (co: its options; NULL: defaults), plus a
 * VM section (a versioned descriptor and the ONNX bytes of the dynamic
 * nodes and the initializers they read). A model with symbolic input dims
 * is refused unless eo binds every such input's shape. */
typedef struct kiln_vm_export_options {
    const char *const *shape_names; /* inputs bound to a fixed shape */
    const kiln_shape *shapes;
    int n_shapes;
} kiln_vm_export_options;
typedef struct kiln_vm_export_info {
    int static_nodes, dynamic_nodes;             /* ONNX nodes of each part */
    int initializers_kept, initializers_dropped; /* in the section's ONNX bytes */
    size_t onnx_bytes, section_bytes;
    bool static_part;                            /* the .so holds a compiled static part */
} kiln_vm_export_info;
kiln_status kiln_vm_export(const void *data, size_t size, const char *base_dir,
                           const kiln_compile_options *co, const kiln_vm_export_options *eo,
                           const char *out_path, kiln_vm_export_info *info, kiln_error *err);
/* A VM from a .so kiln_vm_export wrote: the static part is that .so's
 * compiled model (no compiler runs), the dynamic nodes come from the
 * section. A corrupt or truncated section is an error naming the file.
 * opts->reference is refused; num_threads applies to the compiled parts.
 * kiln_vm_load (libkiln) compiles heavy classes with kiln_vm_compile_graph
 * unless opts->compile is set; kiln_vm_open_so (the runtime) uses
 * opts->compile as given (NULL: heavy classes on reference kernels). */
kiln_status kiln_vm_load(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                         kiln_error *err);


#endif
