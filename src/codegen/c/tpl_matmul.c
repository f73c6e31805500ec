/* codegen/c/tpl_matmul.c: batched A x B of two activations (numpy
 * broadcasting over the batch dims). A task computes `rows_per_task` output
 * rows, accumulating rank-1 updates along k into the output row (contiguous
 * in n, vectorized). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_bmm b;
    if (n->op != KILN_OP_MATMUL || !kiln_tpl_row_major_in(g, n) || !kiln_geom_bmm(g, n, &b) ||
        !kiln_tpl_f32(g, n->inputs[1]))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_bmm b;
    kiln_geom_bmm(l->ctx->g, l->ctx->g->nodes[t->anchor], &b);
    t->flops = 2.0 * b.batch * b.M * b.N * b.K;
    kiln_knobs_rows(t, b.batch, b.M, b.N * b.K);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
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

const kiln_template kiln_tpl_matmul = {
    .name = "matmul",
    .match = match,
    .space = space,
    .emit = emit,
};
