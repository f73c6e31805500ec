/* codegen/c/tpl_softmax.c: Softmax / LogSoftmax along one axis of a
 * row-major float32 tensor (the emitter: emit_norm.c). Softmax absorbs an
 * epilogue; LogSoftmax does not. */
#include "codegen/c/codegen.h"
#include "lower/geom.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if ((n->op != KILN_OP_SOFTMAX && n->op != KILN_OP_LOGSOFTMAX) || !kiln_tpl_f32(g, n->inputs[0]) ||
        !kiln_tpl_row_major_in(g, n))
        return false;
    *epi = n->op == KILN_OP_SOFTMAX ? KILN_EPI_KIND_ANY : KILN_EPI_KIND_NONE;
    return true;
}

/* In a shapes_bound graph the lines (outer x inner) come at run time
 * (codegen.h); a line's length stays in the source. */
static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    const kiln_value *x = l->ctx->g->values[n->inputs[0]];
    if (!l->ctx->shapes_bound)
        return KILN_OK;
    int64_t ax = kiln_attr_int(n, "axis", -1), outer, len, inner;
    if (ax < 0)
        ax += x->shape.rank;
    kiln_geom_split(&x->shape, (int)ax, (int)ax + 1, &outer, &len, &inner);
    t->extent = outer * inner;
    return KILN_OK;
}

const kiln_template kiln_tpl_softmax = {
    .name = "softmax",
    .match = match,
    .space = space,
    .emit = kiln_emit_softmax,
};
