/* pass/alter_layout.c: blocked layouts across runs of conv-like ops.
 *
 * Algorithm (one forward walk in node order, building a new graph):
 *  - A node whose template has a layout preference (target/template.h:
 *    kiln_target_layout; today the blocked and depthwise conv templates,
 *    codegen/c/tpl_conv2d_nchwc.c and tpl_dwconv2d_nchwc.c, which say why
 *    they choose the blocks they do) gets its data input transformed to the
 *    layout it wants, its weight re-laid as a new constant (OIHW{i}i{o}o,
 *    packed once at code generation) and its output in the template's
 *    layout, typically NCHW{cb}c. The block sizes are the template's
 *    decision (they are knobs of its space); this pass only applies them.
 *  - Padding channels of such a partial-block value hold act(0): the packed
 *    weights' padding rows and the bias padding are zeros. They must stay
 *    finite (a conv reading them multiplies them by zero weights), so a
 *    partial-block value keeps its layout only through unary ops that map
 *    finite to finite (Relu, Clip, Sigmoid, ..), Add/Sub/Mul, pools, convs
 *    and GlobalAveragePool (which ignores the padding); anything else
 *    (Div, Log, Pad, Concat, depthwise with another block..) reads it through
 *    a transform, which drops the padding.
 *  - Layout-agnostic ops keep the block of their inputs: unary elementwise
 *    ops, binary elementwise ops over two activations of the same shape and
 *    layout (the residual Add), Mul/Add/Sub of a blocked activation and a
 *    per-channel [1, C, 1, 1] value in any layout (squeeze-and-excitation's
 *    scale; or [C, 1, 1], ConvNeXt's layer scale: neither side is
 *    transformed), 2-D Max/AveragePool, spatial Pad, and Concat along the
 *    channels when every input is blocked alike with whole blocks. A
 *    Transpose between NCHW{b}c and channels-last chooses its layouts as a
 *    template (codegen/c/tpl_transpose.c).
 *    GlobalAveragePool reads blocks and writes row-major.
 *  - Anything else reads row-major: a blocked input first goes through a
 *    layout transform (an Identity node whose output layout differs from its
 *    input's), created once per value and shared by all its consumers; graph
 *    outputs too. So transforms appear only at the edges of a run.
 * The logical shapes never change, only kiln_value.layout.
 *
 * Block choices (pass/layout_dp.h): a template may offer several blocks
 * per node (template.blocks). The pass first runs the layout DP
 * (layout_dp.c), which evaluates whole-graph choices by running this same
 * walk without keeping its graph (kiln_alter_layout_eval: the conv compute
 * at each choice's cost plus the bytes every transform moves), then
 * applies the choice it found; a chain keeps the templates' defaults unless
 * its choice is strictly cheaper. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass/layout_dp.h"
#include "pass/pass.h"
#include "target/template.h"
#include "util/error.h"

static const kiln_layout ROW_MAJOR = {KILN_LAYOUT_ROW_MAJOR, 0, 0};

/* A blocked value whose channel count the block does not divide. */
static bool partial_block(const kiln_value *v)
{
    return v->layout.kind == KILN_LAYOUT_NCHWC && v->shape.rank >= 2 &&
           v->shape.dims[1] % v->layout.block_a != 0;
}

/* Unary ops mapping finite values to finite values (padding stays finite). */
static bool keeps_finite(kiln_op op)
{
    switch (op) {
    case KILN_OP_RELU:
    case KILN_OP_CLIP:
    case KILN_OP_SIGMOID:
    case KILN_OP_HARDSIGMOID:
    case KILN_OP_HARDSWISH:
    case KILN_OP_TANH:
    case KILN_OP_ABS:
    case KILN_OP_NEG:
    case KILN_OP_LEAKYRELU:
    case KILN_OP_ELU:
    case KILN_OP_SELU:
    case KILN_OP_CELU:
    case KILN_OP_GELU:
    case KILN_OP_ERF:
    case KILN_OP_SOFTSIGN:
        return true;
    default:
        return false;
    }
}

