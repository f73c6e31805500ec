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
 * vectors), or when the dividing block is 1 or 2 lanes wide and the padded
 * FMAs cost no more than those narrow ones (an RGB output's 3 channels ->
 * 16; pad_pays). The weight is OIHW{cb_in}i{cb}o, packed once here.
 *
 * Knobs: the register tile (ow_tile pixels x oc_tile channel blocks), the
 * input-channel blocks per accumulation pass, the loop order, and the task
 * split (oh_tile rows x oc_group channel blocks); the analytic defaults come
 * from the header's register/cache model (kiln_conv_default_params). The
 * block sizes cb_in and cb_out are knobs of kind block: chosen by layout()
 * with the neighbours in view, fixed within a whole model. The
 * epilogue: the header's bias, residual Add, Relu, Clip in registers, then
 * any other fused elementwise nodes (SiLU, HardSwish, ...) applied by
 * generated code to each task's output right after the task.
 *
 * Input prologue (template.prologue, fuse.c): an elementwise group that
 * computes the conv's data input from one activation by a Mul and/or an
 * Add with scalar or per-channel constants (either order, each at most
 * once), then at most one Relu or Clip (densenet's pre-activation
 * BatchNorm-Relu before each dense layer's and transition's 1x1 conv), and
 * that nothing else reads, is applied by the kernel as each task stages its
 * input rows (kiln_conv_run_pro): the elementwise kernel and its pass over
 * the tensor are gone. pack folds the chain into a scale and a shift per
 * input channel ((x + b) * a = a x + a b), stored in the Mul's and the
 * Add's argument slots. The group keeps the prologue's nodes before the
 * conv, so its workload key holds them and parses back into the same
 * group. Cost model: the prologue is taken where the conv copies its input
 * anyway (padded columns: the prologue adds only its arithmetic to the
 * copy), or where the analytic configuration with it stages per pixel tile
 * (an unpadded 1x1 in loop order 0: the staged tile is read from the L1)
 * with at most KILN_CONV_PRO_MAX_OCG oc groups per image and group (each
 * stages the input again; the separate kernel reads and writes it once),
 * and an input of more than half the L2 (KILN_CONV_PRO_MIN_L2_FRACTION:
 * a smaller one the separate kernel writes into the L2 and the conv reads
 * from there). One thread, paired profiles of densenet-121 (5 rounds,
 * loaded machine): its 56x56 dense layers took 0.90x the time of the two
 * kernels, 28x28 0.99x, 14x14 and 7x7 1.05x; staging whole bands (loop
 * order 1) 1.06x on the 14x14 and 7x7 ones.
 *
 * A run-time scale per input channel (a squeeze-and-excitation block's
 * Mul of the activation by its sigmoid vector, [1, C, 1, 1], the chain's
 * one node; groups == 1) goes into the weights instead: conv(x * s, W) =
 * conv(x, W diag(s)). The kernel's entry scales the packed weights into
 * thread 0's workspace slice (after the conv's own workspace; every thread
 * reads them there) before the tasks start, and the conv runs as a plain
 * one on x. Taken when the input holds at least KILN_CONV_RT_SCALE_RATIO
 * times the packed weights' floats (one thread scales the weights; the
 * separate Mul kernel read and wrote the whole input): efficientnet-b0's
 * project convs on 112x112 to 28x28, where the Mul was 15-25% of the
 * pair's time. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

/* The most oc groups per image and group (each stages the input again) of
 * a conv that takes an input prologue when it would not copy its input
 * anyway (see the top). */
#define KILN_CONV_PRO_MAX_OCG 2
/* ... and whose input (one image) is more than this fraction of the L2:
 * smaller ones the separate kernel writes into and the conv reads from the
 * L2 (see the top). */
#define KILN_CONV_PRO_MIN_L2_FRACTION 0.5
/* A run-time per-channel scale is taken when the input has at least this
 * many times the packed weights' floats (see the top). */
#define KILN_CONV_RT_SCALE_RATIO 4.0

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

static double out_block_cost(int64_t c, int cb, int vec);

/* Whether output channels c are padded up to whole vec blocks rather than
 * cut in blocks of b, the largest block dividing c: when the padding is at
 * most a third of c (see the top), or when b is 1 or 2 lanes and the padded
 * FMAs at full width cost no more by out_block_cost (padding paid in full,
 * a narrower vector proportionally). So few or odd channels (an
 * image-to-image network's 3-channel output, a 21-class segmentation head)
 * pad: 3 channels on 1-wide blocks ran a CycleGAN generator's last 7x7 conv
 * at 1% of peak, 127 of its 160 ms. Blocks of 4 lanes and more keep the
 * third rule (the expand + depthwise pair fuses on whole blocks of 4). */
