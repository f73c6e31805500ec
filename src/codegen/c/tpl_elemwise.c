/* codegen/c/tpl_elemwise.c: fused elementwise/broadcast chains: any
 * float32 op the generator emits as an expression (expr.c), one loop over the
 * output's storage in chunks (the emitter: emit_movement.c). Knob: chunk. */
#include "codegen/c/codegen.h"
#include "lower/knobs.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (!kiln_expr_op(g, n))
        return false;
    *epi = KILN_EPI_KIND_CHAIN;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_value *y = l->ctx->g->values[l->ctx->groups[t->group].outputs[0]];
    t->epi_from = 0;
    /* In a shapes_bound graph a row-major output with a symbol's dim takes
     * its element count at run time (codegen.h); the chunk follows the
     * count at KILN_RT_ROWS, so every length shares the source. */
    int64_t e = y->layout.kind == KILN_LAYOUT_ROW_MAJOR ? kiln_rt_sym_extent(l, &y->shape) : 0;
    if (e > 0) {
        t->extent = kiln_layout_nbytes(y->dtype, &y->shape, y->layout) / 4;
        kiln_knobs_chunk(t, kiln_rt_numel(&y->shape, e));
        return KILN_OK;
    }
    kiln_knobs_chunk(t, kiln_layout_nbytes(y->dtype, &y->shape, y->layout) / 4);
    return KILN_OK;
}

const kiln_template kiln_tpl_elemwise = {
    .name = "elemwise",
    .match = match,
    .space = space,
    .emit = kiln_emit_elemwise,
};
