/* codegen/c/tpl_attention.c: Attention (ir/attention.h) as one kernel per
 * (batch, head, block of `rows_per_task` query rows).
 *
 * A task first packs K^T of its (batch, head) into the thread's workspace,
 * [D][Sk rounded up to 64] (zero past Sk; kept across consecutive tasks of
 * the same head). Per query row, whole-row softmax (Sk <= 4096: the row of
 * scores stays in L1): the scores scale * q . k_j as rank-1 updates along D
 * into 64-column register blocks, + the mask, max and sum in 16 partial
 * lanes, exp by kiln_kernels_math.h's vectorizable kiln_m_expf; then the
 * weighted sum of the V rows in 64-float register blocks, scaled by 1/sum
 * once. Q, K, V, mask and output are read and written through the strides
 * the op's perms give (compile-time constants): the head split/merge
 * transposes of the exported graph are never materialised. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "ir/attention.h"
#include "lower/knobs.h"

#define MAX_SK KILN_ATTN_MAX_SK
#define MAX_KT KILN_ATTN_MAX_KT /* K^T of one head in the workspace: at most 4 MiB */

static bool geom(const kiln_graph *g, const kiln_node *n, kiln_attn_geom *a)
{
    const kiln_value *m = n->n_inputs > 3 && n->inputs[3] >= 0 ? g->values[n->inputs[3]] : NULL;
    kiln_error e = {0};
    return kiln_attn_geom_of(n, &g->values[n->inputs[0]]->shape, &g->values[n->inputs[1]]->shape,
                             &g->values[n->inputs[2]]->shape, m ? &m->shape : NULL, a,
                             &e) == KILN_OK;
}

/* Sk rounded up to the score block (64 columns: four AVX-512 registers). */
static int64_t sk_padded(const kiln_attn_geom *a)
{
    return (a->Sk + 63) / 64 * 64;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_attn_geom a;
    if (n->op != KILN_OP_ATTENTION || !kiln_tpl_row_major_in(g, n) || !geom(g, n, &a) ||
        a.Sk > MAX_SK || a.Sk < 1 || a.D < 1 || a.D * sk_padded(&a) > MAX_KT)
        return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !kiln_tpl_f32(g, n->inputs[k]))
            return false;
    *epi = KILN_EPI_KIND_NONE;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_attn_geom a;
    geom(l->ctx->g, l->ctx->g->nodes[t->anchor], &a);
    t->flops = 2.0 * a.B * a.H * a.Sq * a.Sk * (a.D + a.Dv);
    /* rows per task: enough to amortize packing K^T (Sk x D) over them, while
     * leaving >= 8 tasks to share */
    int rpt = 1;
    while (rpt * 2 <= a.Sq && rpt < 32 && a.B * a.H * ((a.Sq + rpt * 2 - 1) / (rpt * 2)) >= 8)
        rpt *= 2;
    kiln_knob *k = kiln_knob_add(t, "rows_per_task", KILN_KNOB_TILE, rpt, -1);
    kiln_knob_pow2(k, (int)(a.Sq < 64 ? a.Sq : 64), false);
    t->workspace = (a.D + 1) * sk_padded(&a) * (int64_t)sizeof(float);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_attn_geom a;
    geom(g, n, &a);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t mt = (a.Sq + rpt - 1) / rpt;
    int qa = kiln_task_arg(t, n->inputs[0]), ka = kiln_task_arg(t, n->inputs[1]);
    int va = kiln_task_arg(t, n->inputs[2]);
    int ma = a.has_mask ? kiln_task_arg(t, n->inputs[3]) : -1;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { H_ = %lld, SQ_ = %lld, SK_ = %lld, SKP_ = %lld, D_ = %lld, DV_ = %lld, "
                   "RPT_ = %d, MT_ = %lld };\n",
                   (long long)a.H, (long long)a.Sq, (long long)a.Sk, (long long)sk_padded(&a),
                   (long long)a.D, (long long)a.Dv, rpt, (long long)mt);
