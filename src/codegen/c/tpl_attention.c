/* codegen/c/tpl_attention.c: Attention (ir/attention.h) as one kernel per
 * (batch, head, block of `rows_per_task` query rows).
 *
 * A task first packs K^T of its (batch, head) into the thread's workspace,
 * [D][Sk rounded up to 16] (zero past Sk; kept across consecutive tasks of
 * the same head). The scores of all the task's rows (Sk <= 4096: they stay
 * in L1/L2), scale * q . k_j, are rank-1 updates along D into blocks of
 * ATTN_R (4) rows x 64 columns of registers, each K^T vector loaded serving
 * the 4 rows; 64-key blocks are the outer loop and the row blocks the inner
 * one, so a block of K^T stays in L1 for every row; a last block of 1-3
 * vectors covers the keys past the whole 64s. Then per row: + the mask, max
 * and sum in 16 partial lanes, exp by kiln_kernels_math.h's vectorizable
 * kiln_m_expf. Then P V: per 64 output columns, blocks of ATTN_JB V rows
 * outer (kept in L1 while every row block reads them) and row blocks inner,
 * 4 rows x 64 floats in registers, partial sums kept in the workspace
 * between V blocks, scaled by 1/sum at the last. Rows past the task's last
 * one (up to a whole block of 4) repeat it and store nothing. Q, K, V, mask
 * and output are read and written through the strides the op's perms give
 * (compile-time constants): the head split/merge transposes of the exported
 * graph are never materialised. P V's register blocks read V rows and write
 * output rows of contiguous floats: a V whose rows are strided (channel-
 * major, as a diffusion UNet's attention over [C, HW] gives it) is packed
 * per head into the workspace next to K^T, and strided output rows are
 * staged there and stored column by column after the task's P V. Before,
 * such heads ran a scalar loop, 7x slower.
 *
 * "64 columns" is the AVX-512 block: 4 vectors of 16, 16 accumulators for
 * 4 rows. With AVX2 (and generic) a block is 2 vectors of 8, 16 columns:
 * 8 of the 16 ymm registers (4 x 4 ymm spilled on every FMA); see
 * block_of. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "ir/attention.h"
#include "lower/knobs.h"

#define MAX_SK KILN_ATTN_MAX_SK
#define MAX_KT KILN_ATTN_MAX_KT /* K^T of one head in the workspace: at most 4 MiB */
/* query rows per register block: 4 x 64 scores (or 4 x 64 outputs) are 16
 * AVX-512 accumulators (4 x 16 are 8 AVX2 ones), and each K^T (V) vector
 * loaded serves 4 rows */
#define ATTN_R 4
/* V rows per block of the P V product: 64 rows x 64 columns (16 KiB) stay in
 * L1 while every row block of the task reads them */
#define ATTN_JB 64

static bool geom(const kiln_graph *g, const kiln_node *n, kiln_attn_geom *a)
{
    const kiln_value *m = n->n_inputs > 3 && n->inputs[3] >= 0 ? g->values[n->inputs[3]] : NULL;
    kiln_error e = {0};
    return kiln_attn_geom_of(n, &g->values[n->inputs[0]]->shape, &g->values[n->inputs[1]]->shape,
                             &g->values[n->inputs[2]]->shape, m ? &m->shape : NULL, a,
                             &e) == KILN_OK;
}

/* Sk rounded up to a 16-column vector: whole 64-column score blocks, then a
 * tail block of one to three vectors (Sk = 197: 208 columns computed, where
 * whole 64-column blocks computed 256). */
static int64_t sk_padded(const kiln_attn_geom *a)
{
    return (a->Sk + 15) / 16 * 16;
}

/* The register block's vectors: vw floats each (the target's vector
 * width: 16 AVX-512, 8 AVX2 and generic), nv of them per row (4 x 16 or
 * 2 x 8), so that R_ x nv accumulators, nv loaded vectors and a broadcast
 * fit the register file. */
typedef struct attn_block {
    int vw, nv;
} attn_block;

static attn_block block_of(const kiln_target *tg)
{
    return tg->vec >= 16 ? (attn_block){16, 4} : (attn_block){8, 2};
}

