/* vm/vm.c: the VM for models whose shapes depend on run-time data (vm.h,
 * docs/VM.md).
 *
 * Create: split the ONNX graph. Control flow and sequence nodes are flagged
 * dynamic; one import in split mode (kiln_onnx_options.split) flags every
 * node whose parameter input is data and everything downstream; a second
 * import builds the static part from the rest. The static part's outputs
 * are the model outputs it computes and the values the dynamic part reads
 * (its bodies' captured values too); its inputs, the graph inputs its nodes
 * read.
 *
 * Run: the static part runs (compiled or reference), then each dynamic node
 * in ONNX order. A dynamic node's inputs come from the graph inputs, the
 * static part's outputs, earlier dynamic nodes, or initializers (embedded in
 * its one-node model). Its shape class is a key of every input's dtype and
 * shape plus the bytes of the inputs bound as parameters; a class seen
 * before reuses its converted one-node graph and reference executor (no
 * conversion, no allocation); a new one is converted: a one-node ONNX model
 * is packed and imported, binding the inputs the importer asks for as
 * constants (learned per node, kept for later classes), and compiled when
 * it is heavy (HEAVY_FLOPS). VM_CLASSES classes are kept per node, the least
 * recently used one replaced. A class's reference executor reads its inputs
 * in place (bound, not copied). The VM's own kernels (vm_kernels.c) need no
 * class. */
#include "vm/vm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "ir/graph.h"
#include "ref/ref.h"
#include "util/error.h"
#include "util/file.h"
#include "vm/vm_internal.h"

/* ---- helpers ------------------------------------------------------------------ */

static bool is_initializer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
            return true;
    return false;
}

/* The node (index) among those with in_set[] true that produces `name`, or -1. */
static int producer(const Onnx__GraphProto *g, const bool *in_set, bool want, const char *name)
{
    for (size_t i = 0; i < g->n_node; i++) {
        if (in_set[i] != want)
            continue;
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (g->node[i]->output[k] && strcmp(g->node[i]->output[k], name) == 0)
                return (int)i;
    }
    return -1;
}

int kiln_vm_node_reads(const Onnx__NodeProto *np, const char *name)
{
    int n = 0;
    for (size_t k = 0; k < np->n_input; k++)
        n += np->input[k] && strcmp(np->input[k], name) == 0;
    return n;
}

static void decl_type(const Onnx__ValueInfoProto *vi, kiln_dtype *dt, kiln_shape *shape)
{
    *dt = KILN_DTYPE_FLOAT32;
    memset(shape, 0, sizeof *shape);
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return;
    *dt = kiln_dtype_from_onnx(tp->tensor_type->elem_type);
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (!sp)
        return;
    shape->rank = sp->n_dim <= KILN_MAX_RANK ? (int)sp->n_dim : KILN_MAX_RANK;
    for (int d = 0; d < shape->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
        shape->dims[d] =
            dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dim->dim_value
                                                                                   : -1;
    }
}

/* Imports m in place (bindings as given); *failure says where it stopped. */
static kiln_status import_model(const kiln_vm *vm, Onnx__ModelProto *m,
                                const kiln_onnx_binding *b, int nb, kiln_onnx_failure *failure,
                                kiln_graph **g, kiln_error *err)
{
    kiln_onnx_options o = {.bindings = b, .n_bindings = nb, .failure = failure};
    return kiln_onnx_load_proto(m, vm->base_dir, &o, g, err);
}

/* ---- the static part ---------------------------------------------------------- */

/* Imports the nodes with dyn[i] false as a model of their own into *g (NULL:
 * there is no static part). */
static kiln_status import_static(kiln_vm *vm, const bool *dyn, kiln_onnx_failure *failure,
                                 int *node_map, kiln_graph **g, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    size_t nn = og->n_node;
    Onnx__NodeProto **nodes = calloc(nn + 1, sizeof *nodes);
    Onnx__ValueInfoProto **ins = calloc(og->n_input + 1, sizeof *ins);
    size_t cap_out = og->n_output + 1;
    for (size_t i = 0; i < nn; i++) {
        cap_out += og->node[i]->n_input;
        for (size_t a = 0; a < og->node[i]->n_attribute; a++)
            cap_out += og->node[i]->attribute[a]->g ? VM_MAX_CAPTURED : 0;
    }
    Onnx__ValueInfoProto **outs = calloc(cap_out, sizeof *outs);
    Onnx__ValueInfoProto *fresh = calloc(cap_out, sizeof *fresh);
    kiln_onnx_binding *binds = calloc((size_t)vm->n_bind + 1, sizeof *binds);
    kiln_status s = KILN_OK;
    *g = NULL;
    if (!nodes || !ins || !outs || !fresh || !binds) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    size_t n_nodes = 0, n_ins = 0, n_outs = 0, n_fresh = 0;
    for (size_t i = 0; i < nn; i++)
        if (!dyn[i]) {
            node_map[n_nodes] = (int)i;
            nodes[n_nodes++] = og->node[i];
        }
    for (size_t i = 0; i < og->n_input; i++) {
        const char *nm = og->input[i]->name ? og->input[i]->name : "";
        bool used = is_initializer(og, nm);
        for (size_t j = 0; j < n_nodes && !used; j++)
            used = kiln_vm_node_reads(nodes[j], nm);
        if (used)
            ins[n_ins++] = og->input[i];
    }
    int n_binds = 0; /* a specialization's input shapes, for the inputs kept */
    for (int b = 0; b < vm->n_bind; b++)
        for (size_t j = 0; j < n_ins; j++)
            if (ins[j]->name && strcmp(ins[j]->name, vm->bind[b].name) == 0)
                binds[n_binds++] = vm->bind[b];
    for (size_t i = 0; i < og->n_output; i++)
        if (og->output[i]->name && producer(og, dyn, false, og->output[i]->name) >= 0)
            outs[n_outs++] = og->output[i];
    for (size_t i = 0; i < nn; i++) {
        if (!dyn[i])
            continue;
        /* its inputs, then the names its subgraphs read from this scope */
        const Onnx__NodeProto *np = og->node[i];
        const char *cap[VM_MAX_CAPTURED];
        int n_cap = 0;
        for (size_t a = 0; a < np->n_attribute; a++)
            if (np->attribute[a]->g)
                n_cap += kiln_vm_free_names(np->attribute[a]->g, cap + n_cap,
                                            VM_MAX_CAPTURED - n_cap);
        for (size_t k = 0; k < np->n_input + (size_t)n_cap; k++) {
            const char *nm = k < np->n_input ? np->input[k] : cap[k - np->n_input];
            if (!nm || !*nm || producer(og, dyn, false, nm) < 0)
                continue;
            bool have = false;
            for (size_t j = 0; j < n_outs && !have; j++)
                have = strcmp(outs[j]->name, nm) == 0;
            if (have)
                continue;
            Onnx__ValueInfoProto init = ONNX__VALUE_INFO_PROTO__INIT;
            fresh[n_fresh] = init;
            fresh[n_fresh].name = (char *)nm;
            outs[n_outs++] = &fresh[n_fresh++];
        }
    }
    if (n_nodes == 0 || n_outs == 0)
        goto done; /* everything is dynamic */
    Onnx__GraphProto gp = *og;
    gp.n_node = n_nodes;
    gp.node = nodes;
    gp.n_input = n_ins;
    gp.input = ins;
    gp.n_output = n_outs;
    gp.output = outs;
    gp.n_value_info = 0;
    Onnx__ModelProto mp = *vm->m;
    mp.graph = &gp;
    s = import_model(vm, &mp, binds, n_binds, failure, g, err);
done:
    free(binds);
    free(nodes);
    free(ins);
    free(outs);
    free(fresh);
    return s;
}

