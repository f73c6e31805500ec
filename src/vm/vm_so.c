/* vm/vm_so.c: a model the VM runs, as one compiled .so (docs/VM.md "One .so",
 * docs/FORMATS.md "The VM section").
 *
 * Export (`kiln compile`, VMModule.export): the graph is split as at create
 * (kiln_vm_split). The static part is compiled by the driver exactly as
 * kiln_compile compiles a graph (its kernels through the object cache, its
 * model descriptor, its weights blob), and one more source joins the same
 * link: vm.S, which pulls the VM section (a file written in the build's
 * workspace) in with .incbin, as weights.S pulls in the weights. A model
 * whose nodes are all dynamic has no static part: the .so holds the section
 * alone (linked by the toolchain the same way).
 *
 * The section (global symbols kiln_vm_section_v1 .. kiln_vm_section_v1_end):
 * a fixed header (magic, format version, flags, sizes, an FNV-1a checksum),
 * a JSON descriptor (the model's inputs and outputs, the static part's
 * inputs and outputs by name, counts), and the ONNX bytes the dynamic part
 * converts from: the graph's inputs and outputs, its dynamic nodes only, and
 * only the initializers those nodes (or their bodies) read.
 *
 * Load: dlopen, the section's symbols, the header, checksum and descriptor
 * checked, the ONNX decoded; the static part is the same .so opened by
 * kiln_module_load (no compiler runs), the dynamic nodes set up as
 * kiln_vm_create sets them up. */
#include <cJSON.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/driver.h"
#include "runtime/module_internal.h"
#include "toolchain/toolchain.h"
#include "util/error.h"
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

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* ---- export ------------------------------------------------------------------- */

/* Whether initializer `name` is read by a kept node (an input, or a name its
 * subgraphs read from this scope). */
static bool init_read(const Onnx__GraphProto *g, const bool *keep, const char *name)
{
    for (size_t i = 0; i < g->n_node; i++) {
        if (!keep[i])
            continue;
        const Onnx__NodeProto *np = g->node[i];
        for (size_t k = 0; k < np->n_input; k++)
            if (np->input[k] && !strcmp(np->input[k], name))
                return true;
        for (size_t a = 0; a < np->n_attribute; a++) {
            const char *cap[VM_MAX_CAPTURED];
            int n = np->attribute[a]->g
                        ? kiln_vm_free_names(np->attribute[a]->g, cap, VM_MAX_CAPTURED)
                        : 0;
            for (int j = 0; j < n; j++)
                if (!strcmp(cap[j], name))
                    return true;
        }
    }
    return false;
}

/* The ONNX bytes of the dynamic part: vm->m with only the nodes dyn[]
 * flags and the initializers they read (graph inputs that name a dropped
 * initializer dropped too). *buf is malloc'ed. */
