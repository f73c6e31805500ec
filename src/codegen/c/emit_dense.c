/* codegen/c/emit_dense.c: matrix products.
 *
 * dense: Y = alpha * A x B + beta * C with B constant, packed at compile time
 *   into panels [N/nb][K][nb]. A task owns an mr-row tile of A and a run of
 *   `panels` panels; per panel an mr x nb accumulator tile lives in registers
 *   (the j loop is one or two vectors, the r loop unrolled), fed by a
 *   broadcast of A[r][k] and one panel row per k, then the bias/epilogue and
 *   the only store. One row of A with AVX-512 (batch-1 classifiers: a
 *   matrix-vector product bound by streaming the weights) takes an explicit
 *   path with four independent sums over k: gcc vectorizes the generic loop
 *   across k there and ran 4x below memory speed.
 * matmul: batched A x B of two activations (numpy broadcasting over the
 *   batch dims); a task computes `rows_per_task` output rows, accumulating
 *   rank-1 updates along k into the output row (contiguous in n, vectorized). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"

kiln_status kiln_emit_dense(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_dense d;
    kiln_geom_dense(g, n, &d);
    int mr = kiln_task_knob(t, "mr", 4), nb = kiln_task_knob(t, "nb", 16);
    int ppt = kiln_task_knob(t, "panels", 1);
    int64_t np = (d.N + nb - 1) / nb, npg = (np + ppt - 1) / ppt, mt = (d.M + mr - 1) / mr;
    int aa = kiln_task_arg(t, n->inputs[0]), ba = kiln_task_arg(t, n->inputs[1]);
    int ca = d.bias_kind ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { M_ = %lld, N_ = %lld, K_ = %lld, MR_ = %d, NB_ = %d, NP_ = %lld,\n"
                   "       PPT_ = %d, NPG_ = %lld };\n\n",
                   (long long)d.M, (long long)d.N, (long long)d.K, mr, nb, (long long)np, ppt,
                   (long long)npg);
    /* the register tile, instantiated for a full and a partial row count */
    kiln_sb_printf(b,
                   "#if defined(__AVX512F__)\n"
                   "#include <immintrin.h>\n"
                   "#endif\n"
                   "static inline __attribute__((always_inline)) void tile_(const int mr, const float *a,\n"
                   "                                                      const float *bp, float acc[MR_][NB_])\n"
                   "{\n"
                   "#if defined(__AVX512F__)\n"
                   "    if (MR_ == 1 && NB_ == 16) {\n"
                   "        /* one row (batch 1): a matrix-vector product bound by streaming\n"
                   "         * the panel; four independent sums over k hide the FMA latency\n"
                   "         * (gcc vectorizes the generic loop below across k here, badly) */\n"
                   "        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;\n"
                   "        int64_t k = 0;\n"
                   "        for (; k + 4 <= K_; k += 4) {\n"
                   "            s0 = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), _mm512_loadu_ps(bp + k * NB_), s0);\n"
                   "            s1 = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 1]),\n"
                   "                                 _mm512_loadu_ps(bp + (k + 1) * NB_), s1);\n"
                   "            s2 = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 2]),\n"
                   "                                 _mm512_loadu_ps(bp + (k + 2) * NB_), s2);\n"
                   "            s3 = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 3]),\n"
                   "                                 _mm512_loadu_ps(bp + (k + 3) * NB_), s3);\n"
                   "        }\n"
                   "        for (; k < K_; k++)\n"
                   "            s0 = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), _mm512_loadu_ps(bp + k * NB_), s0);\n"
                   "        _mm512_storeu_ps(acc[0], _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));\n"
                   "        (void)mr;\n"
                   "        return;\n"
                   "    }\n"
                   "#endif\n"
                   "    for (int r = 0; r < MR_; r++)\n"
                   "        for (int j = 0; j < NB_; j++)\n"
                   "            acc[r][j] = 0.0f;\n"
                   "    for (int64_t k = 0; k < K_; k++) {\n"
                   "        const float *bk = bp + k * NB_;\n"
                   "#pragma GCC unroll 8\n"
                   "        for (int r = 0; r < MR_; r++) {\n"
                   "            if (r >= mr)\n"
                   "                break;\n"
                   "            const float av = a[r * (int64_t)K_ + k];\n"
                   "            for (int j = 0; j < NB_; j++)\n"
                   "                acc[r][j] += av * bk[j];\n"
                   "        }\n"
                   "    }\n"
                   "}\n\n");
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t m0 = (task / NPG_) * MR_, pg = task %% NPG_;\n"
                   "        int mr = (int)KILN_MIN_((int64_t)MR_, M_ - m0);\n"
                   "        int64_t p1 = KILN_MIN_((int64_t)NP_, (pg + 1) * PPT_);\n"
                   "        for (int64_t p = pg * PPT_; p < p1; p++) {\n"
                   "            float acc[MR_][NB_];\n"
                   "            const float *bp = a%d + p * (int64_t)K_ * NB_;\n"
                   "            if (mr == MR_)\n"
                   "                tile_(MR_, a%d + m0 * (int64_t)K_, bp, acc);\n"
                   "            else\n"
                   "                tile_(mr, a%d + m0 * (int64_t)K_, bp, acc);\n"
                   "            for (int r = 0; r < mr; r++)\n"
                   "                for (int j = 0; j < NB_; j++) {\n"
                   "                    int64_t col = p * NB_ + j;\n"
                   "                    if (col >= N_)\n"
                   "                        break;\n"
                   "                    int64_t idx = (m0 + r) * (int64_t)N_ + col;\n"
                   "                    float v = acc[r][j]",
                   ba, aa, aa);
    if (d.alpha != 1.0f)
        kiln_sb_printf(b, " * %af", (double)d.alpha);
    if (ca >= 0) {
        const char *ix = d.bias_kind == 1 ? "0" : d.bias_kind == 2 ? "col" : d.bias_kind == 3 ? "idx" : "m0 + r";
        if (d.beta != 1.0f)
            kiln_sb_printf(b, " + %af * a%d[%s]", (double)d.beta, ca, ix);
        else
            kiln_sb_printf(b, " + a%d[%s]", ca, ix);
    }
    kiln_sb_puts(b, ";\n");
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "                    o0[idx] = v;\n                }\n        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(mt * npg));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

