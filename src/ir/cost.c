/* ir/cost.c: parameter and multiply-accumulate counts (kiln zoo, reports). */
#include "ir/graph.h"

int64_t kiln_node_macs(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *out = kiln_graph_value(g, n->outputs[0]);
    if (!out || out->dtype == KILN_DTYPE_UNDEFINED)
        return 0;
    int64_t out_elems = kiln_shape_numel(&out->shape);
    if (out_elems < 0)
        return 0;
    switch (n->op) {
    case KILN_OP_CONV: {
        /* each output element reduces over C_in/group x kernel window */
        const kiln_value *w = kiln_graph_value(g, n->inputs[1]);
        if (!w || w->shape.rank < 2)
            return 0;
        int64_t per = 1;
        for (int i = 1; i < w->shape.rank; i++)
            per *= w->shape.dims[i];
        return out_elems * per;
    }
    case KILN_OP_CONVTRANSPOSE: {
        /* each input element scatters into M/group x kernel window outputs:
         * W [C_in, M/group, k...] */
        const kiln_value *x = kiln_graph_value(g, n->inputs[0]);
        const kiln_value *w = kiln_graph_value(g, n->inputs[1]);
        if (!x || !w || w->shape.rank < 2)
            return 0;
        int64_t in_elems = kiln_shape_numel(&x->shape), per = 1;
        if (in_elems < 0)
            return 0;
        for (int i = 1; i < w->shape.rank; i++)
            per *= w->shape.dims[i];
        return in_elems * per;
    }
    case KILN_OP_GEMM: {
        const kiln_value *a = kiln_graph_value(g, n->inputs[0]);
        if (!a || a->shape.rank != 2)
            return 0;
        int64_t k = kiln_attr_int(n, "transA", 0) ? a->shape.dims[0] : a->shape.dims[1];
        return out_elems * k;
    }
    case KILN_OP_MATMUL: {
        const kiln_value *a = kiln_graph_value(g, n->inputs[0]);
        if (!a || a->shape.rank < 1)
            return 0;
        return out_elems * a->shape.dims[a->shape.rank - 1];
    }
    default:
        return 0;
    }
}

int64_t kiln_graph_macs(const kiln_graph *g)
{
    int64_t total = 0;
    for (int i = 0; g && i < g->n_nodes; i++)
        total += kiln_node_macs(g, g->nodes[i]);
    return total;
}

/* Trainable parameters as torchvision counts them: floating-point constants,
 * except batch-norm running mean and variance (inputs 3 and 4), which are
 * buffers, not parameters. Rank-0 constants are operator scalars (the 1/sqrt(d)
 * of attention, GELU's 0.5), not parameters either. */
int64_t kiln_graph_num_params(const kiln_graph *g)
{
    int64_t total = 0;
    for (int i = 0; g && i < g->n_values; i++) {
        const kiln_value *v = g->values[i];
        if (v->kind != KILN_VALUE_CONST || (v->dtype != KILN_DTYPE_FLOAT32 &&
                                            v->dtype != KILN_DTYPE_FLOAT16 &&
                                            v->dtype != KILN_DTYPE_FLOAT64))
            continue;
        int64_t n = kiln_shape_numel(&v->shape);
        if (n > 0 && v->shape.rank > 0)
            total += n;
    }
    for (int i = 0; g && i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (n->op != KILN_OP_BATCHNORM)
            continue;
        for (int k = 3; k < 5 && k < n->n_inputs; k++) {
            const kiln_value *v = kiln_graph_value(g, n->inputs[k]);
            if (v && v->kind == KILN_VALUE_CONST)
                total -= kiln_shape_numel(&v->shape);
        }
    }
    return total;
}
