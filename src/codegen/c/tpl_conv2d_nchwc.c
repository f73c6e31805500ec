/* codegen/c/tpl_conv2d_nchwc.c: the blocked direct convolution
 * (kiln_kernels_conv.h) for 1-D/2-D float32 convs with constant weights,
 * groups == 1 or whole channel blocks per group.
 *
 * Layout (the block sizes are this template's decision; alter-layout applies
 * them): the input is read in whatever NCHW{b}c it arrives in, except that a
 * row-major input of 2 to 4 channels (an image) is first transformed to
 * NCHW{C}c, one block of all its channels: the microkernel then walks a
 * filter row's taps and channels as one contiguous run (with NCHW1c it loops
 * over each channel plane and each tap for a single FMA group: 49% of peak
 * against 70% on squeezenet's first conv, 69% against 88% on resnet's 7x7).
 * The output is NCHW{cb}c, cb the largest of vec, vec/2, .., 1 dividing
 * C_out (per group), or vec with the channels padded up to a multiple of vec
 * when groups == 1 and the padding costs at most a third of C_out (1000
 * classes -> 1008, mobilenet-v2's 24 channels -> 32: a third more FMAs, but
 * at the full vector width, and the consumer conv's input blocks are whole
 * vectors). The weight is OIHW{cb_in}i{cb}o, packed once here.
 *
 * Knobs: the register tile (ow_tile pixels x oc_tile channel blocks), the
 * input-channel blocks per accumulation pass, the loop order, and the task
 * split (oh_tile rows x oc_group channel blocks); the analytic defaults come
 * from the header's register/cache model (kiln_conv_default_params). The
 * block sizes cb_in and cb_out are knobs of kind block: chosen by layout()
 * with the neighbours in view, fixed within a whole model. The
 * epilogue: the header's bias, residual Add, Relu, Clip in registers, then
 * any other fused elementwise nodes (SiLU, HardSwish, ...) applied by
 * generated code to each task's output right after the task. */
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
    if (!kiln_tpl_conv_operands(g, n) || g->values[n->inputs[1]]->layout.kind != KILN_LAYOUT_OIHWIO)
        return false;
    *epi = KILN_EPI_KIND_ANY; /* the header's part, then kiln_emit_epilogue_span */
    return true;
}

static kiln_layout nchwc(int b)
{
    kiln_layout l = {KILN_LAYOUT_NCHWC, b, 0};
    return b <= 1 ? (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0} : l;
}

static int largest_block(int64_t c, int vec)
{
    for (int b = vec; b > 1; b /= 2)
        if (c % b == 0)
            return b;
    return 1;
}