/* the task's rows rounded up to whole R_ blocks (the score rows kept) */
static int rows_blocked(int rpt)
{
    return (rpt + ATTN_R - 1) / ATTN_R * ATTN_R;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_attn_geom a;
    if (n->op != KILN_OP_ATTENTION || !kiln_tpl_row_major_in(g, n) || !geom(g, n, &a) ||
        a.Sk > MAX_SK || a.Sk < 1 || a.D < 1 || a.D * sk_padded(&a) > MAX_KT ||
        (a.vs[3] != 1 && a.Sk * a.Dv > MAX_KT))
        return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !kiln_tpl_f32(g, n->inputs[k]))
            return false;
    *epi = KILN_EPI_KIND_NONE;
    return true;
}

/* The sequence length at run time (codegen.h, KILN_RT_ROWS): in a
 * shapes_bound graph (a VM specialization), self-attention (Sq = Sk)
 * takes Sq = Sk from kiln_rt.extent. Its source then holds the batch, the
 * heads, D, the knobs and the strides (a batch of 1's batch strides
 * written as 0, a larger batch's through emit_strides): an exported
 * transformer's head split reads rows of H x D floats whatever the
 * length, so the same layer at any length (and the same batch) is one
 * kernel. A stride that holds the length (a [B, H, S, D] operand's head
 * or batch stride, a causal mask's row stride) is written as a multiple
 * of SQ_ (emit_strides). */
static bool rt_len(const kiln_lowered *l, const kiln_attn_geom *a)
{
    return l->ctx->shapes_bound && a->Sq == a->Sk && a->Sq > 0;
}

/* The keys' count at run time: in a shapes_bound graph, attention with as
 * many queries at every step and a key count that grows (a decoder's step
 * over a KV cache: Sq new tokens, Sk = past + Sq) takes Sk from
 * kiln_rt.extent; Sq stays in the source. A stride that holds Sk (K's and
 * V's head stride, a mask's row stride) is written as a multiple of SK_, so
 * every past length is one kernel. */
static bool rt_keys(const kiln_lowered *l, const kiln_attn_geom *a)
{
    return l->ctx->shapes_bound && a->Sq != a->Sk && a->Sk > 0 && a->Sq > 0;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_attn_geom a;
    geom(l->ctx->g, l->ctx->g->nodes[t->anchor], &a);
    t->flops = 2.0 * a.B * a.H * a.Sq * a.Sk * (a.D + a.Dv);
    /* rows per task: enough to amortize packing K^T (Sk x D) over them, while
     * leaving >= 8 tasks to share */
    /* self-attention of one sequence in a shapes_bound graph: its length
     * at run time (see rt_len) */
    const bool rt = rt_len(l, &a);
    if (rt)
        t->extent = a.Sq;
    else if (rt_keys(l, &a))
        t->extent = a.Sk;
    const int64_t sq = rt ? KILN_RT_ROWS : a.Sq;
    int rpt = sq >= ATTN_R ? ATTN_R : 1;
    while (rpt * 2 <= sq && rpt < 32 && a.B * a.H * ((sq + rpt * 2 - 1) / (rpt * 2)) >= 8)
        rpt *= 2;
    kiln_knob *k = kiln_knob_add(t, "rows_per_task", KILN_KNOB_TILE, rpt, -1);
    kiln_knob_pow2(k, (int)(a.Sq < 64 ? a.Sq : 64), false);
    /* the workspace is sized for the largest rows_per_task the knob allows
     * (a tuned config may pick it) */
    int rmax = rows_blocked(a.Sq < 64 ? (int)a.Sq : 64);
    if (rmax < rows_blocked(rpt))
        rmax = rows_blocked(rpt);
    /* + V of the head packed row-major when its rows are strided, + the
     * task's output rows staged when the output's are */
    int64_t vpack = a.vs[3] != 1 ? a.Sk * a.Dv : 0, ostage = a.os[3] != 1 ? rmax * a.Dv : 0;
    t->workspace = ((a.D + rmax) * sk_padded(&a) + (int64_t)rmax * 64 + vpack + ostage) *
                   (int64_t)sizeof(float);
    return KILN_OK;
}

