/* codegen/c/tpl_gconv2d_nchwc.c: grouped convolutions with narrow groups
 * (C_in/groups == C_out/groups == gw, 2 <= gw < vec, vec a multiple of gw:
 * resnext's 32 groups of 4 and 8 channels) in the model's NCHW{vec}c layout.
 *
 * A channel block of vec channels holds vec/gw whole groups, in the input
 * and in the output alike (block k of the output reads block k of the
 * input only). The template runs such a conv as a grouped conv of
 * C_in/vec "block groups" of one block each, on kiln_kernels_conv.h's
 * full-width microkernels, with the weight packed block-diagonal: the
 * [vec][vec] weight tile of a tap holds each group's gw x gw weights on the
 * diagonal and zeros elsewhere. That does vec/gw times the FMAs of the
 * convolution (4x for gw = 4 at 16 lanes), but at the broadcast-FMA rate of
 * the dense template, where the alternative was the portable scalar
 * microkernel on NCHW4c (or the AVX2 one reading a row-major input, 1 input
 * channel per block) plus a layout transform on each side. The reported
 * FLOPs are the convolution's own, not the padded ones.
 *
 * Groups whose width is a multiple of the block are conv2d_nchwc's; this
 * template comes before it in templates.def and takes only the narrow ones
 * that gconv2d_planes_nchwc (before it) leaves: strided, 1x1 or column-
 * dilated ones, where writing that template's input planes costs more
 * than the FMAs it saves (kiln_gconv_planes_pay). The epilogue is the
 * header's (bias, residual Add, Relu, Clip). Knobs as conv2d_nchwc's (the
 * block sizes are fixed to vec). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (!kiln_tpl_conv_operands(g, n))
        return false;
    const kiln_layout *wl = &g->values[n->inputs[1]]->layout;
    if (wl->kind != KILN_LAYOUT_OIHWIO || wl->block_a != wl->block_b ||
        !kiln_tpl_narrow_group_width(g, n, wl->block_a))
        return false;
    *epi = KILN_EPI_KIND_HEADER;
    return true;
}

static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    (void)in;
    if (n->op != KILN_OP_CONV || kiln_conv_is_depthwise(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    if (x->dtype != KILN_DTYPE_FLOAT32 || w->kind != KILN_VALUE_CONST || !w->data ||
        w->shape.rank != 4 || !kiln_tpl_narrow_group_width(g, n, tg->vec))
        return false;
    out->in = (kiln_layout){KILN_LAYOUT_NCHWC, tg->vec, 0};
    out->weight = (kiln_layout){KILN_LAYOUT_OIHWIO, tg->vec, tg->vec};
    out->out = (kiln_layout){KILN_LAYOUT_NCHWC, tg->vec, 0};
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    int cb = g->values[n->inputs[1]]->layout.block_a;
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_conv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    /* the block groups: one block of vec/gw whole groups each */
    *p = kiln_tpl_conv_params(&w, (int)(w.c / cb), cb, cb);
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_conv_supported(p) || p->groups < 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "conv '%s': the narrow-group template rejects it", n->name);
    kiln_conv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->ow_tile,
                                 (int)offsetof(kiln_conv_params, ow_tile));
    for (int v = 1; v <= kiln_conv_max_t(kiln_conv_model_isa(p->cb_out), 1) && v <= p->ow; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->ow_tile);
    k = kiln_knob_add(t, "loop_order", KILN_KNOB_ORDER, p->loop_order,
                      (int)offsetof(kiln_conv_params, loop_order));
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                      (int)offsetof(kiln_conv_params, oh_tile));
    kiln_knob_pow2(k, p->oh, true);
    k = kiln_knob_add(t, "cb_in", KILN_KNOB_BLOCK, p->cb_in, (int)offsetof(kiln_conv_params, cb_in));
    kiln_knob_choice(k, p->cb_in);
    k = kiln_knob_add(t, "cb_out", KILN_KNOB_BLOCK, p->cb_out,
                      (int)offsetof(kiln_conv_params, cb_out));
    kiln_knob_choice(k, p->cb_out);
    /* the convolution's own FLOPs: w.c / w.groups input channels per output */
    t->flops = 2.0 * w.n * w.m * w.oh * w.ow * (double)(w.c / w.groups) * w.kh * w.kw;
    return KILN_OK;
}

/* w_oihw: [c_out][gw][kh][kw] (ONNX, gw = c_in / groups). packed: OIHW{cb}i{cb}o
 * of the block groups (one input block each), block-diagonal. */
static void pack_block_diagonal(const kiln_conv_params *p, int64_t gw, const float *w_oihw,
                                float *packed)
{
    int64_t cb = p->cb_out, taps = (int64_t)p->kh * p->kw, nb = p->c_out / cb;
    float *d = packed;
    for (int64_t ob = 0; ob < nb; ob++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t ci = 0; ci < cb; ci++)
                for (int64_t co = 0; co < cb; co++) {
                    int64_t oc = ob * cb + co, ic = ob * cb + ci;
                    *d++ = oc / gw == ic / gw ? w_oihw[(oc * gw + ic % gw) * taps + t] : 0.0f;
                }
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_conv_params *p = t->params;
    int64_t floats = kiln_conv_packed_weight_floats(p);
    if (floats != (int64_t)p->c_out * p->cb_in * p->kh * p->kw)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': unexpected packed weight size",
                           n->name);
    char lb[48], key[80];
    snprintf(lb, sizeof lb, "OIHW%di%do-blockdiag%lld", p->cb_in, p->cb_out,
             (long long)wv->shape.dims[1]);
    kiln_tpl_params_key(key, sizeof key, lb, p, sizeof *p); /* lb: the group width */
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK)
        return s;
    if (!hit) {
        float *packed;
        if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
            return s;
        pack_block_diagonal(p, wv->shape.dims[1], wv->data, packed);
        if ((s = kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err)) != KILN_OK)
            return s;
    }
    t->workspace = (int64_t)kiln_conv_workspace_bytes(p);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_conv_params *p = t->params;
    kiln_tpl_emit_conv_prologue(b, l, t);
    kiln_sb_printf(b, "/* narrow groups: %d block groups, block-diagonal weights */\n", p->groups);
    kiln_tpl_emit_conv_body(b, l, t);
    return KILN_OK;
}

const kiln_template kiln_tpl_gconv2d_nchwc = {
    .name = "gconv2d_nchwc",
    .match = match,
    .layout = layout,
    .space = space,
    .pack = pack,
    .emit = emit,
};
