/* codegen/c/emit_conv.c: the convolution templates.
 *
 * conv2d_nchwc: the blocked direct convolution of kiln_kernels_conv.h; the
 *   generated file defines the kiln_conv_params literal (geometry, epilogue,
 *   knobs) and calls kiln_conv_run on its share of kiln_conv_tasks(&P_).
 * dwconv2d_nchwc: depthwise on NCHW{b}c, kiln_kernels_dwconv.h (weights
 *   [C/b][kh][kw][b], register tiles of ow_tile pixels, bias/residual/relu/
 *   clip epilogue), called the same way.
 * conv2d_direct: row-major NCHW, any groups/dilation (the fallback for convs
 *   that are neither blocked nor depthwise-blocked): one task per output
 *   plane, accumulating tap by tap over valid output ranges. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "codegen/c/kernels/kiln_kernels_dwconv.h"
#include "lower/geom.h"

static void arg_or_null(kiln_sb *b, int arg, bool out)
{
    if (arg < 0)
        kiln_sb_puts(b, "NULL");
    else
        kiln_sb_printf(b, "%c%d", out ? 'o' : 'a', arg);
}

kiln_status kiln_emit_conv_nchwc(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_conv_params *p = t->params;
    static const char *const hdr[] = {"kiln_kernels_conv.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_conv_params P_ = {\n"
                   "    .n = %d, .c_in = %d, .h = %d, .w = %d, .c_out = %d, .oh = %d, .ow = %d,\n"
                   "    .kh = %d, .kw = %d, .sh = %d, .sw = %d, .dh = %d, .dw = %d,\n"
                   "    .pad_t = %d, .pad_l = %d, .pad_b = %d, .pad_r = %d, .groups = %d,\n"
                   "    .cb_in = %d, .cb_out = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "    .ow_tile = %d, .oc_tile = %d, .ic_tile = %d, .loop_order = %d, .oh_tile = %d,\n"
                   "    .oc_group = %d,\n};\n\n",
                   p->n, p->c_in, p->h, p->w, p->c_out, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw,
                   p->dh, p->dw, p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->groups, p->cb_in,
                   p->cb_out, p->epilogue, (double)p->clip_min, (double)p->clip_max, p->ow_tile,
                   p->oc_tile, p->ic_tile, p->loop_order, p->oh_tile, p->oc_group);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b, "    kiln_conv_run(&P_, a%d, a%d, ", xa, wa);
    arg_or_null(b, ba, false);
    kiln_sb_puts(b, ", ");
    arg_or_null(b, t->residual_arg, false);
    kiln_sb_printf(b, ", o0, begin_, end_, %s);\n}\n", t->workspace > 0 ? KILN_TASK_WS : "NULL");
    kiln_emit_entry(b, t, "kiln_conv_tasks(&P_)", 1);
    return KILN_OK;
}

kiln_status kiln_emit_dwconv(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_dwconv_params *p = t->params;
    static const char *const hdr[] = {"kiln_kernels_dwconv.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_dwconv_params P_ = {\n"
                   "    .n = %d, .c = %d, .h = %d, .w = %d, .oh = %d, .ow = %d, .kh = %d, .kw = %d,\n"
                   "    .sh = %d, .sw = %d, .dh = %d, .dw = %d, .pad_t = %d, .pad_l = %d, .pad_b = %d,\n"
                   "    .pad_r = %d, .cb = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "    .ow_tile = %d, .oh_tile = %d,\n};\n\n",
                   p->n, p->c, p->h, p->w, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw,
                   p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->cb, p->epilogue, (double)p->clip_min,
                   (double)p->clip_max, p->ow_tile, p->oh_tile);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b, "    kiln_dwconv_run(&P_, a%d, a%d, ", xa, wa);
    arg_or_null(b, ba, false);
    kiln_sb_puts(b, ", ");
    arg_or_null(b, t->residual_arg, false);
    kiln_sb_puts(b, ", o0, begin_, end_, NULL);\n}\n");
    kiln_emit_entry(b, t, "kiln_dwconv_tasks(&P_)", 1);
    return KILN_OK;
}

kiln_status kiln_emit_conv_direct(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    char init[64] = "0.0f";
    if (ba >= 0)
        snprintf(init, sizeof init, "a%d[m]", ba);
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { C_ = %lld, H_ = %lld, W_ = %lld, M_ = %lld, OH_ = %lld, OW_ = %lld,\n"
                   "       KH_ = %lld, KW_ = %lld, SH_ = %lld, SW_ = %lld, DH_ = %lld, DW_ = %lld,\n"
                   "       PT_ = %lld, PL_ = %lld, CG_ = %lld, MG_ = %lld };\n\n",
                   (long long)w.c, (long long)w.h, (long long)w.w, (long long)w.m,
                   (long long)w.oh, (long long)w.ow, (long long)w.kh, (long long)w.kw,
                   (long long)w.sh, (long long)w.sw, (long long)w.dh, (long long)w.dw,
                   (long long)w.pt, (long long)w.pl, (long long)(w.c / w.groups),
                   (long long)(w.m / w.groups));
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t n = task / M_, m = task %% M_, grp = m / MG_;\n"
                   "        float *op = o0 + task * (int64_t)(OH_ * OW_);\n"
                   "        float b0 = %s;\n"
                   "        for (int64_t i = 0; i < (int64_t)OH_ * OW_; i++)\n"
                   "            op[i] = b0;\n"
                   "        for (int64_t c = 0; c < CG_; c++) {\n"
                   "            const float *xp = a%d + (n * C_ + grp * CG_ + c) * (int64_t)(H_ * W_);\n"
                   "            const float *wp = a%d + (m * CG_ + c) * (int64_t)(KH_ * KW_);\n"
                   "            for (int64_t kh = 0; kh < KH_; kh++)\n"
                   "                for (int64_t kw = 0; kw < KW_; kw++) {\n"
                   "                    float wv = wp[kh * KW_ + kw];\n"
                   "                    int64_t off = kw * DW_ - PL_;\n"
                   "                    int64_t lo = off >= 0 ? 0 : (-off + SW_ - 1) / SW_;\n"
                   "                    int64_t hi = W_ - 1 - off < 0 ? 0 : (W_ - 1 - off) / SW_ + 1;\n"
                   "                    if (hi > OW_)\n"
                   "                        hi = OW_;\n"
                   "                    for (int64_t oh = 0; oh < OH_; oh++) {\n"
                   "                        int64_t ih = oh * SH_ - PT_ + kh * DH_;\n"
                   "                        if (ih < 0 || ih >= H_)\n"
                   "                            continue;\n"
                   "                        const float *xr = xp + ih * W_ + off;\n"
                   "                        float *orow = op + oh * OW_;\n"
                   "                        for (int64_t ow = lo; ow < hi; ow++)\n"
                   "                            orow[ow] += wv * xr[ow * SW_];\n"
                   "                    }\n"
                   "                }\n"
                   "        }\n",
                   init, xa, wa);
    if (kiln_task_has_epilogue(l, t)) {
        kiln_sb_puts(b, "        for (int64_t i = 0; i < (int64_t)OH_ * OW_; i++) {\n"
                        "            float v = op[i];\n"
                        "            int64_t idx = task * (int64_t)(OH_ * OW_) + i;\n"
                        "            (void)idx;\n");
        kiln_emit_epilogue(b, l, t, "v", "idx");
        kiln_sb_puts(b, "            op[i] = v;\n        }\n");
    }
    kiln_sb_puts(b, "    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(w.n * w.m));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}
