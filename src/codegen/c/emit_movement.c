/* codegen/c/emit_movement.c: elementwise groups and data movement.
 *
 * elemwise: one loop over the output's storage elements in chunks of
 *   `chunk`; each element evaluates the group's expression DAG (operands
 *   broadcast as described in emit_common.c). Vectorizes for the common
 *   same-shape and scalar operands.
 * strided: Transpose, Slice, Gather with a scalar index, Expand: the output
 *   walked row by row, each element read at base + sum(coord_d * stride_d) of
 *   the input (strides 0 broadcast, negative steps allowed); any dtype.
 * copy: Reshape/Flatten/Identity that could not be a view: memcpy in chunks.
 * concat / split: per (outer index, piece) one contiguous memcpy of the
 *   piece's slab along the axis (blocked layouts concatenate channel blocks).
 * layout_transform: NCHW{a}c -> NCHW{b}c (1 = plain NCHW), zero filling
 *   padded channels. */
#include <stdio.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "ir/infer_nn.h"
#include "lower/geom.h"
#include "ref/ref.h"

static const char *elem_type(size_t esz)
{
    switch (esz) {
    case 1:
        return "uint8_t";
    case 2:
        return "uint16_t";
    case 8:
        return "uint64_t";
    default:
        return "uint32_t";
    }
}

/* Whether a row-major elementwise group reads a per-channel operand (a
 * [C, 1, ..] broadcast) over planes long enough to loop over. */
static bool channel_planes(const kiln_lowered *l, const kiln_task *t, const kiln_value *y)
{
    if (y->layout.kind == KILN_LAYOUT_NCHWC || y->shape.rank < 3)
        return false;
    int64_t inner = 1;
    for (int d = 2; d < y->shape.rank; d++)
        inner *= y->shape.dims[d];
    if (inner < 16)
        return false;
    for (int a = 0; a < t->n_in; a++) {
        const kiln_value *v = l->ctx->g->values[t->arg_values[a]];
        if (!kiln_shape_equal(&v->shape, &y->shape) &&
            kiln_epilogue_bcast_kind(&v->shape, &y->shape, y->layout) == 2)
            return true;
    }
    return false;
}

kiln_status kiln_emit_elemwise(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    const kiln_value *y = g->values[gr->outputs[0]];
    int64_t total = kiln_layout_nbytes(y->dtype, &y->shape, y->layout) / 4;
    int chunk = kiln_task_knob(t, "chunk", 16384);
    const bool rt = t->extent > 0; /* the element count at run time (tpl_elemwise.c) */
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "enum { CHUNK_ = %d };\n", chunk);
    if (!rt)
        kiln_sb_printf(b, "static const int64_t TOTAL_ = %lld;\n", (long long)total);
    kiln_sb_puts(b, "\n" KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (rt)
        kiln_sb_puts(b, "    const int64_t TOTAL_ = " KILN_RT_EXTENT ";\n");
    kiln_sb_puts(b, "    int64_t hi = KILN_MIN_(end_ * CHUNK_, TOTAL_);\n");
    int64_t bb = y->layout.kind == KILN_LAYOUT_NCHWC ? y->layout.block_a : 0;
    if (bb > 1 && chunk % bb == 0 && y->shape.rank >= 2) {
        /* blocked: a loop over the lanes of each pixel's block, which knows
         * the channel (per-channel operands read contiguously, vectorized) */
        int64_t inner = 1;
        for (int d = 2; d < y->shape.rank; d++)
            inner *= y->shape.dims[d];
        int64_t cb = (y->shape.dims[1] + bb - 1) / bb;
        kiln_sb_printf(b,
                       "    for (int64_t j_ = begin_ * CHUNK_ / %lld; j_ < hi / %lld; j_++) {\n"
                       "        const int64_t c0_ = j_ / %lld %% %lld * %lld;\n"
                       "        (void)c0_;\n"
                       /* in place at most at the same index; kept a loop (not
                        * unrolled into 16 statements gcc then leaves scalar) */
                       "#pragma GCC ivdep\n#pragma GCC unroll 1\n"
                       "        for (int64_t l_ = 0; l_ < %lld; l_++) {\n"
                       "        const int64_t i = j_ * %lld + l_;\n"
                       "        float v = 0.0f;\n",
                       (long long)bb, (long long)bb, (long long)inner, (long long)cb, (long long)bb,
                       (long long)bb, (long long)bb);
        kiln_emit_epilogue_ch(b, l, t, "v", "i", "c0_ + l_");
        kiln_sb_puts(b, "        o0[i] = v;\n        }\n    }\n}\n");
    } else if (channel_planes(l, t, y)) {
        /* row-major with a per-channel operand (GroupNorm's exported affine,
         * [C, 1, 1]): a loop per channel plane, so the operand is read at
         * the plane's channel, not at (i / inner % C) per element, which kept
         * the loop scalar */
        int64_t inner = 1;
        for (int d = 2; d < y->shape.rank; d++)
            inner *= y->shape.dims[d];
        kiln_sb_printf(b,
                       "    for (int64_t i = begin_ * CHUNK_; i < hi;) {\n"
                       "        const int64_t ch_ = i / %lld %% %lld;\n"
                       "        const int64_t pe_ = KILN_MIN_((i / %lld + 1) * %lld, hi);\n"
                       "        for (; i < pe_; i++) {\n"
                       "        float v = 0.0f;\n",
                       (long long)inner, (long long)y->shape.dims[1], (long long)inner,
                       (long long)inner);
        kiln_emit_epilogue_ch(b, l, t, "v", "i", "ch_");
        kiln_sb_puts(b, "        o0[i] = v;\n        }\n    }\n}\n");
    } else {
        kiln_sb_puts(b, "    for (int64_t i = begin_ * CHUNK_; i < hi; i++) {\n"
                        "        float v = 0.0f;\n");
        kiln_emit_epilogue(b, l, t, "v", "i");
        kiln_sb_puts(b, "        o0[i] = v;\n    }\n}\n");
    }
    kiln_emit_entry_rows(b, t, total, "CHUNK_", chunk);
    return KILN_OK;
}

