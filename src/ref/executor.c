/* ref/executor.c: the reference executor. Runs any valid, shape-inferred
 * graph node by node in topological order with the reference kernels. Every
 * buffer is allocated at create time, the kernels' scratch included (the
 * largest any node takes, ref/scratch.h, lent to each), so run() does not
 * allocate (beyond the argument arrays of nodes with more than 64 inputs or
 * outputs). run() is a
 * loop over run_node(), which profilers call one node at a time (with
 * node_info and node_shapes describing each node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ref/scratch.h"
#include "util/error.h"

struct kiln_ref_executor {
    const kiln_graph *g;
    kiln_tensor *tensors; /* one per value; constants borrow the graph's data */
    int *order;
    void **own; /* per graph input bound in place (bind_input): its own buffer, else NULL */
    void *scratch; /* the kernels' temporaries: the most a node takes */
    size_t scratch_bytes;
};

/* Gives graph input `index` its own buffer back after bind_input. */
static void unbind(kiln_ref_executor *ex, int index)
{
    if (ex->own && ex->own[index]) {
        ex->tensors[ex->g->inputs[index]].data = ex->own[index];
        ex->own[index] = NULL;
    }
}

void kiln_ref_executor_destroy(kiln_ref_executor *ex)
{
    if (!ex)
        return;
    for (int i = 0; ex->own && i < ex->g->n_inputs; i++)
        unbind(ex, i);
    free(ex->own);
    if (ex->tensors)
        for (int i = 0; i < ex->g->n_values; i++)
            if (ex->g->values[i]->kind != KILN_VALUE_CONST)
                kiln_tensor_release(&ex->tensors[i]);
    free(ex->tensors);
    free(ex->order);
    free(ex->scratch);
    free(ex);
}

/* The node's tensors into in/out (its argument arrays); false when it has
 * more than cap inputs or outputs. */
static bool node_args(const kiln_ref_executor *ex, const kiln_node *n, const kiln_tensor **in,
                      kiln_tensor **out, int cap)
{
    if (n->n_inputs > cap || n->n_outputs > cap)
        return false;
    for (int k = 0; k < n->n_inputs; k++)
        in[k] = n->inputs[k] >= 0 ? &ex->tensors[n->inputs[k]] : NULL;
    for (int k = 0; k < n->n_outputs; k++)
        out[k] = &ex->tensors[n->outputs[k]];
    return true;
}

/* The scratch of the node that takes the most. */
static kiln_status alloc_scratch(kiln_ref_executor *ex, kiln_error *err)
{
    const kiln_tensor *ins[64];
    kiln_tensor *outs[64];
    size_t most = 0;
    for (int i = 0; i < ex->g->n_nodes; i++) {
        const kiln_node *n = ex->g->nodes[i];
        if (node_args(ex, n, ins, outs, 64)) {
            size_t b = kiln_ref_scratch_bytes(n, ins, outs);
            most = b > most ? b : most;
        }
    }
    if (!most)
        return KILN_OK;
    if (!(ex->scratch = aligned_alloc(64, kiln_ref_scratch_round(most))))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory for scratch");
    ex->scratch_bytes = most;
    return KILN_OK;
}

kiln_status kiln_ref_executor_create(const kiln_graph *g, kiln_ref_executor **out,
                                     kiln_error *err)
{
    kiln_status s = kiln_graph_validate(g, err);
    if (s != KILN_OK)
        return s;
    kiln_ref_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    ex->g = g;
    ex->tensors = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(kiln_tensor));
    ex->order = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!ex->tensors || !ex->order) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    s = kiln_graph_topo_order(g, ex->order, err);
    if (s != KILN_OK)
        goto fail;
    for (int i = 0; i < g->n_values; i++) {
        const kiln_value *v = g->values[i];
        kiln_tensor *t = &ex->tensors[i];
        if (v->dtype == KILN_DTYPE_UNDEFINED) {
            s = kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                            "value '%s' has no type: run shape inference first", v->name);
            goto fail;
        }
        if (v->kind == KILN_VALUE_CONST) {
            if (!v->data) {
                s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                "constant '%s' has no data (graph built without weights)",
                                v->name);
                goto fail;
            }
            t->dtype = v->dtype;
            t->shape = v->shape;
            t->data = v->data;
            continue;
        }
        s = kiln_tensor_alloc(t, v->dtype, &v->shape, err);
        if (s != KILN_OK) {
            kiln_error_prefix(err, s, "value '%s': ", v->name);
            goto fail;
        }
    }
    if ((s = alloc_scratch(ex, err)) != KILN_OK)
        goto fail;
    *out = ex;
    return KILN_OK;
fail:
    kiln_ref_executor_destroy(ex);
    return s;
}

