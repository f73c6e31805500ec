/* vm/compiler/vm_export.c: a model the VM runs, written as one compiled
 * .so (docs/VM.md "One .so", docs/FORMATS.md "The VM section"); libkiln's
 * (it compiles), vm/vm_so.c (the runtime) opens what it writes.
 *
 * Export (`kiln compile`, VMModule.export): the graph is split as at create
 * (kiln_vm_split). The static part is compiled by the driver exactly as
 * kiln_compile compiles a graph (its kernels through the object cache, its
 * model descriptor, its weights blob), and one more source joins the same
 * link: vm.S, which pulls the VM section (vm/vm_section.h; a file written in
 * the build's workspace) in with .incbin, as weights.S pulls in the
 * weights. A model whose nodes are all dynamic has no static part: the .so
 * holds the section alone (linked by the toolchain the same way). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "toolchain/toolchain.h"
#include "util/error.h"
#include "vm/vm_internal.h"
#include "vm/vm_section.h"


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