/* A strided copy: the output's dims, and along each the input axis it reads
 * (-1: none, stride 0) times `mul` (a slice's step); the first element is
 * at sum_a at[a] * (the input's stride along a). */
typedef struct strided {
    int rank;
    int64_t dims[KILN_MAX_RANK];
    int axis[KILN_MAX_RANK];
    int64_t mul[KILN_MAX_RANK];
    int64_t at[KILN_MAX_RANK];
    /* at[a] was given from the end (a negative start or index, unclamped):
     * at[a] = the input's dim a + end[a] (end[a] < 0) */
    int64_t end[KILN_MAX_RANK];
} strided;

static bool strided_of(const kiln_graph *g, const kiln_node *n, strided *p)
{
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    memset(p, 0, sizeof *p);
    p->rank = y->shape.rank;
    for (int d = 0; d < y->shape.rank; d++) {
        p->dims[d] = y->shape.dims[d];
        p->axis[d] = -1;
        p->mul[d] = 1;
    }
    switch (n->op) {
    case KILN_OP_TRANSPOSE: {
        const int64_t *perm = NULL;
        int np = kiln_attr_ints(n, "perm", &perm);
        for (int d = 0; d < p->rank; d++)
            p->axis[d] = (int)(np == p->rank ? perm[d] : p->rank - 1 - d);
        return true;
    }
    case KILN_OP_EXPAND: {
        int diff = y->shape.rank - x->shape.rank;
        for (int d = diff; d < p->rank; d++)
            if (x->shape.dims[d - diff] != 1)
                p->axis[d] = d - diff;
        return true;
    }
    case KILN_OP_SLICE: {
        for (int d = 0; d < p->rank; d++)
            p->axis[d] = d;
        const int64_t *st = NULL, *ax = NULL, *sp = NULL;
        int ns = kiln_attr_ints(n, "starts", &st);
        int na = kiln_attr_ints(n, "axes", &ax);
        int nsp = kiln_attr_ints(n, "steps", &sp);
        for (int i = 0; i < ns; i++) {
            int a = na > 0 ? (int)(ax[i] < 0 ? ax[i] + p->rank : ax[i]) : i;
            int64_t dim = x->shape.dims[a], step = nsp > 0 ? sp[i] : 1;
            int64_t s0 = st[i] < 0 ? st[i] + dim : st[i];
            if (st[i] < 0 && s0 >= 0 && s0 <= (step > 0 ? dim : dim - 1))
                p->end[a] = st[i];
            if (step > 0)
                s0 = s0 < 0 ? 0 : s0 > dim ? dim : s0;
            else
                s0 = s0 < 0 ? 0 : s0 > dim - 1 ? dim - 1 : s0;
            p->at[a] = s0;
            p->mul[a] = step;
            /* one element at most along a: its stride is never used (and a
             * step of 2^63 - 1 times the stride would overflow) */
            if (y->shape.dims[a] <= 1)
                p->axis[a] = -1;
        }
        return true;
    }
    case KILN_OP_GATHER: {
        const kiln_value *iv = g->values[n->inputs[1]];
        int64_t idx = iv->dtype == KILN_DTYPE_INT64 ? *(const int64_t *)iv->data
                                                    : *(const int32_t *)iv->data;
        int a = (int)kiln_attr_int(n, "axis", 0);
        if (a < 0)
            a += x->shape.rank;
        if (idx < 0) {
            p->end[a] = idx;
            idx += x->shape.dims[a];
        }
        if (idx < 0 || idx >= x->shape.dims[a])
            return false;
        p->at[a] = idx;
        for (int d = 0, o = 0; d < x->shape.rank; d++)
            if (d != a)
                p->axis[o++] = d;
        return true;
    }
    default:
        return false;
    }
}

/* The input's stride along axis a (of its row-major dims). */
static kiln_rt_size rt_stride(const kiln_value *x, int a, int64_t e)
{
    return kiln_rt_dims(x->shape.dims, a + 1, x->shape.rank, e);
}