kiln_status kiln_ref_executor_set_input(kiln_ref_executor *ex, int index, const kiln_tensor *t,
                                        kiln_error *err)
{
    const kiln_graph *g = ex->g;
    if (index < 0 || index >= g->n_inputs)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input index %d out of range (%d inputs)",
                           index, g->n_inputs);
    const kiln_value *v = g->values[g->inputs[index]];
    kiln_tensor *dst = &ex->tensors[v->id];
    kiln_shape_buf a, b;
    if (t->dtype != v->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input '%s' is %s, got %s", v->name,
                           kiln_dtype_name(v->dtype), kiln_dtype_name(t->dtype));
    if (!kiln_shape_equal(&t->shape, &v->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input '%s' has shape %s, got %s",
                           v->name, kiln_shape_fmt(&v->shape, &a), kiln_shape_fmt(&t->shape, &b));
    unbind(ex, index);
    memcpy(dst->data, t->data, (size_t)kiln_tensor_nbytes(dst));
    return KILN_OK;
}

kiln_status kiln_ref_executor_bind_input(kiln_ref_executor *ex, int index, const kiln_tensor *t,
                                         kiln_error *err)
{
    const kiln_graph *g = ex->g;
    if (index < 0 || index >= g->n_inputs)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input index %d out of range (%d inputs)",
                           index, g->n_inputs);
    const kiln_value *v = g->values[g->inputs[index]];
    kiln_shape_buf a, b;
    if (t->dtype != v->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input '%s' is %s, got %s", v->name,
                           kiln_dtype_name(v->dtype), kiln_dtype_name(t->dtype));
    if (!kiln_shape_equal(&t->shape, &v->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input '%s' has shape %s, got %s",
                           v->name, kiln_shape_fmt(&v->shape, &a), kiln_shape_fmt(&t->shape, &b));
    if (!ex->own && !(ex->own = calloc((size_t)g->n_inputs + 1, sizeof *ex->own)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_tensor *dst = &ex->tensors[v->id];
    if (!ex->own[index])
        ex->own[index] = dst->data;
    dst->data = t->data;
    return KILN_OK;
}

kiln_status kiln_ref_executor_run_node(kiln_ref_executor *ex, int i, kiln_error *err)
{
    if (!ex || i < 0 || i >= ex->g->n_nodes)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node index %d out of range", i);
    const kiln_tensor *ins[64];
    kiln_tensor *outs[64];
    const kiln_node *n = ex->g->nodes[ex->order[i]];
    const kiln_tensor **in_p = ins;
    kiln_tensor **out_p = outs;
    if (!node_args(ex, n, ins, outs, 64)) {
        in_p = malloc(sizeof(*in_p) * (size_t)n->n_inputs + 1);
        out_p = malloc(sizeof(*out_p) * (size_t)n->n_outputs + 1);
        if (!in_p || !out_p) {
            free(in_p);
            free(out_p);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        node_args(ex, n, in_p, out_p, INT32_MAX);
    }
    kiln_ref_scratch_loan prev = {0};
    if (ex->scratch)
        prev = kiln_ref_scratch_lend(ex->scratch, ex->scratch_bytes);
    kiln_status s = kiln_op_run_ref(n, in_p, out_p, err);
    if (ex->scratch)
        kiln_ref_scratch_end(prev);
    if (in_p != ins) {
        free(in_p);
        free(out_p);
    }
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "node '%s' (%s): ", n->name, kiln_op_name(n->op));
    return KILN_OK;
}

kiln_status kiln_ref_executor_run(kiln_ref_executor *ex, kiln_error *err)
{
    for (int i = 0; i < ex->g->n_nodes; i++) {
        kiln_status s = kiln_ref_executor_run_node(ex, i, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

int kiln_ref_executor_num_nodes(const kiln_ref_executor *ex)
{
    return ex ? ex->g->n_nodes : 0;
}

kiln_status kiln_ref_executor_node_info(const kiln_ref_executor *ex, int i,
                                        kiln_ref_node_info *info)
{
    if (!ex || !info || i < 0 || i >= ex->g->n_nodes)
        return KILN_ERR_INVALID_ARGUMENT;
    const kiln_node *n = ex->g->nodes[ex->order[i]];
    info->name = n->name ? n->name : "";
    info->op = kiln_op_name(n->op);
    info->flops = 2.0 * (double)kiln_node_macs(ex->g, n);
    return KILN_OK;
}

char *kiln_ref_executor_node_shapes(const kiln_ref_executor *ex, int i, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    buf[0] = '\0';
    if (!ex || i < 0 || i >= ex->g->n_nodes)
        return buf;
    const kiln_node *n = ex->g->nodes[ex->order[i]];
    size_t len = 0;
    int first = 1;
    for (int k = 0; k < n->n_inputs + n->n_outputs && len < size; k++) {
        int id = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        if (id < 0)
            continue;
        const kiln_value *v = ex->g->values[id];
        kiln_shape_buf sb;
        int w = snprintf(buf + len, size - len, "%s%s%s", first ? "" : ", ",
                         kiln_dtype_name(v->dtype), kiln_shape_fmt(&v->shape, &sb));
        if (w < 0)
            break;
        len += (size_t)w;
        first = 0;
    }
    return buf;
}

const kiln_tensor *kiln_ref_executor_output(const kiln_ref_executor *ex, int index)
{
    if (!ex || index < 0 || index >= ex->g->n_outputs)
        return NULL;
    return &ex->tensors[ex->g->outputs[index]];
}