/* The scores of R_ rows x nv vw-column vectors (nv a literal, 1..4) at
 * column j0, over D: per c, nv K^T vectors shared by the R_ broadcasts. */
static void emit_score_block(kiln_sb *b, int nv, int vw)
{
    kiln_sb_printf(b, "                {\n"
                      "                    kv%d_ acc_[R_][%d];\n"
                      "                    for (int r = 0; r < R_; r++)\n"
                      "                        for (int v = 0; v < %d; v++)\n"
                      "                            acc_[r][v] = (kv%d_){0};\n"
                      "                    for (int64_t c = 0; c < D_; c++) {\n"
                      "                        const float *kc = kt + c * SKP_ + j0;\n"
                      "                        kv%d_ kv_[%d];\n"
                      "                        for (int v = 0; v < %d; v++)\n"
                      "                            kv_[v] = *(const kv%du_ *)(kc + %d * v);\n"
                      "                        for (int r = 0; r < R_; r++) {\n"
                      "                            const kv%d_ qc = (kv%d_){0} + qr[r][c * QS3];\n"
                      "                            for (int v = 0; v < %d; v++)\n"
                      "                                acc_[r][v] += qc * kv_[v];\n"
                      "                        }\n"
                      "                    }\n"
                      "                    for (int r = 0; r < R_; r++)\n"
                      "                        for (int v = 0; v < %d; v++)\n"
                      "                            *(kv%du_ *)(s_ + (ib - i0 + r) * SKP_ + j0 + %d * v) =\n"
                      "                                acc_[r][v] * SCALE_;\n"
                      "                }\n",
                   vw, nv, nv, vw, vw, nv, nv, vw, vw, vw, vw, nv, nv, vw, vw);
}

/* P V for the output columns in whole blocks of nv vw-float vectors (V
 * rows and output rows contiguous): per block of columns, blocks of JB_ V
 * rows outer (JB_ x the block's floats of V stay in L1 for all the task's
 * rows), row blocks inner; partial sums in pv_. The accumulators are
 * a0..a{nv-1}, one vector each per row of the R_ block. */
static void emit_pv_blocks(kiln_sb *b, int nv, int vw)
{
    const int bw = nv * vw;
    kiln_sb_printf(b,
                   "        for (; c0 + %d <= DV_; c0 += %d) {\n"
                   "            for (int64_t j0 = 0; j0 < SK_; j0 += JB_) {\n"
                   "                const int64_t j1 = KILN_MIN_((int64_t)SK_, j0 + JB_);\n"
                   "                for (int64_t ib = i0; ib < i1; ib += R_) {\n"
                   "                    const int nr = (int)KILN_MIN_((int64_t)R_, i1 - ib);\n"
                   "                    float *pr = pv_ + (ib - i0) * %d;\n"
                   "                    kv%d_ ",
                   bw, bw, bw, vw);
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "a%d[R_]%s", v, v + 1 < nv ? ", " : ";\n");
    kiln_sb_puts(b, "                    for (int r = 0; r < R_; r++) {\n"
                    "                        if (j0 == 0) {\n"
                    "                            ");
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "a%d[r] = ", v);
    kiln_sb_printf(b, "(kv%d_){0};\n"
                      "                        } else {\n", vw);
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "                            a%d[r] = *(const kv%du_ *)(pr + r * %d + %d);\n",
                       v, vw, bw, v * vw);
    kiln_sb_puts(b, "                        }\n"
                    "                    }\n"
                    "                    const float *srow = s_ + (ib - i0) * SKP_;\n"
                    "                    for (int64_t jj = j0; jj < j1; jj++) {\n"
                    "                        const float *vj = vq + jj * VQ2_ + c0;\n");
    for (int v = 0; v < nv; v += 2) {
        kiln_sb_printf(b, "                        const kv%d_ v%d = *(const kv%du_ *)(vj + %d)", vw, v,
                       vw, v * vw);
        if (v + 1 < nv)
            kiln_sb_printf(b, ", v%d = *(const kv%du_ *)(vj + %d)", v + 1, vw, (v + 1) * vw);
        kiln_sb_puts(b, ";\n");
    }
    kiln_sb_printf(b, "                        for (int r = 0; r < R_; r++) {\n"
                      "                            const kv%d_ pj = (kv%d_){0} + srow[r * SKP_ + jj];\n",
                   vw, vw);
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "                            a%d[r] += pj * v%d;\n", v, v);
    kiln_sb_puts(b, "                        }\n"
                    "                    }\n"
                    "                    if (j1 < SK_) {\n"
                    "                        for (int r = 0; r < R_; r++) {\n");
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "                            *(kv%du_ *)(pr + r * %d + %d) = a%d[r];\n", vw,
                       bw, v * vw, v);
    kiln_sb_puts(b, "                        }\n"
                    "                        continue;\n"
                    "                    }\n"
                    "                    for (int r = 0; r < nr; r++) {\n"
                    "                        const float iv = inv_[ib - i0 + r];\n"
                    "                        float *oi = oq + (ib + r) * OQ2_ + c0;\n");
    for (int v = 0; v < nv; v++)
        kiln_sb_printf(b, "                        *(kv%du_ *)(oi + %d) = a%d[r] * iv;\n", vw, v * vw, v);
    kiln_sb_puts(b, "                    }\n"
                    "                }\n"
                    "            }\n"
                    "        }\n");
}

