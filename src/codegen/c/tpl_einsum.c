/* codegen/c/tpl_einsum.c: Einsum equations that are a batched matrix
 * product of two float32 operands ("bij,bjk->bik", "bhid,bhjd->bhij",
 * "bhij,bhjd->bhid", "ij,jk->ik", "bid,jd->bij", "...ij,...jk->...ik"),
 * with the operands' and the output's strides folded into the loops: no
 * transpose is materialized.
 *
 * The equation is parsed against the operand shapes (ir/einsum.h) and every
 * label classified: summed labels present in both operands are K (several
 * must merge into one contiguous run in both); of the output's labels, the
 * innermost one only A has is M, the innermost one only B has is N, and all
 * others (in both, or one of several in only one operand) are batch dims, each
 * with its own stride in A, B and the output (0 where an operand lacks it or
 * broadcasts an ellipsis dim). Not taken (the reference fallback runs them):
 * other dtypes, one or three or more operands, a label repeated within a
 * term (diagonals), a label summed over one operand alone, K labels that do
 * not merge.
 *
 * A task computes `rows_per_task` rows m of one batch entry into a per-thread
 * row of N accumulators, then stores it through the output strides (with the
 * epilogue). Knob `order`: 0 accumulates rank-1 updates along k (vectorized
 * over n when B is contiguous in n); 1 takes each output as a dot product
 * over k in eight partial sums (A and B contiguous in k); 2 first copies the
 * batch entry's B, K x N, into the thread's workspace contiguous in n (again
 * only when the next task's B differs: a thread's tasks come in contiguous
 * runs), then runs 0 on it: the Q K^T form at the speed of a plain matmul,
 * offered while K x N fits in 1 MiB. Default: 0 when B is contiguous in n,
 * else 2 for M >= 4, else 1 when A and B are contiguous in k, else 0. */
#include <stdio.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "ir/einsum.h"
#include "lower/knobs.h"

typedef struct einsum_mm {
    int64_t M, N, K, batch;
    int64_t am, ak, bk, bn, om, on; /* element strides of m, k, n in A, B, the output */
    int nb;                         /* batch dims, in output order */
    int64_t bdim[KILN_MAX_RANK], ab[KILN_MAX_RANK], bb[KILN_MAX_RANK], ob[KILN_MAX_RANK];
} einsum_mm;

static bool plan(const kiln_graph *g, const kiln_node *n, einsum_mm *p)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const kiln_shape *shapes[2] = {&g->values[n->inputs[0]]->shape,
                                   &g->values[n->inputs[1]]->shape};
    kiln_einsum e;
    if (kiln_einsum_parse(kiln_attr_string(n, "equation", ""), 2, shapes, &e, NULL) != KILN_OK)
        return false;
    /* per operand: the stride of each label (0 where absent or broadcast) */
    int64_t lst[3][KILN_EINSUM_MAX_LABELS];
    bool in[3][KILN_EINSUM_MAX_LABELS];
    memset(lst, 0, sizeof lst);
    memset(in, 0, sizeof in);
    for (int k = 0; k < 2; k++) {
        int64_t st = 1;
        for (int d = e.op_rank[k] - 1; d >= 0; d--) {
            int l = e.op_label[k][d];
            if (in[k][l])
                return false; /* a diagonal */
            in[k][l] = true;
            lst[k][l] = shapes[k]->dims[d] == 1 && e.size[l] != 1 ? 0 : st;
            st *= shapes[k]->dims[d];
        }
    }
    int64_t st = 1;
    for (int i = e.out_rank - 1; i >= 0; i--) {
        int l = e.out_label[i];
        in[2][l] = true;
        lst[2][l] = st;
        st *= e.size[l];
    }
    memset(p, 0, sizeof *p);
    p->M = p->N = p->K = p->batch = 1;
    /* K: summed labels in both operands, merged innermost-first in A's order */
    bool have_k = false;
    for (int d = e.op_rank[0] - 1; d >= 0; d--) {
        int l = e.op_label[0][d];
        if (in[2][l] || e.size[l] == 1)
            continue;
        if (!in[1][l])
            return false; /* summed over A alone */
        if (!have_k) {
            p->K = e.size[l];
            p->ak = lst[0][l];
            p->bk = lst[1][l];
            have_k = true;
        } else if (lst[0][l] == p->ak * p->K && lst[1][l] == p->bk * p->K) {
            p->K *= e.size[l];
        } else {
            return false; /* K labels that do not merge */
        }
    }
    for (int l = 0; l < KILN_EINSUM_MAX_LABELS; l++)
        if (e.used[l] && !in[2][l] && !in[0][l] && e.size[l] != 1)
            return false; /* summed over B alone */
    /* M and N: the innermost output label of A only, of B only */
    int ml = -1, nl = -1;
    for (int i = e.out_rank - 1; i >= 0; i--) {
        int l = e.out_label[i];
        if (in[0][l] && !in[1][l] && ml < 0)
            ml = l;
        if (in[1][l] && !in[0][l] && nl < 0)
            nl = l;
    }
    if (ml >= 0) {
        p->M = e.size[ml];
        p->am = lst[0][ml];
        p->om = lst[2][ml];
    }
    if (nl >= 0) {
        p->N = e.size[nl];
        p->bn = lst[1][nl];
        p->on = lst[2][nl];
    }
    for (int i = 0; i < e.out_rank; i++) {
        int l = e.out_label[i];
        if (l == ml || l == nl || e.size[l] == 1)
            continue;
        p->bdim[p->nb] = e.size[l];
        p->ab[p->nb] = lst[0][l];
        p->bb[p->nb] = lst[1][l];
        p->ob[p->nb] = lst[2][l];
        p->batch *= e.size[l];
        p->nb++;
    }
    return p->M > 0 && p->N > 0 && p->K > 0 && p->batch > 0;
}

