/* vm/vm_so.c: opening a model the VM runs from one compiled .so (docs/VM.md
 * "One .so", docs/FORMATS.md "The VM section"); the runtime's, no compiler
 * needed. vm/compiler/vm_export.c (libkiln) writes such a .so.
 *
 * Load: dlopen, the section's symbols, the header, checksum and descriptor
 * checked, the ONNX decoded; the static part is the same .so opened by
 * kiln_module_load (no compiler runs), the dynamic nodes set up as
 * kiln_vm_open sets them up. */
#include <cJSON.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/module_internal.h"
#include "util/error.h"
#include "vm/vm_internal.h"
#include "vm/vm_section.h"

/* ---- load --------------------------------------------------------------------- */

static void *open_so(const char *path, char *local, size_t cap)
{
    /* a path without '/' would make dlopen search the library path */
    if (!strchr(path, '/')) {
        snprintf(local, cap, "./%s", path);
        path = local;
    }
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

bool kiln_vm_so_has_section(const char *path)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return false;
    char local[4200];
    if (kiln_so_complete(path, NULL) != KILN_OK)
        return false;
    void *dl = open_so(path, local, sizeof local);
    if (!dl)
        return false;
    bool has = dlsym(dl, SECTION_SYMBOL) != NULL;
    dlclose(dl);
    return has;
}

/* Whether JSON array a holds exactly n strings, name(i) each. */
static bool same_names(const cJSON *a, int n, const char *(*name)(const void *, int),
                       const void *ctx)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return false;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsString(e) || strcmp(e->valuestring, name(ctx, i)) != 0)
            return false;
    }
    return true;
}

static const char *mod_in_name(const void *m, int i)
{
    const char *n = "";
    kiln_module_input_info(m, i, &n, NULL, NULL);
    return n;
}
static const char *mod_out_name(const void *m, int i)
{
    const char *n = "";
    kiln_module_output_info(m, i, &n, NULL, NULL);
    return n;
}

/* The static part: the .so's own module, its inputs and outputs by name. */
static kiln_status load_static_so(kiln_vm *vm, const char *path, const cJSON *st,
                                  kiln_error *err)
{
    kiln_module_options mo = {.num_threads = vm->num_threads, .bind_threads = -1};
    kiln_status s = kiln_module_load(path, &mo, &vm->smod, err);
    if (s != KILN_OK)
        return s;
    vm->s_n_in = kiln_module_num_inputs(vm->smod);
    vm->s_n_out = kiln_module_num_outputs(vm->smod);
    if (!same_names(cJSON_GetObjectItemCaseSensitive(st, "inputs"), vm->s_n_in, mod_in_name,
                    vm->smod) ||
        !same_names(cJSON_GetObjectItemCaseSensitive(st, "outputs"), vm->s_n_out, mod_out_name,
                    vm->smod))
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: the VM section's static part does not match the compiled model's "
                           "inputs and outputs (a corrupt .so?)",
                           path);
    vm->s_in_map = calloc((size_t)vm->s_n_in + 1, sizeof *vm->s_in_map);
    vm->s_out_names = calloc((size_t)vm->s_n_out + 1, sizeof *vm->s_out_names);
    if (!vm->s_in_map || !vm->s_out_names)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < vm->s_n_in; i++) {
        const char *nm = mod_in_name(vm->smod, i);
        vm->s_in_map[i] = -1;
        for (int j = 0; j < vm->n_in; j++)
            if (!strcmp(vm->in_vi[j]->name, nm))
                vm->s_in_map[i] = j;
        if (vm->s_in_map[i] < 0)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "%s: the static part's input '%s' is no model input", path, nm);
    }
    for (int i = 0; i < vm->s_n_out; i++)
        vm->s_out_names[i] = mod_out_name(vm->smod, i);
    return KILN_OK;
}

