/* pass/reduce_to_pool.c: a mean or max over the two spatial dims of an
 * NCHW float32 tensor is a global pool. timm's squeeze-excite blocks and
 * heads write `x.mean((2, 3), keepdim=True)`, exported as ReduceMean with
 * axes (2, 3); it becomes GlobalAveragePool (ReduceMax: GlobalMaxPool),
 * and with keepdims 0 a Reshape to [N, C] (a view) follows. The reduce
 * template walks each output's elements with a division per element and
 * reads only row-major data, so a blocked conv chain was transformed to
 * NCHW and back around every such block: in a six-block squeeze-excite
 * net, the reductions and those transforms were 35% of the run. The
 * global pool templates read NCHW{b}c. Runs after fold-patterns, whose
 * normalization patterns read ReduceMeans. */
#include "pass/pass.h"
#include "util/error.h"

static bool plan(const kiln_graph *g, const kiln_node *n)
{
    if ((n->op != KILN_OP_REDUCEMEAN && n->op != KILN_OP_REDUCEMAX) || n->n_inputs != 1 ||
        n->inputs[0] < 0 || n->n_outputs != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]];
    const int64_t *axes = NULL;
    if (x->dtype != KILN_DTYPE_FLOAT32 || x->shape.rank != 4 ||
        kiln_attr_ints(n, "axes", &axes) != 2 || kiln_shape_numel(&x->shape) <= 0)
        return false;
    bool seen[4] = {false};
    for (int i = 0; i < 2; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + 4 : axes[i];
        if (a < 0 || a > 3)
            return false;
        seen[a] = true;
    }
    return seen[2] && seen[3];
}

static bool lower(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    kiln_op pool = n->op == KILN_OP_REDUCEMEAN ? KILN_OP_GLOBALAVERAGEPOOL : KILN_OP_GLOBALMAXPOOL;
    int cur = kiln_rewrite_value(rw, n->inputs[0]);
    if (cur < 0)
        return false;
    if (kiln_attr_int(n, "keepdims", 1) != 0)
        return kiln_rewrite_emit(rw, n, pool, "", &cur, 1, &y->shape, true) >= 0;
    kiln_shape pooled = {4, {x->shape.dims[0], x->shape.dims[1], 1, 1}};
    int id = kiln_rewrite_emit(rw, n, pool, ".pool", &cur, 1, &pooled, false);
    if (id < 0)
        return false;
    return kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, "", kiln_rewrite_out(rw, id), &y->shape,
                             y->shape.dims, true) >= 0;
}

kiln_status kiln_pass_reduce_to_pool(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, plan, lower, err);
}