bool kiln_conv_is_depthwise(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    int64_t grp = kiln_attr_int(n, "group", 1);
    return x->shape.rank == 4 && grp > 1 && grp == x->shape.dims[1] &&
           w->shape.dims[0] == grp && w->shape.dims[1] == 1;
}

static bool is_unary_elemwise(kiln_op op)
{
    const kiln_op_info *info = kiln_op_get(op);
    return info->pattern == KILN_PATTERN_ELEMWISE && info->min_inputs == 1 &&
           info->max_inputs == 1 && op != KILN_OP_CAST && op != KILN_OP_IDENTITY;
}

static bool is_binary_arith(kiln_op op)
{
    return op == KILN_OP_ADD || op == KILN_OP_SUB || op == KILN_OP_MUL || op == KILN_OP_DIV;
}

/* A Pad of the spatial dims only (channels and batch untouched). */
static bool spatial_pad(const kiln_node *n)
{
    const int64_t *p = NULL;
    return kiln_attr_ints(n, "pads", &p) == 8 && !p[0] && !p[1] && !p[4] && !p[5];
}

/* The input (0 or 1) of a float Mul/Add/Sub that is a blocked activation of
 * the output's shape while the other is per-channel, [1, C, 1, 1] in any
 * layout (squeeze-and-excitation's scale) or [C, 1, 1] (ConvNeXt's layer
 * scale). -1 if n is not such a node. */
static int channel_operand_of(const kiln_graph *g, const kiln_node *n, const int *in,
                              const kiln_value *y)
{
    if ((n->op != KILN_OP_MUL && n->op != KILN_OP_ADD && n->op != KILN_OP_SUB) ||
        n->n_inputs != 2 || in[0] < 0 || in[1] < 0 || y->shape.rank != 4)
        return -1;
    for (int k = 0; k < 2; k++) {
        const kiln_value *x = g->values[in[k]], *c = g->values[in[1 - k]];
        if (x->layout.kind == KILN_LAYOUT_NCHWC && kiln_shape_equal(&x->shape, &y->shape) &&
            c->dtype == KILN_DTYPE_FLOAT32 && c->shape.rank >= 3 &&
            kiln_shape_numel(&c->shape) == y->shape.dims[1] &&
            kiln_epilogue_bcast_kind(&c->shape, &y->shape, ROW_MAJOR) == 2)
            return k;
    }
    return -1;
}

typedef struct state {
    kiln_pass_ctx *ctx;
    /* the applied walk: the nodes offered block choices (NULL: a dry run) */
    kiln_layout_decision *dec;
    int n_dec, cap_dec;
    int measured;
    int ordinal; /* nodes offered block choices so far */
    double measured_us, measured_analytic_us;
    kiln_rewrite rw;
    int *rm_of;  /* new value id -> its row-major copy (-1: none yet) */
    int *blk_of; /* new value id -> its blocked copy */
    int cap;
    int transforms;
    double cost_us; /* the analytic cost (layout_dp.h) */
} state;

static bool grow_maps(state *s)
{
    int need = s->rw.dst->n_values + 1;
    if (need <= s->cap)
        return true;
    int nc = s->cap ? s->cap * 2 : 256;
    while (nc < need)
        nc *= 2;
    int *a = realloc(s->rm_of, sizeof(int) * (size_t)nc);
    if (!a)
        return false;
    s->rm_of = a;
    int *b = realloc(s->blk_of, sizeof(int) * (size_t)nc);
    if (!b)
        return false;
    s->blk_of = b;
    for (int i = s->cap; i < nc; i++)
        s->rm_of[i] = s->blk_of[i] = -1;
    s->cap = nc;
    return true;
}