/* Splits the graph (see the top of the file); leaves vm->sg and dyn[] set.
 * One import classifies every node (kiln_onnx_options.split: control flow
 * and sequence nodes flagged first, the importer flags the nodes that need
 * a run-time parameter and everything downstream), a second one builds the
 * static part from the rest. */
kiln_status kiln_vm_split(kiln_vm *vm, bool *dyn, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    int *node_map = calloc(og->n_node + 1, sizeof *node_map);
    if (!node_map)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < og->n_node; i++)
        dyn[i] = kiln_vm_flow_op(og->node[i]->op_type);
    kiln_onnx_options o = {.split = dyn, .bindings = vm->bind, .n_bindings = vm->n_bind};
    kiln_graph *g = NULL;
    kiln_status s = kiln_onnx_load_proto(vm->m, vm->base_dir, &o, &g, err);
    kiln_graph_destroy(g);
    if (s == KILN_OK) {
        kiln_onnx_failure f = {.node = -1, .input = -1};
        s = import_static(vm, dyn, &f, node_map, &vm->sg, err);
        /* a specialization: the next class's kernels may be these */
        if (s == KILN_OK && vm->sg && vm->bind)
            vm->sg->shapes_bound = true;
    }
    free(node_map);
    return s;
}

/* ---- create ------------------------------------------------------------------- */

static int find_input(const kiln_vm *vm, const char *name)
{
    for (int i = 0; i < vm->n_in; i++)
        if (strcmp(vm->in_vi[i]->name, name) == 0)
            return i;
    return -1;
}

static int find_static_output(const kiln_vm *vm, const char *name)
{
    for (int i = 0; i < vm->s_n_out; i++)
        if (strcmp(vm->s_out_names[i], name) == 0)
            return i;
    return -1;
}

/* Where value `name` comes from, for a reader that is dynamic node `before`
 * (or the graph outputs: before = n_dyn). */
vm_src kiln_vm_resolve(const kiln_vm *vm, const char *name, int before)
{
    vm_src src = {.kind = SRC_NONE};
    if (!name || !*name)
        return src;
    for (int d = before - 1; d >= 0; d--)
        for (int k = 0; k < vm->dyn[d].n_out; k++)
            if (vm->dyn[d].np->output[k] && strcmp(vm->dyn[d].np->output[k], name) == 0)
                return (vm_src){.kind = SRC_DYN, .index = d, .sub = k};
    int j = find_static_output(vm, name);
    if (j >= 0)
        return (vm_src){.kind = SRC_STATIC, .index = j};
    j = find_input(vm, name);
    if (j >= 0)
        return (vm_src){.kind = SRC_INPUT, .index = j};
    for (size_t i = 0; i < vm->graph->n_initializer; i++)
        if (vm->graph->initializer[i]->name && !strcmp(vm->graph->initializer[i]->name, name))
            return (vm_src){.kind = SRC_INIT, .index = (int)i};
    return (vm_src){.kind = -1};
}

/* Compiles g into a module with the VM's compiler (through the object
 * cache, so a graph compiled before is only loaded); KILN_ERR_NOT_FOUND
 * without one. The build maps weights an earlier class packed alike
 * (kiln_vm_memo). */
static kiln_status compile_graph(kiln_vm *vm, kiln_graph *g, kiln_module **mod, kiln_error *err)
{
    if (!vm->compile)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "no compiler: the VM was opened by the runtime alone");
    g->pack_memo = kiln_vm_memo(vm);
    return vm->compile(g, vm->cache_dir, vm->target, vm->records, vm->num_threads, mod, err);
}

static kiln_status load_static(kiln_vm *vm, const kiln_vm_options *o, kiln_error *err)
{
    kiln_graph *g = vm->sg;
    vm->s_n_in = kiln_graph_num_inputs(g);
    vm->s_n_out = kiln_graph_num_outputs(g);
    vm->s_in_map = calloc((size_t)vm->s_n_in + 1, sizeof *vm->s_in_map);
    vm->s_out_names = calloc((size_t)vm->s_n_out + 1, sizeof *vm->s_out_names);
    if (!vm->s_in_map || !vm->s_out_names)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < vm->s_n_in; i++) {
        const char *nm = "";
        kiln_graph_input_info(g, i, &nm, NULL, NULL);
        if ((vm->s_in_map[i] = find_input(vm, nm)) < 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "vm: static input '%s' is no model input",
                               nm);
    }
    for (int i = 0; i < vm->s_n_out; i++)
        kiln_graph_output_info(g, i, &vm->s_out_names[i], NULL, NULL);
    (void)o;
    if (vm->reference)
        return kiln_ref_executor_create(g, &vm->sex, err);
    if (!vm->compile)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "the model's static part (%d nodes) needs compiling: open it through "
                           "libkiln (kiln_vm_create), or on reference kernels",
                           g->n_nodes);
    kiln_status s = compile_graph(vm, g, &vm->smod, err);
    /* a specialization compiled needs its graph no more (no export takes
     * one): its constants, the weights as imported, were most of a class's
     * memory (BERT-base: 434 MB each); the outputs' names are the module's */
    if (s == KILN_OK && vm->bind && vm->smod) {
        for (int i = 0; i < vm->s_n_out; i++)
            kiln_module_output_info(vm->smod, i, &vm->s_out_names[i], NULL, NULL);
        kiln_graph_destroy(vm->sg);
        vm->sg = NULL;
    }
    return s;
}