static bool layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                   kiln_tpl_layout *out)
{
    if (n->op != KILN_OP_CONV || kiln_conv_is_depthwise(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const kiln_value *y = g->values[n->outputs[0]];
    if (x->shape.rank != 4 || x->dtype != KILN_DTYPE_FLOAT32 || w->kind != KILN_VALUE_CONST ||
        !w->data)
        return false;
    int vec = tg->vec;
    int64_t c_in = x->shape.dims[1], c_out = y->shape.dims[1];
    int64_t grp = kiln_attr_int(n, "group", 1);
    int cb_out = largest_block(grp > 1 ? c_out / grp : c_out, vec);
    const kiln_value *bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    if (grp == 1 && vec > 1 && cb_out < vec && (!bias || (bias->kind == KILN_VALUE_CONST && bias->data)) &&
        (c_out + vec - 1) / vec * vec - c_out <= c_out / 3)
        cb_out = vec; /* padded (the bias is padded when packing): see the top */
    int cb_in = in.kind == KILN_LAYOUT_NCHWC ? in.block_a : 1;
    if (grp > 1 && (c_in / grp) % cb_in != 0)
        cb_in = 1;
    if (grp == 1 && cb_in == 1 && c_in >= 2 && c_in <= 4)
        cb_in = (int)c_in; /* an image: one block of all its channels, see the top */
    if (grp > 1 && cb_out == 1 && cb_in == 1)
        return false; /* row-major: conv2d_direct */
    out->in = nchwc(cb_in);
    out->weight = (kiln_layout){KILN_LAYOUT_OIHWIO, cb_in, cb_out};
    out->out = nchwc(cb_out);
    return true;
}

/* A conv's geometry as kiln_conv_params with the given groups and blocks
 * (the tiles are left to kiln_conv_default_params): this template's and
 * gconv2d_nchwc's. */
kiln_conv_params kiln_tpl_conv_params(const kiln_win2d *w, int groups, int cb_in, int cb_out)
{
    return (kiln_conv_params){.n = (int)w->n, .c_in = (int)w->c, .h = (int)w->h, .w = (int)w->w,
                              .c_out = (int)w->m, .oh = (int)w->oh, .ow = (int)w->ow,
                              .kh = (int)w->kh, .kw = (int)w->kw, .sh = (int)w->sh,
                              .sw = (int)w->sw, .dh = (int)w->dh, .dw = (int)w->dw,
                              .pad_t = (int)w->pt, .pad_l = (int)w->pl, .pad_b = (int)w->pb,
                              .pad_r = (int)w->pr, .groups = groups, .cb_in = cb_in,
                              .cb_out = cb_out};
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_conv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    *p = kiln_tpl_conv_params(&w, (int)w.groups, wv->layout.block_a, wv->layout.block_b);
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    if (!kiln_conv_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the blocked template rejects it",
                           n->name);
    kiln_conv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_conv_plan q = kiln_conv_plan_of(p);
    int max_o = (int)(q.cob_g < KILN_CONV_MAXO ? q.cob_g : KILN_CONV_MAXO);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->ow_tile,
                                 (int)offsetof(kiln_conv_params, ow_tile));
    for (int v = 1; v <= kiln_conv_max_t(q.isa, 1) && v <= p->ow; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->ow_tile);
    k = kiln_knob_add(t, "oc_tile", KILN_KNOB_TILE, p->oc_tile,
                      (int)offsetof(kiln_conv_params, oc_tile));
    for (int v = 1; v <= max_o; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->oc_tile);
    k = kiln_knob_add(t, "ic_tile", KILN_KNOB_TILE, p->ic_tile,
                      (int)offsetof(kiln_conv_params, ic_tile));
    kiln_knob_pow2(k, (int)q.cib_g, true);
    k = kiln_knob_add(t, "loop_order", KILN_KNOB_ORDER, p->loop_order,
                      (int)offsetof(kiln_conv_params, loop_order));
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    k = kiln_knob_add(t, "oh_tile", KILN_KNOB_TILE, p->oh_tile,
                      (int)offsetof(kiln_conv_params, oh_tile));
    kiln_knob_pow2(k, p->oh, true);
    k = kiln_knob_add(t, "oc_group", KILN_KNOB_TILE, p->oc_group,
                      (int)offsetof(kiln_conv_params, oc_group));
    kiln_knob_pow2(k, (int)q.cob_g, true);
    /* the block sizes alter-layout applied (layout above): part of the
     * configuration, fixed within a model (the neighbours share them) */
    k = kiln_knob_add(t, "cb_in", KILN_KNOB_BLOCK, p->cb_in, (int)offsetof(kiln_conv_params, cb_in));
    kiln_knob_choice(k, p->cb_in);
    k = kiln_knob_add(t, "cb_out", KILN_KNOB_BLOCK, p->cb_out,
                      (int)offsetof(kiln_conv_params, cb_out));
    kiln_knob_choice(k, p->cb_out);
    t->flops = kiln_conv_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_conv_params *p = t->params;
    int64_t floats = kiln_conv_packed_weight_floats(p);
    float *packed = malloc(sizeof(float) * (size_t)floats + 1);
    if (!packed)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory packing '%s'", n->name);
    kiln_conv_pack_weights(p, wv->data, packed);
    char lb[32];
    snprintf(lb, sizeof lb, "OIHW%di%do", p->cb_in, p->cb_out);
    int tid = kiln_lower_weights(l, wv->id, lb, packed, (int64_t)sizeof(float) * floats);
    if (tid < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[kiln_task_arg(t, wv->id)] = tid;
    /* padded output channels: the kernel reads the bias of whole blocks */
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && p->c_out % p->cb_out != 0) {
        const kiln_value *bv = g->values[n->inputs[2]];
        if (bv->kind != KILN_VALUE_CONST || !bv->data || kiln_shape_numel(&bv->shape) != p->c_out)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': padded channels need a constant bias",
                               n->name);
        int64_t nb = (int64_t)(p->c_out + p->cb_out - 1) / p->cb_out * p->cb_out;
        float *pb = calloc((size_t)nb, sizeof(float));
        if (!pb)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory padding '%s'", n->name);
        memcpy(pb, bv->data, sizeof(float) * (size_t)p->c_out);
        snprintf(lb, sizeof lb, "pad%lld", (long long)nb);
        int bid = kiln_lower_weights(l, bv->id, lb, pb, (int64_t)sizeof(float) * nb);
        if (bid < 0)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        t->args[kiln_task_arg(t, bv->id)] = bid;
    }
    t->workspace = (int64_t)kiln_conv_workspace_bytes(p);
    return KILN_OK;
}