static kiln_status emit_copy(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *y = g->values[n->outputs[0]];
    int64_t bytes = kiln_layout_nbytes(y->dtype, &y->shape, y->layout);
    int64_t chunk = 1 << 18, ntasks = (bytes + chunk - 1) / chunk;
    const int64_t e = t->extent; /* > 0: a symbol's extent at run time */
    kiln_emit_prologue(b, l, t, NULL, 0);
    char bb[96], nt[160];
    kiln_rt_size z = kiln_rt_dims(y->shape.dims, 0, y->shape.rank, e);
    z.c *= (int64_t)kiln_dtype_size(y->dtype);
    if (e > 0) {
        kiln_sb_printf(b, "static const int64_t CHUNK_ = %lld;\n\n", (long long)chunk);
        kiln_sb_puts(b, KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
        kiln_sb_printf(b, "    const int64_t E_ = " KILN_RT_EXTENT ", BYTES_ = %s;\n",
                       kiln_rt_str(bb, sizeof bb, z, "E_"));
        snprintf(nt, sizeof nt, "KILN_MAX_(1, (%s + CHUNK_ - 1) / CHUNK_)",
                 kiln_rt_str(bb, sizeof bb, z, "rt->extent"));
    } else {
        kiln_sb_printf(b, "static const int64_t BYTES_ = %lld, CHUNK_ = %lld;\n\n", (long long)bytes,
                       (long long)chunk);
        kiln_sb_puts(b, KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
        snprintf(nt, sizeof nt, "%lld", (long long)(ntasks ? ntasks : 1));
    }
    kiln_sb_printf(b,
                   "    int64_t lo = begin_ * CHUNK_, hi = KILN_MIN_(end_ * CHUNK_, BYTES_);\n"
                   "    if (hi > lo)\n"
                   "        memcpy((char *)o0 + lo, (const char *)a%d + lo, (size_t)(hi - lo));\n}\n",
                   kiln_task_arg(t, n->inputs[0]));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

static bool is_copy(const kiln_node *n)
{
    return n->op == KILN_OP_RESHAPE || n->op == KILN_OP_FLATTEN || n->op == KILN_OP_IDENTITY;
}

kiln_status kiln_space_strided(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    strided p;
    if (x->layout.kind != KILN_LAYOUT_ROW_MAJOR || y->layout.kind != KILN_LAYOUT_ROW_MAJOR ||
        (!is_copy(n) && !strided_of(g, n, &p)))
        return KILN_OK;
    /* the output's symbol, else the input's (the last token's row of
     * [1, S, D]: read from the end, its offset is written from E_) */
    t->extent = kiln_rt_sym_extent(l, &y->shape);
    if (!t->extent && !is_copy(n))
        t->extent = kiln_rt_sym_extent(l, &x->shape);
    return KILN_OK;
}

kiln_status kiln_emit_strided(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    strided p;
    if (is_copy(n) || !strided_of(g, n, &p))
        return emit_copy(b, l, t);
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    const char *ty = elem_type(kiln_dtype_size(y->dtype));
    /* > 0: the extent of the output's (and input's) dims of that size comes
     * at run time (kiln_space_strided); the source holds the rest */
    const int64_t e = t->extent;
    if (p.rank == 0) {
        p.rank = 1;
        p.dims[0] = 1;
        p.axis[0] = -1;
    }
    int64_t kd[KILN_MAX_RANK]; /* the dims the knobs see: e's at KILN_RT_ROWS */
    for (int d = 0; d < p.rank; d++)
        kd[d] = e > 0 && p.dims[d] == e ? KILN_RT_ROWS : p.dims[d];
    /* A short last dim (a phase interleave's stride, [.., Qw, sw]) makes a
     * row of a few elements, each row paying the offset's divisions: the
     * last two dims are then one row, two loops with constant strides. */
    int inner = p.rank >= 2 && kd[p.rank - 1] < 16 ? 2 : 1;
    int64_t rows = 1;
    for (int d = 0; d < p.rank - inner; d++)
        rows *= kd[d];
    int64_t last = kd[p.rank - 1], mid = inner == 2 ? kd[p.rank - 2] : 1;
    int rpt = 1;
    while (rpt * 2 <= rows && rows / (rpt * 2) >= 8 && rpt * last * mid < 16384)
        rpt *= 2;
    /* the sizes: literals, or in terms of E_ (the run-time extent) */
    char rs[96], ls[96], ms[96], xb[160], nt[1024];
    kiln_rt_str(rs, sizeof rs, kiln_rt_dims(p.dims, 0, p.rank - inner, e), "E_");
    kiln_rt_str(ls, sizeof ls, kiln_rt_dims(p.dims, p.rank - 1, p.rank, e), "E_");
    kiln_rt_str(ms, sizeof ms, kiln_rt_dims(p.dims, p.rank - 2, p.rank - 1, e), "E_");
    kiln_rt_size bz[KILN_MAX_RANK + 1] = {{0, 0}}; /* the base, by power of e */
    for (int a = 0; a < x->shape.rank; a++)
        if (p.at[a]) {
            kiln_rt_size z = rt_stride(x, a, e);
            if (e > 0 && p.end[a] && x->shape.dims[a] == e) { /* (E_ + end) * stride */
                bz[z.pow + 1].c += z.c;
                bz[z.pow].c += p.end[a] * z.c;
            } else {
                bz[z.pow].c += p.at[a] * z.c;
            }
        }
    int k = snprintf(xb, sizeof xb, "%lld", (long long)bz[0].c);
    for (int i = 1; i <= KILN_MAX_RANK && k > 0 && (size_t)k < sizeof xb; i++)
        if (bz[i].c) {
            char tb[64];
            bz[i].pow = i;
            k += snprintf(xb + k, sizeof xb - (size_t)k, " + %s", kiln_rt_str(tb, sizeof tb, bz[i], "E_"));
        }
    kiln_emit_prologue(b, l, t, NULL, 0);
    if (e > 0) {
        /* the rows per task from the rows of the run, by the rule above */
        kiln_sb_puts(b, "static int64_t rpt_(int64_t rows, int64_t row_len)\n{\n"
                        "    int64_t r = 1;\n"
                        "    while (r * 2 <= rows && rows / (r * 2) >= 8 && r * row_len < 16384)\n"
                        "        r *= 2;\n"
                        "    return r;\n}\n\n");
    } else {
        kiln_sb_printf(b, "static const int64_t ROWS_ = %s, LAST_ = %s, RPT_ = %d;\n", rs, ls, rpt);
        if (inner == 2)
            kiln_sb_printf(b, "static const int64_t MID_ = %s;\n", ms);
        kiln_sb_puts(b, "\n");
    }
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (e > 0) {
        kiln_sb_printf(b, "    const int64_t E_ = " KILN_RT_EXTENT ", ROWS_ = %s, LAST_ = %s;\n", rs, ls);
        kiln_sb_printf(b, "    const int64_t MID_ = %s, RPT_ = rpt_(ROWS_, LAST_ * MID_);\n"
                          "    (void)E_;\n",
                       inner == 2 ? ms : "1");
    }
    kiln_sb_printf(b,
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    %s *yp = (%s *)o0;\n"
                   "    for (int64_t row = begin_ * RPT_; row < KILN_MIN_(end_ * RPT_, ROWS_); row++) {\n"
                   "        int64_t off = %s, q = row;\n"
                   "        (void)q;\n",
                   ty, ty, kiln_task_arg(t, n->inputs[0]), ty, ty, xb);
    char ss[KILN_MAX_RANK][96], ds[96];
    for (int d = 0; d < p.rank; d++) {
        kiln_rt_size z = {0, 0};
        if (p.axis[d] >= 0) {
            z = rt_stride(x, p.axis[d], e);
            z.c *= p.mul[d];
        }
        kiln_rt_str(ss[d], sizeof ss[d], z, "E_");
    }
    /* with the extent at run time, the outermost dim above 1 takes q as it
     * is (below its extent): no division by a run-time value per row */
    int outer = 0;
    while (e > 0 && outer < p.rank - 1 - inner && p.dims[outer] == 1)
        outer++;
    for (int d = p.rank - 1 - inner; d >= 0; d--) {
        kiln_rt_str(ds, sizeof ds, kiln_rt_dims(p.dims, d, d + 1, e), "E_");
        if (e > 0 && d == outer)
            kiln_sb_printf(b, "        off += q * %s;\n", ss[d]);
        else if (e <= 0 || d > outer)
            kiln_sb_printf(b, "        off += (q %% %s) * %s;\n        q /= %s;\n", ds, ss[d], ds);
    }
    if (inner == 2)
        kiln_sb_printf(b,
                       "        %s *dst = yp + row * MID_ * LAST_;\n"
                       "        for (int64_t i = 0; i < MID_; i++)\n"
                       "            for (int64_t j = 0; j < LAST_; j++)\n"
                       "                dst[i * LAST_ + j] = xp[off + i * %s + j * %s];\n    }\n}\n",
                       ty, ss[p.rank - 2], ss[p.rank - 1]);
    else
        kiln_sb_printf(b,
                       "        %s *dst = yp + row * LAST_;\n"
                       "        for (int64_t j = 0; j < LAST_; j++)\n"
                       "            dst[j] = xp[off + j * %s];\n    }\n}\n",
                       ty, ss[p.rank - 1]);
    if (e > 0) {
        char ls2[96], ms2[96];
        kiln_rt_str(xb, sizeof xb, kiln_rt_dims(p.dims, 0, p.rank - inner, e), "rt->extent");
        kiln_rt_str(ls2, sizeof ls2, kiln_rt_dims(p.dims, p.rank - 1, p.rank, e), "rt->extent");
        kiln_rt_str(ms2, sizeof ms2, kiln_rt_dims(p.dims, p.rank - 2, p.rank - 1, e), "rt->extent");
        snprintf(nt, sizeof nt, "(%s + rpt_(%s, %s * %s) - 1) / rpt_(%s, %s * %s)", xb, xb, ls2,
                 inner == 2 ? ms2 : "1", xb, ls2, inner == 2 ? ms2 : "1");
    } else {
        snprintf(nt, sizeof nt, "%lld", (long long)((rows + rpt - 1) / rpt));
    }
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

/* Storage dims of a value: logical, or for NCHW{b}c [N, C/b, H, W, b]. */
static int storage_dims(const kiln_value *v, int64_t *dims)
{
    if (v->layout.kind == KILN_LAYOUT_NCHWC) {
        int bb = v->layout.block_a;
        dims[0] = v->shape.dims[0];
        dims[1] = (v->shape.dims[1] + bb - 1) / bb;
        dims[2] = v->shape.dims[2];
        dims[3] = v->shape.dims[3];
        dims[4] = bb;
        return 5;
    }
    for (int d = 0; d < v->shape.rank; d++)
        dims[d] = v->shape.dims[d];
    return v->shape.rank;
}

/* The slab copies' loop (task = outer index x piece; piece pointers by a
 * switch over k) and the function's end, over LEN_, OFF_ and WHOLE_. */
static void emit_slab_loop(kiln_sb *b, const kiln_task *t, const kiln_node *n, bool concat, int np)
{
    kiln_sb_puts(b, "    for (int64_t task = begin_; task < end_; task++) {\n"
                    "        int64_t o = task / NP_, k = task % NP_;\n"
                    "        const char *src;\n        char *dst;\n        switch (k) {\n");
    for (int k = 0; k < np; k++) {
        int pa = kiln_task_arg(t, concat ? n->inputs[k] : n->outputs[k]);
        int wa = kiln_task_arg(t, concat ? n->outputs[0] : n->inputs[0]);
        if (concat)
            kiln_sb_printf(b,
                           "        case %d: src = (const char *)a%d + o * LEN_[%d]; dst = (char *)o%d + o * WHOLE_ + OFF_[%d]; break;\n",
                           k, pa, k, wa - t->n_in, k);
        else
            kiln_sb_printf(b,
                           "        case %d: src = (const char *)a%d + o * WHOLE_ + OFF_[%d]; dst = (char *)o%d + o * LEN_[%d]; break;\n",
                           k, wa, k, pa - t->n_in, k);
    }
    kiln_sb_puts(b, "        default: src = NULL; dst = NULL; break;\n        }\n"
                    "        if (src && dst)\n            memcpy(dst, src, (size_t)LEN_[k]);\n    }\n}\n");
}

/* In a shapes_bound graph, a Concat or Split of row-major pieces whose dims
 * hold the symbol's extent (a KV cache's past keys joined with the step's
 * new ones along the length, a sequence split in parts) takes it at run
 * time: every slab size is then written in terms of E_ and the same layer
 * at another length is the same kernel. */
kiln_status kiln_space_slabs(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    bool concat = n->op == KILN_OP_CONCAT;
    const kiln_value *whole = g->values[concat ? n->outputs[0] : n->inputs[0]];
    int np = concat ? n->n_inputs : n->n_outputs;
    if (whole->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return KILN_OK;
    int64_t e = kiln_rt_sym_extent(l, &whole->shape);
    for (int k = 0; k < np; k++) {
        const kiln_value *v = g->values[concat ? n->inputs[k] : n->outputs[k]];
        if (v->layout.kind != KILN_LAYOUT_ROW_MAJOR)
            return KILN_OK;
        int64_t ek = kiln_rt_sym_extent(l, &v->shape);
        e = ek > e ? ek : e;
    }
    t->extent = e;
    return KILN_OK;
}

/* The slabs with their sizes at run time (kiln_space_slabs): each piece's
 * slab (its dims from the axis on) and the outer count in terms of E_; the
 * offsets summed in the kernel. */
static kiln_status emit_slabs_rt(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                                 bool concat)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *whole = g->values[concat ? n->outputs[0] : n->inputs[0]];
    const int64_t e = t->extent;
    int rank = whole->shape.rank;
    int64_t axis = kiln_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += rank;
    int64_t esz = (int64_t)kiln_dtype_size(whole->dtype);
    int np = concat ? n->n_inputs : n->n_outputs;
    char buf[128], nt[160];
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "/* slabs of %d pieces, their sizes at run time */\nenum { NP_ = %d };\n\n",
                   np, np);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_puts(b, "    const int64_t E_ = " KILN_RT_EXTENT ";\n    const int64_t LEN_[NP_] = {");
    for (int k = 0; k < np; k++) {
        const kiln_value *v = g->values[concat ? n->inputs[k] : n->outputs[k]];
        kiln_rt_size z = kiln_rt_dims(v->shape.dims, (int)axis, rank, e);
        z.c *= esz;
        kiln_sb_printf(b, "%s%s", k ? ", " : "", kiln_rt_str(buf, sizeof buf, z, "E_"));
    }
    kiln_sb_puts(b, "};\n"
                    "    int64_t OFF_[NP_], WHOLE_ = 0;\n"
                    "    for (int k = 0; k < NP_; k++) {\n"
                    "        OFF_[k] = WHOLE_;\n"
                    "        WHOLE_ += LEN_[k];\n"
                    "    }\n"
                    "    (void)E_;\n");
    emit_slab_loop(b, t, n, concat, np);
    snprintf(nt, sizeof nt, "%s * %d",
             kiln_rt_str(buf, sizeof buf, kiln_rt_dims(whole->shape.dims, 0, (int)axis, e),
                         "rt->extent"),
             np);
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

/* Concat (pieces = inputs) and Split (pieces = outputs): slabs along axis. */
static kiln_status emit_slabs(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, bool concat)
{
    if (t->extent > 0)
        return emit_slabs_rt(b, l, t, concat);
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *whole = g->values[concat ? n->outputs[0] : n->inputs[0]];
    int rank = whole->shape.rank;
    int64_t axis = kiln_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += rank;
    int64_t wd[KILN_MAX_RANK + 1];
    int srank = storage_dims(whole, wd);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= wd[d];
    for (int d = (int)axis + 1; d < srank; d++)
        inner *= wd[d];
    size_t esz = kiln_dtype_size(whole->dtype);
    int np = concat ? n->n_inputs : n->n_outputs;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "/* %lld slabs of %d pieces */\nenum { NP_ = %d };\n", (long long)outer, np, np);
    kiln_sb_puts(b, "static const int64_t LEN_[NP_] = {");
    int64_t off = 0;
    for (int k = 0; k < np; k++) {
        const kiln_value *v = g->values[concat ? n->inputs[k] : n->outputs[k]];
        int64_t pd[KILN_MAX_RANK + 1];
        storage_dims(v, pd);
        kiln_sb_printf(b, "%s%lld", k ? ", " : "", (long long)(pd[axis] * inner * (int64_t)esz));
    }
    kiln_sb_puts(b, "};\nstatic const int64_t OFF_[NP_] = {");
    for (int k = 0; k < np; k++) {
        const kiln_value *v = g->values[concat ? n->inputs[k] : n->outputs[k]];
        int64_t pd[KILN_MAX_RANK + 1];
        storage_dims(v, pd);
        kiln_sb_printf(b, "%s%lld", k ? ", " : "", (long long)off);
        off += pd[axis] * inner * (int64_t)esz;
    }
    kiln_sb_printf(b, "};\nstatic const int64_t WHOLE_ = %lld;\n\n", (long long)off);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    emit_slab_loop(b, t, n, concat, np);
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(outer * np));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

kiln_status kiln_emit_concat(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    return emit_slabs(b, l, t, true);
}

kiln_status kiln_emit_split(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    return emit_slabs(b, l, t, false);
}

/* Pad (float32): constant, edge or reflect, negative pads crop; on row-major
 * data, or on NCHW{b}c when only the spatial dims are padded. Each output row
 * maps its coordinates to the input (pad_map as in the reference kernel); a
 * row outside a constant pad is filled with the value. */
static void i64_list(kiln_sb *b, const char *name, const int64_t *v, int n)
{
    kiln_sb_printf(b, "static const int64_t %s[R_] = {", name);
    for (int d = 0; d < n; d++)
        kiln_sb_printf(b, "%s%lld", d ? ", " : "", (long long)v[d]);
    kiln_sb_puts(b, "};\n");
}

kiln_status kiln_emit_pad(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    const int64_t *pads = NULL;
    int r = x->shape.rank;
    if (kiln_attr_ints(n, "pads", &pads) != 2 * r || r < 1)
        return KILN_ERR_UNSUPPORTED;
    const char *ms = kiln_attr_string(n, "mode", "constant");
    int mode = !strcmp(ms, "edge") ? 1 : !strcmp(ms, "reflect") ? 2 : 0;
    int64_t xd[KILN_MAX_RANK + 1], yd[KILN_MAX_RANK + 1], pb[KILN_MAX_RANK + 1] = {0},
            lo[KILN_MAX_RANK + 1] = {0}, hi[KILN_MAX_RANK + 1] = {0};
    int sr = storage_dims(x, xd);
    storage_dims(y, yd);
    for (int d = 0; d < sr; d++) {
        int64_t e = d < r ? pads[d + r] : 0;
        pb[d] = d < r ? pads[d] : 0;
        lo[d] = pb[d] < 0 ? -pb[d] : 0;
        hi[d] = xd[d] - (e < 0 ? -e : 0);
    }
    int64_t rows = 1;
    for (int d = 0; d < sr - 1; d++)
        rows *= yd[d];
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "enum { R_ = %d, MODE_ = %d };\n", sr, mode);
    i64_list(b, "XD_", xd, sr);
    i64_list(b, "YD_", yd, sr);
    i64_list(b, "PB_", pb, sr);
    i64_list(b, "LO_", lo, sr);
    i64_list(b, "HI_", hi, sr);
    kiln_sb_printf(b, "static const float VALUE_ = %af;\n\n", (double)kiln_attr_float(n, "value", 0.0f));
    kiln_sb_puts(b, "static int64_t map_(int d, int64_t o)\n{\n"
                    "    int64_t i = o - PB_[d];\n"
                    "    if (i >= LO_[d] && i < HI_[d])\n        return i;\n"
                    "    if (MODE_ == 0)\n        return -1;\n"
                    "    if (MODE_ == 1)\n        return i < LO_[d] ? LO_[d] : HI_[d] - 1;\n"
                    "    return i < LO_[d] ? 2 * LO_[d] - i : 2 * (HI_[d] - 1) - i;\n}\n\n");
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t row = begin_; row < end_; row++) {\n"
                   "        float *dst = o0 + row * YD_[R_ - 1];\n"
                   "        int64_t off = 0, q = row, st = XD_[R_ - 1];\n"
                   "        int constant = 0;\n"
                   "        for (int d = R_ - 2; d >= 0; d--) {\n"
                   "            int64_t i = map_(d, q %% YD_[d]);\n"
                   "            q /= YD_[d];\n"
                   "            if (i < 0)\n"
                   "                constant = 1;\n"
                   "            off += i * st;\n"
                   "            st *= XD_[d];\n"
                   "        }\n"
                   "        for (int64_t j = 0; j < YD_[R_ - 1]; j++) {\n"
                   "            int64_t i = constant ? -1 : map_(R_ - 1, j);\n"
                   "            dst[j] = i < 0 ? VALUE_ : a%d[off + i];\n"
                   "        }\n"
                   "    }\n}\n",
                   kiln_task_arg(t, n->inputs[0]));
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)rows);
    kiln_emit_entry(b, t, nt, 16);
    return KILN_OK;
}

