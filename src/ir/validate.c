/* ir/validate.c: structural validation, topological order and the shape
 * inference driver.
 *
 * Validation checks, in order: every node's op and arity against the registry;
 * every edge points at an existing value (an absent optional input is -1, and
 * only past the op's minimum arity); outputs are owned by their producer; the
 * graph is acyclic (Kahn's algorithm); and, running shape inference on a
 * scratch copy of the values, every recorded dtype/shape agrees with what the
 * node's inference function derives. Each error names the node. */
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "util/error.h"

static kiln_status node_error(kiln_error *err, kiln_status s, const kiln_node *n)
{
    return kiln_error_prefix(err, s, "node '%s' (%s): ", n->name, kiln_op_name(n->op));
}

static kiln_status check_structure(const kiln_graph *g, kiln_error *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        const kiln_op_info *info = kiln_op_get(n->op);
        if (!info)
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s': invalid op %d", n->name,
                               (int)n->op);
        if (n->n_inputs < info->min_inputs || n->n_inputs > info->max_inputs)
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                               "node '%s' (%s): %d inputs, the op takes %d to %d", n->name,
                               info->name, n->n_inputs, info->min_inputs,
                               info->max_inputs == KILN_VARIADIC ? 1 << 20 : info->max_inputs);
        if (n->n_outputs < info->min_outputs || n->n_outputs > info->max_outputs)
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                               "node '%s' (%s): %d outputs, the op produces %d to %d", n->name,
                               info->name, n->n_outputs, info->min_outputs,
                               info->max_outputs == KILN_VARIADIC ? 1 << 20 : info->max_outputs);
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v == -1 && k >= info->min_inputs)
                continue;
            if (!kiln_graph_value(g, v))
                return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                                   "node '%s' (%s): input %d is a dangling edge (value %d)",
                                   n->name, info->name, k, v);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            const kiln_value *v = kiln_graph_value(g, n->outputs[k]);
            if (!v || v->kind != KILN_VALUE_NODE || v->producer != n->id)
                return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                                   "node '%s' (%s): output %d is not owned by the node", n->name,
                                   info->name, k);
        }
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!kiln_graph_value(g, g->inputs[i]))
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "graph input %d is dangling", i);
    for (int i = 0; i < g->n_outputs; i++)
        if (!kiln_graph_value(g, g->outputs[i]))
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "graph output %d is dangling", i);
    return KILN_OK;
}

kiln_status kiln_graph_topo_order(const kiln_graph *g, int *order, kiln_error *err)
{
    /* Kahn's algorithm over a consumer index (CSR: for each value, the nodes
     * reading it, one entry per reading edge), linear in nodes + edges. */
    int n = g->n_nodes, nv = g->n_values;
    if (n == 0)
        return KILN_OK;
    int *pending = calloc((size_t)n, sizeof(int)); /* unfinished producer edges per node */
    int *start = calloc((size_t)nv + 1, sizeof(int));
    int64_t edges = 0;
    for (int i = 0; i < n; i++)
        edges += g->nodes[i]->n_inputs;
    int *cons = malloc(sizeof(int) * (size_t)(edges ? edges : 1));
    if (!pending || !start || !cons) {
        free(pending);
        free(start);
        free(cons);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const kiln_node *nd = g->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++) {
            const kiln_value *v = kiln_graph_value(g, nd->inputs[k]);
            if (v && v->producer >= 0) {
                pending[i]++;
                start[v->id + 1]++;
            }
        }
    }
    for (int v = 0; v < nv; v++)
        start[v + 1] += start[v];
    int *fill = calloc((size_t)nv + 1, sizeof(int));
    if (!fill) {
        free(pending);
        free(start);
        free(cons);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const kiln_node *nd = g->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++) {
            const kiln_value *v = kiln_graph_value(g, nd->inputs[k]);
            if (v && v->producer >= 0)
                cons[start[v->id] + fill[v->id]++] = i;
        }
    }
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (pending[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        const kiln_node *nd = g->nodes[order[head++]];
        for (int k = 0; k < nd->n_outputs; k++) {
            int vid = nd->outputs[k];
            if (vid < 0 || vid >= nv)
                continue;
            for (int e = start[vid]; e < start[vid + 1]; e++)
                if (--pending[cons[e]] == 0)
                    order[tail++] = cons[e];
        }
    }
    kiln_status s = KILN_OK;
    if (tail < n) {
        int bad = 0;
        while (bad < n && pending[bad] == 0)
            bad++;
        s = kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s' (%s) is on a cycle",
                        g->nodes[bad]->name, kiln_op_name(g->nodes[bad]->op));
    }
    free(pending);
    free(start);
    free(cons);
    free(fill);
    return s;
}

