/* codegen/c/tpl_expand_dwconv2d_nchwc.c: an inverted-residual block's
 * expand 1x1 conv, its activation and the depthwise conv after it, as one
 * task (kiln_kernels_expdw.h): the wide activation is made a few rows at a
 * time into the thread's workspace and consumed there, never written to
 * memory at full size.
 *
 * A template for two anchors (template.pair, fuse.c): it takes no node
 * alone; fuse asks it whether a group anchored at a blocked 1x1 conv
 * (stride 1, no padding, groups 1, the wide channels whole blocks), whose
 * epilogue reads nothing but the group's own values (Relu, Clip, HardSwish,
 * SiLU's Sigmoid and Mul, ..), may take the depthwise conv reading its
 * output in the same block. The group keeps the conv as its anchor and the
 * layouts alter-layout gave (conv2d_nchwc's and dwconv2d_nchwc's), so the
 * workload key is the two convs' nodes and it parses back into the same
 * pair.
 *
 * Cost model: fusing trades the wide tensor's round trip through memory
 * (written by the expand, read kh*kw/(sh*sw) times by the depthwise, in
 * another task split) for the halo rows computed twice at band boundaries
 * and the held rows' bookkeeping. It wins when the wide tensor is more than
 * half the L2 (KILN_EXPDW_MIN_L2_FRACTION: the separate expand's output
 * then no longer stays in the L2 beside its input); below that the separate
 * kernels read it from the L2 and fusing was 0-2% slower (one thread,
 * kiln_kernels_expdw.h's figures).
 *
 * Epilogues: the expand's bias, then a Relu/Clip prefix in registers, the
 * rest of its chain as a generated function over each sub-band's new wide
 * rows; the depthwise's bias and Relu/Clip prefix in its header, the rest
 * of the group (any operand the generic epilogue reads) generated, on each
 * output span right after it is written. Knobs: the expand's register tile,
 * the depthwise's, rows and channel blocks per task, rows per sub-band, the
 * order of expand and depthwise in a sub-band. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_expdw.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

/* Fuse only when the wide tensor is larger than this fraction of the L2
 * (see the top): 2 MB L2, mobilenet-v2's 56x56x144 (1.8 MB) fuses, its
 * 28x28x192 (0.6 MB) does not. */
#define KILN_EXPDW_MIN_L2_FRACTION 0.5

static int node_index(const kiln_graph *g, const int *nodes, int n_nodes, int v)
{
    for (int i = 0; i < n_nodes; i++)
        if (g->nodes[nodes[i]]->outputs[0] == v)
            return i;
    return -1;
}

/* The expand conv nodes[0]: a blocked 1x1, stride 1, unpadded, groups 1
 * conv with constant weights (conv2d_nchwc's layouts), writing whole blocks. */
static bool expand_ok(const kiln_graph *g, const kiln_node *n, kiln_win2d *w)
{
    if (!kiln_tpl_conv_operands(g, n) || !kiln_geom_win2d(g, n, w) || w->groups != 1 ||
        w->kh != 1 || w->kw != 1 || w->sh != 1 || w->sw != 1 || w->pt || w->pl || w->pb ||
        w->pr || w->bin < 2 || w->bout < 2 || w->m % w->bout != 0)
        return false;
    const kiln_value *wv = g->values[n->inputs[1]];
    if (wv->layout.kind != KILN_LAYOUT_OIHWIO || wv->layout.block_a != w->bin ||
        wv->layout.block_b != w->bout)
        return false;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        const kiln_value *b = g->values[n->inputs[2]];
        if (b->kind != KILN_VALUE_CONST || !b->data || kiln_shape_numel(&b->shape) != w->m)
            return false;
    }
    return true;
}