kiln_status kiln_emit_layout(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    int b1 = x->layout.kind == KILN_LAYOUT_NCHWC ? x->layout.block_a : 1;
    int b2 = y->layout.kind == KILN_LAYOUT_NCHWC ? y->layout.block_a : 1;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], H = x->shape.dims[2], W = x->shape.dims[3];
    int64_t cb1 = (C + b1 - 1) / b1, cb2 = (C + b2 - 1) / b2;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { B1_ = %d, B2_ = %d };\nstatic const int64_t C_ = %lld, CB1_ = %lld, "
                   "CB2_ = %lld, H_ = %lld, W_ = %lld;\n\n",
                   b1, b2, (long long)C, (long long)cb1, (long long)cb2, (long long)H, (long long)W);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    for (int64_t task = begin_; task < end_; task++) {\n"
                   "        int64_t h = task %% H_, nc = task / H_, c2 = nc %% CB2_, n = nc / CB2_;\n"
                   "        float *dst = o0 + task * W_ * B2_;\n"
                   "        if (B1_ == 1 && B2_ <= 4 && (c2 + 1) * B2_ <= C_) {\n"
                   "            /* an image into one block: interleave the planes, pixel by pixel */\n"
                   "            const float *src = a%d + ((n * C_ + c2 * B2_) * H_ + h) * W_;\n"
                   "            for (int64_t w = 0; w < W_; w++)\n"
                   "                for (int j = 0; j < B2_; j++)\n"
                   "                    dst[w * B2_ + j] = src[j * H_ * W_ + w];\n"
                   "            continue;\n"
                   "        }\n"
                   "        for (int j = 0; j < B2_; j++) {\n"
                   "            int64_t c = c2 * B2_ + j;\n"
                   "            if (c >= C_) {\n"
                   "                for (int64_t w = 0; w < W_; w++)\n"
                   "                    dst[w * B2_ + j] = 0.0f;\n"
                   "                continue;\n"
                   "            }\n"
                   "            const float *src = a%d + (((n * CB1_ + c / B1_) * H_ + h) * W_) * B1_ + c %% B1_;\n"
                   "            for (int64_t w = 0; w < W_; w++)\n"
                   "                dst[w * B2_ + j] = src[w * B1_];\n"
                   "        }\n    }\n}\n",
                   kiln_task_arg(t, n->inputs[0]), kiln_task_arg(t, n->inputs[0]));
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(N * cb2 * H));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