/* Value `v` (new id) in layout `l`: itself, or a (shared) transform of it. */
static int as_layout(state *s, int v, kiln_layout l)
{
    kiln_graph *g = s->rw.dst;
    if (v < 0 || kiln_layout_equal(g->values[v]->layout, l))
        return v;
    if (!grow_maps(s))
        return -1;
    int *slot = l.kind == KILN_LAYOUT_ROW_MAJOR ? &s->rm_of[v] : &s->blk_of[v];
    if (*slot >= 0 && kiln_layout_equal(g->values[*slot]->layout, l))
        return *slot;
    char name[512], lb[32];
    snprintf(name, sizeof name, "%s.to_%s", g->values[v]->name,
             kiln_layout_str(&g->values[v]->shape, l, lb, sizeof lb));
    int node = kiln_graph_add_node(g, KILN_OP_IDENTITY, name, &v, 1, 1);
    if (node < 0)
        return -1;
    int out = g->nodes[node]->outputs[0];
    g->values[out]->dtype = g->values[v]->dtype;
    g->values[out]->shape = g->values[v]->shape;
    g->values[out]->layout = l;
    if (!grow_maps(s)) /* may move the maps: the slot is found again */
        return -1;
    *(l.kind == KILN_LAYOUT_ROW_MAJOR ? &s->rm_of[v] : &s->blk_of[v]) = out;
    s->transforms++;
    int64_t bytes = kiln_layout_nbytes(g->values[v]->dtype, &g->values[v]->shape,
                                       g->values[v]->layout) +
                    kiln_layout_nbytes(g->values[v]->dtype, &g->values[v]->shape, l);
    s->cost_us += (double)bytes / KILN_LAYOUT_TRANSFORM_BW * 1e6 + KILN_LAYOUT_TRANSFORM_US;
    return out;
}

/* Copies node n with `inputs` (new ids) and sets its single output's layout. */
static int emit(state *s, const kiln_node *n, const int *inputs, kiln_layout out_layout)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && inputs[k] < 0)
            return -1;
    int id = kiln_rewrite_node(&s->rw, n, inputs);
    if (id < 0)
        return -1;
    const kiln_node *nn = s->rw.dst->nodes[id];
    if (nn->n_outputs == 1)
        s->rw.dst->values[nn->outputs[0]]->layout = out_layout;
    return id;
}

/* A node whose template chose its layouts (target/template.h): the data
 * input transformed to what it wants, the weight re-laid as a new constant
 * (packed at code generation), the output in the template's layout. */
static int lay_template(state *s, const kiln_node *n, int *in, const kiln_tpl_layout *tl)
{
    in[0] = as_layout(s, in[0], tl->in);
    if (tl->weight.kind != KILN_LAYOUT_ROW_MAJOR) {
        const kiln_value *w = s->rw.src->values[n->inputs[1]];
        char name[512];
        snprintf(name, sizeof name, "%s.packed", w->name);
        in[1] = kiln_rewrite_const(&s->rw, name, w->dtype, &w->shape, w->data, tl->weight);
    }
    int id = emit(s, n, in, tl->out);
    if (id >= 0 && tl->algo &&
        kiln_node_set_int(s->rw.dst, id, KILN_TPL_ALGO_ATTR, tl->algo) != KILN_OK)
        return -1;
    return id;
}

int kiln_layout_block(kiln_layout l)
{
    return l.kind == KILN_LAYOUT_NCHWC ? l.block_a : 1;
}

void kiln_layout_eval_free(kiln_layout_eval *ev)
{
    if (!ev)
        return;
    free(ev->n_blocks);
    free(ev->blocks);
    free(ev->picked);
    free(ev->node_us);
    ev->n_blocks = NULL;
    ev->blocks = NULL;
    ev->picked = NULL;
    ev->node_us = NULL;
}

/* The flops of a node with block choices (a conv): 2 x output elements x
 * the weight's elements per output channel. */
static double node_flops(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *y = g->values[n->outputs[0]];
    double f = (double)kiln_shape_numel(&y->shape);
    if (n->n_inputs > 1 && n->inputs[1] >= 0) {
        const kiln_value *w = g->values[n->inputs[1]];
        if (w->shape.rank >= 2 && w->shape.dims[0] > 0)
            f *= 2.0 * (double)kiln_shape_numel(&w->shape) / (double)w->shape.dims[0];
    }
    return f;
}

static void shape_str(const kiln_shape *sh, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < sh->rank && k + 24 < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "x" : "", (long long)sh->dims[d]);
}