static bool pad_pays(int64_t c, int b, int vec)
{
    if ((c + vec - 1) / vec * vec - c <= c / 3)
        return true;
    return b < 4 && out_block_cost(c, vec, vec) <= out_block_cost(c, b, vec);
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
        pad_pays(c_out, cb_out, vec))
        cb_out = vec; /* padded (the bias is padded when packing): see the top */
    int cb_in = in.kind == KILN_LAYOUT_NCHWC ? in.block_a : 1;
    if (grp > 1 && (c_in / grp) % cb_in != 0)
        cb_in = 1;
    if (grp == 1 && cb_in == 1 && c_in >= 2 && c_in <= 4)
        cb_in = (int)c_in; /* an image: one block of all its channels, see the top */
    kiln_win2d w2;
    if (grp == 1 && cb_in == 1 && in.kind == KILN_LAYOUT_ROW_MAJOR && c_in % vec == 0 &&
        cb_out == vec && c_out % vec == 0 && kiln_geom_win2d(g, n, &w2) &&
        kiln_tpl_wino_takes(&w2))
        cb_in = vec; /* a row-major input (after a reflection Pad, a VM class's
                        input) transformed to blocks, so that Winograd takes it */
    if (grp > 1 && cb_out == 1 && cb_in == 1)
        return false; /* row-major: conv2d_direct */
    out->in = nchwc(cb_in);
    out->weight = (kiln_layout){KILN_LAYOUT_OIHWIO, cb_in, cb_out};
    out->out = nchwc(cb_out);
    return true;
}

/* Relative compute cost of an output block of cb channels on c channels
 * (per group) padded to whole blocks, vec the vector width: the padding is
 * paid in full, and a narrower vector does proportionally less work per
 * FMA (cb / vec of full speed: regnet-y-400mf's 48 -> 104 1x1 conv ran in
 * 646-756 us as NCHW8c against 326-346 us as NCHW16c padded to 112). With
 * it layout()'s choice is the cheapest: vec padded by at most a third
 * (<= 1.33) beats half width unpadded (2), vec padded beats 1- or 2-lane
 * blocks whenever it costs no more (3 -> 16: 5.33 against 16), larger
 * dividing blocks beat smaller. */
static double out_block_cost(int64_t c, int cb, int vec)
{
    double pad = (double)((c + cb - 1) / cb * cb) / (double)c;
    return pad * (double)vec / (double)cb;
}

/* An image read row-major (NCHW1c) instead of as one block of all its
 * channels: the efficiencies the top quotes, 69% against 88% (resnet's 7x7:
 * 1.28x the time) and 49% against 70% (squeezenet's 3x3: 1.43x). */
/* Winograd asked for on a small map (blocks() below), relative to the
 * direct conv: above 1, because the analytic rule (kiln_tpl_wino_takes) says
 * the direct conv is faster there; the tuner's times decide. */
#define KILN_WINO_REQUEST_COST 1.25

static double image_row_major_cost(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *w = g->values[n->inputs[1]];
    return w->shape.rank == 4 && w->shape.dims[2] >= 5 ? 1.28 : 1.43;
}

/* The block choices (template.blocks) of a groups == 1 conv: layout()'s
 * first, then the output blocks vec and vec/2 that divide C_out, vec
 * padded where layout()'s rule allows padding, and for an image the input
 * read row-major, and for a 3x3 conv on a small map the default's blocks
 * by Winograd; each costs out_block_cost (and the image's or Winograd's
 * factor), and a choice cheaper than layout()'s is not offered (layout()'s
 * rule is the analytic optimum; only the layout DP's transforms, or
 * measured times, can outweigh it). */