/* Workspace: N accumulators (rounded to 64 bytes), then order 2's copy of B. */
#define PACK_MAX (1 << 20)
static int64_t acc_len(const einsum_mm *p)
{
    return (p->N + 15) / 16 * 16;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    einsum_mm p;
    if (n->op != KILN_OP_EINSUM || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    for (int k = 0; k < 2; k++)
        if (!kiln_tpl_f32(g, n->inputs[k]) ||
            g->values[n->inputs[k]]->layout.kind != KILN_LAYOUT_ROW_MAJOR)
            return false;
    const kiln_value *y = g->values[n->outputs[0]];
    if (y->dtype != KILN_DTYPE_FLOAT32 || y->layout.kind != KILN_LAYOUT_ROW_MAJOR ||
        !plan(g, n, &p))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    einsum_mm p;
    plan(l->ctx->g, l->ctx->g->nodes[t->anchor], &p);
    t->flops = 2.0 * (double)p.batch * (double)p.M * (double)p.N * (double)p.K;
    kiln_knobs_rows(t, p.batch, p.M, p.N * p.K);
    bool packable = p.K * p.N * (int64_t)sizeof(float) <= PACK_MAX;
    int order = p.bn == 1 || p.N == 1     ? 0
                : packable && p.M >= 4      ? 2
                : p.ak == 1 && p.bk == 1    ? 1
                                            : 0;
    kiln_knob *k = kiln_knob_add(t, "order", KILN_KNOB_ORDER, order, -1);
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    if (packable)
        kiln_knob_choice(k, 2);
    t->workspace = (acc_len(&p) + (packable ? p.K * p.N : 0)) * (int64_t)sizeof(float);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    einsum_mm p;
    plan(g, n, &p);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int order = kiln_task_knob(t, "order", 0);
    int64_t mt = (p.M + rpt - 1) / rpt;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "/* '%s': %lld x [%lld x %lld] . [%lld x %lld] */\n"
                   "static const int64_t M_ = %lld, N_ = %lld, K_ = %lld, MT_ = %lld;\n"
                   "static const int64_t AM_ = %lld, AK_ = %lld, BK_ = %lld, BN_ = %lld, "
                   "OM_ = %lld, ON_ = %lld;\n"
                   "enum { RPT_ = %d };\n\n",
                   kiln_attr_string(n, "equation", ""), (long long)p.batch, (long long)p.M,
                   (long long)p.K, (long long)p.K, (long long)p.N, (long long)p.M,
                   (long long)p.N, (long long)p.K, (long long)mt, (long long)p.am,
                   (long long)p.ak, (long long)p.bk, (long long)p.bn, (long long)p.om,
                   (long long)p.on, rpt);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    const float *A = a%d, *B = a%d;\n"
                   "    float *acc = (float *)" KILN_TASK_WS ";\n"
                   "    float *bpk = acc + %lld; /* order 2: B, K x N */\n"
                   "    int64_t packed = -1;     /* the B offset bpk holds */\n"
                   "    (void)bpk;\n"
                   "    (void)packed;\n"
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        const int64_t bt = task / MT_, m0 = (task %% MT_) * RPT_;\n"
                   "        int64_t aoff = 0, boff = 0, ooff = 0, q = bt;\n"
                   "        (void)q;\n",
                   kiln_task_arg(t, n->inputs[0]), kiln_task_arg(t, n->inputs[1]),
                   (long long)acc_len(&p));
    for (int i = p.nb - 1; i >= 0; i--) {
        kiln_sb_printf(b, "        { const int64_t c = q %% %lld; q /= %lld;", (long long)p.bdim[i],
                       (long long)p.bdim[i]);
        if (p.ab[i])
            kiln_sb_printf(b, " aoff += c * %lld;", (long long)p.ab[i]);
        if (p.bb[i])
            kiln_sb_printf(b, " boff += c * %lld;", (long long)p.bb[i]);
        kiln_sb_printf(b, " ooff += c * %lld; }\n", (long long)p.ob[i]);
    }
    if (order == 2)
        kiln_sb_puts(b, "        if (boff != packed) {\n"
                        "            for (int64_t j = 0; j < N_; j++)\n"
                        "                for (int64_t k = 0; k < K_; k++)\n"
                        "                    bpk[k * N_ + j] = B[boff + k * BK_ + j * BN_];\n"
                        "            packed = boff;\n"
                        "        }\n");
    kiln_sb_puts(b, "        const int64_t m1 = KILN_MIN_(M_, m0 + RPT_);\n"
                    "        for (int64_t m = m0; m < m1; m++) {\n"
                    "            const float *ar = A + aoff + m * AM_;\n"
                    "            const float *br = B + boff;\n"
                    "            (void)br;\n");
    if (order == 0 || order == 2)
        kiln_sb_printf(b, "            for (int64_t j = 0; j < N_; j++)\n"
                          "                acc[j] = 0.0f;\n"
                          "            for (int64_t k = 0; k < K_; k++) {\n"
                          "                const float av = ar[k * AK_];\n"
                          "                const float *bk = %s;\n"
                          "                for (int64_t j = 0; j < N_; j++)\n"
                          "                    acc[j] += av * bk[j * %s];\n"
                          "            }\n",
                       order == 2 ? "bpk + k * N_" : "br + k * BK_", order == 2 ? "1" : "BN_");
    else
        kiln_sb_puts(b, "            for (int64_t j = 0; j < N_; j++) {\n"
                        "                const float *bj = br + j * BN_;\n"
                        "                float s[8] = {0};\n"
                        "                int64_t k = 0;\n"
                        "                for (; k + 8 <= K_; k += 8)\n"
                        "                    for (int u = 0; u < 8; u++)\n"
                        "                        s[u] += ar[(k + u) * AK_] * bj[(k + u) * BK_];\n"
                        "                float r = 0.0f;\n"
                        "                for (; k < K_; k++)\n"
                        "                    r += ar[k * AK_] * bj[k * BK_];\n"
                        "                acc[j] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + "
                        "(s[6] + s[7])) + r;\n"
                        "            }\n");
    kiln_sb_puts(b, "            float *orow = o0 + ooff + m * OM_;\n"
                    "            for (int64_t j = 0; j < N_; j++) {\n"
                    "                float v = acc[j];\n");
    if (kiln_task_has_epilogue(l, t)) {
        kiln_sb_puts(b, "                const int64_t idx = ooff + m * OM_ + j * ON_;\n"
                        "                (void)idx;\n");
        kiln_emit_epilogue(b, l, t, "v", "idx");
    }
    kiln_sb_puts(b, "                orow[j * ON_] = v;\n            }\n        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(p.batch * mt));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_einsum = {
    .name = "einsum",
    .match = match,
    .space = space,
    .emit = emit,
};
