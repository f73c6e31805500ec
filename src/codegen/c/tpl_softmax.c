/* codegen/c/tpl_softmax.c: Softmax / LogSoftmax along one axis of a
 * row-major float32 tensor (the emitter: emit_norm.c). Softmax absorbs an
 * epilogue; LogSoftmax does not. */
#include "codegen/c/codegen.h"

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

const kiln_template kiln_tpl_softmax = {
    .name = "softmax",
    .match = match,
    .emit = kiln_emit_softmax,
};