/* The params literal, the task function (kiln_conv_run, then the group's
 * epilogue beyond the header's on each task's output) and the entry of a
 * conv task whose params are a kiln_conv_params: this template's and
 * gconv2d_nchwc's. */
void kiln_tpl_emit_conv_body(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    const kiln_conv_params *p = t->params;
    kiln_sb_printf(b,
                   "static const kiln_conv_params P_ = {\n"
                   "    .n = %d, .c_in = %d, .h = %d, .w = %d, .c_out = %d, .oh = %d, .ow = %d,\n"
                   "    .kh = %d, .kw = %d, .sh = %d, .sw = %d, .dh = %d, .dw = %d,\n"
                   "    .pad_t = %d, .pad_l = %d, .pad_b = %d, .pad_r = %d, .groups = %d,\n"
                   "    .cb_in = %d, .cb_out = %d, .epilogue = %d, .clip_min = %af, .clip_max = %af,\n"
                   "    .ow_tile = %d, .oc_tile = %d, .ic_tile = %d, .loop_order = %d, .oh_tile = %d,\n"
                   "    .oc_group = %d,\n};\n\n",
                   p->n, p->c_in, p->h, p->w, p->c_out, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw,
                   p->dh, p->dw, p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->groups, p->cb_in,
                   p->cb_out, p->epilogue, (double)p->clip_min, (double)p->clip_max, p->ow_tile,
                   p->oc_tile, p->ic_tile, p->loop_order, p->oh_tile, p->oc_group);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    bool epi = kiln_task_has_epilogue(l, t);
    if (epi)
        kiln_sb_puts(b, "    for (int64_t tk_ = begin_; tk_ < end_; tk_++) {\n    ");
    kiln_sb_printf(b, "    kiln_conv_run(&P_, a%d, a%d, ", xa, wa);
    kiln_emit_arg_or_null(b, ba, false);
    kiln_sb_puts(b, ", ");
    kiln_emit_arg_or_null(b, t->residual_arg, false);
    kiln_sb_printf(b, ", o0, %s, %s);\n", epi ? "tk_, tk_ + 1" : "begin_, end_",
                   t->workspace > 0 ? KILN_TASK_WS : "NULL");
    if (epi) {
        /* the rest of the fused epilogue on the task's output, still in cache */
        kiln_sb_puts(b, "        int64_t f_, len_, ns_, st_;\n"
                        "        kiln_conv_task_out(&P_, tk_, &f_, &len_, &ns_, &st_);\n"
                        "        for (int64_t s_ = 0; s_ < ns_; s_++) {\n");
        kiln_emit_epilogue_span(b, l, t, "f_ + s_ * st_", "len_");
        kiln_sb_puts(b, "        }\n    }\n");
    }
    kiln_sb_puts(b, "}\n");
    kiln_emit_entry(b, t, "kiln_conv_tasks(&P_)", 1);
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    static const char *const hdr[] = {"kiln_kernels_conv.h"};
    kiln_emit_prologue(b, l, t, hdr, 1);
    kiln_tpl_emit_conv_body(b, l, t);
    return KILN_OK;
}

const kiln_template kiln_tpl_conv2d_nchwc = {
    .name = "conv2d_nchwc",
    .match = match,
    .layout = layout,
    .space = space,
    .pack = pack,
    .emit = emit,
};
