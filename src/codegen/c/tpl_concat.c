/* codegen/c/tpl_concat.c: Concat of inputs in the output's layout: per
 * (outer index, piece) one slab copy (the emitter: emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_CONCAT)
        return false;
    const kiln_value *y = g->values[n->outputs[0]];
    for (int k = 0; k < n->n_inputs; k++)
        if (!kiln_layout_equal(g->values[n->inputs[k]]->layout, y->layout))
            return false;
    return true;
}

const kiln_template kiln_tpl_concat = {
    .name = "concat",
    .match = match,
    .space = kiln_space_slabs,
    .emit = kiln_emit_concat,
};
