/* codegen/c/tpl_reduce.c: Reduce{Mean,Sum,Max,Min,Prod,L1,L2,SumSquare}
 * of a row-major float32 tensor with constant axes (the emitter: emit_norm.c).
 * ReduceMean absorbs an epilogue. */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    switch (n->op) {
    case KILN_OP_REDUCEMEAN:
    case KILN_OP_REDUCESUM:
    case KILN_OP_REDUCEMAX:
    case KILN_OP_REDUCEMIN:
    case KILN_OP_REDUCEPROD:
    case KILN_OP_REDUCEL1:
    case KILN_OP_REDUCEL2:
    case KILN_OP_REDUCESUMSQUARE:
        break;
    default:
        return false;
    }
    if (!kiln_tpl_f32(g, n->inputs[0]) || !kiln_tpl_row_major_in(g, n) || n->n_inputs != 1)
        return false;
    *epi = n->op == KILN_OP_REDUCEMEAN ? KILN_EPI_KIND_ANY : KILN_EPI_KIND_NONE;
    return true;
}

/* In a shapes_bound graph the extent of a symbol the input has (a mean
 * over the sequence, or over the rest of it) comes at run time: its dims
 * and the strides that hold it are written in terms of it (codegen.h). */
static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    t->extent = kiln_rt_sym_extent(l, &l->ctx->g->values[n->inputs[0]]->shape);
    return KILN_OK;
}

const kiln_template kiln_tpl_reduce = {
    .name = "reduce",
    .match = match,
    .space = space,
    .emit = kiln_emit_reduce,
};
