/* pass/fold_constant.c: constant folding.
 *
 * Walks the nodes in order; a node whose present inputs are all row-major
 * constants with data is evaluated right away with its reference kernel
 * (kiln_op_get(op)->ref, the same kernels the reference executor runs), and
 * its outputs become new constants. Because the walk is in topological order,
 * whole constant subgraphs (shape arithmetic, weight reshapes, transposed
 * weights) collapse in one pass. Results larger than FOLD_LIMIT bytes are left
 * to run time so that folding never blows up the weights.
 *
 * The kernel writes into buffers of the new graph's arena; only when it
 * succeeds do they become constants. A kernel that cannot evaluate the node
 * (KILN_ERR_UNSUPPORTED: a dtype or attribute it does not handle) leaves the
 * node in place, to run (or be refused, naming it) later; any other failure
 * is the graph's error and names the node.
 *
 * Invariant: value ids are taken before value pointers, never in one
 * expression: kiln_rewrite_value may copy a constant into the new graph and
 * so reallocate its values array. */
#include <stdio.h>
#include <stdlib.h>

#include "pass/pass.h"
#include "util/error.h"

#define FOLD_LIMIT ((int64_t)256 << 20)
#define FOLD_MAX_IO 16

static bool foldable(const kiln_graph *src, const kiln_rewrite *rw, const kiln_node *n)
{
    const kiln_op_info *info = kiln_op_get(n->op);
    if (!info || !info->ref || n->n_inputs == 0 || n->n_inputs > FOLD_MAX_IO ||
        n->n_outputs == 0 || n->n_outputs > FOLD_MAX_IO)
        return false;
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] < 0)
            continue;
        int m = rw->map[n->inputs[k]];
        const kiln_value *v = m >= 0 ? rw->dst->values[m] : src->values[n->inputs[k]];
        if (v->kind != KILN_VALUE_CONST || !v->data || v->layout.kind != KILN_LAYOUT_ROW_MAJOR)
            return false;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_value *v = src->values[n->outputs[k]];
        int64_t nb = kiln_layout_nbytes(v->dtype, &v->shape, v->layout);
        if (v->dtype <= KILN_DTYPE_UNDEFINED || v->dtype >= KILN_DTYPE_COUNT ||
            v->layout.kind != KILN_LAYOUT_ROW_MAJOR || nb < 0 || nb > FOLD_LIMIT)
            return false;
    }
    return true;
}

/* Evaluates `n` into constants of rw->dst, or (*folded false) leaves it to the
 * caller to copy. */
static kiln_status fold_node(kiln_rewrite *rw, const kiln_node *n, bool *folded, kiln_error *err)
{
    const kiln_graph *g = rw->src;
    kiln_tensor tin[FOLD_MAX_IO], tout[FOLD_MAX_IO];
    const kiln_tensor *pin[FOLD_MAX_IO];
    kiln_tensor *pout[FOLD_MAX_IO];
    *folded = false;
    for (int k = 0; k < n->n_inputs; k++) {
        pin[k] = NULL;
        if (n->inputs[k] < 0)
            continue;
        int id = kiln_rewrite_value(rw, n->inputs[k]);
        if (id < 0)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        const kiln_value *v = rw->dst->values[id];
        tin[k] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape, .data = v->data};
        pin[k] = &tin[k];
    }
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_value *v = g->values[n->outputs[k]];
        tout[k] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape};
        int64_t nb = kiln_tensor_nbytes(&tout[k]);
        tout[k].data = nb < 0 ? NULL : kiln_arena_alloc(rw->dst->arena, (size_t)nb);
        if (!tout[k].data)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        pout[k] = &tout[k];
    }
    kiln_status st = kiln_op_run_ref(n, pin, pout, err);
    if (st == KILN_ERR_UNSUPPORTED) {
        kiln_error_clear(err);
        return KILN_OK;
    }
    if (st != KILN_OK)
        return st;
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_value *v = g->values[n->outputs[k]];
        int id = kiln_rewrite_const(rw, v->name, v->dtype, &v->shape, tout[k].data, v->layout);
        if (id < 0)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        rw->map[v->id] = id;
    }
    *folded = true;
    return KILN_OK;
}

kiln_status kiln_pass_fold_constant(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    kiln_rewrite rw;
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    if (st != KILN_OK)
        return st;
    int folded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        bool done = false;
        if (foldable(g, &rw, n)) {
            if ((st = fold_node(&rw, n, &done, err)) != KILN_OK) {
                kiln_rewrite_abort(&rw);
                return kiln_error_prefix(err, st, "folding node '%s' (%s): ", n->name,
                                         kiln_op_name(n->op));
            }
        }
        if (done) {
            folded++;
        } else if (kiln_rewrite_node(&rw, n, NULL) < 0) {
            kiln_rewrite_abort(&rw);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    ctx->stat_const_folded += folded;
    return kiln_pass_ctx_replace(ctx, ng, err);
}
