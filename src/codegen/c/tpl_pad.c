/* codegen/c/tpl_pad.c: Pad (constant, edge, reflect) of float32 data,
 * row-major or NCHW{b}c padded spatially (the emitter: emit_movement.c). */
#include <string.h>

#include "codegen/c/codegen.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_PAD)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    const char *ms = kiln_attr_string(n, "mode", "constant");
    const int64_t *pads = NULL;
    int np = kiln_attr_ints(n, "pads", &pads);
    if (!kiln_tpl_f32(g, n->inputs[0]) || np != 2 * x->shape.rank || x->shape.rank < 1 ||
        (strcmp(ms, "constant") && strcmp(ms, "edge") && strcmp(ms, "reflect")))
        return false;
    if (x->layout.kind == KILN_LAYOUT_NCHWC &&
        (pads[0] || pads[1] || pads[4] || pads[5] || !kiln_layout_equal(x->layout, y->layout)))
        return false;
    return true;
}

const kiln_template kiln_tpl_pad = {
    .name = "pad",
    .match = match,
    .emit = kiln_emit_pad,
};