static kiln_status pack_dynamic(const kiln_vm *vm, const bool *dyn, uint8_t **buf, size_t *size,
                                kiln_vm_export_info *info, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    Onnx__NodeProto **nodes = calloc(og->n_node + 1, sizeof *nodes);
    Onnx__TensorProto **inits = calloc(og->n_initializer + 1, sizeof *inits);
    Onnx__ValueInfoProto **ins = calloc(og->n_input + 1, sizeof *ins);
    bool *dropped = calloc(og->n_initializer + 1, sizeof *dropped);
    kiln_status s = KILN_OK;
    if (!nodes || !inits || !ins || !dropped) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    Onnx__GraphProto gp = *og;
    gp.n_node = gp.n_initializer = gp.n_input = 0;
    gp.node = nodes;
    gp.initializer = inits;
    gp.input = ins;
    gp.n_value_info = 0; /* the VM reads no value_info */
    for (size_t i = 0; i < og->n_node; i++)
        if (dyn[i])
            nodes[gp.n_node++] = og->node[i];
    for (size_t i = 0; i < og->n_initializer; i++) {
        const char *nm = og->initializer[i]->name;
        const Onnx__TensorProto *tp = og->initializer[i];
        if (nm && init_read(og, dyn, nm)) {
            if (tp->has_data_location &&
                tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
                s = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                                "initializer '%s', read by a data-dependent node, keeps its data "
                                "in an external file: a .so's VM section cannot hold it yet "
                                "(save the model with its data inside the .onnx)",
                                nm);
                goto done;
            }
            inits[gp.n_initializer++] = og->initializer[i];
        } else
            dropped[i] = true;
    }
    for (size_t i = 0; i < og->n_input; i++) {
        bool drop = false;
        for (size_t j = 0; j < og->n_initializer && !drop; j++)
            drop = dropped[j] && og->input[i]->name && og->initializer[j]->name &&
                   !strcmp(og->input[i]->name, og->initializer[j]->name);
        if (!drop)
            ins[gp.n_input++] = og->input[i];
    }
    Onnx__ModelProto mp = *vm->m;
    mp.graph = &gp;
    *size = onnx__model_proto__get_packed_size(&mp);
    if (!(*buf = malloc(*size ? *size : 1))) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    onnx__model_proto__pack(&mp, *buf);
    info->dynamic_nodes = (int)gp.n_node;
    info->static_nodes = (int)(og->n_node - gp.n_node);
    info->initializers_kept = (int)gp.n_initializer;
    info->initializers_dropped = (int)(og->n_initializer - gp.n_initializer);
    info->onnx_bytes = *size;
done:
    free(nodes);
    free(inits);
    free(ins);
    free(dropped);
    return s;
}

static cJSON *names_array(int n, const char *(*name)(const void *, int), const void *ctx)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(name(ctx, i)))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

static const char *vm_in_name(const void *vm, int i)
{
    return ((const kiln_vm *)vm)->in_vi[i]->name;
}
static const char *vm_out_name(const void *vm, int i)
{
    const char *n = ((const kiln_vm *)vm)->out_vi[i]->name;
    return n ? n : "";
}
static const char *graph_in_name(const void *g, int i)
{
    const char *n = "";
    kiln_graph_input_info(g, i, &n, NULL, NULL);
    return n;
}
static const char *graph_out_name(const void *g, int i)
{
    const char *n = "";
    kiln_graph_output_info(g, i, &n, NULL, NULL);
    return n;
}

