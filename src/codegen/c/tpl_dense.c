/* codegen/c/tpl_dense.c: Y = alpha * A x B + beta * C with B constant (Gemm,
 * or MatMul with a constant 2-D B, A flattened to [M, K]).
 *
 * B is packed at compile time into panels [N/nb][K][nb] (zero padded). A
 * task owns an mr-row tile of A and a run of `panels` panels; per panel an
 * mr x nb accumulator tile lives in registers (the j loop is one or two
 * vectors, the r loop unrolled), fed by a broadcast of A[r][k] and one panel
 * row per k, then the bias/epilogue and the only store. One row of A with
 * AVX-512 (batch-1 classifiers: a matrix-vector product bound by streaming
 * the weights) takes an explicit path with four independent sums over k:
 * gcc vectorizes the generic loop across k there and ran 4x below memory
 * speed.
 *
 * Knobs: mr (rows per register tile) and nb (panel width: one or two
 * vectors), chosen so mr*nb/vec accumulators plus the loaded panel fit the
 * 32 (AVX-512) or 16 (AVX2) vector registers; panels per task for >= 8
 * tasks of >= ~64K multiply-adds. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_dense d;
    if ((n->op != KILN_OP_GEMM && n->op != KILN_OP_MATMUL) || !kiln_geom_dense(g, n, &d))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

static void dense_knobs(kiln_task *t, const kiln_dense *d, const kiln_target *tg)
{
    int vec = tg->vec;
    int regs = tg->isa == KILN_TARGET_AVX512 ? 32 : 16;
    int nb = d->N >= 2 * vec && d->M >= 4 ? 2 * vec : vec;
    int mr = 1;
    while (mr * 2 <= 8 && mr * 2 <= d->M && (mr * 2) * (nb / vec) + nb / vec + 1 <= regs)
        mr *= 2;
    if (d->M >= 6 && 6 * (nb / vec) + nb / vec + 1 <= regs && nb == vec)
        mr = 6;
    kiln_knob *k = kiln_knob_add(t, "mr", KILN_KNOB_TILE, mr, -1);
    kiln_knob_choice(k, 1);
    kiln_knob_choice(k, 2);
    kiln_knob_choice(k, 4);
    kiln_knob_choice(k, 6);
    kiln_knob_choice(k, 8);
    k = kiln_knob_add(t, "nb", KILN_KNOB_TILE, nb, -1);
    kiln_knob_choice(k, vec);
    kiln_knob_choice(k, 2 * vec);
    int64_t panels = (d->N + nb - 1) / nb, mtiles = (d->M + mr - 1) / mr;
    int ppt = 1;
    while (ppt * 2 <= panels && mtiles * ((panels + ppt * 2 - 1) / (ppt * 2)) >= 8 &&
           (int64_t)ppt * nb * d->K * mr < 65536)
        ppt *= 2;
    k = kiln_knob_add(t, "panels", KILN_KNOB_TILE, ppt, -1);
    kiln_knob_pow2(k, (int)(panels < 64 ? panels : 64), false);
}


static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_dense d;
    kiln_geom_dense(l->ctx->g, l->ctx->g->nodes[t->anchor], &d);
    dense_knobs(t, &d, &l->ctx->target);
    t->flops = 2.0 * d.M * d.N * d.K;
    return KILN_OK;
}

/* Dense B -> panels [ceil(N/nb)][K][nb], zero padded; B is [K,N] or, with
 * trans_b, [N,K]. */
static float *pack_dense(const float *bsrc, const kiln_dense *d, int nb, int64_t *nbytes)
{
    int64_t np = (d->N + nb - 1) / nb;
    *nbytes = (int64_t)sizeof(float) * np * d->K * nb;
    float *p = malloc((size_t)*nbytes + 1);
    if (!p)
        return NULL;
    for (int64_t pi = 0; pi < np; pi++)
        for (int64_t k = 0; k < d->K; k++)
            for (int j = 0; j < nb; j++) {
                int64_t col = pi * nb + j;
                float v = 0.0f;
                if (col < d->N)
                    v = d->trans_b ? bsrc[col * d->K + k] : bsrc[k * d->N + col];
                p[(pi * d->K + k) * nb + j] = v;
            }
    return p;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_dense d;
    kiln_geom_dense(g, n, &d);
    int nb = kiln_task_knob(t, "nb", l->ctx->target.vec);
    const kiln_value *bv = g->values[n->inputs[1]];
    int64_t nbytes;
    float *p = pack_dense(bv->data, &d, nb, &nbytes);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    char lb[32];
    snprintf(lb, sizeof lb, "KN%dn", nb);
    int tid = kiln_lower_weights(l, bv->id, lb, p, nbytes);
    if (tid < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[kiln_task_arg(t, bv->id)] = tid;
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
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

const kiln_template kiln_tpl_dense = {
    .name = "dense",
    .match = match,
    .space = space,
    .pack = pack,
    .emit = emit,
};