static int blocks(const kiln_target *tg, const kiln_graph *g, const kiln_node *n, kiln_layout in,
                  kiln_tpl_block *out)
{
    kiln_tpl_layout d = {0};
    if (!layout(tg, g, n, in, &d))
        return 0;
    int vec = tg->vec;
    int64_t c_in = g->values[n->inputs[0]]->shape.dims[1];
    int64_t c_out = g->values[n->outputs[0]]->shape.dims[1];
    int cb_in = d.in.kind == KILN_LAYOUT_NCHWC ? d.in.block_a : 1;
    int cb_out = d.out.kind == KILN_LAYOUT_NCHWC ? d.out.block_a : 1;
    double base = out_block_cost(c_out, cb_out, vec);
    int k = 0;
    out[k++] = (kiln_tpl_block){d, base};
    if (kiln_attr_int(n, "group", 1) != 1 || vec < 4)
        return k;
    const kiln_value *bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    bool pad_ok = (!bias || (bias->kind == KILN_VALUE_CONST && bias->data)) &&
                  pad_pays(c_out, largest_block(c_out, vec), vec);
    for (int b = vec; b >= vec / 2 && k < KILN_TPL_MAX_BLOCKS - 1; b /= 2) {
        bool fits = c_out % b == 0 || (b == vec && pad_ok);
        double cost = out_block_cost(c_out, b, vec);
        if (b == cb_out || !fits || cost < base)
            continue;
        out[k++] = (kiln_tpl_block){{nchwc(cb_in), {KILN_LAYOUT_OIHWIO, cb_in, b}, nchwc(b), 0}, cost};
    }
    if (in.kind == KILN_LAYOUT_ROW_MAJOR && cb_in == c_in && c_in > 1)
        out[k++] = (kiln_tpl_block){{nchwc(1), {KILN_LAYOUT_OIHWIO, 1, cb_out}, nchwc(cb_out), 0},
                                    base * image_row_major_cost(g, n)};
    /* Winograd on a map its own rule leaves to this template: offered at a
     * cost above the default's, so that only a measured time picks it
     * (template.h, KILN_TPL_ALGO_WINOGRAD) */
    kiln_win2d w2;
    if (k < KILN_TPL_MAX_BLOCKS && cb_in == vec && cb_out == vec && c_in % vec == 0 &&
        c_out % vec == 0 && kiln_tpl_conv_operands(g, n) && kiln_geom_win2d(g, n, &w2) &&
        kiln_tpl_wino_on_request(&w2)) {
        out[k] = out[0];
        out[k].lay.algo = KILN_TPL_ALGO_WINOGRAD;
        out[k++].cost = base * KILN_WINO_REQUEST_COST;
    }
    return k;
}

/* ---- the input prologue ----------------------------------------------------- */

/* An input prologue: x -> clamp(x * scale + shift) before the conv (see the
 * top). Values are graph value ids, -1 where absent. */
typedef struct pro_chain {
    int x;            /* the activation the chain reads */
    int scale, shift; /* the Mul's and the Add's constants (the scale run-time data with rt) */
    bool add_first;   /* the Add before the Mul: the shift is scaled too */
    bool clamp;       /* a Relu or Clip last */
    bool rt;          /* the scale is run-time data: the one Mul of the chain */
    float lo, hi;
} pro_chain;