kiln_status kiln_vm_build_dynamic(kiln_vm *vm, const bool *dyn, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    for (size_t i = 0; i < og->n_node; i++)
        vm->n_dyn += dyn[i];
    vm->dyn = calloc((size_t)vm->n_dyn + 1, sizeof *vm->dyn);
    if (!vm->dyn)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int d = 0;
    for (size_t i = 0; i < og->n_node; i++) {
        if (!dyn[i])
            continue;
        vm_node *n = &vm->dyn[d];
        n->np = og->node[i];
        n->name = n->np->name && *n->np->name ? n->np->name : n->np->op_type;
        n->n_in = (int)n->np->n_input;
        n->n_out = (int)n->np->n_output;
        n->src = calloc((size_t)n->n_in + 1, sizeof *n->src);
        n->bound = calloc((size_t)n->n_in + 1, sizeof *n->bound);
        n->out_pos = calloc((size_t)n->n_out + 1, sizeof *n->out_pos);
        n->readers = calloc((size_t)n->n_out + 1, sizeof *n->readers);
        n->out = calloc((size_t)n->n_out + 1, sizeof *n->out);
        n->in = calloc((size_t)n->n_in + 1, sizeof *n->in);
        if (!n->src || !n->bound || !n->out_pos || !n->readers || !n->out || !n->in)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        for (int k = 0; k < n->n_in; k++) {
            n->src[k] = kiln_vm_resolve(vm, n->np->input[k], d);
            if (n->src[k].kind < 0)
                return kiln_errorf(err, KILN_ERR_PARSE, "node '%s': input '%s' is not defined",
                                   n->name, n->np->input[k]);
        }
        bool kernel = kiln_vm_kernel_op(n->np->op_type);
        bool view = !kernel && kiln_vm_view_op(n->np->op_type);
        if (kernel || view) {
            n->flow = kernel ? VM_KERNEL : VM_VIEW;
            n->own = calloc((size_t)n->n_out + 1, sizeof *n->own);
            n->own_cap = calloc((size_t)n->n_out + 1, sizeof *n->own_cap);
            if (!n->own || !n->own_cap)
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        if (kernel || view || kiln_vm_flow_op(n->np->op_type)) {
            kiln_status s = kernel || view ? KILN_OK : kiln_vm_flow_prepare(vm, d, err);
            /* kernels, views, control flow and sequences read initializers
             * as tensors */
            for (int k = 0; k < n->n_in && s == KILN_OK; k++)
                if (n->src[k].kind == SRC_INIT)
                    s = kiln_vm_load_init(vm, n->src[k].index, err);
            if (s != KILN_OK)
                return s;
        }
        d++;
    }
    /* outputs read by later dynamic nodes (or the bodies of their
     * subgraphs: captured values) or by the graph */
    const char **cap = calloc((size_t)vm->n_dyn * VM_MAX_CAPTURED + 1, sizeof *cap);
    int *n_cap = calloc((size_t)vm->n_dyn + 1, sizeof *n_cap);
    if (!cap || !n_cap) {
        free(cap);
        free(n_cap);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (d = 0; d < vm->n_dyn; d++)
        for (size_t a = 0; a < vm->dyn[d].np->n_attribute; a++)
            if (vm->dyn[d].np->attribute[a]->g)
                n_cap[d] += kiln_vm_free_names(vm->dyn[d].np->attribute[a]->g,
                                               cap + (size_t)d * VM_MAX_CAPTURED + n_cap[d],
                                               VM_MAX_CAPTURED - n_cap[d]);
    for (d = 0; d < vm->n_dyn; d++) {
        vm_node *n = &vm->dyn[d];
        int pos = 0;
        for (int k = 0; k < n->n_out; k++) {
            const char *nm = n->np->output[k];
            int readers = 0;
            for (int e = d + 1; e < vm->n_dyn && readers < VM_READERS_MANY && nm && *nm; e++) {
                readers += kiln_vm_node_reads(vm->dyn[e].np, nm);
                for (int j = 0; j < n_cap[e] && readers < VM_READERS_MANY; j++)
                    if (!strcmp(cap[(size_t)e * VM_MAX_CAPTURED + j], nm))
                        readers = VM_READERS_MANY;
            }
            for (size_t o = 0; o < og->n_output && nm && *nm; o++)
                if (og->output[o]->name && strcmp(og->output[o]->name, nm) == 0)
                    readers = VM_READERS_MANY;
            n->readers[k] = readers;
            n->out_pos[k] = readers ? pos++ : -1;
        }
    }
    free(cap);
    free(n_cap);
    for (int i = 0; i < vm->n_out; i++) {
        vm->out_src[i] = kiln_vm_resolve(vm, vm->out_vi[i]->name, vm->n_dyn);
        if (vm->out_src[i].kind <= SRC_NONE || vm->out_src[i].kind == SRC_INIT)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "graph output '%s' is not computed by a node",
                               vm->out_vi[i]->name ? vm->out_vi[i]->name : "");
    }
    kiln_vm_scatter_plan(vm);
    return KILN_OK;
}

/* Whether graph input vi declares no shape, or a dim that is not a number
 * (a dim_param, or nothing). */
static bool symbolic_input(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return false; /* not a tensor: the import says so */
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (!sp)
        return true;
    for (size_t d = 0; d < sp->n_dim; d++)
        if (sp->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            return true;
    return false;
}

/* The model's inputs and outputs (vm->graph's), their declared types. */
kiln_status kiln_vm_init_io(kiln_vm *vm, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    size_t cap = og->n_input + og->n_output + 1;
    vm->in_vi = calloc(cap, sizeof *vm->in_vi);
    vm->out_vi = calloc(cap, sizeof *vm->out_vi);
    vm->in_dt = calloc(cap, sizeof *vm->in_dt);
    vm->out_dt = calloc(cap, sizeof *vm->out_dt);
    vm->in_shape = calloc(cap, sizeof *vm->in_shape);
    vm->out_shape = calloc(cap, sizeof *vm->out_shape);
    vm->in_t = calloc(cap, sizeof *vm->in_t);
    vm->in_set = calloc(cap, sizeof *vm->in_set);
    vm->in_cap = calloc(cap, sizeof *vm->in_cap);
    vm->out_src = calloc(cap, sizeof *vm->out_src);
    if (!vm->in_vi || !vm->out_vi || !vm->in_dt || !vm->out_dt || !vm->in_shape ||
        !vm->out_shape || !vm->in_t || !vm->in_set || !vm->in_cap || !vm->out_src)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < og->n_input; i++) {
        const Onnx__ValueInfoProto *vi = og->input[i];
        if (!vi->name || is_initializer(og, vi->name))
            continue;
        vm->in_vi[vm->n_in] = vi;
        decl_type(vi, &vm->in_dt[vm->n_in], &vm->in_shape[vm->n_in]);
        vm->generic |= symbolic_input(vi);
        vm->n_in++;
    }
    for (size_t i = 0; i < og->n_output; i++) {
        vm->out_vi[vm->n_out] = og->output[i];
        decl_type(og->output[i], &vm->out_dt[vm->n_out], &vm->out_shape[vm->n_out]);
        vm->n_out++;
    }
    return KILN_OK;
}

/* Splits the graph, imports and loads the static part, sets up the dynamic
 * nodes (vm->bind: the input shapes of a specialization, or none). */
kiln_status kiln_vm_build(kiln_vm *vm, const kiln_vm_options *o, kiln_error *err)
{
    bool *dyn = calloc(vm->graph->n_node + 1, sizeof *dyn);
    if (!dyn)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_status s = kiln_vm_split(vm, dyn, err);
    if (s == KILN_OK && vm->batch_c > 0) /* a chunk of a symbolic batch (vm_batch.c) */
        s = kiln_vm_batch_check(vm, dyn, err);
    if (s != KILN_OK || vm->batch_probe) {
        free(dyn);
        return s;
    }
    if (vm->sg)
        s = load_static(vm, o, err);
    if (s == KILN_OK)
        s = kiln_vm_build_dynamic(vm, dyn, err);
    free(dyn);
    return s;
}

kiln_status kiln_vm_copy_options(kiln_vm *vm, const kiln_vm_options *o)
{
    vm->reference = o->reference;
    vm->num_threads = o->num_threads;
    vm->compile = o->compile;
    if ((o->cache_dir && !(vm->cache_dir = strdup(o->cache_dir))) ||
        (o->target && !(vm->target = strdup(o->target))) ||
        (o->records && !(vm->records = strdup(o->records))))
        return KILN_ERR_OUT_OF_MEMORY;
    return KILN_OK;
}

/* kiln_vm_create's body over the model's bytes; base_dir resolves external
 * data (NULL: none can be). */
static kiln_status create(const void *data, size_t size, const char *base_dir,
                          const kiln_vm_options *opts, kiln_vm **out, kiln_error *err)
{
    kiln_vm_options def = {0};
    const kiln_vm_options *o = opts ? opts : &def;
    kiln_vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_status s = KILN_OK;
    if (kiln_vm_copy_options(vm, o) != KILN_OK ||
        !(vm->base_dir = strdup(base_dir ? base_dir : "."))) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    if ((s = onnx_decode_model(data, size, &vm->m, err)) != KILN_OK)
        goto fail;
    if (!vm->m->graph) {
        s = kiln_errorf(err, KILN_ERR_PARSE, "the model has no graph");
        goto fail;
    }
    vm->graph = vm->m->graph;
    if ((s = kiln_vm_init_io(vm, err)) != KILN_OK)
        goto fail;
    /* symbolic input dims: imported per input-shape class, at the first run */
    if (!vm->generic && (s = kiln_vm_build(vm, o, err)) != KILN_OK)
        goto fail;
    *out = vm;
    return KILN_OK;
fail:
    kiln_vm_destroy(vm);
    return s;
}

kiln_status kiln_vm_open(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                         kiln_error *err)
{
    kiln_file_bytes fb;
    char *dir = NULL;
    kiln_status s = kiln_file_map(path, (size_t)INT32_MAX, &fb, err);
    if (s == KILN_OK && !(dir = strdup(path)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            strcpy(dir, ".");
        else if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        s = create(fb.data, fb.size, dir, opts, out, err);
    }
    kiln_file_release(&fb);
    free(dir);
    if (s != KILN_OK)
        kiln_error_prefix(err, s, "%s: ", path);
    return s;
}

kiln_status kiln_vm_open_buffer(const void *data, size_t size, const char *base_dir,
                                const kiln_vm_options *opts, kiln_vm **out, kiln_error *err)
{
    if (!data && size)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_open_buffer: no data");
    return create(data, size, base_dir, opts, out, err);
}

static void free_class(vm_class *c)
{
    kiln_module_destroy(c->mod);
    kiln_ref_executor_destroy(c->ex);
    kiln_graph_destroy(c->g);
    free(c->in_slot);
    free(c->key);
    memset(c, 0, sizeof *c);
}

void kiln_vm_destroy(kiln_vm *vm)
{
    if (!vm)
        return;
    for (int d = 0; vm->dyn && d < vm->n_dyn; d++) {
        vm_node *n = &vm->dyn[d];
        for (int c = 0; c < n->n_cls; c++)
            free_class(&n->cls[c]);
        free(n->src);
        free(n->bound);
        free(n->out_pos);
        free(n->readers);
        free(n->out);
        free(n->in);
        free(n->key);
        kiln_vm_flow_free(n);
    }
    free(vm->dyn);
    kiln_module_destroy(vm->smod);
    kiln_ref_executor_destroy(vm->sex);
    kiln_graph_destroy(vm->sg);
    free(vm->s_in_map);
    free(vm->s_out_names);
    for (int i = 0; vm->in_t && !vm->borrowed_m && i < vm->n_in; i++)
        kiln_tensor_release(&vm->in_t[i]); /* a specialization's are the generic VM's */
    free(vm->in_t);
    free(vm->in_set);
    free(vm->in_vi);
    free(vm->out_vi);
    free(vm->in_dt);
    free(vm->out_dt);
    free(vm->in_shape);
    free(vm->out_shape);
    free(vm->out_src);
    free(vm->base_dir);
    free(vm->cache_dir);
    free(vm->target);
    free(vm->records);
    free(vm->cap_vi);
    for (size_t i = 0; vm->init_ok && i < vm->graph->n_initializer; i++)
        if (vm->init_ok[i])
            kiln_tensor_release(&vm->init_t[i]);
    free(vm->init_t);
    free(vm->init_ok);
    for (int i = 0; i < vm->n_spec; i++) {
        kiln_vm_destroy(vm->spec[i].vm);
        free(vm->spec[i].shapes);
    }
    free(vm->in_cap);
    kiln_vm_batch_free(vm);
    kiln_vm_memo_free(vm);
    if (vm->m && !vm->parent && !vm->borrowed_m)
        onnx_free_model(vm->m);
    free(vm);
}

/* ---- run ---------------------------------------------------------------------- */

static const kiln_tensor *static_output(const kiln_vm *vm, int j)
{
    return vm->smod ? kiln_module_output(vm->smod, j) : kiln_ref_executor_output(vm->sex, j);
}

kiln_status kiln_vm_load_init(kiln_vm *vm, int i, kiln_error *err)
{
    if (!vm->init_t) {
        vm->init_t = calloc(vm->graph->n_initializer + 1, sizeof *vm->init_t);
        vm->init_ok = calloc(vm->graph->n_initializer + 1, sizeof *vm->init_ok);
        if (!vm->init_t || !vm->init_ok)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (vm->init_ok[i])
        return KILN_OK;
    kiln_status s = kiln_tensor_from_onnx(vm->graph->initializer[i], &vm->init_t[i], err);
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "initializer '%s': ", vm->graph->initializer[i]->name);
    vm->init_ok[i] = true;
    return KILN_OK;
}

const kiln_tensor *kiln_vm_value(const kiln_vm *vm, vm_src s)
{
    switch (s.kind) {
    case SRC_INIT: return vm->init_ok && vm->init_ok[s.index] ? &vm->init_t[s.index] : NULL;
    case SRC_INPUT: return &vm->in_t[s.index];
    case SRC_STATIC: return static_output(vm, s.index);
    case SRC_DYN: return vm->dyn[s.index].out[s.sub];
    default: return NULL;
    }
}

/* The shape class of node n with inputs `t` into n->key; false: out of memory. */
static bool make_key(vm_node *n, const kiln_tensor *const *t, size_t *len)
{
    size_t need = 0;
    for (int k = 0; k < n->n_in; k++) {
        need += 8 + 8 * KILN_MAX_RANK;
        if (t[k] && n->bound[k])
            need += 8 + (size_t)kiln_tensor_nbytes(t[k]);
    }
    if (need > n->key_cap) {
        unsigned char *p = realloc(n->key, need);
        if (!p)
            return false;
        n->key = p;
        n->key_cap = need;
    }
    size_t o = 0;
    for (int k = 0; k < n->n_in; k++) {
        int32_t head[2] = {t[k] ? (int32_t)t[k]->dtype : -1, t[k] ? t[k]->shape.rank : -1};
        memcpy(n->key + o, head, 8);
        o += 8;
        if (!t[k])
            continue;
        memcpy(n->key + o, t[k]->shape.dims, 8 * (size_t)t[k]->shape.rank);
        o += 8 * (size_t)t[k]->shape.rank;
        if (n->bound[k]) {
            int64_t nb = kiln_tensor_nbytes(t[k]);
            memcpy(n->key + o, &nb, 8);
            o += 8;
            memcpy(n->key + o, t[k]->data, (size_t)nb);
            o += (size_t)nb;
        }
    }
    *len = o;
    return true;
}

/* Converts node n for inputs t into class c (a one-node model, imported with
 * the inputs the importer takes as parameters bound to their values). */
static kiln_status convert(kiln_vm *vm, vm_node *n, const kiln_tensor *const *t, vm_class *c,
                           kiln_error *err)
{
    int ni = n->n_in;
    Onnx__ValueInfoProto *vis = calloc((size_t)ni + 1, sizeof *vis);
    Onnx__ValueInfoProto **ins = calloc((size_t)ni + 1, sizeof *ins);
    Onnx__TypeProto *tps = calloc((size_t)ni + 1, sizeof *tps);
    Onnx__TypeProto__Tensor *tts = calloc((size_t)ni + 1, sizeof *tts);
    Onnx__TensorShapeProto *sps = calloc((size_t)ni + 1, sizeof *sps);
    Onnx__TensorShapeProto__Dimension *dims =
        calloc((size_t)ni * KILN_MAX_RANK + 1, sizeof *dims);
    Onnx__TensorShapeProto__Dimension **dimp =
        calloc((size_t)ni * KILN_MAX_RANK + 1, sizeof *dimp);
    Onnx__TensorProto **inits = calloc((size_t)ni + 1, sizeof *inits);
    Onnx__ValueInfoProto *ovis = calloc((size_t)n->n_out + 1, sizeof *ovis);
    Onnx__ValueInfoProto **outs = calloc((size_t)n->n_out + 1, sizeof *outs);
    kiln_onnx_binding *binds = calloc((size_t)ni + 1, sizeof *binds);
    c->in_slot = calloc((size_t)ni + 1, sizeof *c->in_slot);
    kiln_status s = KILN_OK;
    if (!vis || !ins || !tps || !tts || !sps || !dims || !dimp || !inits || !ovis || !outs ||
        !binds || !c->in_slot) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    const Onnx__GraphProto *og = vm->graph;
    size_t n_ins = 0, n_inits = 0, n_outs = 0;
    for (int k = 0; k < ni; k++) {
        const char *nm = n->np->input[k];
        if (n->src[k].kind == SRC_INIT) {
            for (size_t i = 0; i < og->n_initializer; i++)
                if (og->initializer[i]->name && strcmp(og->initializer[i]->name, nm) == 0)
                    inits[n_inits++] = og->initializer[i];
            continue;
        }
        if (!t[k])
            continue;
        bool dup = false;
        for (size_t j = 0; j < n_ins && !dup; j++)
            dup = strcmp(ins[j]->name, nm) == 0;
        if (dup)
            continue;
        Onnx__TensorShapeProto sp0 = ONNX__TENSOR_SHAPE_PROTO__INIT;
        Onnx__TypeProto__Tensor tt0 = ONNX__TYPE_PROTO__TENSOR__INIT;
        Onnx__TypeProto tp0 = ONNX__TYPE_PROTO__INIT;
        Onnx__ValueInfoProto vi0 = ONNX__VALUE_INFO_PROTO__INIT;
        sps[k] = sp0;
        sps[k].n_dim = (size_t)t[k]->shape.rank;
        sps[k].dim = &dimp[k * KILN_MAX_RANK];
        for (int d = 0; d < t[k]->shape.rank; d++) {
            Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            dims[k * KILN_MAX_RANK + d] = d0;
            dims[k * KILN_MAX_RANK + d].value_case =
                ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[k * KILN_MAX_RANK + d].dim_value = t[k]->shape.dims[d];
            dimp[k * KILN_MAX_RANK + d] = &dims[k * KILN_MAX_RANK + d];
        }
        tts[k] = tt0;
        tts[k].has_elem_type = 1;
        tts[k].elem_type = kiln_dtype_to_onnx(t[k]->dtype);
        tts[k].shape = &sps[k];
        tps[k] = tp0;
        tps[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tps[k].tensor_type = &tts[k];
        vis[k] = vi0;
        vis[k].name = (char *)nm;
        vis[k].type = &tps[k];
        ins[n_ins++] = &vis[k];
    }
    for (int k = 0; k < n->n_out; k++) {
        if (n->out_pos[k] < 0)
            continue;
        Onnx__ValueInfoProto vi0 = ONNX__VALUE_INFO_PROTO__INIT;
        ovis[k] = vi0;
        ovis[k].name = n->np->output[k];
        outs[n_outs++] = &ovis[k];
    }
    Onnx__NodeProto *node = (Onnx__NodeProto *)n->np;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    gp.name = "vm_node";
    gp.n_node = 1;
    gp.node = &node;
    gp.n_input = n_ins;
    gp.input = ins;
    gp.n_initializer = n_inits;
    gp.initializer = inits;
    gp.n_output = n_outs;
    gp.output = outs;
    Onnx__ModelProto mp = *vm->m;
    mp.graph = &gp;
    for (int tries = 0; tries <= ni; tries++) {
        int nb = 0;
        for (int k = 0; k < ni; k++)
            if (n->bound[k] && t[k]) {
                bool dup = false;
                for (int j = 0; j < nb && !dup; j++)
                    dup = strcmp(binds[j].name, n->np->input[k]) == 0;
                if (!dup)
                    binds[nb++] = (kiln_onnx_binding){.name = n->np->input[k], .value = t[k]};
            }
        kiln_onnx_failure f = {.node = -1, .input = -1};
        s = import_model(vm, &mp, binds, nb, &f, &c->g, err);
        if (s == KILN_OK)
            break;
        if (!f.data_param || f.input < 0 || f.input >= ni || n->bound[f.input] || !t[f.input])
            break;
        n->bound[f.input] = true; /* a parameter: bound from now on */
        kiln_error_clear(err);
    }
    if (s != KILN_OK)
        goto done;
    for (int k = 0; k < ni; k++) {
        c->in_slot[k] = -1;
        for (int i = 0; i < kiln_graph_num_inputs(c->g) && t[k]; i++) {
            const char *nm = "";
            kiln_graph_input_info(c->g, i, &nm, NULL, NULL);
            if (strcmp(nm, n->np->input[k]) == 0)
                c->in_slot[k] = i;
        }
    }
    if (kiln_graph_num_outputs(c->g) != (int)n_outs)
        s = kiln_errorf(err, KILN_ERR_INTERNAL, "converted to %d outputs, expected %zu",
                        kiln_graph_num_outputs(c->g), n_outs);
    if (s == KILN_OK)
        s = kiln_ref_executor_create(c->g, &c->ex, err);
done:
    free(vis);
    free(ins);
    free(tps);
    free(tts);
    free(sps);
    free(dims);
    free(dimp);
    free(inits);
    free(ovis);
    free(outs);
    free(binds);
    return s;
}

/* Dynamic nodes of at least this many flops (a detection head's Gemm on
 * its data-dependent number of proposals) are compiled per shape class, like
 * the static part, instead of run on reference kernels. */
#define HEAVY_FLOPS 2e7

/* Flops of the Gemm, MatMul, Conv and ConvTranspose nodes of a converted
 * one-node graph (ir/cost.c's count). */
static double graph_flops(const kiln_graph *g)
{
    double f = 0;
    for (int i = 0; i < g->n_nodes; i++)
        f += 2.0 * (double)kiln_node_macs(g, g->nodes[i]);
    return f;
}

kiln_vm *kiln_vm_root(const kiln_vm *vm)
{
    while (vm->parent)
        vm = vm->parent;
    return (kiln_vm *)vm;
}

/* A heavy node's compile found no C compiler (a .so loaded where none is
 * installed): it and every later heavy class run on reference kernels;
 * stderr says so once per VM, and kiln_vm_report_describe in the profile's
 * configuration. */
static void heavy_without_cc(kiln_vm *vm, const vm_node *n, const char *why)
{
    kiln_vm *root = kiln_vm_root(vm);
    root->no_cc = true;
    fprintf(stderr,
            "kiln: vm: %s; node '%s' (%s) and every later heavy Gemm/MatMul/Conv(Transpose) class run on "
            "reference kernels instead of compiled ones\n",
            why, n->name, n->np->op_type);
}

/* The class of node n with inputs t: found by its key, or converted (and
 * compiled when heavy) into a free or the least recently used slot. */
static kiln_status find_class(kiln_vm *vm, vm_node *n, const kiln_tensor *const *t,
                              vm_class **out, kiln_error *err)
{
    size_t len = 0;
    if (!make_key(n, t, &len))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    vm_class *c = NULL;
    for (int i = 0; i < n->n_cls && !c; i++)
        if (n->cls[i].key_len == len && (len == 0 || memcmp(n->cls[i].key, n->key, len) == 0))
            c = &n->cls[i];
    if (!c) {
        if (n->n_cls < VM_CLASSES) {
            c = &n->cls[n->n_cls++];
        } else {
            c = &n->cls[0];
            for (int i = 1; i < n->n_cls; i++)
                if (n->cls[i].used < c->used)
                    c = &n->cls[i];
            free_class(c);
        }
        kiln_status s = convert(vm, n, t, c, err);
        /* the bound set may have grown: key the class by it */
        if (s == KILN_OK && !make_key(n, t, &len))
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (s == KILN_OK && !(c->key = malloc(len ? len : 1)))
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (s != KILN_OK) {
            free_class(c);
            n->n_cls--; /* c is the last slot or an evicted one: compact */
            if (c != &n->cls[n->n_cls])
                *c = n->cls[n->n_cls], memset(&n->cls[n->n_cls], 0, sizeof *c);
            return kiln_error_prefix(err, s, "node '%s' (%s) with its inputs' run-time values: ",
                                     n->name, n->np->op_type);
        }
        if (len) /* a node without inputs has an empty key (and n->key may be NULL) */
            memcpy(c->key, n->key, len);
        c->key_len = len;
        vm->conversions++;
        c->flops = graph_flops(c->g);
        kiln_status cs = KILN_OK;
        /* without a compiler (the runtime alone) heavy classes run on
         * reference kernels too, as documented; nothing is said */
        /* its shapes come from run-time values: the next class's kernels
         * may be these */
        c->g->shapes_bound = true;
        if (!vm->reference && vm->compile && !kiln_vm_root(vm)->no_cc &&
            c->flops >= HEAVY_FLOPS &&
            (cs = compile_graph(vm, c->g, &c->mod, err)) != KILN_OK) {
            c->mod = NULL; /* the reference kernels still run it */
            if (cs == KILN_ERR_NOT_FOUND) /* no C compiler: said once */
                heavy_without_cc(vm, n, err ? err->msg : "no C compiler found");
            kiln_error_clear(err);
        }
    }
    *out = c;
    return KILN_OK;
}

/* Runs class c of node n on inputs t; n->out[k] its outputs. */
static kiln_status exec_class(kiln_vm *vm, vm_node *n, vm_class *c, const kiln_tensor *const *t,
                              kiln_error *err)
{
    n->compiled = c->mod != NULL;
    n->flops = c->flops;
    if (c->mod) {
        c->used = ++vm->stamp;
        kiln_status s = KILN_OK;
        for (int k = 0; k < n->n_in && s == KILN_OK; k++)
            if (c->in_slot[k] >= 0)
                s = kiln_module_set_input(c->mod, c->in_slot[k], t[k], err);
        if (s == KILN_OK)
            s = kiln_module_run(c->mod, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (%s): ", n->name, n->np->op_type);
        for (int k = 0; k < n->n_out; k++)
            n->out[k] = n->out_pos[k] >= 0 ? kiln_module_output(c->mod, n->out_pos[k]) : NULL;
        return KILN_OK;
    }
    c->used = ++vm->stamp;
    for (int k = 0; k < n->n_in; k++) {
        if (c->in_slot[k] < 0)
            continue;
        kiln_status s = kiln_ref_executor_bind_input(c->ex, c->in_slot[k], t[k], err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s': ", n->name);
    }
    kiln_status s = kiln_ref_executor_run(c->ex, err);
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "node '%s' (%s): ", n->name, n->np->op_type);
    for (int k = 0; k < n->n_out; k++)
        n->out[k] = n->out_pos[k] >= 0 ? kiln_ref_executor_output(c->ex, n->out_pos[k]) : NULL;
    return KILN_OK;
}

/* ---- heavy convolutions over a data-dependent batch, in chunks ---------------
 * A detection head convolves its data-dependent number of rois (or
 * detections) as a batch. Compiled per class, each new count would compile
 * the node again (about 1.7 s per conv of a 512-channel head: seconds per
 * new image). A Conv or ConvTranspose runs instead as chunks of VM_CHUNK
 * items, the rest in chunks of 4, 2 and 1 (its binary digits), each chunk
 * size a class of its own: four classes, compiled once, whatever the
 * counts; the chunks' outputs are copied into the node's own buffer. When
 * a chunk's class is not compiled (not heavy, or no compiler), the node
 * runs whole. */
#define VM_CHUNK 8

static bool chunkable(const kiln_vm *vm, const vm_node *n, const kiln_tensor *const *t)
{
    const char *op = n->np->op_type;
    return !vm->reference && vm->compile && n->n_out == 1 && n->n_in >= 2 && n->n_in <= 3 &&
           (!strcmp(op, "Conv") || !strcmp(op, "ConvTranspose")) && t[0] &&
           t[0]->shape.rank >= 3 && n->out_pos[0] >= 0 && t[0]->shape.dims[0] > 0 &&
           /* a batch of 1, 2, 4 or 8 is one chunk: it runs whole */
           (t[0]->shape.dims[0] > VM_CHUNK || (t[0]->shape.dims[0] & (t[0]->shape.dims[0] - 1)));
}

static kiln_status run_chunks(kiln_vm *vm, vm_node *n, bool *done, kiln_error *err)
{
    const kiln_tensor *x = n->in[0];
    const int64_t total = x->shape.dims[0];
    const size_t row_in = (size_t)(kiln_tensor_nbytes(x) / total);
    kiln_tensor part = *x;
    const kiln_tensor *tv[3] = {&part, n->in[1], n->n_in > 2 ? n->in[2] : NULL};
    double flops = 0;
    size_t row_out = 0;
    *done = false;
    for (int64_t at = 0; at < total;) {
        int64_t rows = VM_CHUNK; /* then the tail in powers of two */
        while (rows > total - at)
            rows /= 2;
        part.shape.dims[0] = rows;
        part.data = (char *)x->data + (size_t)at * row_in;
        vm_class *c = NULL;
        kiln_status s = find_class(vm, n, tv, &c, err);
        if (s != KILN_OK)
            return s;
        if (!c->mod) /* not compiled: the node runs whole */
            return KILN_OK;
        if ((s = exec_class(vm, n, c, tv, err)) != KILN_OK)
            return s;
        const kiln_tensor *y = n->out[0];
        if (at == 0) { /* the whole output: the chunk's, total items */
            if (!n->own && (!(n->own = calloc(2, sizeof *n->own)) ||
                            !(n->own_cap = calloc(2, sizeof *n->own_cap))))
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            kiln_shape sh = y->shape;
            sh.dims[0] = total;
            row_out = (size_t)(kiln_tensor_nbytes(y) / rows);
            if ((s = kiln_vm_set_out(n, 0, y->dtype, &sh, err)) != KILN_OK)
                return s;
        }
        if (y->shape.dims[0] != rows || (size_t)kiln_tensor_nbytes(y) != row_out * (size_t)rows)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "node '%s': chunk output shape", n->name);
        memcpy((char *)n->own[0].data + (size_t)at * row_out, y->data, row_out * (size_t)rows);
        flops += c->flops;
        at += rows;
    }
    n->out[0] = &n->own[0];
    n->flops = flops;
    *done = true;
    return KILN_OK;
}

static kiln_status run_node(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    const kiln_tensor **t = n->in;
    for (int k = 0; k < n->n_in; k++)
        t[k] = kiln_vm_value(vm, n->src[k]);
    if (chunkable(vm, n, t)) {
        bool done = false;
        kiln_status s = run_chunks(vm, n, &done, err);
        if (s != KILN_OK || done)
            return s;
    }
    vm_class *c = NULL;
    kiln_status s = find_class(vm, n, t, &c, err);
    return s == KILN_OK ? exec_class(vm, n, c, t, err) : s;
}

/* ---- steps: one kiln_vm_run, one piece at a time (for the profiler) ---------
 * Step 0 checks the inputs and hands them to the static part; steps 1..ns
 * are the static part's (the compiled module's steps, or the reference
 * executor's nodes); then one step per dynamic node, in ONNX order. Running
 * every step once, in order, is kiln_vm_run (which does exactly that). */

static int static_steps(const kiln_vm *vm)
{
    return vm->smod ? kiln_module_num_steps(vm->smod)
           : vm->sex ? kiln_ref_executor_num_nodes(vm->sex)
                     : 0;
}

int kiln_vm_num_steps(const kiln_vm *vm)
{
    if (vm && vm->generic)
        return vm->n_chunk  ? kiln_vm_batch_num_steps(vm)
               : vm->active ? kiln_vm_num_steps(vm->active)
                            : 1;
    return vm ? 1 + static_steps(vm) + vm->n_dyn : 0;
}

static const char *dyn_kind(const vm_node *n)
{
    if (n->fused)
        return "vm fused";
    if (n->flow == VM_VIEW)
        return n->as_view ? "vm view" : "vm converted";
    if (n->flow == VM_CONVERT && n->compiled)
        return "vm compiled";
    switch (n->flow) {
    case VM_KERNEL: return "vm kernel";
    case VM_IF: case VM_LOOP: case VM_SCAN: return "vm control flow";
    case VM_SEQ: return "vm sequence";
    default: return "vm converted";
    }
}

int kiln_vm_step_accumulators(const kiln_vm *vm, int i)
{
    if (vm && vm->active)
        return vm->n_chunk ? 0 : kiln_vm_step_accumulators(vm->active, i);
    int d = vm ? i - 1 - static_steps(vm) : -1;
    if (!vm || d < 0 || d >= vm->n_dyn || vm->dyn[d].flow != VM_LOOP || !vm->dyn[d].accum)
        return 0;
    int k = 0;
    for (int j = 0; j < vm->dyn[d].n_in - 2; j++)
        k += vm->dyn[d].accum[j] != 0;
    return k;
}

kiln_status kiln_vm_step_info(const kiln_vm *vm, int i, kiln_vm_step_desc *info, char *shapes,
                              size_t size)
{
    if (vm && vm->active)
        return vm->n_chunk ? kiln_vm_batch_step_info(vm, i, info, shapes, size)
                           : kiln_vm_step_info(vm->active, i, info, shapes, size);
    int ns = vm ? static_steps(vm) : 0;
    if (!vm || !info || i < 0 || i >= kiln_vm_num_steps(vm))
        return KILN_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    if (shapes && size)
        shapes[0] = '\0';
    if (i == 0) {
        info->name = "vm: inputs to the static part";
        info->op = "vm";
        info->kind = "vm";
        return KILN_OK;
    }
    if (i <= ns) {
        if (vm->smod) {
            kiln_step_info si;
            if (kiln_module_step_info(vm->smod, i - 1, &si) != KILN_OK)
                return KILN_ERR_INTERNAL;
            info->name = si.name, info->op = si.op, info->kind = "compiled";
            info->flops = si.flops, info->workload_hash = si.workload_hash;
            info->layouts = si.layouts;
            if (shapes && size)
                snprintf(shapes, size, "%s", si.shapes);
        } else {
            kiln_ref_node_info ni;
            if (kiln_ref_executor_node_info(vm->sex, i - 1, &ni) != KILN_OK)
                return KILN_ERR_INTERNAL;
            info->name = ni.name, info->op = ni.op, info->kind = "reference";
            info->flops = ni.flops;
            if (shapes && size)
                kiln_ref_executor_node_shapes(vm->sex, i - 1, shapes, size);
        }
        return KILN_OK;
    }
    const vm_node *n = &vm->dyn[i - 1 - ns];
    info->name = n->name ? n->name : "";
    info->op = n->np->op_type ? n->np->op_type : "";
    info->kind = dyn_kind(n);
    info->flops = n->flow == VM_CONVERT || (n->flow == VM_VIEW && !n->as_view) ? n->flops : 0;
    if (shapes && size) { /* the inputs as the last run saw them */
        size_t len = 0;
        for (int k = 0; k < n->n_in && len + 1 < size; k++) {
            const kiln_tensor *t = kiln_vm_value(vm, n->src[k]);
            if (!t)
                continue;
            len += (size_t)snprintf(shapes + len, size - len, "%s%s[", len ? ", " : "",
                                    kiln_dtype_name(t->dtype));
            for (int d = 0; d < t->shape.rank && len + 1 < size; d++)
                len += (size_t)snprintf(shapes + len, size - len, "%s%lld", d ? ", " : "",
                                        (long long)t->shape.dims[d]);
            if (len + 1 < size)
                len += (size_t)snprintf(shapes + len, size - len, "]");
        }
    }
    return KILN_OK;
}

kiln_status kiln_vm_run_step(kiln_vm *vm, int i, kiln_error *err)
{
    if (!vm || i < 0 || i >= kiln_vm_num_steps(vm))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_run_step: no step %d", i);
    if (vm->generic) { /* step 0 picks the specialization of the inputs' shapes */
        kiln_status s = i == 0 ? kiln_vm_spec_select(vm, err) : KILN_OK;
        if (s == KILN_OK && !vm->active)
            s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_run_step: step 0 first");
        return s != KILN_OK  ? s
               : vm->n_chunk ? kiln_vm_batch_run_step(vm, i, err)
                             : kiln_vm_run_step(vm->active, i, err);
    }
    int ns = static_steps(vm);
    if (i == 0) {
        for (int k = 0; k < vm->n_in; k++)
            if (!vm->in_set[k])
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input %d ('%s') is not set",
                                   k, vm->in_vi[k]->name);
        kiln_status s = KILN_OK;
        for (int k = 0; k < vm->s_n_in && s == KILN_OK; k++) {
            const kiln_tensor *t = &vm->in_t[vm->s_in_map[k]];
            s = vm->smod ? kiln_module_set_input(vm->smod, k, t, err)
                         : kiln_ref_executor_set_input(vm->sex, k, t, err);
        }
        return s;
    }
    if (i <= ns)
        return vm->smod ? kiln_module_run_step(vm->smod, i - 1) == KILN_OK
                              ? KILN_OK
                              : kiln_errorf(err, KILN_ERR_INTERNAL, "static step %d failed", i - 1)
                        : kiln_ref_executor_run_node(vm->sex, i - 1, err);
    int d = i - 1 - ns;
    if (vm->dyn[d].fused) /* its reader reads its inputs (vm_scatter.c) */
        return KILN_OK;
    if (vm->dyn[d].flow == VM_VIEW) {
        bool done = false;
        kiln_status s = kiln_vm_view_run(vm, &vm->dyn[d], &done, err);
        return s != KILN_OK || done ? s : run_node(vm, &vm->dyn[d], err);
    }
    return vm->dyn[d].flow == VM_KERNEL ? kiln_vm_kernel_run(vm, &vm->dyn[d], err)
           : vm->dyn[d].flow            ? kiln_vm_flow_run(vm, d, err)
                                        : run_node(vm, &vm->dyn[d], err);
}

kiln_status kiln_vm_run(kiln_vm *vm, kiln_error *err)
{
    if (!vm)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_run: NULL VM");
    if (vm->generic) {
        kiln_status s = kiln_vm_spec_select(vm, err);
        if (s != KILN_OK || !vm->n_chunk)
            return s == KILN_OK ? kiln_vm_run(vm->active, err) : s;
        const int n = kiln_vm_batch_num_steps(vm);
        for (int i = 0; i < n && s == KILN_OK; i++)
            s = kiln_vm_batch_run_step(vm, i, err);
        return s;
    }
    const int n = kiln_vm_num_steps(vm);
    for (int i = 0; i < n; i++) {
        kiln_status s = kiln_vm_run_step(vm, i, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

/* ---- bodies of If, Loop and Scan --------------------------------------------- */

static bool defined_in(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && strcmp(g->input[i]->name, name) == 0)
            return true;
    if (is_initializer(g, name))
        return true;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (g->node[i]->output[k] && strcmp(g->node[i]->output[k], name) == 0)
                return true;
    return false;
}

static int add_name(const char **names, int n, int max, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return n;
    if (n < max)
        names[n++] = name;
    return n;
}

int kiln_vm_free_names(const Onnx__GraphProto *g, const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        for (size_t k = 0; k < np->n_input; k++)
            if (np->input[k] && *np->input[k] && !defined_in(g, np->input[k]))
                n = add_name(names, n, max, np->input[k]);
        for (size_t a = 0; a < np->n_attribute; a++) {
            const Onnx__GraphProto *sub = np->attribute[a]->g;
            if (!sub)
                continue;
            const char *inner[VM_MAX_CAPTURED];
            int ni = kiln_vm_free_names(sub, inner, VM_MAX_CAPTURED);
            for (int j = 0; j < ni; j++)
                if (!defined_in(g, inner[j]))
                    n = add_name(names, n, max, inner[j]);
        }
    }
    for (size_t o = 0; o < g->n_output; o++)
        if (g->output[o]->name && !defined_in(g, g->output[o]->name))
            n = add_name(names, n, max, g->output[o]->name);
    return n;
}

kiln_status kiln_vm_create_body(kiln_vm *parent, const Onnx__GraphProto *g, kiln_vm **out,
                                kiln_error *err)
{
    kiln_vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    vm->m = parent->m;
    vm->graph = g;
    vm->parent = parent;
    vm->reference = true;
    kiln_status s = KILN_OK;
    const char *cap[VM_MAX_CAPTURED];
    int n_cap = kiln_vm_free_names(g, cap, VM_MAX_CAPTURED);
    size_t cap_n = g->n_input + (size_t)n_cap + g->n_output + 1;
    vm->cap_vi = calloc((size_t)n_cap + 1, sizeof *vm->cap_vi);
    vm->base_dir = strdup(parent->base_dir);
    vm->in_vi = calloc(cap_n, sizeof *vm->in_vi);
    vm->out_vi = calloc(cap_n, sizeof *vm->out_vi);
    vm->in_dt = calloc(cap_n, sizeof *vm->in_dt);
    vm->out_dt = calloc(cap_n, sizeof *vm->out_dt);
    vm->in_shape = calloc(cap_n, sizeof *vm->in_shape);
    vm->out_shape = calloc(cap_n, sizeof *vm->out_shape);
    vm->in_t = calloc(cap_n, sizeof *vm->in_t);
    vm->in_set = calloc(cap_n, sizeof *vm->in_set);
    vm->out_src = calloc(cap_n, sizeof *vm->out_src);
    bool *dyn = calloc(g->n_node + 1, sizeof *dyn);
    if (!vm->cap_vi || !vm->base_dir || !vm->in_vi || !vm->out_vi || !vm->in_dt ||
        !vm->out_dt || !vm->in_shape || !vm->out_shape || !vm->in_t || !vm->in_set ||
        !vm->out_src || !dyn) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        if (!g->input[i]->name || is_initializer(g, g->input[i]->name))
            continue;
        vm->in_vi[vm->n_in] = g->input[i];
        decl_type(g->input[i], &vm->in_dt[vm->n_in], &vm->in_shape[vm->n_in]);
        vm->n_in++;
    }
    vm->n_formal = vm->n_in;
    for (int i = 0; i < n_cap; i++) {
        Onnx__ValueInfoProto v0 = ONNX__VALUE_INFO_PROTO__INIT;
        vm->cap_vi[i] = v0;
        vm->cap_vi[i].name = (char *)cap[i];
        vm->in_vi[vm->n_in++] = &vm->cap_vi[i];
    }
    for (size_t i = 0; i < g->n_output; i++) {
        vm->out_vi[vm->n_out] = g->output[i];
        decl_type(g->output[i], &vm->out_dt[vm->n_out], &vm->out_shape[vm->n_out]);
        vm->n_out++;
    }
    for (size_t i = 0; i < g->n_node; i++)
        dyn[i] = true; /* bodies run node by node: their shapes come from the iteration */
    s = kiln_vm_build_dynamic(vm, dyn, err);
done:
    free(dyn);
    if (s != KILN_OK) {
        kiln_vm_destroy(vm);
        return s;
    }
    *out = vm;
    return KILN_OK;
}

int kiln_vm_num_captured(const kiln_vm *body)
{
    return body->n_in - body->n_formal;
}

/* ---- queries ------------------------------------------------------------------ */

int kiln_vm_num_inputs(const kiln_vm *vm)
{
    return vm->n_in;
}

int kiln_vm_num_outputs(const kiln_vm *vm)
{
    return vm->n_out;
}

kiln_status kiln_vm_input_info(const kiln_vm *vm, int i, const char **name, kiln_dtype *dtype,
                               kiln_shape *shape)
{
    if (i < 0 || i >= vm->n_in)
        return KILN_ERR_INVALID_ARGUMENT;
    if (name)
        *name = vm->in_vi[i]->name;
    if (dtype)
        *dtype = vm->in_dt[i];
    if (shape)
        *shape = vm->in_shape[i];
    return KILN_OK;
}

kiln_status kiln_vm_output_info(const kiln_vm *vm, int i, const char **name, kiln_dtype *dtype,
                                kiln_shape *shape)
{
    if (i < 0 || i >= vm->n_out)
        return KILN_ERR_INVALID_ARGUMENT;
    if (name)
        *name = vm->out_vi[i]->name ? vm->out_vi[i]->name : "";
    if (dtype)
        *dtype = vm->out_dt[i];
    if (shape)
        *shape = vm->out_shape[i];
    return KILN_OK;
}

kiln_status kiln_vm_set_input(kiln_vm *vm, int i, const kiln_tensor *t, kiln_error *err)
{
    if (i < 0 || i >= vm->n_in)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input index %d out of range (%d)", i,
                           vm->n_in);
    if (!t)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input %d: no tensor", i);
    if (!vm->parent) { /* a body: its node checked what it passes */
        kiln_status s = kiln_vm_check_input(vm, i, t, err);
        if (s != KILN_OK)
            return s;
    }
    kiln_tensor *dst = &vm->in_t[i];
    if (vm->generic) { /* inputs change shape: a buffer grown, never shrunk */
        int64_t nb = kiln_tensor_nbytes(t);
        if (nb < 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input '%s': no finite size",
                               vm->in_vi[i]->name);
        if (!dst->data || (size_t)nb > vm->in_cap[i]) {
            void *p = realloc(dst->data, nb ? (size_t)nb : 1);
            if (!p) {
                vm->in_set[i] = false;
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "input '%s': %lld bytes",
                                   vm->in_vi[i]->name, (long long)nb);
            }
            dst->data = p;
            vm->in_cap[i] = nb ? (size_t)nb : 1;
        }
        dst->dtype = t->dtype;
        dst->shape = t->shape;
        if (nb > 0 && dst->data != t->data)
            memcpy(dst->data, t->data, (size_t)nb);
        vm->in_set[i] = true;
        return KILN_OK;
    }
    if (!vm->in_set[i] || dst->dtype != t->dtype || !kiln_shape_equal(&dst->shape, &t->shape)) {
        kiln_tensor_release(dst);
        kiln_status s = kiln_tensor_alloc(dst, t->dtype, &t->shape, err);
        if (s != KILN_OK) {
            vm->in_set[i] = false;
            return s;
        }
    }
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb > 0 && dst->data != t->data) /* a body's state handed back to itself */
        memcpy(dst->data, t->data, (size_t)nb);
    vm->in_set[i] = true;
    return KILN_OK;
}