static bool pair(const kiln_target *tg, const kiln_graph *g, const int *nodes, int n_nodes,
                 const kiln_node *next, kiln_epi_kind *epi)
{
    kiln_win2d we, wd;
    const kiln_node *e = g->nodes[nodes[0]];
    if (next->op != KILN_OP_CONV || !kiln_conv_is_depthwise(g, next) ||
        !kiln_tpl_conv_operands(g, next) || !kiln_geom_win2d(g, next, &wd) || !expand_ok(g, e, &we))
        return false;
    /* the expand's epilogue: every operand a value of the group */
    for (int i = 1; i < n_nodes; i++) {
        const kiln_node *m = g->nodes[nodes[i]];
        if (m->n_outputs != 1)
            return false;
        for (int k = 0; k < m->n_inputs; k++)
            if (m->inputs[k] < 0 || node_index(g, nodes, i, m->inputs[k]) < 0)
                return false;
    }
    const kiln_value *x = g->values[next->inputs[0]], *y = g->values[next->outputs[0]];
    if (x->layout.kind != KILN_LAYOUT_NCHWC || x->layout.block_a != we.bout ||
        !kiln_layout_equal(y->layout, x->layout) || wd.c != we.m || wd.h != we.oh ||
        wd.w != we.ow || wd.n != we.n)
        return false;
    if (next->n_inputs > 2 && next->inputs[2] >= 0 &&
        g->values[next->inputs[2]]->kind != KILN_VALUE_CONST)
        return false;
    /* the cost model: the wide tensor must not fit in the L2 */
    double wide = 4.0 * (double)we.n * (double)we.m * (double)we.oh * (double)we.ow;
    if (wide <= KILN_EXPDW_MIN_L2_FRACTION * (double)tg->l2_bytes)
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

/* The index in the group of the depthwise conv (the second anchor). */
static int dw_index(const kiln_graph *g, const kiln_group *gr)
{
    for (int i = 1; i < gr->n_nodes; i++)
        if (g->nodes[gr->nodes[i]]->op == KILN_OP_CONV)
            return i;
    return gr->n_nodes;
}

/* The header's part of the chain gr->nodes[from, to) after an anchor (node
 * from - 1): Relu then Clip at most once each, as long a prefix as no later
 * node of the chain reads past (it sees the prefix's last value only).
 * Adds the flags to *flags; returns the first node left to generated code. */
static int header_prefix(const kiln_graph *g, const kiln_group *gr, int from, int to, int *flags,
                         float *lo, float *hi)
{
    int f = 0, i = from;
    *lo = -FLT_MAX;
    *hi = FLT_MAX;
    for (; i < to; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        if (m->op == KILN_OP_RELU && !(f & (KILN_EPI_RELU | KILN_EPI_CLIP))) {
            f |= KILN_EPI_RELU;
        } else if (m->op == KILN_OP_CLIP && !(f & KILN_EPI_CLIP)) {
            f |= KILN_EPI_CLIP;
            *lo = kiln_attr_float(m, "min", *lo);
            *hi = kiln_attr_float(m, "max", *hi);
        } else {
            break;
        }
    }
    for (int j = i; j < to; j++) {
        const kiln_node *m = g->nodes[gr->nodes[j]];
        for (int k = 0; k < m->n_inputs; k++) {
            int pi = m->inputs[k] >= 0 ? node_index(g, gr->nodes, gr->n_nodes, m->inputs[k]) : -1;
            if (pi >= from - 1 && pi < i - 1) {
                *lo = -FLT_MAX;
                *hi = FLT_MAX;
                return from;
            }
        }
    }
    *flags |= f;
    return i;
}

/* Where the expand's generated chain starts (the header prefix before it). */
static int wide_from(const kiln_graph *g, const kiln_group *gr)
{
    int flags = 0;
    float lo, hi;
    return header_prefix(g, gr, 1, dw_index(g, gr), &flags, &lo, &hi);
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    int di = dw_index(g, gr);
    if (di >= gr->n_nodes)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "expand+depthwise group without a depthwise conv");
    const kiln_node *en = g->nodes[gr->nodes[0]], *dn = g->nodes[gr->nodes[di]];
    kiln_win2d we, wd;
    kiln_geom_win2d(g, en, &we);
    kiln_geom_win2d(g, dn, &wd);
    kiln_expdw_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    p->e = kiln_tpl_conv_params(&we, 1, (int)we.bin, (int)we.bout);
    p->e.epilogue = en->n_inputs > 2 && en->inputs[2] >= 0 ? KILN_EPI_BIAS : 0;
    header_prefix(g, gr, 1, di, &p->e.epilogue, &p->e.clip_min, &p->e.clip_max);
    p->d = (kiln_dwconv_params){.n = (int)wd.n, .c = (int)wd.c, .h = (int)wd.h, .w = (int)wd.w,
                                .oh = (int)wd.oh, .ow = (int)wd.ow, .kh = (int)wd.kh,
                                .kw = (int)wd.kw, .sh = (int)wd.sh, .sw = (int)wd.sw,
                                .dh = (int)wd.dh, .dw = (int)wd.dw, .pad_t = (int)wd.pt,
                                .pad_l = (int)wd.pl, .pad_b = (int)wd.pb, .pad_r = (int)wd.pr,
                                .cb = wd.bin};
    p->d.epilogue = dn->n_inputs > 2 && dn->inputs[2] >= 0 ? KILN_EPI_BIAS : 0;
    t->epi_from = header_prefix(g, gr, di + 1, gr->n_nodes, &p->d.epilogue, &p->d.clip_min,
                                &p->d.clip_max);
    t->residual_arg = -1;
    if (!kiln_expdw_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the expand+depthwise template rejects it",
                           en->name);
    kiln_expdw_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_conv_plan q = kiln_conv_plan_of(&p->e);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->e.ow_tile,
                                 (int)offsetof(kiln_expdw_params, e.ow_tile));
    for (int v = 2; v <= kiln_conv_max_t(kiln_conv_model_isa(p->e.cb_out), 1); v += 2)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->e.ow_tile);
    k = kiln_knob_add(t, "oc_tile", KILN_KNOB_TILE, p->e.oc_tile,
                      (int)offsetof(kiln_expdw_params, e.oc_tile));
    for (int v = 1; v <= KILN_CONV_MAXO && v <= q.cob; v++)
        kiln_knob_choice(k, v);
    k = kiln_knob_add(t, "dw_ow_tile", KILN_KNOB_TILE, p->d.ow_tile,
                      (int)offsetof(kiln_expdw_params, d.ow_tile));
    for (int v = 1; v <= KILN_DWCONV_MAXT && v <= p->d.ow; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->d.ow_tile);
    k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                      (int)offsetof(kiln_expdw_params, oh_tile));
    kiln_knob_pow2(k, p->d.oh, true);
    k = kiln_knob_add(t, "oc_group", KILN_KNOB_TILE, p->oc_group,
                      (int)offsetof(kiln_expdw_params, oc_group));
    kiln_knob_pow2(k, (int)q.cob, true);
    k = kiln_knob_add(t, "sub_rows", KILN_KNOB_TILE, p->sub_rows,
                      (int)offsetof(kiln_expdw_params, sub_rows));
    kiln_knob_pow2(k, p->d.oh, true);
    k = kiln_knob_add(t, "order", KILN_KNOB_ORDER, p->order,
                      (int)offsetof(kiln_expdw_params, order));
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    k = kiln_knob_add(t, "cb_in", KILN_KNOB_BLOCK, p->e.cb_in,
                      (int)offsetof(kiln_expdw_params, e.cb_in));
    kiln_knob_choice(k, p->e.cb_in);
    k = kiln_knob_add(t, "cb", KILN_KNOB_BLOCK, p->e.cb_out,
                      (int)offsetof(kiln_expdw_params, e.cb_out));
    kiln_knob_choice(k, p->e.cb_out);
    t->flops = kiln_expdw_flops(p);
    return KILN_OK;
}