/* Resize (float32, row-major or NCHW{b}c) of the last two dims: the taps of
 * every output row and column (ref/resize.c's kiln_resize_dim_taps, so that
 * the kernel and the reference agree tap for tap) are tables in the kernel
 * file; a task is one output row of a plane (blocked: of one channel
 * block): its row taps blended into one input line (a vector loop, on the
 * stack: tpl_resize.c bounds the width; a lone tap of weight 1 reads the
 * input row in place), then each element (blocked: each pixel's b
 * channels, one vector) the weighted sum of its column taps on that line,
 * in float (row-major: over runs of columns with one tap count, each loop's
 * count a constant, see resize_runs). The leading dims are not resized. */
static void resize_table(kiln_sb *b, const kiln_resize_params *p, int d, int64_t in,
                         const char *name, bool counts)
{
    int64_t n = p->out[d];
    for (int k = 0; k < (counts ? 3 : 2); k++) { /* the indices, the weights, the counts */
        kiln_sb_puts(b, "static const ");
        kiln_sb_printf(b, k == 0 ? "int32_t %sI_[%lld][4]" : k == 1 ? "float %sW_[%lld][4]"
                                                                   : "uint8_t %sN_[%lld]",
                       name, (long long)n);
        kiln_sb_puts(b, " = {");
        for (int64_t x = 0; x < n; x++) {
            int64_t idx[4] = {0, 0, 0, 0};
            double w[4] = {0, 0, 0, 0};
            int count = 0;
            kiln_resize_dim_taps(p, d, in, x, idx, w, &count);
            if (k == 0)
                kiln_sb_printf(b, "%s{%lld,%lld,%lld,%lld}", x ? "," : "", (long long)idx[0],
                               (long long)idx[1], (long long)idx[2], (long long)idx[3]);
            else if (k == 1)
                kiln_sb_printf(b, "%s{%af,%af,%af,%af}", x ? "," : "", (double)(float)w[0],
                               (double)(float)w[1], (double)(float)w[2], (double)(float)w[3]);
            else
                kiln_sb_printf(b, "%s%d", x ? "," : "", count < 0 ? 0 : count);
            if (x % 8 == 7)
                kiln_sb_puts(b, "\n");
        }
        kiln_sb_puts(b, "};\n");
    }
}

