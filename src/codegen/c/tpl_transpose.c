/* codegen/c/tpl_transpose.c: Transpose. Of row-major data, any dtype: a
 * strided copy (the emitter: emit_movement.c). Of a rank-4 float32 value
 * between NCHW{b}c and channels-last (perm [0,2,3,1] reading the blocks,
 * perm [0,3,1,2] writing them): one copy of b lanes per pixel and block
 * (kiln_kernels_layout.h), in place of a layout transform to NCHW and a
 * strided transpose (ConvNeXt's permutes around its depthwise convs).
 *
 * Layout (alter-layout asks it): [0,2,3,1] keeps a blocked input blocked
 * and writes row-major; [0,3,1,2] of a row-major value writes NCHW{b}c
 * (b: the largest of vec, vec/2, .. >= 4 dividing the channels) when every
 * reader of its output keeps or wants blocks (convs, unary elementwise ops,
 * Add/Sub/Mul, pools, a [0,2,3,1] Transpose), so no transform is added.
 * That one takes a fused epilogue (any elementwise chain: ConvNeXt's layer
 * scale Mul and residual Add), applied to each element between its load
 * and its store. */
#include <stdio.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "pass/pass.h"

static const int64_t TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

/* 1: perm [0,2,3,1], 2: [0,3,1,2], 0: anything else or not rank-4 float32 */
static int perm_kind(const kiln_graph *g, const kiln_node *n)
{
    if (n->op != KILN_OP_TRANSPOSE || n->n_inputs < 1 || n->inputs[0] < 0)
        return 0;
    const kiln_value *x = g->values[n->inputs[0]];
    const int64_t *perm = NULL;
    if (x->dtype != KILN_DTYPE_FLOAT32 || x->shape.rank != 4 ||
        kiln_attr_ints(n, "perm", &perm) != 4)
        return 0;
    if (!memcmp(perm, TO_NHWC, sizeof TO_NHWC))
        return 1;
    if (!memcmp(perm, TO_NCHW, sizeof TO_NCHW))
        return 2;
    return 0;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (n->op != KILN_OP_TRANSPOSE)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    bool xb = x->layout.kind == KILN_LAYOUT_NCHWC, yb = y->layout.kind == KILN_LAYOUT_NCHWC;
    if (!xb && !yb)
        return kiln_tpl_row_major_in(g, n) && y->layout.kind == KILN_LAYOUT_ROW_MAJOR;
    int k = perm_kind(g, n);
    if (k == 2 && yb && x->layout.kind == KILN_LAYOUT_ROW_MAJOR) {
        /* the elementwise ops after it (layer scale, residual Add) run on
         * each task's output while it is in cache */
        *epi = KILN_EPI_KIND_ANY;
        return true;
    }
    return k == 1 && xb && y->layout.kind == KILN_LAYOUT_ROW_MAJOR;
}

static bool is_nhwc_transpose(const kiln_graph *g, const kiln_node *n)
{
    return perm_kind(g, n) == 1;
}

/* Every reader of value v keeps a blocked input blocked (or wants one):
 * unary elementwise ops, Add/Sub/Mul, pools, an NHWC transpose, a conv's
 * data input, and with `concat` a Concat along the channels (alter-layout
 * keeps it blocked when its inputs are blocked alike). Not a graph output.
 * Shared with tpl_resize.c (codegen.h). */
bool kiln_tpl_readers_take_blocks(const kiln_graph *g, int v, bool concat)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v)
            return false;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *m = g->nodes[i];
        bool reads = false;
        for (int k = 0; k < m->n_inputs; k++)
            reads |= m->inputs[k] == v;
        if (!reads)
            continue;
        readers++;
        const kiln_op_info *info = kiln_op_get(m->op);
        bool unary = info->pattern == KILN_PATTERN_ELEMWISE && info->min_inputs == 1 &&
                     info->max_inputs == 1 && m->op != KILN_OP_CAST && m->op != KILN_OP_IDENTITY;
        int64_t axis = m->op == KILN_OP_CONCAT ? kiln_attr_int(m, "axis", 0) : 0;
        bool ok = unary || m->op == KILN_OP_ADD || m->op == KILN_OP_SUB || m->op == KILN_OP_MUL ||
                  m->op == KILN_OP_MAXPOOL || m->op == KILN_OP_AVERAGEPOOL ||
                  m->op == KILN_OP_GLOBALAVERAGEPOOL || is_nhwc_transpose(g, m) ||
                  (concat && m->op == KILN_OP_CONCAT && (axis == 1 || axis == -3)) ||
                  (m->op == KILN_OP_CONV && m->inputs[0] == v &&
                   g->values[m->inputs[1]]->kind == KILN_VALUE_CONST);
        if (!ok)
            return false;
    }
    return readers > 0;
}