static void ints_str(const kiln_node *n, const char *attr, char *buf, size_t size)
{
    const int64_t *v = NULL;
    int c = kiln_attr_ints(n, attr, &v);
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < c && k + 24 < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : "", (long long)v[d]);
}

void kiln_layout_node_key(const char *target, const kiln_graph *g, const kiln_node *n,
                          const kiln_tpl_block *b, char *buf, size_t size)
{
    char x[64] = "", w[64] = "", st[32], pd[48], dl[32];
    if (n->n_inputs > 0 && n->inputs[0] >= 0)
        shape_str(&g->values[n->inputs[0]]->shape, x, sizeof x);
    if (n->n_inputs > 1 && n->inputs[1] >= 0)
        shape_str(&g->values[n->inputs[1]]->shape, w, sizeof w);
    ints_str(n, "strides", st, sizeof st);
    ints_str(n, "pads", pd, sizeof pd);
    ints_str(n, "dilations", dl, sizeof dl);
    int k = snprintf(buf, size, "%s %s x%s w%s s%s p%s d%s g%lld b%d | out %d in %d",
                     target ? target : "", kiln_op_name(n->op), x, w, st, pd, dl,
                     (long long)kiln_attr_int(n, "group", 1), n->n_inputs > 2 && n->inputs[2] >= 0,
                     kiln_layout_block(b->lay.out), kiln_layout_block(b->lay.in));
    if (b->lay.algo && k >= 0 && (size_t)k < size)
        snprintf(buf + k, size - (size_t)k, " algo %d", b->lay.algo);
}

static int cmp_time(const void *a, const void *b)
{
    return strcmp(((const kiln_layout_time *)a)->key, ((const kiln_layout_time *)b)->key);
}

void kiln_layout_times_sort(kiln_layout_time *t, int n)
{
    if (n > 1)
        qsort(t, (size_t)n, sizeof *t, cmp_time);
}

double kiln_layout_time_of(const kiln_layout_hints *h, const char *key)
{
    if (!h || h->n_times <= 0)
        return -1;
    const kiln_layout_time k = {key, 0};
    const kiln_layout_time *f = bsearch(&k, h->times, (size_t)h->n_times, sizeof k, cmp_time);
    return f ? f->us : -1;
}

/* The measured time of node n at choice pick (its key's time; -1: none, the
 * choice keeps the analytic cost, scaled); keys[] (may be NULL) receives
 * every choice's key. */
static double measured_us(const state *s, const kiln_node *n, const kiln_tpl_block *bl, int nb,
                          int pick, char (*keys)[KILN_LAYOUT_KEY_MAX])
{
    const kiln_layout_hints *h = s->ctx->layout_hints;
    const kiln_graph *g = s->ctx->g;
    bool want = h && h->n_times > 0;
    double us = -1;
    for (int k = 0; k < nb; k++) {
        if (!keys && (!want || k != pick))
            continue;
        char tmp[KILN_LAYOUT_KEY_MAX];
        char *key = keys ? keys[k] : tmp;
        kiln_layout_node_key(s->ctx->target.name, g, n, &bl[k], key, KILN_LAYOUT_KEY_MAX);
        if (want && k == pick)
            us = kiln_layout_time_of(h, key);
    }
    return us;
}

void kiln_layout_decisions_free(kiln_layout_decision *d, int n)
{
    for (int k = 0; d && k < n; k++)
        free(d[k].name);
    free(d);
}

/* Records node i's choices for the applied walk (s->dec). */
static bool add_decision(state *s, const kiln_node *n, const kiln_tpl_block *bl, int nb,
                         int pick)
{
    if (s->n_dec == s->cap_dec) {
        int nc = s->cap_dec ? 2 * s->cap_dec : 16;
        kiln_layout_decision *d = realloc(s->dec, sizeof *d * (size_t)nc);
        if (!d)
            return false;
        s->dec = d;
        s->cap_dec = nc;
    }
    kiln_layout_decision *d = &s->dec[s->n_dec];
    memset(d, 0, sizeof *d);
    d->name = strdup(n->name ? n->name : "");
    if (!d->name)
        return false;
    d->n_blocks = nb;
    d->picked = pick;
    memcpy(d->blocks, bl, sizeof *bl * (size_t)nb);
    d->measured = measured_us(s, n, bl, nb, pick, d->keys) >= 0;
    s->n_dec++;
    return true;
}

