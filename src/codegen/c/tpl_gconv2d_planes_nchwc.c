/* codegen/c/tpl_gconv2d_planes_nchwc.c: grouped convolutions with narrow groups
 * (C_in/groups == C_out/groups == gw, 2 <= gw < vec, vec a multiple of gw:
 * resnext's 32 groups of 4 and 8 channels) in the model's NCHW{vec}c layout,
 * column dilation 1.
 *
 * A channel block of vec channels holds vec/gw whole groups, in the input
 * and in the output alike (block k of the output reads block k of the
 * input only). The kernel (kiln_kernels_gconv.h) runs the conv as gw
 * depthwise convs over lane-permuted copies ("planes") of the input rows a
 * task reads, on the depthwise microkernels: every FMA useful, where
 * gconv2d_nchwc's block-diagonal weights do vec/gw times the FMAs. The
 * planes cost a store per input vector and plane, so the template takes
 * the convs where that is worth it (kiln_gconv_planes_pay: 3x3 and 5x5 at
 * stride 1, 3x3 at stride 2 with gw 4; not 1x1 convs, nor stride 2 with gw
 * 8) with a column dilation of 1, and leaves the rest to gconv2d_nchwc,
 * after it in templates.def (conv2d_nchwc, after both, takes groups of
 * whole blocks). The epilogue is the header's (bias,
 * residual Add, Relu, Clip), then any other fused node on each task's
 * output. Knobs: ow_tile, oh_tile. The layouts (NCHW{vec}c in and out) are
 * gconv2d_nchwc's choice for every narrow grouped conv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_gconv.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

/* A narrow grouped conv this template takes: column dilation 1 and planes
 * that pay (kiln_gconv_planes_pay). */
static bool takes(const kiln_graph *g, const kiln_node *n, int block)
{
    kiln_win2d w;
    int64_t gw = kiln_tpl_narrow_group_width(g, n, block);
    return gw && kiln_geom_win2d(g, n, &w) && w.dw == 1 &&
           kiln_gconv_planes_pay((int)w.kh, (int)w.kw, (int)w.sh, (int)w.sw, (int)gw, block);
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (!kiln_tpl_conv_operands(g, n))
        return false;
    const kiln_layout *wl = &g->values[n->inputs[1]]->layout;
    if (wl->kind != KILN_LAYOUT_OIHWIO || wl->block_a != wl->block_b ||
        !takes(g, n, wl->block_a))
        return false;
    *epi = KILN_EPI_KIND_ANY; /* the header's part, then kiln_emit_epilogue_span */
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_gconv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    *p = (kiln_gconv_params){.n = (int)w.n, .c = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                             .oh = (int)w.oh, .ow = (int)w.ow, .kh = (int)w.kh, .kw = (int)w.kw,
                             .sh = (int)w.sh, .sw = (int)w.sw, .dh = (int)w.dh,
                             .pad_t = (int)w.pt, .pad_l = (int)w.pl, .pad_b = (int)w.pb,
                             .pad_r = (int)w.pr, .gw = (int)(w.c / w.groups), .cb = w.bin};
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_gconv_supported(p) || w.m != w.c || w.dw != 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "conv '%s': the narrow-group template rejects it", n->name);
    kiln_gconv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->ow_tile,
                                 (int)offsetof(kiln_gconv_params, ow_tile));
    for (int v = 1; v <= KILN_DWCONV_MAXT && v <= p->ow; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->ow_tile);
    k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                      (int)offsetof(kiln_gconv_params, oh_tile));
    kiln_knob_pow2(k, p->oh, true);
    t->flops = kiln_gconv_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_gconv_params *p = t->params;
    int64_t floats = kiln_gconv_packed_weight_floats(p);
    char lb[48], key[80];
    snprintf(lb, sizeof lb, "C%dc_HW%dg%dc", p->cb, p->gw, p->cb);
    kiln_tpl_params_key(key, sizeof key, "gconv", p, sizeof *p);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK)
        return s;
    if (!hit) {
        float *packed;
        if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
            return s;
        kiln_gconv_pack_weights(p, wv->data, packed);
        if ((s = kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err)) != KILN_OK)
            return s;
    }
    t->workspace = (int64_t)kiln_gconv_workspace_bytes(p); /* a band's planes */
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_gconv_params *p = t->params;
    static const char *const hdr[] = {"kiln_kernels_gconv.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_gconv_params P_ = {\n"
                   "    .n = %d, .c = %d, .h = %d, .w = %d, .oh = %d, .ow = %d, .kh = %d, .kw = %d,\n"
                   "    .sh = %d, .sw = %d, .dh = %d, .pad_t = %d, .pad_l = %d, .pad_b = %d,\n"
                   "    .pad_r = %d, .gw = %d, .cb = %d, .epilogue = %d, .clip_min = %af,\n"
                   "    .clip_max = %af, .ow_tile = %d, .oh_tile = %d,\n};\n\n",
                   p->n, p->c, p->h, p->w, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw, p->dh,
                   p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->gw, p->cb, p->epilogue,
                   (double)p->clip_min, (double)p->clip_max, p->ow_tile, p->oh_tile);
    kiln_tpl_emit_conv_tasks(b, l, t, "kiln_gconv", false);
    return KILN_OK;
}

const kiln_template kiln_tpl_gconv2d_planes_nchwc = {
    .name = "gconv2d_planes_nchwc",
    .match = match,
    .space = space,
    .pack = pack,
    .emit = emit,
};