/* A float32 constant with data that is a scalar or per channel of y. */
static bool pro_const(const kiln_graph *g, int v, const kiln_value *y)
{
    const kiln_value *c = g->values[v];
    if (c->kind != KILN_VALUE_CONST || !c->data || c->dtype != KILN_DTYPE_FLOAT32 ||
        c->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    int k = kiln_epilogue_bcast_kind(&c->shape, &y->shape, y->layout);
    return k == 1 || (k == 2 && kiln_shape_numel(&c->shape) == y->shape.dims[1]);
}

/* Run-time float32 data with one value per channel of y ([1, C, 1, 1] in a
 * layout where channel c is at offset c: row-major or blocked). */
static bool pro_rt_vec(const kiln_graph *g, int v, const kiln_value *y)
{
    const kiln_value *c = g->values[v];
    if (c->kind == KILN_VALUE_CONST || c->dtype != KILN_DTYPE_FLOAT32 ||
        (c->layout.kind != KILN_LAYOUT_ROW_MAJOR && c->layout.kind != KILN_LAYOUT_NCHWC))
        return false;
    return kiln_epilogue_bcast_kind(&c->shape, &y->shape, y->layout) == 2 &&
           kiln_shape_numel(&c->shape) == y->shape.dims[1];
}

/* Whether nodes[0..n) is an input prologue of conv node `cv` (see the top:
 * each node reads the one before, the first the activation x, and every
 * value has the conv input's shape and layout); *c describes it. */
static bool pro_parse(const kiln_graph *g, const int *nodes, int n, const kiln_node *cv,
                      pro_chain *c)
{
    *c = (pro_chain){.x = -1, .scale = -1, .shift = -1, .lo = -FLT_MAX, .hi = FLT_MAX};
    const kiln_value *in = g->values[cv->inputs[0]];
    int prev = -1;
    for (int i = 0; i < n; i++) {
        const kiln_node *m = g->nodes[nodes[i]];
        if (m->n_outputs != 1 || m->n_inputs < 1 || c->clamp)
            return false;
        const kiln_value *y = g->values[m->outputs[0]];
        if (y->dtype != KILN_DTYPE_FLOAT32 || !kiln_shape_equal(&y->shape, &in->shape) ||
            !kiln_layout_equal(y->layout, in->layout))
            return false;
        int act;
        if (m->op == KILN_OP_MUL || m->op == KILN_OP_ADD) {
            if (m->n_inputs != 2 || m->inputs[0] < 0 || m->inputs[1] < 0)
                return false;
            int k = pro_const(g, m->inputs[1], y) ? 1 : pro_const(g, m->inputs[0], y) ? 0 : -1;
            if (k < 0 && m->op == KILN_OP_MUL && n == 1) {
                /* a run-time scale per channel (squeeze-and-excitation) */
                k = pro_rt_vec(g, m->inputs[1], y) ? 1 : pro_rt_vec(g, m->inputs[0], y) ? 0 : -1;
                c->rt = k >= 0;
            }
            if (k < 0)
                return false;
            act = m->inputs[1 - k];
            int *slot = m->op == KILN_OP_MUL ? &c->scale : &c->shift;
            if (*slot >= 0)
                return false;
            *slot = m->inputs[k];
            if (m->op == KILN_OP_ADD)
                c->add_first = c->scale < 0;
        } else if (m->op == KILN_OP_RELU || m->op == KILN_OP_CLIP) {
            for (int k = 1; k < m->n_inputs; k++)
                if (m->inputs[k] >= 0)
                    return false; /* bounds as inputs: not constant attributes */
            act = m->inputs[0];
            c->clamp = true;
            if (m->op == KILN_OP_RELU) {
                c->lo = 0.0f;
            } else {
                c->lo = kiln_attr_float(m, "min", -FLT_MAX);
                c->hi = kiln_attr_float(m, "max", FLT_MAX);
            }
        } else {
            return false;
        }
        if (i == 0) {
            const kiln_value *x = g->values[act];
            if (x->dtype != KILN_DTYPE_FLOAT32 || !kiln_shape_equal(&x->shape, &in->shape) ||
                !kiln_layout_equal(x->layout, in->layout))
                return false;
            c->x = act;
        } else if (act != prev) {
            return false;
        }
        prev = m->outputs[0];
    }
    if (prev != cv->inputs[0] || (c->scale >= 0 && c->scale == c->shift))
        return false;
    for (int k = 1; k < cv->n_inputs; k++) /* the constants' argument slots are the prologue's */
        if (cv->inputs[k] >= 0 && (cv->inputs[k] == c->scale || cv->inputs[k] == c->shift))
            return false;
    return true;
}

static int pro_flags(const pro_chain *c)
{
    return (c->scale >= 0 ? KILN_CONV_PRO_SCALE : 0) | (c->shift >= 0 ? KILN_CONV_PRO_SHIFT : 0) |
           (c->clamp ? KILN_CONV_PRO_CLAMP : 0);
}

/* The input prologue of task t's group (the nodes before its anchor), or
 * false when it has none. */
static bool task_pro(const kiln_lowered *l, const kiln_task *t, pro_chain *c)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    int ai = 0;
    while (ai < gr->n_nodes && gr->nodes[ai] != t->anchor)
        ai++;
    return ai > 0 && ai < gr->n_nodes && pro_parse(g, gr->nodes, ai, g->nodes[t->anchor], c);
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

/* template.prologue: the chain parses (pro_parse) and the cost model of
 * the top says yes for the analytic configuration. */
static bool prologue(const kiln_target *tg, const kiln_graph *g, const int *nodes, int n_nodes,
                     const kiln_node *n, kiln_epi_kind *epi)
{
    pro_chain c;
    kiln_win2d w;
    if (!match(tg, g, n, epi) || !pro_parse(g, nodes, n_nodes, n, &c) || !kiln_geom_win2d(g, n, &w))
        return false;
    const kiln_value *wv = g->values[n->inputs[1]];
    kiln_conv_params p = kiln_tpl_conv_params(&w, (int)w.groups, wv->layout.block_a,
                                              wv->layout.block_b);
    if (!kiln_conv_supported(&p))
        return false;
    if (c.rt) /* scaled weights: while they are small next to the input (see the top) */
        return p.groups == 1 &&
               KILN_CONV_RT_SCALE_RATIO * (double)kiln_conv_packed_weight_floats(&p) <=
                   (double)kiln_shape_numel(&g->values[n->inputs[0]]->shape);
    if (kiln_conv_plan_of(&p).copy) /* it copies its input anyway */
        return true;
    p.pro = pro_flags(&c);
    kiln_conv_default_params(&p, tg->l1_bytes, tg->l2_bytes, 2);
    kiln_conv_plan q = kiln_conv_plan_of(&p);
    double in_bytes = 4.0 * (double)q.cib * q.cbi * p.h * p.w;
    return q.stage_tile && q.n_ocg / p.groups <= KILN_CONV_PRO_MAX_OCG &&
           in_bytes > KILN_CONV_PRO_MIN_L2_FRACTION * (double)tg->l2_bytes;
}

/* The next analytic picks after the default d (kiln_knob_pick), for the
 * tuner: the register tiles the model ranks next, with weight loads at
 * their L1 cost and at their L2 cost (KILN_CONV_WLOAD_L2_AVX2) taken in
 * turn, each with the task knobs the model gives it; then the default in
 * the other loop order. Coordinate descent cannot reach these from the
 * default (4x3 -> 5x2 moves two knobs, and 4x2 between them is slower). */
static void add_picks(kiln_task *t, const kiln_conv_params *d, int64_t l1, int64_t l2)
{
    const int isa = kiln_conv_model_isa(d->cb_out);
    kiln_conv_plan q = kiln_conv_plan_isa(d, isa);
    kiln_tile_rank r[2][KILN_CONV_MAXO * KILN_CONV_MAXT];
    int n[2] = {0, 0};
    for (int w = 0; w < 2; w++) {
        double wcost = w ? KILN_CONV_WLOAD_L2_AVX2 : 0.5;
        for (int o = 1; o <= KILN_CONV_MAXO; o++)
            for (int x = 1; kiln_conv_tile_ok(isa, d->ow, q.cob_g, x, o); x++)
                r[w][n[w]++] = (kiln_tile_rank){x, o, kiln_conv_tile_cost(d->ow, q.cob_g, wcost, x, o)};
        kiln_tiles_rank(r[w], n[w]);
    }
    int tiles = 0;
    for (int j = 0; j < KILN_CONV_MAXO * KILN_CONV_MAXT && tiles < KILN_MAX_PICKS - 1; j++)
        for (int w = 0; w < 2 && tiles < KILN_MAX_PICKS - 1; w++) {
            if (j >= n[w] || (r[w][j].t == q.T && r[w][j].o == q.O))
                continue;
            kiln_conv_params c = *d;
            c.ow_tile = r[w][j].t;
            c.oc_tile = r[w][j].o;
            kiln_conv_task_knobs(&c, l1, l2, 2);
            tiles += kiln_knob_pick(t, &c);
        }
    kiln_conv_params c = *d;
    c.loop_order = !d->loop_order;
    c.ic_tile = c.loop_order ? kiln_conv_pass_blocks(&c, l1) : 0;
    kiln_knob_pick(t, &c);
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
    t->params_size = sizeof *p;
    *p = kiln_tpl_conv_params(&w, (int)w.groups, wv->layout.block_a, wv->layout.block_b);
    p->epilogue = kiln_tpl_header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0,
                                           &p->clip_min, &p->clip_max);
    pro_chain c;
    if (task_pro(l, t, &c)) {
        p->pro = c.rt ? 0 : pro_flags(&c); /* a run-time scale goes into the weights */
        p->pro_lo = c.clamp ? c.lo : 0.0f;
        p->pro_hi = c.clamp ? c.hi : 0.0f;
    } else if (t->anchor != l->ctx->groups[t->group].nodes[0]) {
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': nodes before it are no input prologue",
                           n->name);
    }
    if (!kiln_conv_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the blocked template rejects it",
                           n->name);
    kiln_conv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_conv_plan q = kiln_conv_plan_of(p);
    int max_o = (int)(q.cob_g < KILN_CONV_MAXO ? q.cob_g : KILN_CONV_MAXO);
    kiln_knob *k = kiln_knob_add(t, "ow_tile", KILN_KNOB_TILE, p->ow_tile,
                                 (int)offsetof(kiln_conv_params, ow_tile));
    for (int v = 1; v <= kiln_conv_max_t(kiln_conv_model_isa(p->cb_out), 1) && v <= p->ow; v++)
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
    k = kiln_knob_add(t, "task_order", KILN_KNOB_ORDER, p->task_order,
                      (int)offsetof(kiln_conv_params, task_order));
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    /* the block sizes alter-layout applied (layout above): part of the
     * configuration, fixed within a model (the neighbours share them) */
    k = kiln_knob_add(t, "cb_in", KILN_KNOB_BLOCK, p->cb_in, (int)offsetof(kiln_conv_params, cb_in));
    kiln_knob_choice(k, p->cb_in);
    k = kiln_knob_add(t, "cb_out", KILN_KNOB_BLOCK, p->cb_out,
                      (int)offsetof(kiln_conv_params, cb_out));
    kiln_knob_choice(k, p->cb_out);
    add_picks(t, p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes);
    t->flops = kiln_conv_flops(p);
    return KILN_OK;
}

