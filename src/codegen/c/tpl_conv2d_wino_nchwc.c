/* codegen/c/tpl_conv2d_wino_nchwc.c: 3x3 stride-1 convolutions (groups 1,
 * pads up to 2, or with an equal row and column dilation d up to
 * KILN_WINO_MAX_DIL, pads up to 2d) by Winograd F(4x4, 3x3) in the model's
 * NCHW{vec}c layout (kiln_kernels_wino.h): 4x fewer multiply-adds than the
 * direct conv, for transforms of the input and output and weights 4x
 * larger. A dilated conv (whose phases hold at least one whole tile row
 * and column: not DeepLab's ASPP rates 12-36 on a 32x32 map, where most
 * taps read the padding) runs as d x d phases of undilated tiles read and
 * written with strides (the header's top): fcn-resnet50's atrous 3x3s (d 2
 * on 256 channels, d 4 on 512, 32x32 maps) ran on conv2d_nchwc at 90-95% of
 * the FMA peak, a third of the network's time.
 *
 * Which convs it takes (kiln_tpl_wino_takes): both channel counts at least
 * KILN_WINO_MIN_C (thin convs are dominated by the transforms) and at least
 * KILN_WINO_MIN_TILES 4x4 output tiles per image, so that each weight U
 * (36 x c_in x c_out floats, streamed from memory in a network) serves
 * enough tiles; smaller maps (resnet-50's 14x14 and 7x7 stages, with their
 * 2-9 MB of U per conv) stay with conv2d_nchwc, after this template in
 * templates.def, unless a measured block choice asks for Winograd
 * (KILN_TPL_ALGO_WINOGRAD on the node: kiln_tpl_wino_on_request, at least
 * KILN_WINO_REQUEST_MIN_TILES tiles): whether U streamed from memory costs
 * more than the 4x fewer FMAs save depends on the machine (on a Zen 4
 * EPYC resnet-50's 14x14 3x3s ran 1.55x faster in the network, its 7x7
 * ones 0.75x), so the tuner's layout stage times both. The layouts are conv2d_nchwc's (NCHW{vec}c in and out,
 * equal blocks); the epilogue is the header's (bias, residual Add, Relu,
 * Clip) at the output transform's store, then any other fused node on each
 * task's output rows. No input prologue: a pre-activation before such a
 * conv runs as its own kernel. Knobs: tile_T, oc_tile (the microkernel's
 * tile), th (tile rows per task). A dilated conv's tasks cover scattered
 * output rows, so it takes the header's epilogue only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_wino.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

#define KILN_WINO_MIN_C 32
#define KILN_WINO_MIN_TILES 49
#define KILN_WINO_REQUEST_MIN_TILES 4 /* a 7x7 map: 2 x 2 tiles */
#define KILN_WINO_MAX_DIL 16

/* The geometry the kernel runs well at all, with at least min_tiles output
 * tiles per image. */
static bool wino_geometry(const kiln_win2d *w, int64_t min_tiles)
{
    const int64_t d = w->dh;
    int64_t tiles = d * kiln_k_cdiv(kiln_k_cdiv(w->oh, d), 4) * d *
                    kiln_k_cdiv(kiln_k_cdiv(w->ow, d), 4);
    return w->kh == 3 && w->kw == 3 && w->sh == 1 && w->sw == 1 && d >= 1 &&
           d <= KILN_WINO_MAX_DIL && w->dw == d && w->groups == 1 && w->pt >= 0 &&
           w->pt <= 2 * d && w->pl >= 0 && w->pl <= 2 * d && w->pb >= 0 && w->pb <= 2 * d &&
           w->pr >= 0 && w->pr <= 2 * d && w->c >= KILN_WINO_MIN_C && w->m >= KILN_WINO_MIN_C &&
           tiles >= min_tiles && (d == 1 || (kiln_k_cdiv(w->oh, d) >= 4 &&
                                             kiln_k_cdiv(w->ow, d) >= 4));
}

bool kiln_tpl_wino_takes(const kiln_win2d *w)
{
    return wino_geometry(w, KILN_WINO_MIN_TILES);
}