/* #define <name>0..3: an operand's element strides of the logical dims
 * [B, H, S, D] (the mask's: [B, H, Sq, Sk]). With the length S at run time
 * (rt, S > 1), a stride holding the length, because a length dim (`len`: a
 * bit per logical dim) lies physically inside it (a smaller, non-zero
 * stride), is written as its coefficient times SQ_ once per such dim: a
 * [B, H, S, D] operand's head stride S x D, a causal mask's row stride.
 * The coefficient times S to that power is the stride exactly, so the
 * kernel is right at this class's length whichever classes share its
 * source. */
static void emit_strides(kiln_sb *b, const char *name, const int64_t st[4], int64_t S, bool rt,
                         unsigned len, const char *sv)
{
    for (int x = 0; x < 4; x++) {
        int64_t coef = st[x];
        int n_len = 0;
        for (int d = 0; rt && S > 1 && d < 4; d++)
            if (d != x && (len >> d & 1u) && st[d] > 0 && st[d] < st[x] && coef % S == 0) {
                coef /= S;
                n_len++;
            }
        kiln_sb_printf(b, "#define %s%d ", name, x);
        if (!n_len) {
            kiln_sb_printf(b, "%lldll\n", (long long)st[x]);
            continue;
        }
        kiln_sb_printf(b, "(%lldll", (long long)coef);
        for (int k = 0; k < n_len; k++)
            kiln_sb_printf(b, " * %s", sv);
        kiln_sb_puts(b, ")\n");
    }
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_attn_geom a;
    geom(g, n, &a);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t mt = (a.Sq + rpt - 1) / rpt;
    /* at run time: Sq = Sk (rt_len), or Sk alone (keys, rt_keys) */
    const bool rt = t->extent > 0, keys = rt && a.Sq != a.Sk;
    if (rt && a.B == 1) /* the batch strides are never multiplied by anything but 0 */
        a.qs[0] = a.ks[0] = a.vs[0] = a.os[0] = a.ms[0] = 0;
    int qa = kiln_task_arg(t, n->inputs[0]), ka = kiln_task_arg(t, n->inputs[1]);
    int va = kiln_task_arg(t, n->inputs[2]);
    int ma = a.has_mask ? kiln_task_arg(t, n->inputs[3]) : -1;
    const int64_t skp = sk_padded(&a);
    const attn_block blk = block_of(&l->ctx->target);
    const int bw = blk.nv * blk.vw;
    const int tail_nv = (int)(skp % bw / blk.vw); /* vectors past the last whole block */
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { H_ = %lld, D_ = %lld, DV_ = %lld, RPT_ = %d, RB_ = %d, R_ = %d, "
                   "JB_ = %d };\n",
                   (long long)a.H, (long long)a.D, (long long)a.Dv, rpt, rows_blocked(rpt),
                   ATTN_R, ATTN_JB);
    if (!rt)
        kiln_sb_printf(b, "enum { SQ_ = %lld, SK_ = %lld, SKP_ = %lld, MT_ = %lld };\n",
                       (long long)a.Sq, (long long)a.Sk, (long long)skp, (long long)mt);
    else if (keys)
        kiln_sb_printf(b, "enum { SQ_ = %lld, MT_ = %lld };\n", (long long)a.Sq, (long long)mt);
    if (keys) { /* the dims of Sk: K's and V's rows, the mask's columns */
        emit_strides(b, "QS", a.qs, a.Sk, false, 0, "SK_");
        emit_strides(b, "KS", a.ks, a.Sk, true, 1u << 2, "SK_");
        emit_strides(b, "VS", a.vs, a.Sk, true, 1u << 2, "SK_");
        emit_strides(b, "OS", a.os, a.Sk, false, 0, "SK_");
        emit_strides(b, "MS", a.ms, a.Sk, true, 1u << 3, "SK_");
    } else {
        emit_strides(b, "QS", a.qs, a.Sq, rt, 1u << 2, "SQ_");
        emit_strides(b, "KS", a.ks, a.Sq, rt, 1u << 2, "SQ_");
        emit_strides(b, "VS", a.vs, a.Sq, rt, 1u << 2, "SQ_");
        emit_strides(b, "OS", a.os, a.Sq, rt, 1u << 2, "SQ_");
        emit_strides(b, "MS", a.ms, a.Sq, rt, 1u << 2 | 1u << 3, "SQ_");
    }
    /* V and output as the P V loops read and write them: rows of DV_
     * contiguous floats, packed (V) or staged (output) when strided (a
     * diffusion UNet's [C, HW] attention: V and output channel-major) */
    bool pack_v = a.vs[3] != 1, stage_o = a.os[3] != 1;
    kiln_sb_printf(b, "#define VQ2_ %s\n#define VQ3_ %s\n#define OQ2_ %s\n#define OQ3_ %s\n",
                   pack_v ? "DV_" : "VS2", pack_v ? "1" : "VS3", stage_o ? "DV_" : "OS2",
                   stage_o ? "1" : "OS3");
    /* a hex float: exact, and a valid literal for every value (1 printed
     * by %g as "1f" is not) */
    kiln_sb_printf(b, "#define SCALE_ %af\n", (double)a.scale);
    /* vw-float vectors (gcc's vector extension: zmm with AVX-512, ymm with
     * AVX2, pairs of xmm otherwise); the u form loads unaligned */
    kiln_sb_printf(b, "typedef float kv%d_ __attribute__((vector_size(%d)));\n"
                      "typedef float kv%du_ __attribute__((vector_size(%d), aligned(4), may_alias));\n\n",
                   blk.vw, 4 * blk.vw, blk.vw, 4 * blk.vw);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (keys)
        kiln_sb_puts(b, "    const int64_t SK_ = " KILN_RT_EXTENT ", SKP_ = (SK_ + 15) / 16 * 16;\n");
    else if (rt)
        kiln_sb_puts(b, "    const int64_t SQ_ = " KILN_RT_EXTENT ", SK_ = SQ_, SKP_ = (SK_ + 15) / 16 * 16,\n"
                        "                  MT_ = (SQ_ + RPT_ - 1) / RPT_;\n");
    /* workspace: K^T of the current (batch, head) [D][SKP] (zero past Sk),
     * the scores of the task's rows [RB_][SKP], the partial sums of P V for
     * one 64-column block of the output [RB_][64]. Rows past the task's last
     * one (up to a whole R_ block) repeat that row (computed, not stored), so
     * every block runs the one register-blocked path. */
    kiln_sb_printf(b,
                   "    float *kt = (float *)" KILN_TASK_WS ";\n"
                   "    float *s_ = kt + (int64_t)D_ * SKP_;\n"
                   "    float *pv_ = s_ + (int64_t)RB_ * SKP_;\n"
                   "    (void)pv_;\n"
                   "    float *vp_ = pv_ + (int64_t)RB_ * 64;\n"
                   "    float *ot_ = vp_ + %s;\n"
                   "    (void)vp_, (void)ot_;\n"
                   "    int64_t packed = -1;\n"
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        const int64_t bh = task / MT_, i0 = (task %% MT_) * RPT_;\n"
                   "        const int64_t bb = bh / H_, hh = bh %% H_;\n"
                   "        const int64_t i1 = KILN_MIN_((int64_t)SQ_, i0 + RPT_);\n"
                   "        const float *kb = a%d + bb * KS0 + hh * KS1;\n"
                   "        const float *vb = a%d + bb * VS0 + hh * VS1;\n"
                   "        const float *vq = %s;\n"
                   "        float *oq = %s;\n"
                   "        float inv_[RB_];\n"
                   "        if (packed != bh) {\n"
                   /* in blocks of 16 keys: the 16 rows of K stay in L1 while
                    * each c writes 16 contiguous floats of K^T */
                   "            for (int64_t j0 = 0; j0 < SK_; j0 += 16) {\n"
                   "                const int64_t jn = KILN_MIN_((int64_t)SK_ - j0, (int64_t)16);\n"
                   "                for (int64_t c = 0; c < D_; c++)\n"
                   "                    for (int64_t j = 0; j < jn; j++)\n"
                   "                        kt[c * SKP_ + j0 + j] = kb[(j0 + j) * KS2 + c * KS3];\n"
                   "            }\n"
                   "            for (int64_t c = 0; c < D_; c++)\n"
                   "                for (int64_t j = SK_; j < SKP_; j++)\n"
                   "                    kt[c * SKP_ + j] = 0.0f;\n"
                   "%s"
                   "            packed = bh;\n"
                   "        }\n"
                   /* scores: column blocks outer, the task's row blocks inner,
                    * so a block of K^T (D x 64) stays in L1 for all the rows */
                   "        for (int64_t j0 = 0; j0 < SKP_; j0 += %d) {\n"
                   "            for (int64_t ib = i0; ib < i1; ib += R_) {\n"
                   "                const int nr = (int)KILN_MIN_((int64_t)R_, i1 - ib);\n"
                   "                const float *qr[R_];\n"
                   "                for (int r = 0; r < R_; r++)\n"
                   "                    qr[r] = a%d + bb * QS0 + hh * QS1 + (ib + (r < nr ? r : nr - 1)) * QS2;\n"
                   "                if (j0 + %d <= SKP_)\n",
                   pack_v ? "(int64_t)SK_ * DV_" : "0", ka, va, pack_v ? "vp_" : "vb",
                   stage_o ? "ot_ - i0 * (int64_t)DV_" : "o0 + bb * OS0 + hh * OS1",
                   pack_v ? /* V's rows, in blocks of 16 keys as K^T's */
                       "            for (int64_t j0 = 0; j0 < SK_; j0 += 16) {\n"
                       "                const int64_t jn = KILN_MIN_((int64_t)SK_ - j0, (int64_t)16);\n"
                       "                for (int64_t c = 0; c < DV_; c++)\n"
                       "                    for (int64_t j = 0; j < jn; j++)\n"
                       "                        vp_[(j0 + j) * DV_ + c] = vb[(j0 + j) * VS2 + c * VS3];\n"
                       "            }\n"
                          : "",
                   bw, qa, bw);
    emit_score_block(b, blk.nv, blk.vw);
    if (rt) { /* the tail block's vectors follow SKP_: every width */
        for (int nv = 1; nv < blk.nv; nv++) {
            kiln_sb_printf(b, "                else if (SKP_ - j0 == %d)\n", nv * blk.vw);
            emit_score_block(b, nv, blk.vw);
        }
    } else if (tail_nv > 0 && tail_nv < blk.nv) {
        kiln_sb_puts(b, "                else\n");
        emit_score_block(b, tail_nv, blk.vw);
    }
    kiln_sb_puts(b, "            }\n"
                    "        }\n"
                    "        for (int64_t i = i0; i < i1; i++) {\n"
                    "            float *sr = s_ + (i - i0) * SKP_;\n");
    if (ma >= 0)
        kiln_sb_printf(b,
                       "            {\n"
                       "                const float *mi = a%d + bb * MS0 + hh * MS1 + i * MS2;\n"
                       "                for (int64_t j = 0; j < SK_; j++)\n"
                       "                    sr[j] += mi[j * MS3];\n"
                       "            }\n",
                       ma);
    kiln_sb_puts(b, "            float m16[16];\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                m16[u] = -INFINITY;\n"
                    "            int64_t j = 0;\n"
                    "            for (; j + 16 <= SK_; j += 16)\n"
                    "                for (int u = 0; u < 16; u++)\n"
                    "                    m16[u] = sr[j + u] > m16[u] ? sr[j + u] : m16[u];\n"
                    "            float mx = -INFINITY;\n"
                    "            for (; j < SK_; j++)\n"
                    "                mx = sr[j] > mx ? sr[j] : mx;\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                mx = m16[u] > mx ? m16[u] : mx;\n"
                    "            float z16[16] = {0};\n"
                    "            for (j = 0; j + 16 <= SK_; j += 16)\n"
                    "                for (int u = 0; u < 16; u++) {\n"
                    "                    const float e = kiln_m_expf_nonpos(sr[j + u] - mx);\n"
                    "                    sr[j + u] = e;\n"
                    "                    z16[u] += e;\n"
                    "                }\n"
                    "            float sum = 0.0f;\n"
                    "            for (; j < SK_; j++) {\n"
                    "                sr[j] = kiln_m_expf_nonpos(sr[j] - mx);\n"
                    "                sum += sr[j];\n"
                    "            }\n"
                    "            for (int u = 0; u < 16; u++)\n"
                    "                sum += z16[u];\n"
                    "            inv_[i - i0] = 1.0f / sum;\n"
                    "        }\n"
                    "        for (int64_t i = i1; i < i0 + RB_; i++) /* the repeated rows' */\n"
                    "            inv_[i - i0] = inv_[i1 - 1 - i0];\n"
                    "        int64_t c0 = 0;\n");
    emit_pv_blocks(b, blk.nv, blk.vw); /* V and output rows contiguous (VQ3_, OQ3_ 1) */
    kiln_sb_puts(b, "        for (; c0 < DV_; c0 += 64) {\n"
                    "            const int64_t cn = KILN_MIN_((int64_t)DV_ - c0, (int64_t)64);\n"
                    "            for (int64_t i = i0; i < i1; i++) {\n"
                    "                const float *sr = s_ + (i - i0) * SKP_;\n"
                    "                float *oi = oq + i * OQ2_;\n"
                    "                float acc[64] = {0};\n"
                    "                for (int64_t jj = 0; jj < SK_; jj++) {\n"
                    "                    const float pj = sr[jj], *vj = vq + jj * VQ2_ + c0 * VQ3_;\n"
                    "                    for (int64_t u = 0; u < cn; u++)\n"
                    "                        acc[u] += pj * vj[u * VQ3_];\n"
                    "                }\n"
                    "                for (int64_t u = 0; u < cn; u++)\n"
                    "                    oi[(c0 + u) * OQ3_] = acc[u] * inv_[i - i0];\n"
                    "            }\n"
                    "        }\n");
    if (stage_o) /* the staged rows to the strided output, columns outer: a
                  * channel-major output is written along its rows */
        kiln_sb_puts(b, "        for (int64_t c = 0; c < DV_; c++)\n"
                        "            for (int64_t i = i0; i < i1; i++)\n"
                        "                o0[bb * OS0 + hh * OS1 + i * OS2 + c * OS3] = ot_[(i - i0) * DV_ + c];\n");
    kiln_sb_puts(b, "    }\n"
                    "}\n");
    char nt[96];
    if (keys) /* the tasks follow the queries: in the source */
        snprintf(nt, sizeof nt, "%lld", (long long)(a.B * a.H * mt));
    else if (rt && a.B == 1)
        snprintf(nt, sizeof nt, "H_ * ((rt->extent + RPT_ - 1) / RPT_)");
    else if (rt) /* the batch stays in the source: one kernel per batch size */
        snprintf(nt, sizeof nt, "%lld * H_ * ((rt->extent + RPT_ - 1) / RPT_)", (long long)a.B);
    else
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
