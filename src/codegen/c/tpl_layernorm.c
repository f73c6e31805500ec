/* codegen/c/tpl_layernorm.c: LayerNormalization of a row-major float32
 * tensor, one output, and InstanceNormalization (the same rows: one per
 * (n, c) over the spatial dims, scale and bias per channel; GroupNorm
 * exports as one between two Reshapes) (the emitter: emit_norm.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if ((n->op != KILN_OP_LAYERNORM && n->op != KILN_OP_INSTANCENORM) || n->n_outputs != 1 ||
        !kiln_tpl_f32(g, n->inputs[0]) || !kiln_tpl_row_major_in(g, n) ||
        !kiln_tpl_f32(g, n->inputs[1]))
        return false;
    if (n->op == KILN_OP_INSTANCENORM &&
        (g->values[n->inputs[0]]->shape.rank < 3 || n->n_inputs < 3 || n->inputs[2] < 0 ||
         !kiln_tpl_f32(g, n->inputs[2])))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

/* In a shapes_bound graph the rows come at run time (codegen.h,
 * KILN_RT_ROWS): a row's length and the channels stay in the source. */
static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    if (l->ctx->shapes_bound)
        t->extent = kiln_norm_rows(l->ctx->g, l->ctx->g->nodes[t->anchor]);
    return KILN_OK;
}

const kiln_template kiln_tpl_layernorm = {
    .name = "layernorm",
    .match = match,
    .space = space,
    .emit = kiln_emit_layernorm,
};
