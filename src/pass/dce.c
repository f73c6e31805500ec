/* pass/dce.c: dead-code elimination.
 *
 * Marks, walking the nodes backwards from the graph outputs, every node some
 * output depends on (a node is live if any of its outputs is a graph output
 * or read by a live node), then copies only the live nodes. Constants nobody
 * reads are dropped by the copy itself (they are mapped on first use). */
#include <stdlib.h>

#include "pass/pass.h"
#include "util/error.h"

kiln_status kiln_pass_dce(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    bool *live_v = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
    bool *live_n = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(bool));
    if (!live_v || !live_n) {
        free(live_v);
        free(live_n);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < g->n_outputs; i++)
        live_v[g->outputs[i]] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const kiln_node *n = g->nodes[i];
        for (int k = 0; k < n->n_outputs && !live_n[i]; k++)
            live_n[i] = live_v[n->outputs[k]];
        if (!live_n[i])
            continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                live_v[n->inputs[k]] = true;
    }
    kiln_rewrite rw;
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    int removed = 0;
    for (int i = 0; i < g->n_nodes && st == KILN_OK; i++) {
        if (!live_n[i]) {
            removed++;
            continue;
        }
        if (kiln_rewrite_node(&rw, g->nodes[i], NULL) < 0) {
            kiln_rewrite_abort(&rw);
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    free(live_v);
    free(live_n);
    if (st != KILN_OK)
        return st;
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    ctx->stat_removed += removed;
    return kiln_pass_ctx_replace(ctx, ng, err);
}