bool kiln_tpl_wino_on_request(const kiln_win2d *w)
{
    return !kiln_tpl_wino_takes(w) && wino_geometry(w, KILN_WINO_REQUEST_MIN_TILES);
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    kiln_win2d w;
    if (!kiln_tpl_conv_operands(g, n) || !kiln_geom_win2d(g, n, &w))
        return false;
    if (!kiln_tpl_wino_takes(&w) &&
        !(kiln_attr_int(n, KILN_TPL_ALGO_ATTR, 0) == KILN_TPL_ALGO_WINOGRAD &&
          kiln_tpl_wino_on_request(&w)))
        return false;
    const kiln_layout *wl = &g->values[n->inputs[1]]->layout;
    if (wl->kind != KILN_LAYOUT_OIHWIO || wl->block_a != wl->block_b || wl->block_a != tg->vec)
        return false;
    /* the header's part, then kiln_emit_epilogue_span (undilated: a dilated
     * task's rows are scattered) */
    *epi = w.dh > 1 ? KILN_EPI_KIND_HEADER : KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    if (t->anchor != l->ctx->groups[t->group].nodes[0])
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the Winograd template takes no "
                           "input prologue", n->name);
    kiln_wino_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    *p = (kiln_wino_params){.n = (int)w.n, .c_in = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                            .c_out = (int)w.m, .oh = (int)w.oh, .ow = (int)w.ow,
                            .pad_t = (int)w.pt, .pad_l = (int)w.pl, .dil = (int)w.dh,
                            .cb = wv->layout.block_a};
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_wino_supported(p) || (p->dil > 1 && kiln_task_has_epilogue(l, t)))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the Winograd template rejects it",
                           n->name);
    kiln_wino_default_params(p, l->ctx->target.l2_bytes, 2);
    kiln_wino_plan q = kiln_wino_plan_of(p);
    int max_o = (int)(q.cob < KILN_CONV_MAXO ? q.cob : KILN_CONV_MAXO);
    kiln_knob *k = kiln_knob_add(t, "tile_T", KILN_KNOB_TILE, p->tile_T,
                                 (int)offsetof(kiln_wino_params, tile_T));
    for (int v = 1; v <= kiln_conv_max_t(kiln_conv_model_isa(p->cb), 1); v++)
        kiln_knob_choice(k, v); /* clamped to the oc tile's budget at run time */
    kiln_knob_choice(k, p->tile_T);
    k = kiln_knob_add(t, "oc_tile", KILN_KNOB_TILE, p->oc_tile,
                      (int)offsetof(kiln_wino_params, oc_tile));
    for (int v = 1; v <= max_o; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->oc_tile);
    k = kiln_knob_add(t, "th", KILN_KNOB_TILE, p->th, (int)offsetof(kiln_wino_params, th));
    kiln_knob_pow2(k, (int)q.nth, true);
    t->flops = kiln_wino_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_wino_params *p = t->params;
    int64_t floats = kiln_wino_packed_weight_floats(p);
    char lb[48], key[80];
    snprintf(lb, sizeof lb, "wino36_OI%di%do", p->cb, p->cb);
    kiln_tpl_params_key(key, sizeof key, "wino", p, sizeof *p);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK)
        return s;
    if (!hit) {
        float *packed;
        if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
            return s;
        kiln_wino_pack_weights(p, wv->data, packed);
        if ((s = kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err)) != KILN_OK)
            return s;
    }
    if ((s = kiln_tpl_pad_bias(l, t, n, p->c_out, p->cb, err)) != KILN_OK)
        return s;
    t->workspace = (int64_t)kiln_wino_workspace_bytes(p);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_wino_params *p = t->params;
    uint32_t tm, om; /* only the tile widths the products take are compiled */
    kiln_wino_tile_sets(p, kiln_conv_model_isa(p->cb), &tm, &om);
    const int isa = kiln_conv_model_isa(p->cb); /* the products: whole blocks, unit stride */
    kiln_emit_prologue_tiles(b, l, t, "KILN_CONV", tm, om, kiln_conv_ps_bit(isa, p->cb, p->cb),
                             "kiln_kernels_wino.h");
    char dil[32] = ""; /* undilated kernels' text as before */
    if (p->dil > 1)
        snprintf(dil, sizeof dil, " .dil = %d,", p->dil);
    kiln_sb_printf(b,
                   "static const kiln_wino_params P_ = {\n"
                   "    .n = %d, .c_in = %d, .h = %d, .w = %d, .c_out = %d, .oh = %d, .ow = %d,\n"
                   "    .pad_t = %d, .pad_l = %d,%s .cb = %d, .epilogue = %d, .clip_min = %af,\n"
                   "    .clip_max = %af, .tile_T = %d, .oc_tile = %d, .th = %d,\n};\n\n",
                   p->n, p->c_in, p->h, p->w, p->c_out, p->oh, p->ow, p->pad_t, p->pad_l, dil,
                   p->cb, p->epilogue, (double)p->clip_min, (double)p->clip_max, p->tile_T,
                   p->oc_tile, p->th);
    kiln_tpl_emit_conv_tasks(b, l, t, "kiln_wino", true);
    return KILN_OK;
}

const kiln_template kiln_tpl_conv2d_wino_nchwc = {
    .name = "conv2d_wino_nchwc",
    .match = match,
    .space = space,
    .pack = pack,
    .emit = emit,
};
