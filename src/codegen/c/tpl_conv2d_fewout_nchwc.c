/* codegen/c/tpl_conv2d_fewout_nchwc.c: convolutions with few output
 * channels (1 to KILN_CONVRED_MAXO, groups == 1, float32, constant
 * weights): an image-to-image network's last conv to RGB, a depth or mask
 * head, a 1- or 2-class segmentation head.
 *
 * The blocked conv (conv2d_nchwc) vectorises over output channels and pads
 * 3 channels to a 16-lane block: 5.3x the FMAs, and a transform of the
 * padded output back to NCHW (32 -> 3, 3x3 on 192x192: 14% of peak). This
 * template reduces over the input channels instead (kiln_kernels_convred.h):
 * the input stays in the NCHW{vec}c of the convs before it (or is
 * transformed to it from another layout), every lane of every FMA is
 * useful, and the output is written row-major, NCHW. It takes a conv where
 * the reduction pays by kiln_convred_pays (K = C_in x KH x KW large enough
 * that one horizontal add per output value is cheap against the K / vec
 * FMAs; an RGB image's 3 input channels never do) and is asked before the
 * blocked templates (templates.def), whose layouts it replaces.
 *
 * The epilogue: the header's bias, residual Add, Relu and Clip, then any
 * other fused elementwise node (Tanh, Sigmoid, ...) on each task's output
 * rows, one span per output channel. Knob: oh_tile (rows per task); the
 * register tile is fixed per output count (kiln_convred_tile_width). */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_convred.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

/* A conv this template takes on a target of vec lanes. */
static bool takes(const kiln_target *tg, const kiln_graph *g, const kiln_node *n)
{
    kiln_win2d w;
    if (!kiln_tpl_conv_operands(g, n) || kiln_attr_int(n, "group", 1) != 1 ||
        !kiln_geom_win2d(g, n, &w) || w.groups != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *wt = g->values[n->inputs[1]];
    if (x->shape.rank != 4 || !wt->data || wt->dtype != KILN_DTYPE_FLOAT32)
        return false;
    const kiln_value *bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    if (bias && (bias->kind != KILN_VALUE_CONST || !bias->data))
        return false;
    return kiln_convred_pays(w.c, w.kh, w.kw, w.m, tg->vec);
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    if (n->op != KILN_OP_CONV || n->n_inputs < 2 ||
        g->values[n->inputs[0]]->layout.kind != KILN_LAYOUT_NCHWC ||
        g->values[n->inputs[1]]->layout.kind != KILN_LAYOUT_ROW_MAJOR ||
        g->values[n->outputs[0]]->layout.kind != KILN_LAYOUT_ROW_MAJOR || !takes(tg, g, n))
        return false;
    *epi = KILN_EPI_KIND_ANY; /* the header's part, then kiln_emit_epilogue_span */
    return true;
}

/* The input in NCHW{vec}c (kept if it arrives so, else transformed), the
 * weight as it is (packed by pack()), the output row-major. */
static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    (void)in;
    if (n->op != KILN_OP_CONV || tg->vec < 4 || !takes(tg, g, n))
        return false;
    out->in = (kiln_layout){KILN_LAYOUT_NCHWC, tg->vec, 0};
    out->weight = (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0};
    out->out = (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0};
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_convred_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    *p = (kiln_convred_params){.n = (int)w.n, .c_in = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                               .c_out = (int)w.m, .oh = (int)w.oh, .ow = (int)w.ow,
                               .kh = (int)w.kh, .kw = (int)w.kw, .sh = (int)w.sh,
                               .sw = (int)w.sw, .dh = (int)w.dh, .dw = (int)w.dw,
                               .pad_t = (int)w.pt, .pad_l = (int)w.pl, .pad_b = (int)w.pb,
                               .pad_r = (int)w.pr, .cb = w.bin};
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_convred_supported(p) || w.bin < 2 || w.bout != 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "conv '%s': the few-output-channel template rejects it", n->name);
    kiln_convred_default_params(p, 2);
    kiln_knob *k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                                 (int)offsetof(kiln_convred_params, oh_tile));
    kiln_knob_pow2(k, p->oh, false);
    t->flops = kiln_convred_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_convred_params *p = t->params;
    int64_t floats = kiln_convred_packed_weight_floats(p);
    char lb[48], key[80];
    snprintf(lb, sizeof lb, "C%dc_HW%do%dc", p->cb, p->c_out, p->cb);
    kiln_tpl_params_key(key, sizeof key, "convred", p, sizeof *p);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK || hit)
        return s;
    float *packed;
    if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
        return s;
    kiln_convred_pack_weights(p, wv->data, packed);
    return kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err);
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_convred_params *p = t->params;
    static const char *const hdr[] = {"kiln_kernels_convred.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_sb_printf(b,
                   "static const kiln_convred_params P_ = {\n"
                   "    .n = %d, .c_in = %d, .h = %d, .w = %d, .c_out = %d, .oh = %d, .ow = %d,\n"
                   "    .kh = %d, .kw = %d, .sh = %d, .sw = %d, .dh = %d, .dw = %d, .pad_t = %d,\n"
                   "    .pad_l = %d, .pad_b = %d, .pad_r = %d, .cb = %d, .epilogue = %d,\n"
                   "    .clip_min = %af, .clip_max = %af, .ow_tile = %d, .oh_tile = %d,\n};\n\n",
                   p->n, p->c_in, p->h, p->w, p->c_out, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw,
                   p->dh, p->dw, p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->cb, p->epilogue,
                   (double)p->clip_min, (double)p->clip_max, p->ow_tile, p->oh_tile);
    kiln_tpl_emit_conv_tasks(b, l, t, "kiln_convred", true);
    return KILN_OK;
}

const kiln_template kiln_tpl_conv2d_fewout_nchwc = {
    .name = "conv2d_fewout_nchwc",
    .match = match,
    .layout = layout,
    .space = space,
    .pack = pack,
    .emit = emit,
};
