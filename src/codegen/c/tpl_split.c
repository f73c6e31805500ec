/* codegen/c/tpl_split.c: Split of row-major data: per (outer index,
 * piece) one slab copy (the emitter: emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    return n->op == KILN_OP_SPLIT && kiln_tpl_row_major_in(g, n);
}

const kiln_template kiln_tpl_split = {
    .name = "split",
    .match = match,
    .space = kiln_space_slabs,
    .emit = kiln_emit_split,
};
