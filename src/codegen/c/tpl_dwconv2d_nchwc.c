/* codegen/c/tpl_dwconv2d_nchwc.c: depthwise convolution (group == C_in ==
 * C_out) on NCHW{b}c, kiln_kernels_dwconv.h: weights [C/b][kh][kw][b],
 * register tiles of ow_tile pixels, bias/residual/relu/clip epilogue.
 *
 * Layout: it keeps the block of its input, also one that does not divide C
 * when the padding is at most C/3 (mobilenet-v3's 72 and 120 channels arrive
 * from their expand conv as 5 and 8 blocks of 16: re-blocking them to 8c
 * cost a layout transform per block, ~8% of the network, and half-width
 * vectors; the padded channels compute act(0 + 0), as a padded conv's do);
 * otherwise, the largest of vec, vec/2, .. dividing C. A channel count no
 * block > 1 divides stays row-major and goes to conv2d_direct. Knobs: ow_tile (register tile) and oh_tile (rows per
 * task), defaults from the header's model. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_dwconv.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (!kiln_tpl_conv_operands(g, n) || !kiln_conv_is_depthwise(g, n) ||
        g->values[n->inputs[0]]->layout.kind != KILN_LAYOUT_NCHWC)
        return false;
    *epi = KILN_EPI_KIND_ANY; /* the header's part, then kiln_emit_epilogue_span */
    return true;
}

static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    if (n->op != KILN_OP_CONV || !kiln_conv_is_depthwise(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    if (x->dtype != KILN_DTYPE_FLOAT32 || w->kind != KILN_VALUE_CONST || !w->data)
        return false;
    int64_t c = x->shape.dims[1];
    int b = in.kind == KILN_LAYOUT_NCHWC ? in.block_a : 1;
    const kiln_value *bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    bool padded_ok = b > 1 && (c + b - 1) / b * b - c <= c / 3 &&
                     (!bias || (bias->kind == KILN_VALUE_CONST && bias->data));
    if (b == 1 || (c % b != 0 && !padded_ok)) {
        b = 1;
        for (int v = tg->vec; v > 1; v /= 2)
            if (c % v == 0) {
                b = v;
                break;
            }
    }
    if (b == 1)
        return false;
    kiln_layout bl = {KILN_LAYOUT_NCHWC, b, 0};
    out->in = out->out = bl;
    out->weight = (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0};
    return true;
}

/* The one block choice (it follows the input's block), with its cost for
 * the layout DP (template.blocks): the padded channels in full, and a
 * narrower vector at b / vec of full speed, as conv2d_nchwc's output
 * blocks. */
static int blocks(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                  kiln_tpl_block *out)
{
    if (!layout(tg, g, n, in, &out[0].lay))
        return 0;
    int64_t c = g->values[n->inputs[0]]->shape.dims[1];
    int b = out[0].lay.out.block_a;
    double pad = (double)((c + b - 1) / b * b) / (double)c;
    out[0].cost = pad * (double)(tg->vec > b ? tg->vec : b) / (double)b;
    return 1;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_dwconv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    *p = (kiln_dwconv_params){.n = (int)w.n, .c = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                              .oh = (int)w.oh, .ow = (int)w.ow, .kh = (int)w.kh, .kw = (int)w.kw,
                              .sh = (int)w.sh, .sw = (int)w.sw, .dh = (int)w.dh, .dw = (int)w.dw,
                              .pad_t = (int)w.pt, .pad_l = (int)w.pl, .pad_b = (int)w.pb,
                              .pad_r = (int)w.pr, .cb = w.bin};
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_dwconv_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the depthwise template rejects it",
                           n->name);
    kiln_dwconv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->ow_tile,
                                 (int)offsetof(kiln_dwconv_params, ow_tile));
    for (int v = 1; v <= KILN_DWCONV_MAXT && v <= p->ow; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->ow_tile);
    k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                      (int)offsetof(kiln_dwconv_params, oh_tile));
    kiln_knob_pow2(k, p->oh, true);
    k = kiln_knob_add(t, "cb", KILN_KNOB_BLOCK, p->cb, (int)offsetof(kiln_dwconv_params, cb));
    kiln_knob_choice(k, p->cb); /* the block alter-layout applied: fixed in a model */
    t->flops = kiln_dwconv_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_dwconv_params *p = t->params;
    int64_t floats = kiln_dwconv_packed_weight_floats(p);
    char lb[32], key[80];
    snprintf(lb, sizeof lb, "C%dc_HW%dc", p->cb, p->cb);
    kiln_tpl_params_key(key, sizeof key, "dwconv", p, sizeof *p);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK)
        return s;
    if (!hit) {
        float *packed;
        if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
            return s;
        kiln_dwconv_pack_weights(p, wv->data, packed);
        if ((s = kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err)) != KILN_OK)
            return s;
    }
    /* padded channels: the kernel reads the bias of whole blocks */
    if ((s = kiln_tpl_pad_bias(l, t, n, p->c, p->cb, err)) != KILN_OK)
        return s;
    t->workspace = (int64_t)kiln_dwconv_workspace_bytes(p); /* gathered border windows */
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_dwconv_params *p = t->params;
    static const char *const hdr[] = {"kiln_kernels_dwconv.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_dwconv_params P_ = {\n"
                   "    .n = %d, .c = %d, .h = %d, .w = %d, .oh = %d, .ow = %d, .kh = %d, .kw = %d,\n"
                   "    .sh = %d, .sw = %d, .dh = %d, .dw = %d, .pad_t = %d, .pad_l = %d, .pad_b = %d,\n"
                   "    .pad_r = %d, .cb = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "    .ow_tile = %d, .oh_tile = %d,\n};\n\n",
                   p->n, p->c, p->h, p->w, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw,
                   p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->cb, p->epilogue, (double)p->clip_min,
                   (double)p->clip_max, p->ow_tile, p->oh_tile);
    kiln_tpl_emit_conv_tasks(b, l, t, "kiln_dwconv", false);
    return KILN_OK;
}

const kiln_template kiln_tpl_dwconv2d_nchwc = {
    .name = "dwconv2d_nchwc",
    .match = match,
    .layout = layout,
    .blocks = blocks,
    .space = space,
    .pack = pack,
    .emit = emit,
};