static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    const kiln_layout rm = {KILN_LAYOUT_ROW_MAJOR, 0, 0};
    int k = perm_kind(g, n);
    out->weight = rm;
    if (k == 1 && in.kind == KILN_LAYOUT_NCHWC) {
        out->in = in;
        out->out = rm;
        return true;
    }
    if (k != 2)
        return false;
    int64_t c = g->values[n->inputs[0]]->shape.dims[3];
    int b = 1;
    for (int v = tg->vec; v >= 4; v /= 2)
        if (c % v == 0) {
            b = v;
            break;
        }
    if (b == 1 || !kiln_tpl_readers_take_blocks(g, n->outputs[0], false))
        return false;
    out->in = rm;
    out->out = (kiln_layout){KILN_LAYOUT_NCHWC, b, 0};
    return true;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    bool from = x->layout.kind == KILN_LAYOUT_NCHWC;
    if (!from && y->layout.kind != KILN_LAYOUT_NCHWC)
        return kiln_emit_strided(b, l, t);
    const kiln_value *blk = from ? x : y; /* its logical dims are [N, C, H, W] */
    int64_t nn = blk->shape.dims[0], c = blk->shape.dims[1];
    int64_t hw = blk->shape.dims[2] * blk->shape.dims[3];
    /* about 16 KB of one block's lanes per task, and work for every thread */
    int64_t chunk = 4096 / blk->layout.block_a;
    while (chunk > 8 && nn * ((hw + chunk - 1) / chunk) < 8)
        chunk /= 2;
    if (chunk > hw)
        chunk = hw > 0 ? hw : 1;
    static const char *const hdr[] = {"kiln_kernels_layout.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_nhwc_params P_ = {.n = %lld, .c = %lld, .hw = %lld, .cb = %d, "
                   ".chunk = %lld};\n\n",
                   (long long)nn, (long long)c, (long long)hw, blk->layout.block_a, (long long)chunk);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    int xa = kiln_task_arg(t, n->inputs[0]);
    if (from || !kiln_task_has_epilogue(l, t)) {
        kiln_sb_printf(b, "    kiln_nhwc_%s(&P_, a%d, o0, begin_, end_);\n}\n",
                       from ? "from_blocked" : "to_blocked", xa);
    } else {
        /* the fused epilogue on each element between its load and its
         * store: one pass (as a second pass over each task's runs it cost
         * as much as the copy) */
        kiln_sb_printf(b,
                       "    const int64_t nt_ = (P_.hw + P_.chunk - 1) / P_.chunk;\n"
                       "    const int64_t cbn_ = (P_.c + P_.cb - 1) / P_.cb;\n"
                       "    for (int64_t tk_ = begin_; tk_ < end_; tk_++) {\n"
                       "        const int64_t n_ = tk_ / nt_, p0_ = tk_ %% nt_ * P_.chunk;\n"
                       "        const int64_t p1_ = KILN_MIN_(P_.hw, p0_ + P_.chunk);\n"
                       "        for (int64_t b_ = 0; b_ < cbn_; b_++) {\n"
                       "            const int64_t c0_ = b_ * P_.cb;\n"
                       "            const float *s_ = a%d + n_ * P_.hw * P_.c + c0_;\n"
                       "            for (int64_t j_ = p0_; j_ < p1_; j_++) {\n"
                       "#pragma GCC ivdep\n#pragma GCC unroll 1\n"
                       "            for (int64_t l_ = 0; l_ < P_.cb; l_++) {\n"
                       "                const int64_t i = ((n_ * cbn_ + b_) * P_.hw + j_) * P_.cb + l_;\n",
                       xa);
        if (c % blk->layout.block_a == 0)
            kiln_sb_puts(b, "                float v = s_[j_ * P_.c + l_];\n");
        else
            kiln_sb_puts(b, "                float v = c0_ + l_ < P_.c ? s_[j_ * P_.c + l_] : 0.0f;\n");
        kiln_emit_epilogue_ch(b, l, t, "v", "i", "c0_ + l_");
        kiln_sb_puts(b, "                o0[i] = v;\n            }\n            }\n        }\n    }\n}\n");
    }
    kiln_emit_entry(b, t, "kiln_nhwc_tasks(&P_)", 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_transpose = {
    .name = "transpose",
    .match = match,
    .layout = layout,
    .space = kiln_space_strided, /* the strided copy's (row-major both sides) */
    .emit = emit,
};
