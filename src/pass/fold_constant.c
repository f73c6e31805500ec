/* pass/fold_constant.c: constant folding.
 *
 * Walks the nodes in order; a node whose present inputs are all constants with
 * data is evaluated right away with its reference kernel (kiln_op_get(op)->ref,
 * the same kernels the reference executor runs), and its outputs become new
 * constants. Because the walk is in topological order, whole constant
 * subgraphs (shape arithmetic, weight reshapes, transposed weights) collapse
 * in one pass. Results larger than FOLD_LIMIT bytes are left to run time so
 * that folding never blows up the weights. */
#include <stdio.h>
#include <stdlib.h>

#include "pass/pass.h"
#include "util/error.h"

#define FOLD_LIMIT ((int64_t)256 << 20)

static bool foldable(const kiln_graph *src, const kiln_rewrite *rw, const kiln_node *n)
{
    if (!kiln_op_get(n->op)->ref || n->n_inputs == 0 || n->n_inputs > 16 || n->n_outputs > 16)
        return false;
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] < 0)
            continue;
        int m = rw->map[n->inputs[k]];
        const kiln_value *v = m >= 0 ? rw->dst->values[m] : src->values[n->inputs[k]];
        if (v->kind != KILN_VALUE_CONST || !v->data)
            return false;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_value *v = src->values[n->outputs[k]];
        int64_t nb = kiln_layout_nbytes(v->dtype, &v->shape, v->layout);
        if (v->dtype == KILN_DTYPE_UNDEFINED || nb < 0 || nb > FOLD_LIMIT)
            return false;
    }
    return true;
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
        if (!foldable(g, &rw, n)) {
            if (kiln_rewrite_node(&rw, n, NULL) < 0)
                goto oom;
            continue;
        }
        kiln_tensor tin[16], tout[16];
        const kiln_tensor *pin[16];
        kiln_tensor *pout[16];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] < 0) {
                pin[k] = NULL;
                continue;
            }
            const kiln_value *v = rw.dst->values[kiln_rewrite_value(&rw, n->inputs[k])];
            tin[k] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape, .data = v->data};
            pin[k] = &tin[k];
        }
        for (int k = 0; k < n->n_outputs; k++) {
            const kiln_value *v = g->values[n->outputs[k]];
            void *data = NULL;
            int id = kiln_graph_add_const_uninit(rw.dst, v->name, v->dtype, &v->shape, true, &data);
            if (id < 0)
                goto oom;
            tout[k] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape, .data = data};
            pout[k] = &tout[k];
            rw.map[v->id] = id;
        }
        st = kiln_op_get(n->op)->ref(n, pin, pout, err);
        if (st != KILN_OK) {
            kiln_rewrite_abort(&rw);
            return kiln_error_prefix(err, st, "folding node '%s' (%s): ", n->name,
                                     kiln_op_name(n->op));
        }
        folded++;
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    ctx->stat_const_folded += folded;
    return kiln_pass_ctx_replace(ctx, ng, err);
oom:
    kiln_rewrite_abort(&rw);
    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
}
