/* pass/lower_to_2d.c: 1-D convolutions (audio, sequence nets) and 3-D
 * convolutions and pools (video, volumetric nets) as 2-D ones, which the
 * blocked templates compile. kiln has no 3-D template (the reference kernels
 * ran them), and its blocked conv templates take rank-4 convs: a 1-D conv
 * ran on conv2d_direct (one output plane per task, a tap at a time), 4-5x
 * slower than the same conv written with one row.
 *
 * Conv 1-D. X [N, C, L] is [N, C, 1, L] and W [M, C/G, K] is [M, C/G, 1, K]
 * (the same floats): Reshape -> Conv 2-D with a (1, K) window -> Reshape.
 *
 * Conv. X [N, C, D, H, W], W [M, C/G, KD, KH, KW] (constant), output depth
 * o reads input depths o*sd + kd*dd - pd (kd < KD; outside: zero). With X'
 * holding, per (n, o), the KD depth planes that output plane reads, one
 * after another per channel,
 *     X'[n*Do + o, c*KD + kd, h, w] = Xpad[n, c, o*sd + kd*dd, h, w],
 * the 3-D conv is a 2-D conv of X' with W seen as [M, (C/G)*KD, KH, KW]
 * (the same floats: (c, kd) is W's row-major order, and a group's input
 * channels stay contiguous in X'), H/W strides, dilations and pads kept:
 *     Pad (depth, zeros; only when padded) -> Gather (axis 2, the Do*KD
 *     depths, o major) -> Reshape [N, C, Do, KD, H, W] -> Transpose
 *     [N, Do, C, KD, H, W] -> Reshape [N*Do, C*KD, H, W] -> Conv 2-D ->
 *     Reshape [N, Do, M, Ho, Wo] -> Transpose [N, M, Do, Ho, Wo].
 * X' is KD/sd times X (a 3x3x3 stride-1 conv: 3x), the price of running
 * the 2-D templates; the conv's multiply-adds are the 3-D conv's exactly.
 * Left to the reference kernel: run-time W or bias, a non-float32 X, and an
 * X' over 2^28 floats.
 *
 * MaxPool and AveragePool (one output, no Indices). A box window is
 * separable: pool H and W with X seen as [N, C*D, H, W], then D with the
 * result seen as [N, C, D, Ho*Wo] and a (KD, 1) window. Max ignores padding
 * either way; an average's divisor is the product of the per-dim counts
 * (padding included or not), so it divides exactly as the 3-D window does.
 * An AveragePool with ceil_mode is left to the reference kernel (its
 * divisor at a window that runs past the padding is not a per-dim
 * product in every runtime). */
#include <stdio.h>
#include <string.h>

#include "ir/infer_util.h"
#include "pass/pass.h"
#include "util/error.h"

#define MAX_UNFOLDED (1LL << 28) /* floats of X' */

static bool const_f32(const kiln_value *v)
{
    return v->kind == KILN_VALUE_CONST && v->data && v->dtype == KILN_DTYPE_FLOAT32;
}

/* The window of a 1-D Conv, or a 3-D Conv, MaxPool or AveragePool, this pass
 * lowers. */