/* The walk (see the top) with `choice` (NULL: defaults). *out receives the
 * new graph; out NULL: a dry run whose graph is dropped. ev (may be NULL)
 * receives the cost and, when its arrays are allocated, what each node was
 * offered and given. */
typedef struct walk_decisions {
    kiln_layout_decision *dec;
    int n, measured;
} walk_decisions;

static kiln_status walk(const kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                        kiln_layout_eval *ev, kiln_graph **out, int *transforms,
                        walk_decisions *dec, kiln_error *err)
{
    const kiln_graph *src = ctx->g;
    state s = {.ctx = (kiln_pass_ctx *)ctx};
    kiln_status st = kiln_rewrite_begin(&s.rw, src, err);
    if (st != KILN_OK)
        return st;
    int stack[16];
    for (int i = 0; i < src->n_nodes; i++) {
        const kiln_node *n = src->nodes[i];
        int *in = n->n_inputs <= 16 ? stack : malloc(sizeof(int) * (size_t)n->n_inputs);
        if (!in)
            goto oom;
        kiln_graph *g = s.rw.dst;
        /* the template taking n may choose its layouts (conv block sizes):
         * its default, or the requested choice where it offers it */
        kiln_tpl_block bl[KILN_TPL_MAX_BLOCKS];
        int x0 = n->n_inputs > 0 ? kiln_rewrite_value(&s.rw, n->inputs[0]) : -1;
        int nb = n->n_inputs > 0 && n->n_outputs == 1 && x0 >= 0
                     ? kiln_target_blocks(&ctx->target, src, n, g->values[x0]->layout, bl)
                     : 0;
        bool chosen = nb > 0;
        int pick = 0;
        if (chosen && choice && (choice[i].in_block || choice[i].out_block)) {
            /* the requested blocks and algorithm; else (the input arrives
             * in another block than when the choice was made) the requested
             * output, by the requested algorithm where offered */
            int exact = -1, out_only = -1;
            for (int k = nb - 1; k >= 0; k--)
                if (kiln_layout_block(bl[k].lay.out) == choice[i].out_block &&
                    (bl[k].lay.algo == choice[i].algo || (out_only < 0 && !bl[k].lay.algo))) {
                    out_only = k;
                    if (kiln_layout_block(bl[k].lay.in) == choice[i].in_block)
                        exact = k;
                }
            pick = exact >= 0 ? exact : out_only >= 0 ? out_only : 0;
        }
        const kiln_layout_hints *hints = ctx->layout_hints;
        if (chosen && nb >= 2 && hints && hints->force >= 0 && nb > hints->force &&
            (hints->force_phase == 0 || s.ordinal % 2 == hints->force_phase - 1))
            pick = hints->force;
        if (chosen && nb >= 2)
            s.ordinal++;
        kiln_tpl_layout tl = bl[pick].lay;
        if (chosen) {
            double us = measured_us(&s, n, bl, nb, pick, NULL);
            double an = node_flops(src, n) * bl[pick].cost / KILN_LAYOUT_CONV_RATE * 1e6;
            if (us >= 0) {
                s.measured++;
                s.measured_us += us;
                s.measured_analytic_us += an;
            } else {
                us = an * (hints && hints->analytic_scale > 0 ? hints->analytic_scale : 1.0);
            }
            s.cost_us += us;
            if (ev && ev->node_us)
                ev->node_us[i] = us;
            if (dec && nb >= 2 && !add_decision(&s, n, bl, nb, pick)) {
                if (in != stack)
                    free(in);
                goto oom;
            }
            if (ev && ev->n_blocks) {
                ev->n_blocks[i] = nb;
                memcpy(ev->blocks[i], bl, sizeof(kiln_tpl_block) * (size_t)nb);
                ev->picked[i] = pick;
            }
        }
        for (int k = 0; k < n->n_inputs; k++)
            in[k] = k == 0                                                  ? x0
                    : chosen && k == 1 && tl.weight.kind != KILN_LAYOUT_ROW_MAJOR ? -1
                                                            : kiln_rewrite_value(&s.rw, n->inputs[k]);
        int id = -1;
        const kiln_value *y = n->n_outputs == 1 ? src->values[n->outputs[0]] : NULL;
        bool f32 = y && y->dtype == KILN_DTYPE_FLOAT32;
        kiln_layout l0 = n->n_inputs > 0 && in[0] >= 0 ? g->values[in[0]]->layout : ROW_MAJOR;
        if (chosen) {
            id = lay_template(&s, n, in, &tl);
        } else if (f32 && is_unary_elemwise(n->op) && l0.kind == KILN_LAYOUT_NCHWC &&
                   (!partial_block(g->values[in[0]]) || keeps_finite(n->op))) {
            id = emit(&s, n, in, l0);
        } else if (f32 && is_binary_arith(n->op) && l0.kind == KILN_LAYOUT_NCHWC &&
                   (n->op != KILN_OP_DIV || !partial_block(g->values[in[0]])) &&
                   in[1] >= 0 && g->values[in[1]]->kind != KILN_VALUE_CONST &&
                   kiln_layout_equal(g->values[in[1]]->layout, l0) &&
                   kiln_shape_equal(&g->values[in[0]]->shape, &g->values[in[1]]->shape)) {
            id = emit(&s, n, in, l0);
        } else if (f32 && channel_operand_of(g, n, in, y) >= 0) {
            /* the activation keeps its blocks; kernels read the [1, C, 1, 1]
             * operand by channel index, which its storage holds at c in any
             * layout (H = W = 1), so it needs no transform either */
            id = emit(&s, n, in, g->values[in[channel_operand_of(g, n, in, y)]]->layout);
        } else if (f32 && (n->op == KILN_OP_MAXPOOL || n->op == KILN_OP_AVERAGEPOOL) &&
                   n->n_outputs == 1 && l0.kind == KILN_LAYOUT_NCHWC && y->shape.rank == 4) {
            id = emit(&s, n, in, l0);
        } else if (f32 && n->op == KILN_OP_PAD && l0.kind == KILN_LAYOUT_NCHWC &&
                   y->shape.rank == 4 && spatial_pad(n) && !partial_block(g->values[in[0]])) {
            id = emit(&s, n, in, l0);
        } else if (f32 && n->op == KILN_OP_GLOBALAVERAGEPOOL && l0.kind == KILN_LAYOUT_NCHWC &&
                   y->shape.rank == 4) {
            id = emit(&s, n, in, ROW_MAJOR);
        } else if (f32 && n->op == KILN_OP_CONCAT && l0.kind == KILN_LAYOUT_NCHWC &&
                   y->shape.rank == 4) {
            int64_t axis = kiln_attr_int(n, "axis", 0);
            bool ok = axis == 1 || axis == -3;
            for (int k = 0; k < n->n_inputs && ok; k++) {
                const kiln_value *v = g->values[in[k]];
                ok = v->kind != KILN_VALUE_CONST && kiln_layout_equal(v->layout, l0) &&
                     v->shape.dims[1] % l0.block_a == 0;
            }
            if (ok)
                id = emit(&s, n, in, l0);
        }
        if (id == -1) {
            /* a row-major consumer: transform blocked inputs back */
            for (int k = 0; k < n->n_inputs; k++)
                if (in[k] >= 0)
                    in[k] = as_layout(&s, in[k], ROW_MAJOR);
            id = emit(&s, n, in, ROW_MAJOR);
        }
        if (in != stack)
            free(in);
        if (id < 0)
            goto oom;
    }
    /* graph outputs are row-major */
    for (int i = 0; i < src->n_outputs; i++) {
        int v = src->outputs[i];
        int nv = kiln_rewrite_value(&s.rw, v);
        if (nv >= 0 && s.rw.dst->values[nv]->layout.kind != KILN_LAYOUT_ROW_MAJOR) {
            int t = as_layout(&s, nv, ROW_MAJOR);
            if (t < 0)
                goto oom;
            s.rw.map[v] = t;
        }
    }
    free(s.rm_of);
    free(s.blk_of);
    if (ev) {
        ev->cost_us = s.cost_us;
        ev->transforms = s.transforms;
        ev->measured = s.measured;
        ev->measured_us = s.measured_us;
        ev->measured_analytic_us = s.measured_analytic_us;
    }
    if (transforms)
        *transforms = s.transforms;
    if (!out) {
        kiln_rewrite_abort(&s.rw);
        return KILN_OK;
    }
    kiln_status fs = kiln_rewrite_finish(&s.rw, out, err);
    if (fs == KILN_OK && dec) {
        dec->dec = s.dec;
        dec->n = s.n_dec;
        dec->measured = s.measured;
    } else {
        kiln_layout_decisions_free(s.dec, s.n_dec);
    }
    return fs;
oom:
    kiln_layout_decisions_free(s.dec, s.n_dec);
    free(s.rm_of);
    free(s.blk_of);
    kiln_rewrite_abort(&s.rw);
    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory in alter-layout");
}