/* Where the scaled weights of a run-time input scale lie in thread 0's
 * workspace slice: after the conv's own workspace, 64-byte aligned. */
static int64_t rt_weights_offset(const kiln_task *t)
{
    return ((int64_t)kiln_conv_workspace_bytes(t->params) + 63) / 64 * 64;
}

/* The input prologue's scale and shift per input channel, ceil(c_in /
 * cb_in) * cb_in floats each (zeros in the padding channels), in the Mul's
 * and the Add's argument slots: (x + b) * a folds to a x + a b. */
static kiln_status pack_pro(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_conv_params *p = t->params;
    pro_chain c;
    if (!p->pro || !task_pro(l, t, &c))
        return KILN_OK;
    const kiln_graph *g = l->ctx->g;
    int64_t nc = kiln_k_cdiv(p->c_in, p->cb_in) * p->cb_in;
    const kiln_value *a = c.scale >= 0 ? g->values[c.scale] : NULL;
    const kiln_value *b = c.shift >= 0 ? g->values[c.shift] : NULL;
    for (int k = 0; k < 2; k++) {
        const kiln_value *v = k ? b : a;
        if (!v)
            continue;
        float *d = calloc((size_t)nc, sizeof(float));
        if (!d)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        const float *av = a ? a->data : NULL, *vv = v->data;
        bool sa = a && kiln_shape_numel(&a->shape) == 1, sv = kiln_shape_numel(&v->shape) == 1;
        for (int64_t ch = 0; ch < p->c_in; ch++) {
            float x = vv[sv ? 0 : ch];
            if (k && c.add_first && av)
                x *= av[sa ? 0 : ch];
            d[ch] = x;
        }
        char lb[32];
        snprintf(lb, sizeof lb, "%s%lld", k ? "shift" : "scale", (long long)nc);
        kiln_status s = kiln_tpl_use_packed(l, t, v, lb, d, nc, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    const kiln_conv_params *p = t->params;
    int64_t floats = kiln_conv_packed_weight_floats(p);
    char lb[32], key[160];
    snprintf(lb, sizeof lb, "OIHW%di%do", p->cb_in, p->cb_out);
    /* what kiln_conv_pack_weights reads besides the weights (its plan's
     * block counts follow from these alone) */
    snprintf(key, sizeof key, "conv2d ci%d co%d g%d k%dx%d cb%d/%d", p->c_in, p->c_out, p->groups,
             p->kh, p->kw, p->cb_in, p->cb_out);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, wv, lb, key, floats, &hit, err);
    if (s != KILN_OK)
        return s;
    if (!hit) {
        float *packed;
        if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
            return s;
        kiln_conv_pack_weights(p, wv->data, packed);
        if ((s = kiln_tpl_use_packed_key(l, t, wv, lb, packed, floats, key, err)) != KILN_OK)
            return s;
    }
    /* padded output channels: the kernel reads the bias of whole blocks */
    if ((s = kiln_tpl_pad_bias(l, t, n, p->c_out, p->cb_out, err)) != KILN_OK)
        return s;
    if ((s = pack_pro(l, t, err)) != KILN_OK)
        return s;
    t->workspace = (int64_t)kiln_conv_workspace_bytes(p);
    pro_chain c;
    if (task_pro(l, t, &c) && c.rt) /* the scaled weights, after thread 0's own part */
        t->workspace = rt_weights_offset(t) + (int64_t)sizeof(float) * floats;
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
                   "    .oc_group = %d, .task_order = %d,\n",
                   p->n, p->c_in, p->h, p->w, p->c_out, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw,
                   p->dh, p->dw, p->pad_t, p->pad_l, p->pad_b, p->pad_r, p->groups, p->cb_in,
                   p->cb_out, p->epilogue, (double)p->clip_min, (double)p->clip_max, p->ow_tile,
                   p->oc_tile, p->ic_tile, p->loop_order, p->oh_tile, p->oc_group, p->task_order);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int sa = -1, ha = -1; /* the input prologue's scale and shift */
    pro_chain c;
    bool rt = !p->pro && task_pro(l, t, &c) && c.rt;
    char wexpr[96];
    snprintf(wexpr, sizeof wexpr, "a%d", wa);
    if (rt) { /* a run-time scale: the entry scales the weights into thread 0's workspace */
        xa = kiln_task_arg(t, c.x);
        sa = kiln_task_arg(t, c.scale);
        snprintf(wexpr, sizeof wexpr, "(const float *)((const char *)k_->rt->workspace + %lld)",
                 (long long)rt_weights_offset(t));
    } else if (p->pro && task_pro(l, t, &c)) {
        kiln_sb_printf(b, "    .pro = %d, .pro_lo = %af, .pro_hi = %af,\n", p->pro,
                       (double)p->pro_lo, (double)p->pro_hi);
        xa = kiln_task_arg(t, c.x);
        sa = c.scale >= 0 ? kiln_task_arg(t, c.scale) : -1;
        ha = c.shift >= 0 ? kiln_task_arg(t, c.shift) : -1;
    }
    if (p->colseg) /* only when set: other convs' literals stay as they were */
        kiln_sb_puts(b, "    .colseg = 1,\n");
    kiln_sb_puts(b, "};\n\n");
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    bool epi = kiln_task_has_epilogue(l, t);
    if (epi)
        kiln_sb_puts(b, "    for (int64_t tk_ = begin_; tk_ < end_; tk_++) {\n    ");
    if (p->pro) {
        kiln_sb_printf(b, "    kiln_conv_run_pro(&P_, a%d, ", xa);
        kiln_emit_arg_or_null(b, sa, false);
        kiln_sb_puts(b, ", ");
        kiln_emit_arg_or_null(b, ha, false);
        kiln_sb_printf(b, ", a%d, ", wa);
    } else {
        kiln_sb_printf(b, "    kiln_conv_run(&P_, a%d, %s, ", xa, wexpr);
    }
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
    if (!rt) {
        kiln_emit_entry(b, t, "kiln_conv_tasks(&P_)", 1);
        return;
    }
    kiln_sb_printf(b,
                   "\nvoid %s(void *const *args, const kiln_rt *rt)\n{\n"
                   "    kiln_kctx_ k_ = {args, rt};\n"
                   "    kiln_conv_scale_weights(&P_, (const float *)args[%d], (const float *)args[%d],\n"
                   "                            (float *)((char *)rt->workspace + %lld));\n"
                   "    rt->parallel_for(rt->pool, kiln_conv_tasks(&P_), 1, task_, &k_);\n}\n",
                   t->fn_name, wa, sa, (long long)rt_weights_offset(t));
}