const kiln_tensor *kiln_vm_output(const kiln_vm *vm, int i)
{
    if (vm->generic)
        return vm->n_chunk ? (vm->bout && i >= 0 && i < vm->n_out ? &vm->bout[i] : NULL)
               : vm->active ? kiln_vm_output(vm->active, i)
                            : NULL;
    if (i < 0 || i >= vm->n_out)
        return NULL;
    return kiln_vm_value(vm, vm->out_src[i]);
}

int kiln_vm_num_dynamic_nodes(const kiln_vm *vm)
{
    if (vm->generic)
        return vm->active ? kiln_vm_num_dynamic_nodes(vm->active) : 0;
    return vm->n_dyn;
}

bool kiln_vm_static_compiled(const kiln_vm *vm)
{
    if (vm->generic)
        return vm->active && kiln_vm_static_compiled(vm->active);
    return vm->smod != NULL;
}

const char *kiln_vm_static_part(const kiln_vm *vm)
{
    if (vm->generic)
        return vm->active ? kiln_vm_static_part(vm->active) : "not imported yet";
    return vm->smod ? "compiled" : vm->sex ? "reference kernels" : "none";
}

int64_t kiln_vm_num_conversions(const kiln_vm *vm)
{
    int64_t c = vm->conversions;
    for (int i = 0; i < vm->n_spec; i++)
        c += kiln_vm_num_conversions(vm->spec[i].vm);
    for (int d = 0; d < vm->n_dyn; d++)
        for (int b = 0; b < 2; b++)
            if (vm->dyn[d].body[b])
                c += kiln_vm_num_conversions(vm->dyn[d].body[b]);
    return c;
}