/* The checked section of an open .so: the header, descriptor and ONNX bytes. */
static kiln_status read_section(void *dl, const char *path, const section_header **hp,
                                cJSON **desc, kiln_error *err)
{
    const unsigned char *p = dlsym(dl, SECTION_SYMBOL), *end = dlsym(dl, SECTION_END);
    if (!p || !end)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: no VM section (symbol %s)", path,
                           SECTION_SYMBOL);
    size_t avail = end > p ? (size_t)(end - p) : 0;
    section_header h;
    if (avail < sizeof h)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: VM section truncated (%zu bytes)", path,
                           avail);
    memcpy(&h, p, sizeof h);
    if (memcmp(h.magic, SECTION_MAGIC, 8) != 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: VM section corrupt (bad magic)", path);
    if (h.version != SECTION_VERSION)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: VM section format version %u, this kiln reads version %u: "
                           "recompile the model with this kiln",
                           path, (unsigned)h.version, SECTION_VERSION);
    if (h.desc_size > avail - sizeof h || h.onnx_size > avail - sizeof h - h.desc_size)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: VM section truncated (header says %llu + %llu bytes, %zu there)",
                           path, (unsigned long long)h.desc_size,
                           (unsigned long long)h.onnx_size, avail - sizeof h);
    const unsigned char *d = p + sizeof h;
    if (fnv1a(fnv1a(0xcbf29ce484222325ull, d, h.desc_size), d + h.desc_size, h.onnx_size) !=
        h.checksum)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: VM section corrupt (checksum mismatch)",
                           path);
    *desc = cJSON_ParseWithLength((const char *)d, (size_t)h.desc_size);
    if (!*desc || !cJSON_IsObject(*desc) ||
        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(*desc, "format")) != SECTION_VERSION)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: VM section's descriptor is not valid", path);
    *hp = (const section_header *)p;
    return KILN_OK;
}

kiln_status kiln_vm_open_so(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                            kiln_error *err)
{
    if (!path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_open_so: no path");
    kiln_vm_options def = {0};
    const kiln_vm_options *o = opts ? opts : &def;
    if (o->reference)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%s: a compiled model's static part runs compiled (no reference "
                           "executor for a .so)",
                           path);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return kiln_errorf(err, KILN_ERR_IO, "%s: no such file", path);
    char local[4200];
    kiln_status es = kiln_so_complete(path, err);
    if (es != KILN_OK)
        return es;
    dlerror();
    void *dl = open_so(path, local, sizeof local);
    if (!dl) {
        const char *why = dlerror();
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: cannot load as a shared object: %s", path,
                           why ? why : "unknown error");
    }
    const section_header *h = NULL;
    cJSON *desc = NULL;
    kiln_vm *vm = NULL;
    bool *dyn = NULL;
    kiln_status s = read_section(dl, path, &h, &desc, err);
    if (s == KILN_OK && !(vm = calloc(1, sizeof *vm)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK && (kiln_vm_copy_options(vm, o) != KILN_OK || !(vm->base_dir = strdup("."))))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK) {
        vm->from_so = true;
        const unsigned char *onnx = (const unsigned char *)(h + 1) + h->desc_size;
        if ((s = onnx_decode_model(onnx, (size_t)h->onnx_size, &vm->m, err)) == KILN_OK &&
            !(vm->graph = vm->m->graph))
            s = kiln_errorf(err, KILN_ERR_PARSE, "the model has no graph");
        if (s != KILN_OK)
            kiln_error_prefix(err, s, "%s: VM section's ONNX bytes: ", path);
    }
    if (s == KILN_OK && (s = kiln_vm_init_io(vm, err)) == KILN_OK &&
        (vm->generic ||
         !same_names(cJSON_GetObjectItemCaseSensitive(desc, "inputs"), vm->n_in, vm_in_name, vm) ||
         !same_names(cJSON_GetObjectItemCaseSensitive(desc, "outputs"), vm->n_out, vm_out_name,
                     vm)))
        s = kiln_errorf(err, KILN_ERR_PARSE,
                        "%s: VM section's descriptor does not match its ONNX graph's inputs and "
                        "outputs",
                        path);
    if (s == KILN_OK && (h->flags & FLAG_STATIC))
        s = load_static_so(vm, path, cJSON_GetObjectItemCaseSensitive(desc, "static_part"), err);
    if (s == KILN_OK && !(dyn = calloc(vm->graph->n_node + 1, sizeof *dyn)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK) { /* the section holds the dynamic nodes only */
        for (size_t i = 0; i < vm->graph->n_node; i++)
            dyn[i] = true;
        if ((s = kiln_vm_build_dynamic(vm, dyn, err)) != KILN_OK)
            kiln_error_prefix(err, s, "%s: ", path);
    }
    free(dyn);
    cJSON_Delete(desc);
    dlclose(dl); /* the module (if any) holds its own reference */
    if (s != KILN_OK) {
        kiln_vm_destroy(vm);
        return s;
    }
    *out = vm;
    return KILN_OK;
}

bool kiln_vm_from_so(const kiln_vm *vm)
{
    return vm && vm->from_so;
}

bool kiln_vm_heavy_on_reference(const kiln_vm *vm)
{
    if (!vm)
        return false;
    const kiln_vm *root = kiln_vm_root(vm);
    return !root->reference && (root->no_cc || !root->compile);
}

bool kiln_vm_compiles(const kiln_vm *vm)
{
    return vm && kiln_vm_root(vm)->compile != NULL;
}