void kiln_tpl_emit_conv_prologue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_conv_params *p = t->params;
    uint32_t tm, om;
    kiln_conv_tile_sets(p, kiln_conv_model_isa(p->cb_out), &tm, &om);
    kiln_emit_prologue_tiles(b, l, t, "KILN_CONV", tm, om,
                             kiln_conv_ps_set(p, kiln_conv_model_isa(p->cb_out)),
                             "kiln_kernels_conv.h");
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    kiln_tpl_emit_conv_prologue(b, l, t);
    kiln_tpl_emit_conv_body(b, l, t);
    return KILN_OK;
}

/* The whole-space cost model (template.h `cost`; kiln tune ranks the space
 * by it), in the tile model's units (kiln_conv_tile_cost per output row
 * and input channel tap, weight loads at their L1 cost, or on AVX2 at
 * KILN_CONV_WLOAD_L2_AVX2 in loop order 0 when an oc tile's weights for
 * the whole reduction exceed half the L1, as kiln_conv_default_params):
 *  - compute: each oc group's rows of tiles over the taps, the last group
 *    and band as they are; 500 a task;
 *  - threads: the pool deals each of 2 threads a contiguous run of tasks,
 *    so the time is the longest run at the average task, plus a tenth of
 *    a task for the threads' uneven finish;
 *  - traffic: the weights once from memory (in a network: 1 unit per 4
 *    bytes), then again for each further band, from the L2 when an oc
 *    group's fit half of it (1 unit per 16 bytes), else from memory; the
 *    input once per oc group from the caches (1 unit per 16 bytes); over
 *    2 threads, half of it hidden behind the compute;
 *  - kiln_conv_task_knobs' rules as costs: x1.2 when an oc group's
 *    weights exceed half the L2; x1.05 for the loop order the rule does
 *    not pick, x1.03 for the task order; in loop order 1, x1.02 per
 *    doubling between the ic pass and the one that fills half the L1.
 * The analytic default is at or near its minimum (test_cost_model). */
