/* codegen/c/tpl_resize.c: Resize (nearest, linear, cubic; every coordinate
 * transformation but tf_crop_and_resize) of float32 data that resizes its
 * last two dims only: each output row blends its tabulated taps (the
 * emitter: emit_movement.c, kiln_emit_resize).
 *
 * Layout: row-major, or the NCHW{b}c its input arrives in (a rank-4 Resize
 * of H and W inside a run of blocked convs: an FPN's or a YOLO neck's
 * nearest upsample, a decoder's bilinear one), kept for the output when
 * its readers keep blocks (layout()). Blocked,
 * every tap blends whole b-channel vectors, and the run needs no transform
 * to NCHW and back (espcn-style bilinear x2 on [1, 32, 96, 96]: the NCHW
 * Resize took 0.99 ms behind a 0.13 ms transform, 1 ns per output). Padding
 * channels of a partial block are blended like the others: finite stays
 * finite (alter_layout.c's rule for partial blocks). */
#include "codegen/c/codegen.h"
#include "ir/infer_nn.h"

/* The largest output extent whose taps are tabulated in the kernel file, and
 * the most floats of an input row (times the block when blocked: the kernel
 * blends rows into a line on its stack). */
#define RESIZE_MAX_OUT 16384
#define RESIZE_MAX_LINE 8192

/* Whether the template takes Resize node n with its data input in layout
 * `in` (the output in the same layout). */
static bool takes(const kiln_graph *g, const kiln_node *n, kiln_layout in)
{
    if (n->op != KILN_OP_RESIZE || n->n_outputs != 1 || !kiln_tpl_f32(g, n->inputs[0]))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    if (y->dtype != KILN_DTYPE_FLOAT32 || x->shape.rank < 2 || kiln_shape_numel(&x->shape) < 0)
        return false;
    int64_t b = 1;
    if (in.kind == KILN_LAYOUT_NCHWC) {
        if (x->shape.rank != 4 || in.block_a < 2)
            return false;
        b = in.block_a;
    } else if (in.kind != KILN_LAYOUT_ROW_MAJOR) {
        return false;
    }
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
    return ih >= 1 && iw >= 1 && iw * b <= RESIZE_MAX_LINE && p.out[r - 2] >= 1 &&
           p.out[r - 1] >= 1 && p.out[r - 2] <= RESIZE_MAX_OUT && p.out[r - 1] <= RESIZE_MAX_OUT;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_RESIZE || n->n_outputs != 1 || n->n_inputs < 1 || n->inputs[0] < 0)
        return false;
    kiln_layout in = g->values[n->inputs[0]]->layout;
    return kiln_layout_equal(g->values[n->outputs[0]]->layout, in) && takes(g, n, in);
}

/* A blocked input keeps its blocks (see the top) when every reader of the
 * output keeps them too; else (a graph output, a reader wanting NCHW) the
 * generic rule's row-major: transforming the upsampled output back would
 * move more than the input (DeepLabV3's logits, 21 channels padded to 32 at
 * 256x256: 0.6 ms blocked + 1.4 ms transform, against 1.1 ms row-major). */
static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    (void)tg;
    if (in.kind != KILN_LAYOUT_NCHWC || !takes(g, n, in) ||
        !kiln_tpl_readers_take_blocks(g, n->outputs[0], true))
        return false;
    out->in = in;
    out->weight = (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0};
    out->out = in;
    return true;
}

const kiln_template kiln_tpl_resize = {
    .name = "resize",
    .match = match,
    .layout = layout,
    .emit = kiln_emit_resize,
};