/* The JSON descriptor (docs/FORMATS.md). */
static char *descriptor(const kiln_vm *vm, const kiln_vm_export_info *info)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddNumberToObject(j, "format", SECTION_VERSION);
    cJSON_AddStringToObject(j, "kiln", KILN_VERSION);
    cJSON_AddItemToObject(j, "inputs", names_array(vm->n_in, vm_in_name, vm));
    cJSON_AddItemToObject(j, "outputs", names_array(vm->n_out, vm_out_name, vm));
    cJSON *st = cJSON_AddObjectToObject(j, "static_part");
    if (st && vm->sg) {
        cJSON_AddItemToObject(st, "inputs",
                              names_array(kiln_graph_num_inputs(vm->sg), graph_in_name, vm->sg));
        cJSON_AddItemToObject(st, "outputs",
                              names_array(kiln_graph_num_outputs(vm->sg), graph_out_name, vm->sg));
        cJSON_AddNumberToObject(st, "onnx_nodes", info->static_nodes);
    }
    cJSON *dy = cJSON_AddObjectToObject(j, "dynamic_part");
    if (dy) {
        cJSON_AddNumberToObject(dy, "nodes", info->dynamic_nodes);
        cJSON_AddNumberToObject(dy, "initializers", info->initializers_kept);
        cJSON_AddNumberToObject(dy, "initializers_dropped", info->initializers_dropped);
        cJSON_AddNumberToObject(dy, "onnx_bytes", (double)info->onnx_bytes);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* Writes the section (header, descriptor, ONNX bytes) to `path`. */
static kiln_status write_section(const char *path, bool has_static, const char *desc,
                                 const uint8_t *onnx, size_t onnx_size, size_t *total,
                                 kiln_error *err)
{
    section_header h = {.version = SECTION_VERSION, .flags = has_static ? FLAG_STATIC : 0,
                        .desc_size = strlen(desc), .onnx_size = onnx_size};
    memcpy(h.magic, SECTION_MAGIC, 8);
    h.checksum = fnv1a(fnv1a(0xcbf29ce484222325ull, desc, h.desc_size), onnx, onnx_size);
    FILE *f = fopen(path, "wb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write '%s'", path);
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(desc, 1, h.desc_size, f) == h.desc_size &&
              fwrite(onnx, 1, onnx_size, f) == onnx_size;
    ok = fclose(f) == 0 && ok;
    *total = sizeof h + h.desc_size + onnx_size;
    return ok ? KILN_OK
              : kiln_errorf(err, KILN_ERR_IO, "writing the VM section to '%s' failed (disk full?)",
                            path);
}

/* vm.S: the section file pulled in by .incbin, between two global symbols. */
static char *section_asm(const char *bin)
{
    const char *fmt = "/* Generated by kiln: the VM section (docs/FORMATS.md). */\n"
                      "    .section .rodata\n"
                      "    .balign 64\n"
                      "    .globl " SECTION_SYMBOL "\n"
                      "    .type " SECTION_SYMBOL ", @object\n" SECTION_SYMBOL ":\n"
                      "    .incbin \"%s\"\n"
                      "    .globl " SECTION_END "\n" SECTION_END ":\n"
                      "    .byte 0\n"
                      "    .size " SECTION_SYMBOL ", " SECTION_END "-" SECTION_SYMBOL "\n"
                      "    .section .note.GNU-stack,\"\",@progbits\n";
    for (const char *p = bin; *p; p++)
        if (*p == '"' || *p == '\\' || *p == '\n')
            return NULL; /* the workspace path is kiln's own: never happens */
    size_t n = strlen(fmt) + strlen(bin) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, fmt, bin);
    return s;
}

/* Binds the given input shapes into the ModelProto's graph inputs (a
 * symbolic model compiled for one input-shape class). */
static kiln_status bind_shapes(kiln_vm *vm, const char *const *names, const kiln_shape *shapes,
                               int n, kiln_error *err)
{
    for (int b = 0; b < n; b++) {
        const Onnx__ValueInfoProto *vi = NULL;
        for (size_t i = 0; i < vm->graph->n_input && !vi; i++)
            if (vm->graph->input[i]->name && !strcmp(vm->graph->input[i]->name, names[b]))
                vi = vm->graph->input[i];
        if (!vi)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "--input-shape: no input '%s'",
                               names[b]);
        const Onnx__TypeProto *tp = vi->type;
        Onnx__TensorShapeProto *sp =
            tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type
                ? tp->tensor_type->shape
                : NULL;
        if (!sp || (int)sp->n_dim != shapes[b].rank)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "--input-shape %s: rank %d, but the model declares %s", names[b],
                               shapes[b].rank, sp ? "another rank" : "no shape");
        for (int d = 0; d < shapes[b].rank; d++) {
            Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                if (dim->dim_value != shapes[b].dims[d])
                    return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                       "--input-shape %s: dim %d is %lld in the model, not %lld",
                                       names[b], d, (long long)dim->dim_value,
                                       (long long)shapes[b].dims[d]);
                continue;
            }
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
                free(dim->dim_param); /* protobuf-c frees only the case set */
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = shapes[b].dims[d];
        }
    }
    return KILN_OK;
}

/* The split VM of an export: decoded, input shapes bound, split; nothing
 * compiled. */