static bool plan(const kiln_graph *g, const kiln_node *n, kiln_window *win)
{
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]];
    int r = x->shape.rank;
    if (x->dtype != KILN_DTYPE_FLOAT32 || (r != 5 && (r != 3 || n->op != KILN_OP_CONV)))
        return false;
    int64_t kernel[3];
    if (n->op == KILN_OP_CONV) {
        if (n->n_inputs < 2 || n->inputs[1] < 0)
            return false;
        const kiln_value *w = g->values[n->inputs[1]];
        const kiln_value *b = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]]
                                                                   : NULL;
        if (!const_f32(w) || w->shape.rank != r || (b && !const_f32(b)))
            return false;
        memcpy(kernel, w->shape.dims + 2, sizeof(int64_t) * (size_t)(r - 2));
    } else if (n->op == KILN_OP_MAXPOOL || n->op == KILN_OP_AVERAGEPOOL) {
        const int64_t *ks = NULL;
        if (kiln_attr_ints(n, "kernel_shape", &ks) != 3)
            return false;
        if (n->op == KILN_OP_AVERAGEPOOL && kiln_attr_int(n, "ceil_mode", 0))
            return false;
        memcpy(kernel, ks, sizeof kernel);
    } else {
        return false;
    }
    kiln_error err;
    if (kiln_window_resolve(n, kiln_op_name(n->op), &x->shape, kernel, n->op != KILN_OP_CONV, win,
                            &err) != KILN_OK)
        return false;
    if (n->op != KILN_OP_CONV || r == 3)
        return true;
    const int64_t *d = x->shape.dims;
    double unfolded = (double)d[0] * (double)win->out[0] * (double)d[1] * (double)win->kernel[0] *
                      (double)d[3] * (double)d[4];
    return unfolded <= (double)MAX_UNFOLDED;
}

/* Sets a 2-D window's attributes on node id: kernel_shape (pools only),
 * strides, dilations, pads from the given per-dim values. */
static bool set_window(kiln_graph *dst, int id, const int64_t *kernel, const int64_t *stride,
                       const int64_t *dilation, const int64_t *pads)
{
    return (!kernel || kiln_node_set_ints(dst, id, "kernel_shape", kernel, 2) == KILN_OK) &&
           kiln_node_set_ints(dst, id, "strides", stride, 2) == KILN_OK &&
           kiln_node_set_ints(dst, id, "dilations", dilation, 2) == KILN_OK &&
           kiln_node_set_ints(dst, id, "pads", pads, 4) == KILN_OK;
}

/* The node's bias input, if any, mapped into rw's graph; in[] gets X', W'
 * and it, *n_in their count. */
static void conv_inputs(kiln_rewrite *rw, const kiln_node *n, int x, int w, int *in, int *n_in)
{
    in[0] = x, in[1] = w, *n_in = 2;
    if (n->n_inputs > 2 && n->inputs[2] >= 0)
        in[(*n_in)++] = kiln_rewrite_value(rw, n->inputs[2]);
}

static bool lower_conv1d(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                         const kiln_window *win)
{
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    int64_t N = x->shape.dims[0], M = w->shape.dims[0], Lo = win->out[0];
    kiln_shape x4 = {.rank = 4, .dims = {N, x->shape.dims[1], 1, x->shape.dims[2]}};
    kiln_shape ws = {.rank = 4, .dims = {M, w->shape.dims[1], 1, w->shape.dims[2]}};
    kiln_shape c4 = {.rank = 4, .dims = {N, M, 1, Lo}};
    kiln_shape y3 = {.rank = 3, .dims = {N, M, Lo}};
    char name[512];
    snprintf(name, sizeof name, "%s.weight_2d", n->name);
    int wid = kiln_rewrite_const(rw, name, KILN_DTYPE_FLOAT32, &ws, w->data, w->layout);
    int x2 = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".as_2d",
                               kiln_rewrite_value(rw, n->inputs[0]), &x4, x4.dims, false);
    if (wid < 0 || x2 < 0)
        return false;
    int in[3], n_in, id;
    conv_inputs(rw, n, x2, wid, in, &n_in);
    int64_t stride[2] = {1, win->stride[0]}, dil[2] = {1, win->dilation[0]};
    int64_t pads[4] = {0, win->pad_begin[0], 0, win->pad_end[0]};
    if ((id = kiln_rewrite_emit(rw, n, KILN_OP_CONV, ".conv_2d", in, n_in, &c4, false)) < 0 ||
        !set_window(rw->dst, id, NULL, stride, dil, pads) ||
        kiln_node_set_int(rw->dst, id, "group", kiln_attr_int(n, "group", 1)) != KILN_OK)
        return false;
    return kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, "", kiln_rewrite_out(rw, id), &y3, y3.dims,
                             true) >= 0;
}

