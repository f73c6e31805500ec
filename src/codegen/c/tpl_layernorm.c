/* codegen/c/tpl_layernorm.c: LayerNormalization of a row-major float32
 * tensor, one output (the emitter: emit_norm.c). */
#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (n->op != KILN_OP_LAYERNORM || n->n_outputs != 1 || !kiln_tpl_f32(g, n->inputs[0]) ||
        !kiln_tpl_row_major_in(g, n) || !kiln_tpl_f32(g, n->inputs[1]))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

const kiln_template kiln_tpl_layernorm = {
    .name = "layernorm",
    .match = match,
    .emit = kiln_emit_layernorm,
};
