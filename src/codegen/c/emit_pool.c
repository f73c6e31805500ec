/* codegen/c/emit_pool.c: pooling templates.
 *
 * pool2d: Max/AveragePool on NCHW{b}c (b = 1 is plain NCHW); a task is a
 *   band of `rows_per_task` output rows of one (image, channel block); per
 *   output pixel a vector of b accumulators over the window's taps inside the
 *   input, whose row and column ranges are computed first (padding never
 *   wins a max; averages divide by the real taps, or with count_include_pad
 *   by the taps inside the padded extent, as the reference does). The loops
 *   carry no bounds tests: GCC 12 at -O3 with AVX-512 vectorized the earlier
 *   form (a `continue` per padded tap next to the counters) wrongly for some
 *   shapes (found on inception-v3's 8x8 average pools).
 * global_pool: GlobalAverage/MaxPool over all spatial dims of NCHW{b}c or
 *   row-major input, writing row-major [N, C, 1, ..]. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"

kiln_status kiln_emit_pool(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    bool is_max = n->op == KILN_OP_MAXPOOL;
    bool incl = kiln_attr_int(n, "count_include_pad", 0) != 0;
    int B = w.bin;
    int64_t cb = (w.c + B - 1) / B;
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t bands = (w.oh + rpt - 1) / rpt;
    int xa = kiln_task_arg(t, n->inputs[0]);
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { B_ = %d, H_ = %lld, W_ = %lld, OH_ = %lld, OW_ = %lld, KH_ = %lld,\n"
                   "       KW_ = %lld, SH_ = %lld, SW_ = %lld, DH_ = %lld, DW_ = %lld, PT_ = %lld,\n"
                   "       PL_ = %lld, PB_ = %lld, PR_ = %lld, RPT_ = %d, BANDS_ = %lld };\n\n",
                   B, (long long)w.h, (long long)w.w, (long long)w.oh, (long long)w.ow,
                   (long long)w.kh, (long long)w.kw, (long long)w.sh, (long long)w.sw,
                   (long long)w.dh, (long long)w.dw, (long long)w.pt, (long long)w.pl,
                   (long long)w.pb, (long long)w.pr, rpt, (long long)bands);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t band = task %% BANDS_, plane = task / BANDS_;\n"
                   "        const float *xp = a%d + plane * (int64_t)(H_ * W_ * B_);\n"
                   "        int64_t oh1 = KILN_MIN_((band + 1) * RPT_, (int64_t)OH_);\n"
                   "        for (int64_t oh = band * RPT_; oh < oh1; oh++) {\n"
                   "            for (int64_t ow = 0; ow < OW_; ow++) {\n"
                   "                float acc[B_];\n"
                   "                for (int j = 0; j < B_; j++)\n"
                   "                    acc[j] = %s;\n"
                   "                /* the taps inside the input, and inside the padded extent */\n"
                   "                const int64_t h0 = oh * SH_ - PT_, w0 = ow * SW_ - PL_;\n"
                   "                int kh0 = 0, kh1 = KH_, kw0 = 0, kw1 = KW_, ph = 0, pw = 0;\n"
                   "                while (kh0 < KH_ && h0 + kh0 * DH_ < 0)\n"
                   "                    kh0++;\n"
                   "                while (kh1 > kh0 && h0 + (kh1 - 1) * DH_ >= H_)\n"
                   "                    kh1--;\n"
                   "                while (kw0 < KW_ && w0 + kw0 * DW_ < 0)\n"
                   "                    kw0++;\n"
                   "                while (kw1 > kw0 && w0 + (kw1 - 1) * DW_ >= W_)\n"
                   "                    kw1--;\n"
                   "                for (int k = 0; k < KH_; k++)\n"
                   "                    ph += h0 + k * DH_ >= -PT_ && h0 + k * DH_ < H_ + PB_;\n"
                   "                for (int k = 0; k < KW_; k++)\n"
                   "                    pw += w0 + k * DW_ >= -PL_ && w0 + k * DW_ < W_ + PR_;\n"
                   "                const int64_t cnt = (int64_t)(kh1 - kh0) * (kw1 - kw0);\n"
                   "                const int64_t cnt_pad = (int64_t)ph * pw;\n"
                   "                for (int kh = kh0; kh < kh1; kh++)\n"
                   "                    for (int kw = kw0; kw < kw1; kw++) {\n"
                   "                        const float *xv = xp + ((h0 + kh * DH_) * W_ + w0 + kw * DW_) * B_;\n"
                   "                        for (int j = 0; j < B_; j++)\n"
                   "                            acc[j] = %s;\n"
                   "                    }\n"
                   "                (void)cnt;\n"
                   "                (void)cnt_pad;\n"
                   "                int64_t base = ((plane * OH_ + oh) * OW_ + ow) * B_;\n"
                   "                for (int j = 0; j < B_; j++) {\n"
                   "                    float v = acc[j]%s;\n"
                   "                    int64_t idx = base + j;\n"
                   "                    (void)idx;\n",
                   xa, is_max ? "-HUGE_VALF" : "0.0f",
                   is_max ? "xv[j] > acc[j] ? xv[j] : acc[j]" : "acc[j] + xv[j]",
                   is_max ? "" : (incl ? " / (float)(cnt_pad > 0 ? cnt_pad : 1)" : " / (float)(cnt > 0 ? cnt : 1)"));
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "                    o0[idx] = v;\n                }\n            }\n        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(w.n * cb * bands));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

kiln_status kiln_emit_global_pool(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]];
    bool is_max = n->op == KILN_OP_GLOBALMAXPOOL;
    int B = x->layout.kind == KILN_LAYOUT_NCHWC ? x->layout.block_a : 1;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], HW = 1;
    for (int d = 2; d < x->shape.rank; d++)
        HW *= x->shape.dims[d];
    int64_t cb = (C + B - 1) / B;
    int xa = kiln_task_arg(t, n->inputs[0]);
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "enum { B_ = %d, C_ = %lld, CB_ = %lld, HW_ = %lld };\n\n", B, (long long)C,
                   (long long)cb, (long long)HW);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t n = task / CB_, c_blk = task %% CB_;\n"
                   "        const float *xp = a%d + task * (int64_t)(HW_ * B_);\n"
                   "        float acc[B_];\n"
                   "        for (int j = 0; j < B_; j++)\n"
                   "            acc[j] = %s;\n"
                   "        for (int64_t i = 0; i < HW_; i++)\n"
                   "            for (int j = 0; j < B_; j++)\n"
                   "                acc[j] = %s;\n"
                   "        for (int j = 0; j < B_; j++) {\n"
                   "            int64_t c = c_blk * B_ + j;\n"
                   "            if (c >= C_)\n"
                   "                break;\n"
                   "            float v = acc[j]%s;\n"
                   "            int64_t idx = n * C_ + c;\n",
                   xa, is_max ? "-HUGE_VALF" : "0.0f",
                   is_max ? "xp[i * B_ + j] > acc[j] ? xp[i * B_ + j] : acc[j]"
                          : "acc[j] + xp[i * B_ + j]",
                   is_max ? "" : " * (1.0f / (float)HW_)");
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "            o0[idx] = v;\n        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(N * cb));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}