static bool lower_conv(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                       const kiln_window *win)
{
    kiln_graph *dst = rw->dst;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const int64_t *xd = x->shape.dims;
    int64_t N = xd[0], C = xd[1], D = xd[2], H = xd[3], W = xd[4];
    int64_t M = w->shape.dims[0], KD = win->kernel[0], Do = win->out[0];
    int64_t Ho = win->out[1], Wo = win->out[2];
    int64_t pb = win->pad_begin[0], pe = win->pad_end[0];
    int cur = kiln_rewrite_value(rw, n->inputs[0]), id;
    char name[512];
    if (pb > 0 || pe > 0) {
        kiln_shape ps = {.rank = 5, .dims = {N, C, D + pb + pe, H, W}};
        int64_t pads[10] = {0, 0, pb, 0, 0, 0, 0, pe, 0, 0};
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_PAD, ".pad_depth", &cur, 1, &ps, false)) < 0 ||
            kiln_node_set_ints(dst, id, "pads", pads, 10) != KILN_OK ||
            kiln_node_set_string(dst, id, "mode", "constant") != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
    }
    /* the depths each output plane reads, o major */
    kiln_shape is = {.rank = 1, .dims = {Do * KD}};
    int64_t *idx;
    snprintf(name, sizeof name, "%s.depths", n->name);
    int iid = kiln_graph_add_const_uninit(dst, name, KILN_DTYPE_INT64, &is, true, (void **)&idx);
    if (iid < 0)
        return false;
    for (int64_t o = 0; o < Do; o++)
        for (int64_t k = 0; k < KD; k++)
            idx[o * KD + k] = o * win->stride[0] + k * win->dilation[0];
    kiln_shape gs = {.rank = 5, .dims = {N, C, Do * KD, H, W}};
    int gin[2] = {cur, iid};
    if ((id = kiln_rewrite_emit(rw, n, KILN_OP_GATHER, ".unfold_depth", gin, 2, &gs, false)) < 0 ||
        kiln_node_set_int(dst, id, "axis", 2) != KILN_OK)
        return false;
    cur = kiln_rewrite_out(rw, id);
    kiln_shape s6 = {.rank = 6, .dims = {N, C, Do, KD, H, W}};
    kiln_shape t6 = {.rank = 6, .dims = {N, Do, C, KD, H, W}};
    kiln_shape x4 = {.rank = 4, .dims = {N * Do, C * KD, H, W}};
    static const int64_t perm6[6] = {0, 2, 1, 3, 4, 5};
    cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".split_depth", cur, &s6, s6.dims, false);
    cur = kiln_rewrite_move(rw, n, KILN_OP_TRANSPOSE, ".depth_to_batch", cur, &t6, perm6, false);
    if ((cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".as_2d", cur, &x4, x4.dims, false)) < 0)
        return false;

    /* W [M, C/G, KD, KH, KW] seen as [M, C/G*KD, KH, KW]: the same floats */
    kiln_shape ws = {.rank = 4, .dims = {M, w->shape.dims[1] * KD, w->shape.dims[3],
                                         w->shape.dims[4]}};
    snprintf(name, sizeof name, "%s.weight_2d", n->name);
    int wid = kiln_rewrite_const(rw, name, KILN_DTYPE_FLOAT32, &ws, w->data, w->layout);
    if (wid < 0)
        return false;
    int in[3], n_in;
    conv_inputs(rw, n, cur, wid, in, &n_in);
    kiln_shape cs = {.rank = 4, .dims = {N * Do, M, Ho, Wo}};
    int64_t pads[4] = {win->pad_begin[1], win->pad_begin[2], win->pad_end[1], win->pad_end[2]};
    if ((id = kiln_rewrite_emit(rw, n, KILN_OP_CONV, ".conv_2d", in, n_in, &cs, false)) < 0 ||
        !set_window(dst, id, NULL, win->stride + 1, win->dilation + 1, pads) ||
        kiln_node_set_int(dst, id, "group", kiln_attr_int(n, "group", 1)) != KILN_OK)
        return false;
    kiln_shape r5 = {.rank = 5, .dims = {N, Do, M, Ho, Wo}};
    kiln_shape y5 = {.rank = 5, .dims = {N, M, Do, Ho, Wo}};
    static const int64_t perm5[5] = {0, 2, 1, 3, 4};
    cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".split_batch", kiln_rewrite_out(rw, id), &r5,
                            r5.dims, false);
    return kiln_rewrite_move(rw, n, KILN_OP_TRANSPOSE, "", cur, &y5, perm5, true) >= 0;
}