/* The runs of output columns (dim d, `in` input elements) with one tap
 * count each, as [first, end, count] (a count of 0, nothing read, runs as
 * 1: the kernel reads tap 0 with its weight either way); their number, or
 * 0 past KILN_RESIZE_MAX_RUNS (then one loop bounded by WN_ per column). */
#define KILN_RESIZE_MAX_RUNS 16
static int resize_runs(const kiln_resize_params *p, int d, int64_t in,
                       int64_t runs[KILN_RESIZE_MAX_RUNS][3])
{
    int nr = 0;
    for (int64_t x = 0; x < p->out[d]; x++) {
        int64_t idx[4];
        double w[4];
        int count = 0;
        kiln_resize_dim_taps(p, d, in, x, idx, w, &count);
        int64_t c = count < 1 ? 1 : count;
        if (nr && runs[nr - 1][2] == c) {
            runs[nr - 1][1] = x + 1;
            continue;
        }
        if (nr == KILN_RESIZE_MAX_RUNS)
            return 0;
        runs[nr][0] = x;
        runs[nr][1] = x + 1;
        runs[nr][2] = c;
        nr++;
    }
    return nr;
}

kiln_status kiln_emit_resize(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]];
    kiln_resize_params p;
    kiln_error err = {0};
    if (kiln_resize_resolve(n, &x->shape, &p, &err) != KILN_OK || p.rank < 2)
        return KILN_ERR_UNSUPPORTED;
    int r = p.rank;
    /* blocked (NCHW{b}c, rank 4): a plane is one channel block of an image,
     * each pixel b floats; row-major: b = 1 */
    int64_t blk = x->layout.kind == KILN_LAYOUT_NCHWC ? x->layout.block_a : 1;
    int64_t planes = 1;
    for (int d = 0; d < r - 2; d++)
        planes *= d == 1 && blk > 1 ? (x->shape.dims[1] + blk - 1) / blk : x->shape.dims[d];
    int64_t ih = x->shape.dims[r - 2], iw = x->shape.dims[r - 1];
    int64_t oh = p.out[r - 2], ow = p.out[r - 1];
    bool epi = kiln_task_has_epilogue(l, t);
    if (blk > 1 && epi)
        return KILN_ERR_UNSUPPORTED; /* the template absorbs no epilogue */
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b,
                   "enum { IW_ = %lld, B_ = %lld };\n"
                   "static const int64_t IH_ = %lld, OH_ = %lld, OW_ = %lld;\n",
                   (long long)iw, (long long)blk, (long long)ih, (long long)oh, (long long)ow);
    /* row-major: the columns' runs of one tap count (below), when few */
    int64_t runs[KILN_RESIZE_MAX_RUNS][3];
    int nr = blk > 1 ? 0 : resize_runs(&p, r - 1, iw, runs);
    resize_table(b, &p, r - 2, ih, "H", true);
    resize_table(b, &p, r - 1, iw, "W", nr == 0);
    kiln_sb_puts(b, "\n" KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    float line[IW_ * B_];\n"
                   "    for (int64_t row = begin_; row < end_; row++) {\n"
                   "        int64_t plane = row / OH_, h = row %% OH_;\n"
                   "        const float *src = a%d + plane * IH_ * IW_ * B_;\n"
                   "        /* the row taps blended into one input line (a single tap of\n"
                   "           weight 1, nearest: the input row itself), then the column taps */\n"
                   "        const float *r0 = src + (int64_t)HI_[h][0] * IW_ * B_;\n"
                   "        const float *ln = r0;\n"
                   "        if (HN_[h] != 1 || HW_[h][0] != 1.0f) {\n"
                   "            for (int64_t w = 0; w < IW_ * B_; w++)\n"
                   "                line[w] = HW_[h][0] * r0[w];\n"
                   "            for (int i = 1; i < HN_[h]; i++) {\n"
                   "                const float *ri = src + (int64_t)HI_[h][i] * IW_ * B_;\n"
                   "                const float wi = HW_[h][i];\n"
                   "                for (int64_t w = 0; w < IW_ * B_; w++)\n"
                   "                    line[w] += wi * ri[w];\n"
                   "            }\n"
                   "            ln = line;\n"
                   "        }\n",
                   kiln_task_arg(t, n->inputs[0]));
    if (blk > 1) {
        kiln_sb_puts(b, "        float *dst = o0 + row * OW_ * B_;\n"
                        "        for (int64_t w = 0; w < OW_; w++) {\n"
                        "            const float *l0 = ln + (int64_t)WI_[w][0] * B_;\n"
                        "            const float w0 = WW_[w][0];\n"
                        "            float acc[B_];\n"
                        "            for (int j = 0; j < B_; j++)\n"
                        "                acc[j] = w0 * l0[j];\n"
                        "            for (int i = 1; i < WN_[w]; i++) {\n"
                        "                const float *li = ln + (int64_t)WI_[w][i] * B_;\n"
                        "                const float wi = WW_[w][i];\n"
                        "                for (int j = 0; j < B_; j++)\n"
                        "                    acc[j] += wi * li[j];\n"
                        "            }\n"
                        "            for (int j = 0; j < B_; j++)\n"
                        "                dst[w * B_ + j] = acc[j];\n"
                        "        }\n    }\n}\n");
    } else {
        /* runs of columns with the same tap count, each a loop whose count is
         * a constant: gcc vectorizes those (a bilinear upsample's 2 taps: 1.9x
         * the outputs per second of a loop bounded by WN_[w]); the sums are
         * the same, in the same order */
        if (nr > 0) {
            kiln_sb_puts(b, "        static const int64_t WR_[][3] = {");
            for (int k = 0; k < nr; k++)
                kiln_sb_printf(b, "%s{%lld,%lld,%lld}", k ? "," : "", (long long)runs[k][0],
                               (long long)runs[k][1], (long long)runs[k][2]);
            kiln_sb_printf(b, "};\n"
                              "        for (int r_ = 0; r_ < %d; r_++) {\n"
                              "            const int64_t w1_ = WR_[r_][1];\n"
                              "            switch (WR_[r_][2]) {\n",
                           nr);
            for (int c = 1; c <= 4; c++) {
                bool used = false;
                for (int k = 0; k < nr; k++)
                    used |= runs[k][2] == c;
                if (!used)
                    continue;
                kiln_sb_printf(b, "            case %d:\n"
                                  "                for (int64_t w = WR_[r_][0]; w < w1_; w++) {\n"
                                  "                    float acc = WW_[w][0] * ln[WI_[w][0]];\n",
                               c);
                for (int j = 1; j < c; j++)
                    kiln_sb_printf(b, "                    acc += WW_[w][%d] * ln[WI_[w][%d]];\n", j,
                                   j);
                kiln_sb_puts(b, "                    int64_t idx = row * OW_ + w;\n");
                if (epi)
                    kiln_emit_epilogue(b, l, t, "acc", "idx");
                kiln_sb_puts(b, "                    o0[idx] = acc;\n                }\n"
                                "                break;\n");
            }
            kiln_sb_puts(b, "            }\n        }\n    }\n}\n");
        } else {
            kiln_sb_puts(b, "        for (int64_t w = 0; w < OW_; w++) {\n"
                            "            float acc = WW_[w][0] * ln[WI_[w][0]];\n"
                            "            for (int j = 1; j < WN_[w]; j++)\n"
                            "                acc += WW_[w][j] * ln[WI_[w][j]];\n"
                            "            int64_t idx = row * OW_ + w;\n");
            if (epi)
                kiln_emit_epilogue(b, l, t, "acc", "idx");
            kiln_sb_puts(b, "            o0[idx] = acc;\n        }\n    }\n}\n");
        }
    }
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)(planes * oh));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}