/* Runs every node's inference over `vals` (one pointer per value id) in
 * topological order. With `compare`, the derived types are checked against the
 * ones recorded in `recorded` wherever those are defined. */
static kiln_status run_inference(const kiln_graph *g, kiln_value **vals,
                                 kiln_value *const *recorded, const int *order, kiln_error *err)
{
    const kiln_value *ins[64];
    kiln_value *outs[64];
    const kiln_value **in_p = ins;
    kiln_value **out_p = outs;
    kiln_status s = KILN_OK;
    for (int oi = 0; oi < g->n_nodes && s == KILN_OK; oi++) {
        const kiln_node *n = g->nodes[order[oi]];
        const kiln_op_info *info = kiln_op_get(n->op);
        if (n->n_inputs > 64 || n->n_outputs > 64) {
            in_p = malloc(sizeof(*in_p) * (size_t)(n->n_inputs ? n->n_inputs : 1));
            out_p = malloc(sizeof(*out_p) * (size_t)(n->n_outputs ? n->n_outputs : 1));
            if (!in_p || !out_p) {
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto next;
            }
        }
        for (int k = 0; k < n->n_inputs; k++) {
            in_p[k] = n->inputs[k] >= 0 ? vals[n->inputs[k]] : NULL;
            if (in_p[k] && in_p[k]->dtype == KILN_DTYPE_UNDEFINED) {
                s = kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                                "node '%s' (%s): input %d ('%s') has no type", n->name,
                                info->name, k, in_p[k]->name);
                goto next;
            }
        }
        for (int k = 0; k < n->n_outputs; k++)
            out_p[k] = vals[n->outputs[k]];
        s = info->infer(n, in_p, out_p, err);
        if (s != KILN_OK) {
            s = node_error(err, s, n);
            goto next;
        }
        for (int k = 0; k < n->n_outputs && recorded; k++) {
            const kiln_value *r = recorded[n->outputs[k]];
            if (r->dtype == KILN_DTYPE_UNDEFINED)
                continue;
            kiln_shape_buf a, b;
            if (r->dtype != out_p[k]->dtype) {
                s = kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                                "node '%s' (%s): output %d ('%s') is recorded as %s but the op "
                                "produces %s",
                                n->name, info->name, k, r->name, kiln_dtype_name(r->dtype),
                                kiln_dtype_name(out_p[k]->dtype));
                goto next;
            }
            if (!kiln_shape_equal(&r->shape, &out_p[k]->shape)) {
                s = kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                "node '%s' (%s): output %d ('%s') is recorded as %s but the op "
                                "produces %s",
                                n->name, info->name, k, r->name, kiln_shape_fmt(&r->shape, &a),
                                kiln_shape_fmt(&out_p[k]->shape, &b));
                goto next;
            }
        }
    next:
        if (in_p != ins) {
            free(in_p);
            free(out_p);
            in_p = ins;
            out_p = outs;
        }
    }
    return s;
}

kiln_status kiln_graph_validate(const kiln_graph *g, kiln_error *err)
{
    if (!g)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no graph");
    kiln_status s = check_structure(g, err);
    if (s != KILN_OK)
        return s;
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    kiln_value *scratch = malloc(sizeof(kiln_value) * (size_t)(g->n_values ? g->n_values : 1));
    kiln_value **vals = malloc(sizeof(kiln_value *) * (size_t)(g->n_values ? g->n_values : 1));
    if (!order || !scratch || !vals) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    s = kiln_graph_topo_order(g, order, err);
    if (s != KILN_OK)
        goto done;
    for (int i = 0; i < g->n_values; i++) {
        scratch[i] = *g->values[i];
        if (scratch[i].kind == KILN_VALUE_NODE)
            scratch[i].dtype = KILN_DTYPE_UNDEFINED;
        vals[i] = &scratch[i];
    }
    s = run_inference(g, vals, g->values, order, err);
done:
    free(order);
    free(scratch);
    free(vals);
    return s;
}

kiln_status kiln_graph_infer_shapes(kiln_graph *g, kiln_error *err)
{
    if (!g)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no graph");
    kiln_status s = check_structure(g, err);
    if (s != KILN_OK)
        return s;
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!order)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    s = kiln_graph_topo_order(g, order, err);
    if (s == KILN_OK)
        s = run_inference(g, g->values, NULL, order, err);
    free(order);
    return s;
}
