/* codegen/c/tpl_conv2d_direct.c: row-major NCHW convolution, any groups and
 * dilation: the template for convs that are neither blocked nor depthwise
 * blocked. One task per output plane, accumulating tap by tap over the valid
 * output range of each filter column; any fused epilogue after the sum. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (!kiln_tpl_conv_operands(g, n) || !kiln_tpl_row_major_in(g, n) ||
        g->values[n->outputs[0]]->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_win2d w;
    kiln_geom_win2d(l->ctx->g, l->ctx->g->nodes[t->anchor], &w);
    t->flops = 2.0 * w.n * w.m * w.oh * w.ow * (double)(w.c / w.groups) * w.kh * w.kw;
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
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

const kiln_template kiln_tpl_conv2d_direct = {
    .name = "conv2d_direct",
    .match = match,
    .space = space,
    .emit = emit,
};
