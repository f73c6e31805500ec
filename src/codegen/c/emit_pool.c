/* codegen/c/emit_pool.c: pooling templates.
 *
 * pool2d: Max/AveragePool on NCHW{b}c (b = 1 is plain NCHW); a task is a
 *   band of `rows_per_task` output rows of one (image, channel block); per
 *   output pixel a vector of b accumulators. Interior pixels (the whole window
 *   inside the input: the row tested once per output row, the columns a range
 *   [OWI0_, OWI1_) fixed at codegen) take px_full_: constant trip counts,
 *   AVX-512 / AVX2 intrinsics for b = 16 / 8 (max(x, acc) keeps the scalar
 *   `x > acc ? x : acc`, adds in the same tap order, so both paths agree
 *   bit for bit). Border pixels take px_border_: the window's taps inside the
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

/* The output columns whose window lies inside the input: [*lo, *hi). */
static void interior_cols(const kiln_win2d *w, int64_t *lo, int64_t *hi)
{
    int64_t a = (w->pl + w->sw - 1) / w->sw;
    int64_t last = w->w - 1 + w->pl - (w->kw - 1) * w->dw; /* ow * sw <= last */
    int64_t b = last < 0 ? 0 : last / w->sw + 1;
    if (b > w->ow)
        b = w->ow;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

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
    int64_t owi0, owi1;
    interior_cols(&w, &owi0, &owi1);
    int xa = kiln_task_arg(t, n->inputs[0]);
    static const char *const hdr[] = {"kiln_kernels_common.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "enum { B_ = %d, H_ = %lld, W_ = %lld, OH_ = %lld, OW_ = %lld, KH_ = %lld,\n"
                   "       KW_ = %lld, SH_ = %lld, SW_ = %lld, DH_ = %lld, DW_ = %lld, PT_ = %lld,\n"
                   "       PL_ = %lld, PB_ = %lld, PR_ = %lld, RPT_ = %d, BANDS_ = %lld,\n"
                   "       OWI0_ = %lld, OWI1_ = %lld };\n\n",
                   B, (long long)w.h, (long long)w.w, (long long)w.oh, (long long)w.ow,
                   (long long)w.kh, (long long)w.kw, (long long)w.sh, (long long)w.sw,
                   (long long)w.dh, (long long)w.dw, (long long)w.pt, (long long)w.pl,
                   (long long)w.pb, (long long)w.pr, rpt, (long long)bands, (long long)owi0,
                   (long long)owi1);
    /* the interior pixel: the whole window inside the input, constant trips */
    const char *init = is_max ? "-HUGE_VALF" : "0.0f";
    kiln_sb_puts(b, "/* a window inside the input (xv: its first tap); returns the tap count */\n"
                    "static inline int64_t px_full_(const float *xv, float *acc)\n{\n");
    const char *vt = NULL, *vl = NULL, *vs = NULL, *v1 = NULL, *vop = NULL, *isa = NULL;
    if (B == 16) {
        isa = "KILN_KERNELS_AVX512";
        vt = "__m512";
        vl = "_mm512_loadu_ps";
        vs = "_mm512_storeu_ps";
        v1 = "_mm512_set1_ps";
        vop = is_max ? "_mm512_max_ps(x, a)" : "_mm512_add_ps(a, x)";
    } else if (B == 8) {
        isa = "KILN_KERNELS_AVX2";
        vt = "__m256";
        vl = "_mm256_loadu_ps";
        vs = "_mm256_storeu_ps";
        v1 = "_mm256_set1_ps";
        vop = is_max ? "_mm256_max_ps(x, a)" : "_mm256_add_ps(a, x)";
    }
    if (isa)
        /* max(x, a) is x > a ? x : a, as the scalar form (NaN and -0 alike) */
        kiln_sb_printf(b,
                       "#ifdef %s\n"
                       "    %s a = %s(%s);\n"
                       "    for (int kh = 0; kh < KH_; kh++)\n"
                       "        for (int kw = 0; kw < KW_; kw++) {\n"
                       "            %s x = %s(xv + ((int64_t)kh * DH_ * W_ + (int64_t)kw * DW_) * B_);\n"
                       "            a = %s;\n"
                       "        }\n"
                       "    %s(acc, a);\n"
                       "#else\n",
                       isa, vt, v1, init, vt, vl, vop, vs);
    kiln_sb_printf(b,
                   "    for (int j = 0; j < B_; j++)\n"
                   "        acc[j] = %s;\n"
                   "    for (int kh = 0; kh < KH_; kh++)\n"
                   "        for (int kw = 0; kw < KW_; kw++) {\n"
                   "            const float *x = xv + ((int64_t)kh * DH_ * W_ + (int64_t)kw * DW_) * B_;\n"
                   "            for (int j = 0; j < B_; j++)\n"
                   "                acc[j] = %s;\n"
                   "        }\n",
                   init, is_max ? "x[j] > acc[j] ? x[j] : acc[j]" : "acc[j] + x[j]");
    if (isa)
        kiln_sb_puts(b, "#endif\n");
    kiln_sb_puts(b, "    return (int64_t)KH_ * KW_;\n}\n\n");
    /* the border pixel: the taps inside the input (and inside the padded extent) */
    kiln_sb_printf(b,
                   "/* a window at the border: the taps inside the input; returns the divisor */\n"
                   "static inline int64_t px_border_(const float *xp, int64_t h0, int64_t w0, float *acc)\n"
                   "{\n"
                   "    for (int j = 0; j < B_; j++)\n"
                   "        acc[j] = %s;\n"
                   "    int kh0 = 0, kh1 = KH_, kw0 = 0, kw1 = KW_, ph = 0, pw = 0;\n"
                   "    while (kh0 < KH_ && h0 + kh0 * DH_ < 0)\n"
                   "        kh0++;\n"
                   "    while (kh1 > kh0 && h0 + (kh1 - 1) * DH_ >= H_)\n"
                   "        kh1--;\n"
                   "    while (kw0 < KW_ && w0 + kw0 * DW_ < 0)\n"
                   "        kw0++;\n"
                   "    while (kw1 > kw0 && w0 + (kw1 - 1) * DW_ >= W_)\n"
                   "        kw1--;\n"
                   "    for (int k = 0; k < KH_; k++)\n"
                   "        ph += h0 + k * DH_ >= -PT_ && h0 + k * DH_ < H_ + PB_;\n"
                   "    for (int k = 0; k < KW_; k++)\n"
                   "        pw += w0 + k * DW_ >= -PL_ && w0 + k * DW_ < W_ + PR_;\n"
                   "    for (int kh = kh0; kh < kh1; kh++)\n"
                   "        for (int kw = kw0; kw < kw1; kw++) {\n"
                   "            const float *xv = xp + ((h0 + kh * DH_) * W_ + w0 + kw * DW_) * B_;\n"
                   "            for (int j = 0; j < B_; j++)\n"
                   "                acc[j] = %s;\n"
                   "        }\n"
                   "    return %s;\n}\n\n",
                   init, is_max ? "xv[j] > acc[j] ? xv[j] : acc[j]" : "acc[j] + xv[j]",
                   incl ? "(int64_t)ph * pw" : "(int64_t)(kh1 - kh0) * (kw1 - kw0)");
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t band = task %% BANDS_, plane = task / BANDS_;\n"
                   "        const float *xp = a%d + plane * (int64_t)(H_ * W_ * B_);\n"
                   "        int64_t oh1 = KILN_MIN_((band + 1) * RPT_, (int64_t)OH_);\n"
                   "        for (int64_t oh = band * RPT_; oh < oh1; oh++) {\n"
                   "            const int64_t h0 = oh * SH_ - PT_;\n"
                   "            const int rin = h0 >= 0 && h0 + (KH_ - 1) * DH_ < H_;\n"
                   "            for (int64_t ow = 0; ow < OW_; ow++) {\n"
                   "                float acc[B_];\n"
                   "                const int64_t w0 = ow * SW_ - PL_;\n"
                   "                const int64_t cnt = rin && ow >= OWI0_ && ow < OWI1_\n"
                   "                                        ? px_full_(xp + (h0 * W_ + w0) * B_, acc)\n"
                   "                                        : px_border_(xp, h0, w0, acc);\n"
                   "                (void)cnt;\n"
                   "                int64_t base = ((plane * OH_ + oh) * OW_ + ow) * B_;\n"
                   "                for (int j = 0; j < B_; j++) {\n"
                   "                    float v = acc[j]%s;\n"
                   "                    int64_t idx = base + j;\n"
                   "                    (void)idx;\n",
                   xa, is_max ? "" : " / (float)(cnt > 0 ? cnt : 1)");
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
