/* pass/crop_taps.c: a 2-D Conv's filter rows and columns that never read the
 * input dropped, with the pads they covered.
 *
 * A dilated conv on a map smaller than its dilation reads its outer taps
 * only from the padding: DeepLabV3's ASPP convolves a 16x16 (or 32x32) map
 * with 3x3 filters at rates 12, 24 and 36, and at rate 24 or more every
 * off-centre tap of every output falls outside the map, so the conv is a
 * 1x1 conv of the centre weights. The kernels skip such taps but not their
 * cost (rates 24 and 36: 2.5 ms each on [1, 960, 16, 16] -> 256, 22% of the
 * FMA peak in the work done).
 *
 * Filter row kh reads input row oh * sh - pt + kh * dh for output rows oh in
 * [0, OH); it is dropped when no such row is inside [0, H). The rows kept
 * are an interval [k0, k1] (the rows read move monotonically with kh), and
 * the conv becomes one with filter rows k0..k1 (the weights sliced into a
 * new constant), pads pt - k0 * dh and pb - (KH - 1 - k1) * dh: the same
 * output extent and, for every output, the same taps inside the map (a
 * dropped tap contributed 0). Columns likewise. Taken only where the new
 * pads stay >= 0 (a 'same' padded conv's outer taps go with their pads),
 * for float32 constant weights, any groups, stride and dilation. */
#include <stdio.h>
#include <string.h>

#include "ir/infer_util.h"
#include "pass/pass.h"
#include "util/error.h"

/* The filter taps [*k0, *k1] of one spatial dim that read the input, given
 * the window's in/kernel/stride/dilation/pad_begin/out at index d. False when
 * none does (left alone: the conv is all padding). */
static bool taps_read(const kiln_window *w, int d, int64_t *k0, int64_t *k1)
{
    *k0 = -1;
    *k1 = -1;
    for (int64_t k = 0; k < w->kernel[d]; k++) {
        /* rows read: oh * s - p + k * dil for oh in [0, out) */
        int64_t first = -w->pad_begin[d] + k * w->dilation[d];
        /* the first oh reading a row >= 0 must read one < in */
        int64_t lo = first >= 0 ? 0 : (-first + w->stride[d] - 1) / w->stride[d];
        if (lo < w->out[d] && first + lo * w->stride[d] < w->in[d]) {
            if (*k0 < 0)
                *k0 = k;
            *k1 = k;
        }
    }
    return *k0 >= 0;
}

typedef struct crop {
    int64_t k0[2], k1[2];
    kiln_window win;
} crop;

static bool plan(const kiln_graph *g, const kiln_node *n, crop *c)
{
    if (n->op != KILN_OP_CONV || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
        n->n_outputs != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    if (x->shape.rank != 4 || w->kind != KILN_VALUE_CONST || !w->data ||
        w->dtype != KILN_DTYPE_FLOAT32 || w->shape.rank != 4 ||
        w->layout.kind != KILN_LAYOUT_ROW_MAJOR || kiln_shape_numel(&x->shape) <= 0)
        return false;
    kiln_error err;
    if (kiln_window_resolve(n, "Conv", &x->shape, w->shape.dims + 2, false, &c->win, &err) !=
        KILN_OK)
        return false;
    bool smaller = false;
    for (int d = 0; d < 2; d++) {
        if (!taps_read(&c->win, d, &c->k0[d], &c->k1[d]))
            return false;
        int64_t tail = c->win.kernel[d] - 1 - c->k1[d];
        if (c->win.pad_begin[d] - c->k0[d] * c->win.dilation[d] < 0 ||
            c->win.pad_end[d] - tail * c->win.dilation[d] < 0)
            return false;
        smaller |= c->k0[d] > 0 || tail > 0;
    }
    return smaller;
}

static bool takes(const kiln_graph *g, const kiln_node *n)
{
    crop c;
    return plan(g, n, &c);
}

static bool rewrite(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    crop c;
    if (!plan(g, n, &c))
        return false;
    const kiln_value *w = g->values[n->inputs[1]];
    const int64_t M = w->shape.dims[0], C = w->shape.dims[1], KH = w->shape.dims[2],
                  KW = w->shape.dims[3];
    const int64_t kh = c.k1[0] - c.k0[0] + 1, kw = c.k1[1] - c.k0[1] + 1;
    kiln_shape ws = {.rank = 4, .dims = {M, C, kh, kw}};
    char name[512];
    snprintf(name, sizeof name, "%s.taps", n->name ? n->name : "conv");
    void *data = NULL;
    int wid = kiln_graph_add_const_uninit(rw->dst, name, KILN_DTYPE_FLOAT32, &ws, true, &data);
    if (wid < 0 || !data)
        return false;
    const float *src = w->data;
    float *dst = data;
    for (int64_t mc = 0; mc < M * C; mc++)
        for (int64_t y = 0; y < kh; y++)
            memcpy(dst + (mc * kh + y) * kw, src + (mc * KH + c.k0[0] + y) * KW + c.k0[1],
                   sizeof(float) * (size_t)kw);
    int in[3] = {kiln_rewrite_value(rw, n->inputs[0]), wid, -1};
    int n_in = 2;
    if (n->n_inputs > 2 && n->inputs[2] >= 0)
        in[n_in++] = kiln_rewrite_value(rw, n->inputs[2]);
    int id = kiln_rewrite_emit(rw, n, KILN_OP_CONV, "", in, n_in, NULL, true);
    if (id < 0)
        return false;
    const kiln_window *v = &c.win;
    int64_t ksz[2] = {kh, kw}, st[2] = {v->stride[0], v->stride[1]};
    int64_t dil[2] = {v->dilation[0], v->dilation[1]};
    int64_t pads[4] = {v->pad_begin[0] - c.k0[0] * v->dilation[0],
                       v->pad_begin[1] - c.k0[1] * v->dilation[1],
                       v->pad_end[0] - (KH - 1 - c.k1[0]) * v->dilation[0],
                       v->pad_end[1] - (KW - 1 - c.k1[1]) * v->dilation[1]};
    return kiln_node_set_ints(rw->dst, id, "kernel_shape", ksz, 2) == KILN_OK &&
           kiln_node_set_ints(rw->dst, id, "strides", st, 2) == KILN_OK &&
           kiln_node_set_ints(rw->dst, id, "dilations", dil, 2) == KILN_OK &&
           kiln_node_set_ints(rw->dst, id, "pads", pads, 4) == KILN_OK &&
           kiln_node_set_int(rw->dst, id, "group", kiln_attr_int(n, "group", 1)) == KILN_OK;
}

kiln_status kiln_pass_crop_taps(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, takes, rewrite, err);
}