static kiln_status export_vm(const void *data, size_t size, const char *base_dir,
                             const kiln_vm_export_options *eo, bool *dyn_out[], kiln_vm **out,
                             kiln_error *err)
{
    kiln_vm *vm = calloc(1, sizeof *vm);
    if (!vm || !(vm->base_dir = strdup(base_dir ? base_dir : "."))) {
        free(vm);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *out = vm;
    kiln_status s = onnx_decode_model(data, size, &vm->m, err);
    if (s != KILN_OK)
        return s;
    if (!(vm->graph = vm->m->graph))
        return kiln_errorf(err, KILN_ERR_PARSE, "the model has no graph");
    if (eo && eo->n_shapes > 0 &&
        (s = bind_shapes(vm, eo->shape_names, eo->shapes, eo->n_shapes, err)) != KILN_OK)
        return s;
    if ((s = kiln_vm_init_io(vm, err)) != KILN_OK)
        return s;
    for (int i = 0; vm->generic && i < vm->n_in; i++)
        for (int d = -1; d < vm->in_shape[i].rank; d++)
            if (kiln_vm_input_dim_param(vm, i, d))
                return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                                   "input '%s' has %s: a compiled .so holds one input-shape "
                                   "class; pass --input-shape %s=DIMS (or run the .onnx, which "
                                   "specializes per input shape at run time)",
                                   vm->in_vi[i]->name,
                                   d < 0 ? "no declared shape" : "a symbolic or unknown dim",
                                   vm->in_vi[i]->name);
    if (!(*dyn_out = calloc(vm->graph->n_node + 1, sizeof **dyn_out)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return kiln_vm_split(vm, *dyn_out, err);
}

kiln_status kiln_vm_export(const void *data, size_t size, const char *base_dir,
                           const kiln_compile_options *co, const kiln_vm_export_options *eo,
                           const char *out_path, kiln_vm_export_info *info, kiln_error *err)
{
    if ((!data && size) || !out_path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_export: no model or path");
    kiln_vm_export_info inf0 = {0};
    kiln_vm_export_info *inf = info ? info : &inf0;
    memset(inf, 0, sizeof *inf);
    kiln_compile_options copts = co ? *co : (kiln_compile_options){0};
    kiln_vm *vm = NULL;
    bool *dyn = NULL;
    uint8_t *onnx = NULL;
    size_t onnx_size = 0;
    char *desc = NULL, *asm_src = NULL;
    kiln_build *b = NULL;
    kiln_tc_build *tc = NULL;
    kiln_status s = export_vm(data, size, base_dir, eo, &dyn, &vm, err);
    if (s == KILN_OK)
        s = pack_dynamic(vm, dyn, &onnx, &onnx_size, inf, err);
    inf->static_part = vm && vm->sg;
    if (s == KILN_OK && !(desc = descriptor(vm, inf)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    /* the workspace: the static part's build, or the toolchain's alone */
    if (s == KILN_OK && vm->sg) {
        if ((s = kiln_build_create(vm->sg, &copts, &b, err)) == KILN_OK)
            s = kiln_build_codegen(b, err);
        tc = b ? b->tc : NULL;
    } else if (s == KILN_OK) {
        kiln_target tg;
        if ((s = kiln_target_resolve(copts.target, &tg, err)) == KILN_OK)
            s = kiln_tc_begin(&tg, copts.cache_dir, &tc, err);
    }
    char bin[4200];
    if (s == KILN_OK) {
        snprintf(bin, sizeof bin, "%s/vm_section.bin", kiln_tc_dir(tc));
        s = write_section(bin, vm->sg != NULL, desc, onnx, onnx_size, &inf->section_bytes, err);
    }
    if (s == KILN_OK && !(asm_src = section_asm(bin)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = kiln_tc_add_source(tc, "vm.S", asm_src, err);
    if (s == KILN_OK)
        s = b ? kiln_build_link(b, out_path, err) : kiln_tc_link(tc, out_path, copts.jobs, err);
    if (b)
        kiln_build_destroy(b); /* ends its workspace */
    else
        kiln_tc_end(tc);
    free(asm_src);
    free(desc);
    free(onnx);
    free(dyn);
    kiln_vm_destroy(vm);
    return s;
}

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

kiln_status kiln_vm_load(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                         kiln_error *err)
{
    if (!path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_load: no path");
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
    return vm && kiln_vm_root(vm)->no_cc;
}