/* Packs one conv's weights (the expand's with the conv header, the
 * depthwise's with its own) into a weights tensor replacing the constant. */
static kiln_status pack_one(kiln_lowered *l, kiln_task *t, const kiln_node *n, bool expand,
                            kiln_error *err)
{
    const kiln_expdw_params *p = t->params;
    const kiln_value *wv = l->ctx->g->values[n->inputs[1]];
    int64_t floats = expand ? kiln_conv_packed_weight_floats(&p->e)
                            : kiln_dwconv_packed_weight_floats(&p->d);
    char lb[32], key[80];
    if (expand) {
        snprintf(lb, sizeof lb, "OIHW%di%do", p->e.cb_in, p->e.cb_out);
        kiln_tpl_params_key(key, sizeof key, "expdw-e", &p->e, sizeof p->e);
    } else {
        snprintf(lb, sizeof lb, "C%dc_HW%dc", p->d.cb, p->d.cb);
        kiln_tpl_params_key(key, sizeof key, "expdw-d", &p->d, sizeof p->d);
    }
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK || hit)
        return s;
    float *packed;
    if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
        return s;
    if (expand)
        kiln_conv_pack_weights(&p->e, wv->data, packed);
    else
        kiln_dwconv_pack_weights(&p->d, wv->data, packed);
    return kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err);
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    kiln_status s = pack_one(l, t, g->nodes[gr->nodes[0]], true, err);
    if (s == KILN_OK)
        s = pack_one(l, t, g->nodes[gr->nodes[dw_index(g, gr)]], false, err);
    t->workspace = (int64_t)kiln_expdw_workspace_bytes(t->params);
    return s;
}

/* The expand's generated chain, nodes [from, dw): a function mapping wide
 * floats in place (its operands are the group's own values: pair). */
