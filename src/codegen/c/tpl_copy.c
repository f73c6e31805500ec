/* codegen/c/tpl_copy.c: Reshape/Flatten that could not be a view,
 * Identity within one layout, and Expand (a strided copy with zero strides):
 * any dtype (the emitter: emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    switch (n->op) {
    case KILN_OP_EXPAND:
    case KILN_OP_RESHAPE:
    case KILN_OP_FLATTEN:
        return kiln_tpl_row_major_in(g, n);
    case KILN_OP_IDENTITY:
        return !(n->n_inputs > 0 && n->inputs[0] >= 0 &&
                 !kiln_layout_equal(g->values[n->inputs[0]]->layout,
                                    g->values[n->outputs[0]]->layout));
    default:
        return false;
    }
}

const kiln_template kiln_tpl_copy = {
    .name = "copy",
    .match = match,
    .space = kiln_space_strided,
    .emit = kiln_emit_strided,
};
