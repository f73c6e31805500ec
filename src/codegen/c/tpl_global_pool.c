/* codegen/c/tpl_global_pool.c: GlobalAverage/MaxPool over all spatial dims
 * of NCHW{b}c or row-major input (the emitter: emit_pool.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if ((n->op != KILN_OP_GLOBALAVERAGEPOOL && n->op != KILN_OP_GLOBALMAXPOOL) ||
        !kiln_tpl_f32(g, n->inputs[0]) || g->values[n->inputs[0]]->shape.rank < 3)
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

const kiln_template kiln_tpl_global_pool = {
    .name = "global_pool",
    .match = match,
    .emit = kiln_emit_global_pool,
};
