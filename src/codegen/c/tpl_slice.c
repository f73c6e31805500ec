/* codegen/c/tpl_slice.c: Slice of row-major data, any dtype: a strided
 * copy, negative steps included (the emitter: emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    return n->op == KILN_OP_SLICE && kiln_tpl_row_major_in(g, n);
}

const kiln_template kiln_tpl_slice = {
    .name = "slice",
    .match = match,
    .space = kiln_space_strided,
    .emit = kiln_emit_strided,
};