static double cost(const void *params, const kiln_target *tg)
{
    const kiln_conv_params *p = params;
    const int isa = kiln_conv_model_isa(p->cb_out);
    const kiln_conv_plan q = kiln_conv_plan_isa(p, isa);
    const int threads = 2;
    const double l1 = (double)tg->l1_bytes, l2 = (double)tg->l2_bytes;
    const double wblock = (double)q.cib_g * p->kh * p->kw * q.cbi * q.cbo * 4;
    const double wtile = wblock * q.O;
    const double igroup = (double)q.cib_g * p->h * p->w * q.cbi * 4 * (q.copy ? 2 : 1);
    const double taps = (double)q.cib_g * q.cbi * p->kh * p->kw;
    const double wcost =
        isa == KILN_ISA_AVX2 && q.order == 0 && wtile > l1 / 2 ? KILN_CONV_WLOAD_L2_AVX2 : 0.5;
    const int64_t ng = kiln_k_cdiv(q.cob_g, q.oc_group), nb = q.n_bands;
    const int64_t last_g = q.cob_g - (ng - 1) * q.oc_group;
    double per_row = (double)(ng - 1) * kiln_conv_tile_cost(p->ow, q.oc_group, wcost, q.T, q.O) +
                     kiln_conv_tile_cost(p->ow, last_g, wcost, q.T, last_g < q.O ? (int)last_g : q.O);
    const double images = (double)p->n * p->groups;
    const int64_t tasks = p->n * (int64_t)p->groups * ng * nb;
    double total = images * (double)p->oh * per_row * taps + 500.0 * (double)tasks;
    const double wgroup = (double)q.oc_group * wblock;
    double traffic = images * ((double)q.cob_g * wblock * (0.25 + (double)(nb - 1) * (wgroup <= l2 / 2 ? 1.0 / 16 : 0.25)) +
                               (double)ng * igroup / 16);
    double avg = total / (double)tasks;
    double span = (double)((tasks + threads - 1) / threads) * avg + 0.1 * avg +
                  0.5 * traffic / threads;
    if (wgroup > l2 / 2 && q.oc_group > q.O)
        span *= 1.2;
    const double in_tile =
        (double)q.cib_g * p->kh * ((double)(q.T - 1) * p->sw + (p->kw - 1) * p->dw + 1) * q.cbi * 4;
    int order_rule = (double)q.oc_group * wblock <= l2 / 2 && in_tile <= l1 / 2 &&
                             (double)q.oh_tile * p->ow > KILN_CONV_ORDER0_PIXELS
                         ? 0
                         : 1;
    if (q.order != order_rule)
        span *= 1.05;
    if (q.task_order != (igroup > (double)q.cob_g * wblock ? 1 : 0))
        span *= 1.03;
    if (q.order == 1) {
        double want = kiln_conv_pass_blocks(p, tg->l1_bytes), got = q.ict;
        span *= 1.0 + 0.02 * fabs(log2(got / want));
    }
    return span;
}

const kiln_template kiln_tpl_conv2d_nchwc = {
    .name = "conv2d_nchwc",
    .match = match,
    .layout = layout,
    .blocks = blocks,
    .space = space,
    .pack = pack,
    .emit = emit,
    .prologue = prologue,
    .cost = cost,
};
