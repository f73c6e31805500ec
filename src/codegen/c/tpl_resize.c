/* codegen/c/tpl_resize.c: Resize (nearest, linear, cubic; every coordinate
 * transformation but tf_crop_and_resize) of row-major float32 data that
 * resizes its last two dims only: each output row blends its tabulated taps
 * (the emitter: emit_movement.c, kiln_emit_resize). */
#include "codegen/c/codegen.h"
#include "ir/infer_nn.h"

/* The largest output extent whose taps are tabulated in the kernel file, and
 * the widest input row (the kernel blends rows into a line on its stack). */
#define RESIZE_MAX_OUT 16384
#define RESIZE_MAX_IN_W 4096

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_RESIZE || n->n_outputs != 1 || !kiln_tpl_row_major_in(g, n) ||
        !kiln_tpl_f32(g, n->inputs[0]))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    if (y->layout.kind != KILN_LAYOUT_ROW_MAJOR || y->dtype != KILN_DTYPE_FLOAT32 ||
        x->shape.rank < 2 || kiln_shape_numel(&x->shape) < 0)
        return false;
    kiln_resize_params p;
    kiln_error err = {0};
    if (kiln_resize_resolve(n, &x->shape, &p, &err) != KILN_OK ||
        p.coord == KILN_COORD_TF_CROP_AND_RESIZE || p.rank != x->shape.rank)
        return false;
    int r = p.rank;
    for (int d = 0; d < r - 2; d++)
        if (p.scale[d] != 1.0 || p.out[d] != x->shape.dims[d])
            return false;
    int64_t ih = x->shape.dims[r - 2], iw = x->shape.dims[r - 1];
    return ih >= 1 && iw >= 1 && iw <= RESIZE_MAX_IN_W && p.out[r - 2] >= 1 &&
           p.out[r - 1] >= 1 && p.out[r - 2] <= RESIZE_MAX_OUT && p.out[r - 1] <= RESIZE_MAX_OUT;
}

const kiln_template kiln_tpl_resize = {
    .name = "resize",
    .match = match,
    .emit = kiln_emit_resize,
};