#define S4(name, s)                                                                               \
    kiln_sb_printf(b, "#define " name "0 %lldll\n#define " name "1 %lldll\n#define " name          \
                      "2 %lldll\n#define " name "3 %lldll\n",                                     \
                   (long long)(s)[0], (long long)(s)[1], (long long)(s)[2], (long long)(s)[3])
    S4("QS", a.qs);
    S4("KS", a.ks);
    S4("VS", a.vs);
    S4("OS", a.os);
    S4("MS", a.ms);
#undef S4
    kiln_sb_printf(b, "#define SCALE_ %.9gf\n", (double)a.scale);
    /* 16-float vectors (gcc's vector extension: zmm with AVX-512, pairs of
     * ymm with AVX2, xmm quads otherwise); the u form loads unaligned */
    kiln_sb_puts(b, "typedef float kv16_ __attribute__((vector_size(64)));\n"
                    "typedef float kv16u_ __attribute__((vector_size(64), aligned(4), may_alias));\n\n");
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    /* workspace: K^T of the current (batch, head) [D][SKP] (zero past Sk), then
     * one row of scores [SKP] */
    kiln_sb_printf(b,
                   "    float *kt = (float *)" KILN_TASK_WS ";\n"
                   "    float *s_ = kt + (int64_t)D_ * SKP_;\n"
                   "    int64_t packed = -1;\n"
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        const int64_t bh = task / MT_, i0 = (task %% MT_) * RPT_;\n"
                   "        const int64_t bb = bh / H_, hh = bh %% H_;\n"
                   "        const int64_t i1 = KILN_MIN_((int64_t)SQ_, i0 + RPT_);\n"
                   "        const float *kb = a%d + bb * KS0 + hh * KS1;\n"
                   "        const float *vb = a%d + bb * VS0 + hh * VS1;\n"
                   "        if (packed != bh) {\n"
                   "            for (int64_t j = 0; j < SK_; j++)\n"
                   "                for (int64_t c = 0; c < D_; c++)\n"
                   "                    kt[c * SKP_ + j] = kb[j * KS2 + c * KS3];\n"
                   "            for (int64_t c = 0; c < D_; c++)\n"
                   "                for (int64_t j = SK_; j < SKP_; j++)\n"
                   "                    kt[c * SKP_ + j] = 0.0f;\n"
                   "            packed = bh;\n"
                   "        }\n"
                   "        for (int64_t i = i0; i < i1; i++) {\n"
                   "            const float *qi = a%d + bb * QS0 + hh * QS1 + i * QS2;\n"
                   "            for (int64_t j0 = 0; j0 < SKP_; j0 += 64) {\n"
                   "                kv16_ r0 = {0}, r1 = {0}, r2 = {0}, r3 = {0};\n"
                   "                for (int64_t c = 0; c < D_; c++) {\n"
                   "                    const kv16_ qc = (kv16_){0} + qi[c * QS3] * SCALE_;\n"
                   "                    const float *kc = kt + c * SKP_ + j0;\n"
                   "                    r0 += qc * *(const kv16u_ *)(kc + 0);\n"
                   "                    r1 += qc * *(const kv16u_ *)(kc + 16);\n"
                   "                    r2 += qc * *(const kv16u_ *)(kc + 32);\n"
                   "                    r3 += qc * *(const kv16u_ *)(kc + 48);\n"
                   "                }\n"
                   "                *(kv16u_ *)(s_ + j0) = r0;\n"
                   "                *(kv16u_ *)(s_ + j0 + 16) = r1;\n"
                   "                *(kv16u_ *)(s_ + j0 + 32) = r2;\n"
                   "                *(kv16u_ *)(s_ + j0 + 48) = r3;\n"
                   "            }\n",
                   ka, va, qa);
    if (ma >= 0)
        kiln_sb_printf(b,
                       "            {\n"
                       "                const float *mi = a%d + bb * MS0 + hh * MS1 + i * MS2;\n"
                       "                for (int64_t j = 0; j < SK_; j++)\n"
                       "                    s_[j] += mi[j * MS3];\n"
                       "            }\n",
                       ma);
    kiln_sb_puts(b, "            float m16[16];\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                m16[u] = -INFINITY;\n"
                    "            int64_t j = 0;\n"
                    "            for (; j + 16 <= SK_; j += 16)\n"
                    "                for (int u = 0; u < 16; u++)\n"
                    "                    m16[u] = s_[j + u] > m16[u] ? s_[j + u] : m16[u];\n"
                    "            float mx = -INFINITY;\n"
                    "            for (; j < SK_; j++)\n"
                    "                mx = s_[j] > mx ? s_[j] : mx;\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                mx = m16[u] > mx ? m16[u] : mx;\n"
                    "            float z16[16] = {0};\n"
                    "            for (j = 0; j + 16 <= SK_; j += 16)\n"
                    "                for (int u = 0; u < 16; u++) {\n"
                    "                    const float e = kiln_m_expf(s_[j + u] - mx);\n"
                    "                    s_[j + u] = e;\n"
                    "                    z16[u] += e;\n"
                    "                }\n"
                    "            float sum = 0.0f;\n"
                    "            for (; j < SK_; j++) {\n"
                    "                s_[j] = kiln_m_expf(s_[j] - mx);\n"
                    "                sum += s_[j];\n"
                    "            }\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                sum += z16[u];\n"
                    "            const float inv = 1.0f / sum;\n"
                    "            float *oi = o0 + bb * OS0 + hh * OS1 + i * OS2;\n"
                    "            int64_t c0 = 0;\n");
    if (a.vs[3] == 1 && a.os[3] == 1) /* V rows and output rows contiguous: 64-float blocks */
        kiln_sb_puts(b, "            for (; c0 + 64 <= DV_; c0 += 64) {\n"
                        "                kv16_ a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};\n"
                        "                for (int64_t jj = 0; jj < SK_; jj++) {\n"
                        "                    const kv16_ pj = (kv16_){0} + s_[jj] * inv;\n"
                        "                    const float *vj = vb + jj * VS2 + c0;\n"
                        "                    a0 += pj * *(const kv16u_ *)(vj + 0);\n"
                        "                    a1 += pj * *(const kv16u_ *)(vj + 16);\n"
                        "                    a2 += pj * *(const kv16u_ *)(vj + 32);\n"
                        "                    a3 += pj * *(const kv16u_ *)(vj + 48);\n"
                        "                }\n"
                        "                *(kv16u_ *)(oi + c0) = a0;\n"
                        "                *(kv16u_ *)(oi + c0 + 16) = a1;\n"
                        "                *(kv16u_ *)(oi + c0 + 32) = a2;\n"
                        "                *(kv16u_ *)(oi + c0 + 48) = a3;\n"
                        "            }\n");
    kiln_sb_puts(b, "            for (; c0 < DV_; c0 += 64) {\n"
                    "                const int64_t cn = KILN_MIN_((int64_t)DV_ - c0, (int64_t)64);\n"
                    "                float acc[64] = {0};\n"
                    "                for (int64_t jj = 0; jj < SK_; jj++) {\n"
                    "                    const float pj = s_[jj], *vj = vb + jj * VS2 + c0 * VS3;\n"
                    "                    for (int64_t u = 0; u < cn; u++)\n"
                    "                        acc[u] += pj * vj[u * VS3];\n"
                    "                }\n"
                    "                for (int64_t u = 0; u < cn; u++)\n"
                    "                    oi[(c0 + u) * OS3] = acc[u] * inv;\n"
                    "            }\n"
                    "        }\n"
                    "    }\n"
                    "}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(a.B * a.H * mt));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_attention = {
    .name = "attention",
    .match = match,
    .space = space,
    .emit = emit,
};
