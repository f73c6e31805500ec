/* codegen/c/tpl_gather.c: Gather with a constant scalar index on
 * row-major data, any dtype: a strided copy (the emitter: emit_movement.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_GATHER || !kiln_tpl_row_major_in(g, n))
        return false;
    const kiln_value *idx = g->values[n->inputs[1]];
    return idx->kind == KILN_VALUE_CONST && idx->data && kiln_shape_numel(&idx->shape) == 1 &&
           idx->shape.rank == 0 &&
           (idx->dtype == KILN_DTYPE_INT64 || idx->dtype == KILN_DTYPE_INT32);
}

const kiln_template kiln_tpl_gather = {
    .name = "gather",
    .match = match,
    .space = kiln_space_strided,
    .emit = kiln_emit_strided,
};