static bool lower_pool(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                       const kiln_window *win)
{
    kiln_graph *dst = rw->dst;
    const int64_t *xd = g->values[n->inputs[0]]->shape.dims;
    int64_t N = xd[0], C = xd[1], D = xd[2];
    int64_t Do = win->out[0], Ho = win->out[1], Wo = win->out[2];
    int64_t ceil = kiln_attr_int(n, "ceil_mode", 0);
    int64_t incl = kiln_attr_int(n, "count_include_pad", 0);
    kiln_shape a4 = {.rank = 4, .dims = {N, C * D, xd[3], xd[4]}};
    kiln_shape p4 = {.rank = 4, .dims = {N, C * D, Ho, Wo}};
    kiln_shape b4 = {.rank = 4, .dims = {N, C, D, Ho * Wo}};
    kiln_shape q4 = {.rank = 4, .dims = {N, C, Do, Ho * Wo}};
    kiln_shape y5 = {.rank = 5, .dims = {N, C, Do, Ho, Wo}};
    int64_t hw_pads[4] = {win->pad_begin[1], win->pad_begin[2], win->pad_end[1], win->pad_end[2]};
    int64_t d_kernel[2] = {win->kernel[0], 1}, d_stride[2] = {win->stride[0], 1};
    int64_t d_dil[2] = {win->dilation[0], 1}, d_pads[4] = {win->pad_begin[0], 0, win->pad_end[0], 0};
    int cur = kiln_rewrite_value(rw, n->inputs[0]), id;
    if ((cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".planes", cur, &a4, a4.dims, false)) < 0)
        return false;
    for (int step = 0; step < 2; step++) {
        const kiln_shape *os = step ? &q4 : &p4;
        if ((id = kiln_rewrite_emit(rw, n, n->op, step ? ".pool_d" : ".pool_hw", &cur, 1, os,
                                    false)) < 0)
            return false;
        bool ok = step ? set_window(dst, id, d_kernel, d_stride, d_dil, d_pads)
                       : set_window(dst, id, win->kernel + 1, win->stride + 1, win->dilation + 1,
                                    hw_pads);
        if (!ok || kiln_node_set_int(dst, id, "ceil_mode", ceil) != KILN_OK ||
            (n->op == KILN_OP_AVERAGEPOOL &&
             kiln_node_set_int(dst, id, "count_include_pad", incl) != KILN_OK))
            return false;
        cur = kiln_rewrite_out(rw, id);
        if (!step) {
            if ((cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".depth_rows", cur, &b4, b4.dims,
                                         false)) < 0)
                return false;
        }
    }
    return kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, "", cur, &y5, y5.dims, true) >= 0;
}

static bool takes(const kiln_graph *g, const kiln_node *n)
{
    kiln_window win;
    return plan(g, n, &win);
}

static bool rewrite(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    kiln_window win;
    if (!plan(g, n, &win))
        return false;
    if (n->op == KILN_OP_CONV)
        return win.nsp == 1 ? lower_conv1d(rw, g, n, &win) : lower_conv(rw, g, n, &win);
    return lower_pool(rw, g, n, &win);
}

kiln_status kiln_pass_lower_to_2d(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, takes, rewrite, err);
}
