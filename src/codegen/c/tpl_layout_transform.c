/* codegen/c/tpl_layout_transform.c: a layout transform NCHW{a}c -> NCHW{b}c (1:
 * plain NCHW), zero filling padded channels: an Identity whose output layout
 * differs from its input's (alter-layout makes them; emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_IDENTITY || n->n_inputs < 1 || n->inputs[0] < 0)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    return !kiln_layout_equal(x->layout, y->layout) && x->shape.rank == 4 &&
           x->layout.kind != KILN_LAYOUT_OIHWIO && y->layout.kind != KILN_LAYOUT_OIHWIO;
}

const kiln_template kiln_tpl_layout_transform = {
    .name = "layout_transform",
    .match = match,
    .emit = kiln_emit_layout,
};