kiln_status kiln_alter_layout_eval(const kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                                   bool want_blocks, kiln_layout_eval *ev, kiln_error *err)
{
    kiln_layout_eval e = {0};
    if (want_blocks) {
        size_t n = (size_t)(ctx->g->n_nodes > 0 ? ctx->g->n_nodes : 1);
        e.n_blocks = calloc(n, sizeof *e.n_blocks);
        e.blocks = calloc(n, sizeof *e.blocks);
        e.picked = calloc(n, sizeof *e.picked);
        e.node_us = calloc(n, sizeof *e.node_us);
        if (!e.n_blocks || !e.blocks || !e.picked || !e.node_us) {
            kiln_layout_eval_free(&e);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory in alter-layout");
        }
    }
    kiln_status st = walk(ctx, choice, &e, NULL, NULL, NULL, err);
    if (st != KILN_OK) {
        kiln_layout_eval_free(&e);
        return st;
    }
    *ev = e;
    return KILN_OK;
}

kiln_status kiln_pass_alter_layout_with(kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                                        kiln_error *err)
{
    kiln_graph *ng = NULL;
    int transforms = 0;
    walk_decisions dec = {0};
    kiln_status st = walk(ctx, choice, NULL, &ng, &transforms, &dec, err);
    if (st != KILN_OK)
        return st;
    kiln_layout_decisions_free(ctx->layout_decisions, ctx->n_layout_decisions);
    ctx->layout_decisions = dec.dec;
    ctx->n_layout_decisions = dec.n;
    ctx->layout_measured = dec.measured;
    ctx->stat_transforms = transforms;
    return kiln_pass_ctx_replace(ctx, ng, err);
}

kiln_status kiln_pass_alter_layout(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_layout_hints *h = ctx->layout_hints;
    if (h && h->force >= 0)
        return kiln_pass_alter_layout_with(ctx, NULL, err);
    kiln_layout_plan plan = {0};
    kiln_status st = kiln_layout_dp(ctx, &plan, err);
    if (st != KILN_OK)
        return st;
    if (ctx->verbose)
        for (int c = 0; c < plan.n_chains; c++)
            if (plan.chains[c].changed)
                fprintf(ctx->dump ? ctx->dump : stderr,
                        "alter-layout: chain at '%s' (%d convs with block choices): blocks "
                        "changed, %s cost %.1f -> %.1f us\n",
                        ctx->g->nodes[plan.chains[c].first]->name ? ctx->g->nodes[plan.chains[c].first]->name : "?",
                        plan.chains[c].n_nodes,
                        ctx->layout_hints && ctx->layout_hints->n_times > 0 ? "measured"
                                                                           : "analytic",
                        plan.chains[c].default_us, plan.chains[c].chosen_us);
    st = kiln_pass_alter_layout_with(ctx, plan.choice, err);
    kiln_layout_plan_free(&plan);
    return st;
}