static void emit_wide_epi(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int from, int di)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    kiln_sb_puts(b, "static void wide_epi_(float *p_, int64_t len_)\n{\n"
                    "#pragma GCC ivdep\n    for (int64_t i = 0; i < len_; i++) {\n"
                    "        float v = p_[i];\n");
    for (int i = from; i < di; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        char ops[4][16];
        const char *opp[4];
        int nx = m->n_inputs < 4 ? m->n_inputs : 4;
        for (int k = 0; k < nx; k++) {
            int pi = node_index(g, gr->nodes, gr->n_nodes, m->inputs[k]);
            if (pi < from)
                snprintf(ops[k], sizeof ops[k], "v");
            else
                snprintf(ops[k], sizeof ops[k], "e%d", pi);
            opp[k] = ops[k];
        }
        char out[16];
        snprintf(out, sizeof out, "e%d", i);
        kiln_sb_printf(b, "        float %s; ", out);
        kiln_expr_emit(b, m, opp, nx, out);
        kiln_sb_puts(b, "\n");
    }
    kiln_sb_printf(b, "        p_[i] = e%d;\n    }\n}\n\n", di - 1);
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    const kiln_expdw_params *p = t->params;
    int di = dw_index(g, gr), wf = wide_from(g, gr);
    const kiln_node *en = g->nodes[gr->nodes[0]], *dn = g->nodes[gr->nodes[di]];
    /* the expand's tile widths: only those its loops take are instantiated */
    const int isa = kiln_conv_model_isa(p->e.cb_out);
    kiln_emit_prologue_tiles(b, l, t, "KILN_CONV", kiln_expdw_pixel_tiles(p, isa),
                             kiln_expdw_oc_tiles(p, isa),
                             kiln_conv_ps_bit(isa, p->e.cb_in, p->e.cb_in), /* staged rows */
                             "kiln_kernels_expdw.h");
    const kiln_conv_params *e = &p->e;
    const kiln_dwconv_params *d = &p->d;
    kiln_sb_printf(b,
                   "static const kiln_expdw_params P_ = {\n"
                   "    .e = {.n = %d, .c_in = %d, .h = %d, .w = %d, .c_out = %d, .oh = %d, .ow = %d,\n"
                   "          .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1,\n"
                   "          .cb_in = %d, .cb_out = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "          .ow_tile = %d, .oc_tile = %d},\n",
                   e->n, e->c_in, e->h, e->w, e->c_out, e->oh, e->ow, e->cb_in, e->cb_out,
                   e->epilogue, (double)e->clip_min, (double)e->clip_max, e->ow_tile, e->oc_tile);
    kiln_sb_printf(b,
                   "    .d = {.n = %d, .c = %d, .h = %d, .w = %d, .oh = %d, .ow = %d, .kh = %d, .kw = %d,\n"
                   "          .sh = %d, .sw = %d, .dh = %d, .dw = %d, .pad_t = %d, .pad_l = %d, .pad_b = %d,\n"
                   "          .pad_r = %d, .cb = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "          .ow_tile = %d},\n"
                   "    .oh_tile = %d, .oc_group = %d, .sub_rows = %d, .order = %d,\n};\n\n",
                   d->n, d->c, d->h, d->w, d->oh, d->ow, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw,
                   d->pad_t, d->pad_l, d->pad_b, d->pad_r, d->cb, d->epilogue, (double)d->clip_min,
                   (double)d->clip_max, d->ow_tile, p->oh_tile, p->oc_group, p->sub_rows, p->order);
    bool wide_epi = wf < di, out_epi = kiln_task_has_epilogue(l, t);
    if (wide_epi)
        emit_wide_epi(b, l, t, wf, di);
    if (out_epi) {
        /* the rest of the group on each output span, still in cache */
        kiln_sb_puts(b, "static void out_epi_(void *ctx_, int64_t f_, int64_t len_)\n{\n"
                        "    const int thread_ = 0;\n");
        kiln_emit_arg_ptrs(b, t);
        kiln_sb_puts(b, "    {\n");
        kiln_emit_epilogue_span(b, l, t, "f_", "len_");
        kiln_sb_puts(b, "    }\n}\n\n");
    }
    int xa = kiln_task_arg(t, en->inputs[0]), wea = kiln_task_arg(t, en->inputs[1]);
    int bea = en->n_inputs > 2 && en->inputs[2] >= 0 ? kiln_task_arg(t, en->inputs[2]) : -1;
    int wda = kiln_task_arg(t, dn->inputs[1]);
    int bda = dn->n_inputs > 2 && dn->inputs[2] >= 0 ? kiln_task_arg(t, dn->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b, "    kiln_expdw_run(&P_, a%d, a%d, ", xa, wea);
    kiln_emit_arg_or_null(b, bea, false);
    kiln_sb_printf(b, ", a%d, ", wda);
    kiln_emit_arg_or_null(b, bda, false);
    kiln_sb_printf(b, ", o0, begin_, end_, %s, %s, %s, ctx_);\n}\n", KILN_TASK_WS,
                   wide_epi ? "wide_epi_" : "NULL", out_epi ? "out_epi_" : "NULL");
    kiln_emit_entry(b, t, "kiln_expdw_tasks(&P_)", 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_expand_dwconv2d_nchwc = {
    .name = "expand_dwconv2d_nchwc",
    .space = space,
    .pack = pack,
    .emit = emit,
    .pair = pair,
};