kiln_status kiln_emit_matmul(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_bmm m;
    kiln_geom_bmm(g, n, &m);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t mtasks = (m.M + rpt - 1) / rpt;
    int aa = kiln_task_arg(t, n->inputs[0]), ba = kiln_task_arg(t, n->inputs[1]);
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "enum { M_ = %lld, N_ = %lld, K_ = %lld, RPT_ = %d, MT_ = %lld };\n\n",
                   (long long)m.M, (long long)m.N, (long long)m.K, rpt, (long long)mtasks);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_puts(b, "    for (int64_t task = begin_; task < end_; task++) {\n"
                    "        int64_t bt = task / MT_, m0 = (task % MT_) * RPT_;\n"
                    "        int64_t aoff = 0, boff = 0;\n"
                    "        (void)bt;\n");
    int64_t st = 1;
    for (int i = m.n_bdims - 1; i >= 0; i--) {
        if (m.a_bstride[i])
            kiln_sb_printf(b, "        aoff += (bt / %lld %% %lld) * %lld;\n", (long long)st,
                           (long long)m.out_dims[i], (long long)(m.a_bstride[i] * m.M * m.K));
        if (m.b_bstride[i])
            kiln_sb_printf(b, "        boff += (bt / %lld %% %lld) * %lld;\n", (long long)st,
                           (long long)m.out_dims[i], (long long)(m.b_bstride[i] * m.K * m.N));
        st *= m.out_dims[i];
    }
    kiln_sb_printf(b,
                   "        int64_t m1 = KILN_MIN_((int64_t)M_, m0 + RPT_);\n"
                   "        for (int64_t mm = m0; mm < m1; mm++) {\n"
                   "            float *orow = o0 + (bt * M_ + mm) * (int64_t)N_;\n"
                   "            const float *arow = a%d + aoff + mm * (int64_t)K_;\n"
                   "            for (int64_t j = 0; j < N_; j++)\n"
                   "                orow[j] = 0.0f;\n"
                   "            for (int64_t k = 0; k < K_; k++) {\n"
                   "                const float av = arow[k];\n"
                   "                const float *bk = a%d + boff + k * (int64_t)N_;\n"
                   "                for (int64_t j = 0; j < N_; j++)\n"
                   "                    orow[j] += av * bk[j];\n"
                   "            }\n",
                   aa, ba);
    if (kiln_task_has_epilogue(l, t)) {
        kiln_sb_puts(b, "            for (int64_t j = 0; j < N_; j++) {\n"
                        "                float v = orow[j];\n"
                        "                int64_t idx = (bt * M_ + mm) * (int64_t)N_ + j;\n"
                        "                (void)idx;\n");
        kiln_emit_epilogue(b, l, t, "v", "idx");
        kiln_sb_puts(b, "                orow[j] = v;\n            }\n");
    }
    kiln_sb_puts(b, "        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(m.batch * mtasks));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}
