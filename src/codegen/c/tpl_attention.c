/* codegen/c/tpl_attention.c: Attention (ir/attention.h) as one kernel per
 * (batch, head, block of `rows_per_task` query rows).
 *
 * Per query row: the Sk scores scale * q . k_j + m_j go to a stack buffer
 * (whole-row softmax: Sk <= 4096, so the row stays in L1), then max, exp and
 * sum, then the weighted sum of the V rows accumulated in a Dv-float row and
 * scaled by 1/sum once. Q, K, V and the output are read and written through
 * the strides the op's perms give (the head split/merge transposes of the
 * exported graph are never materialised); the dot products run in 16
 * partial sums over D so they vectorize. The scores never leave the cache. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "ir/attention.h"
#include "lower/knobs.h"

#define MAX_SK 4096
#define MAX_DV 1024

static bool geom(const kiln_graph *g, const kiln_node *n, kiln_attn_geom *a)
{
    const kiln_value *m = n->n_inputs > 3 && n->inputs[3] >= 0 ? g->values[n->inputs[3]] : NULL;
    kiln_error e = {0};
    return kiln_attn_geom_of(n, &g->values[n->inputs[0]]->shape, &g->values[n->inputs[1]]->shape,
                             &g->values[n->inputs[2]]->shape, m ? &m->shape : NULL, a,
                             &e) == KILN_OK;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_attn_geom a;
    if (n->op != KILN_OP_ATTENTION || !kiln_tpl_row_major_in(g, n) || !geom(g, n, &a) ||
        a.Sk > MAX_SK || a.Dv > MAX_DV || a.Sk < 1 || a.D < 1)
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
    kiln_knobs_rows(t, a.B * a.H, a.Sq, a.Sk * (a.D + a.Dv));
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
                   "#include <math.h>\n"
                   "enum { H_ = %lld, SQ_ = %lld, SK_ = %lld, D_ = %lld, DV_ = %lld, RPT_ = %d, "
                   "MT_ = %lld };\n",
                   (long long)a.H, (long long)a.Sq, (long long)a.Sk, (long long)a.D,
                   (long long)a.Dv, rpt, (long long)mt);
#define S4(name, s)                                                                               \
    kiln_sb_printf(b, "static const int64_t " name "[4] = {%lld, %lld, %lld, %lld};\n",            \
                   (long long)(s)[0], (long long)(s)[1], (long long)(s)[2], (long long)(s)[3])
    S4("QS_", a.qs);
    S4("KS_", a.ks);
    S4("VS_", a.vs);
    S4("OS_", a.os);
    S4("MS_", a.ms);
#undef S4
    kiln_sb_printf(b, "static const float SCALE_ = %.9gf;\n\n", (double)a.scale);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_puts(b, "    float s_[SK_];\n"
                    "    float acc_[DV_];\n"
                    "    for (int64_t task = begin_; task < end_; task++) {\n"
                    "        int64_t bh = task / MT_, i0 = (task % MT_) * RPT_;\n"
                    "        int64_t bb = bh / H_, hh = bh % H_;\n"
                    "        int64_t i1 = KILN_MIN_((int64_t)SQ_, i0 + RPT_);\n");
    kiln_sb_printf(b,
                   "        const float *kb = a%d + bb * KS_[0] + hh * KS_[1];\n"
                   "        const float *vb = a%d + bb * VS_[0] + hh * VS_[1];\n"
                   "        for (int64_t i = i0; i < i1; i++) {\n"
                   "            const float *qi = a%d + bb * QS_[0] + hh * QS_[1] + i * QS_[2];\n"
                   "            float mx = -INFINITY;\n"
                   "            for (int64_t j = 0; j < SK_; j++) {\n"
                   "                const float *kj = kb + j * KS_[2];\n"
                   "                float p16[16] = {0};\n"
                   "                int64_t c = 0;\n"
                   "                for (; c + 16 <= D_; c += 16)\n"
                   "                    for (int u = 0; u < 16; u++)\n"
                   "                        p16[u] += qi[(c + u) * QS_[3]] * kj[(c + u) * KS_[3]];\n"
                   "                float d = 0.0f;\n"
                   "                for (; c < D_; c++)\n"
                   "                    d += qi[c * QS_[3]] * kj[c * KS_[3]];\n"
                   "                for (int u = 0; u < 16; u++)\n"
                   "                    d += p16[u];\n"
                   "                d *= SCALE_;\n",
                   ka, va, qa);
    if (ma >= 0)
        kiln_sb_printf(b, "                d += a%d[bb * MS_[0] + hh * MS_[1] + i * MS_[2] + j * "
                          "MS_[3]];\n",
                       ma);
    kiln_sb_puts(b, "                s_[j] = d;\n"
                    "                mx = d > mx ? d : mx;\n"
                    "            }\n"
                    "            float sum = 0.0f;\n"
                    "            for (int64_t j = 0; j < SK_; j++) {\n"
                    "                float e = expf(s_[j] - mx);\n"
                    "                s_[j] = e;\n"
                    "                sum += e;\n"
                    "            }\n"
                    "            for (int64_t c = 0; c < DV_; c++)\n"
                    "                acc_[c] = 0.0f;\n"
                    "            for (int64_t j = 0; j < SK_; j++) {\n"
                    "                const float pj = s_[j], *vj = vb + j * VS_[2];\n"
                    "                for (int64_t c = 0; c < DV_; c++)\n"
                    "                    acc_[c] += pj * vj[c * VS_[3]];\n"
                    "            }\n"
                    "            const float inv = 1.0f / sum;\n"
                    "            float *oi = o0 + bb * OS_[0] + hh * OS_[1] + i * OS_[2];\n"
                    "            for (int64_t c = 0; c < DV_; c++)\n"
                    "                oi[c * OS_[3]] = acc_[c] * inv;\n"
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
