/* lower/lower.c: fused groups -> kernel tasks (see lower.h).
 *
 * For each KERNEL group: pick the template from the anchor op and its layouts
 * (choose_tpl), collect its tensors (group inputs, then outputs; constants
 * become weights tensors, packed for the template where it wants packed
 * weights), fill the knob space with the analytic default (knobs.c), count
 * flops, and name the workload. Finally tasks with the same workload and
 * knobs share a kernel (kiln_lowered_finalize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "codegen/c/kernels/kiln_kernels_dwconv.h"
#include "lower/geom.h"
#include "lower/hash.h"
#include "lower/knobs.h"
#include "util/error.h"
#include "util/rng.h"

static const char *const tpl_names[KILN_TPL_COUNT] = {
    [KILN_TPL_CONV2D_NCHWC] = "conv2d_nchwc",
    [KILN_TPL_DWCONV2D_NCHWC] = "dwconv2d_nchwc",
    [KILN_TPL_CONV2D_DIRECT] = "conv2d_direct",
    [KILN_TPL_DENSE] = "dense",
    [KILN_TPL_MATMUL] = "matmul",
    [KILN_TPL_POOL2D] = "pool2d",
    [KILN_TPL_GLOBAL_POOL] = "global_pool",
    [KILN_TPL_SOFTMAX] = "softmax",
    [KILN_TPL_LAYERNORM] = "layernorm",
    [KILN_TPL_REDUCE] = "reduce",
    [KILN_TPL_ELEMWISE] = "elemwise",
    [KILN_TPL_TRANSPOSE] = "transpose",
    [KILN_TPL_COPY] = "copy",
    [KILN_TPL_CONCAT] = "concat",
    [KILN_TPL_SLICE] = "slice",
    [KILN_TPL_SPLIT] = "split",
    [KILN_TPL_GATHER] = "gather",
    [KILN_TPL_PAD] = "pad",
    [KILN_TPL_LAYOUT] = "layout_transform",
    [KILN_TPL_REF] = "ref",
};

const char *kiln_tpl_name(kiln_tpl t)
{
    return (unsigned)t < KILN_TPL_COUNT ? tpl_names[t] : "?";
}

/* ---- which template ----------------------------------------------------------- */

static bool f32(const kiln_graph *g, int v)
{
    return v >= 0 && g->values[v]->dtype == KILN_DTYPE_FLOAT32;
}

static bool gather_scalar_index(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *idx = g->values[n->inputs[1]];
    return idx->kind == KILN_VALUE_CONST && idx->data && kiln_shape_numel(&idx->shape) == 1 &&
           idx->shape.rank == 0 &&
           (idx->dtype == KILN_DTYPE_INT64 || idx->dtype == KILN_DTYPE_INT32);
}

static kiln_tpl node_tpl(const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? g->values[n->inputs[0]] : NULL;
    const kiln_value *y = g->values[n->outputs[0]];
    bool row_major_in = x && x->layout.kind == KILN_LAYOUT_ROW_MAJOR;
    switch (n->op) {
    case KILN_OP_CONV: {
        if (!f32(g, n->inputs[0]) || g->values[n->inputs[1]]->kind != KILN_VALUE_CONST)
            return KILN_TPL_REF;
        kiln_win2d w;
        if (!kiln_geom_win2d(g, n, &w))
            return KILN_TPL_REF;
        if (g->values[n->inputs[1]]->layout.kind == KILN_LAYOUT_OIHWIO)
            return KILN_TPL_CONV2D_NCHWC;
        if (kiln_conv_is_depthwise(g, n) && x->layout.kind == KILN_LAYOUT_NCHWC)
            return KILN_TPL_DWCONV2D_NCHWC;
        if (row_major_in && y->layout.kind == KILN_LAYOUT_ROW_MAJOR)
            return KILN_TPL_CONV2D_DIRECT;
        return KILN_TPL_REF;
    }
    case KILN_OP_MAXPOOL:
    case KILN_OP_AVERAGEPOOL: {
        kiln_win2d w;
        if (n->n_outputs != 1 || !f32(g, n->inputs[0]) || !kiln_geom_win2d(g, n, &w))
            return KILN_TPL_REF;
        return KILN_TPL_POOL2D;
    }
    case KILN_OP_GLOBALAVERAGEPOOL:
    case KILN_OP_GLOBALMAXPOOL:
        return f32(g, n->inputs[0]) && x->shape.rank >= 3 ? KILN_TPL_GLOBAL_POOL : KILN_TPL_REF;
    case KILN_OP_GEMM:
    case KILN_OP_MATMUL: {
        kiln_dense d;
        if (kiln_geom_dense(g, n, &d))
            return KILN_TPL_DENSE;
        kiln_bmm b;
        if (n->op == KILN_OP_MATMUL && row_major_in && kiln_geom_bmm(g, n, &b) &&
            f32(g, n->inputs[1]))
            return KILN_TPL_MATMUL;
        return KILN_TPL_REF;
    }
    case KILN_OP_SOFTMAX:
    case KILN_OP_LOGSOFTMAX:
        return f32(g, n->inputs[0]) && row_major_in ? KILN_TPL_SOFTMAX : KILN_TPL_REF;
    case KILN_OP_LAYERNORM:
        return n->n_outputs == 1 && f32(g, n->inputs[0]) && row_major_in &&
                       g->values[n->inputs[1]]->dtype == KILN_DTYPE_FLOAT32
                   ? KILN_TPL_LAYERNORM
                   : KILN_TPL_REF;
    case KILN_OP_REDUCEMEAN:
    case KILN_OP_REDUCESUM:
    case KILN_OP_REDUCEMAX:
    case KILN_OP_REDUCEMIN:
    case KILN_OP_REDUCEPROD:
    case KILN_OP_REDUCEL1:
    case KILN_OP_REDUCEL2:
    case KILN_OP_REDUCESUMSQUARE:
        return f32(g, n->inputs[0]) && row_major_in && n->n_inputs == 1 ? KILN_TPL_REDUCE
                                                                         : KILN_TPL_REF;
    case KILN_OP_TRANSPOSE:
        return row_major_in ? KILN_TPL_TRANSPOSE : KILN_TPL_REF;
    case KILN_OP_SLICE:
        return row_major_in ? KILN_TPL_SLICE : KILN_TPL_REF;
    case KILN_OP_EXPAND:
        return row_major_in ? KILN_TPL_COPY : KILN_TPL_REF;
    case KILN_OP_GATHER:
        return row_major_in && gather_scalar_index(g, n) ? KILN_TPL_GATHER : KILN_TPL_REF;
    case KILN_OP_RESHAPE:
    case KILN_OP_FLATTEN:
        return row_major_in ? KILN_TPL_COPY : KILN_TPL_REF;
    case KILN_OP_IDENTITY:
        if (x && !kiln_layout_equal(x->layout, y->layout))
            return (x->shape.rank == 4 && x->layout.kind != KILN_LAYOUT_OIHWIO &&
                    y->layout.kind != KILN_LAYOUT_OIHWIO)
                       ? KILN_TPL_LAYOUT
                       : KILN_TPL_REF;
        return KILN_TPL_COPY;
    case KILN_OP_CONCAT:
        for (int k = 0; k < n->n_inputs; k++)
            if (!kiln_layout_equal(g->values[n->inputs[k]]->layout, y->layout))
                return KILN_TPL_REF;
        return KILN_TPL_CONCAT;
    case KILN_OP_SPLIT:
        return row_major_in ? KILN_TPL_SPLIT : KILN_TPL_REF;
    case KILN_OP_PAD: {
        const char *ms = kiln_attr_string(n, "mode", "constant");
        const int64_t *pads = NULL;
        int np = kiln_attr_ints(n, "pads", &pads);
        if (!f32(g, n->inputs[0]) || np != 2 * x->shape.rank || x->shape.rank < 1 ||
            (strcmp(ms, "constant") && strcmp(ms, "edge") && strcmp(ms, "reflect")))
            return KILN_TPL_REF;
        if (x->layout.kind == KILN_LAYOUT_NCHWC &&
            (pads[0] || pads[1] || pads[4] || pads[5] || !kiln_layout_equal(x->layout, y->layout)))
            return KILN_TPL_REF;
        return KILN_TPL_PAD;
    }
    default:
        break;
    }
    if (kiln_epilogue_op(g, n))
        return KILN_TPL_ELEMWISE;
    return KILN_TPL_REF;
}

bool kiln_lower_has_template(const kiln_graph *g, const kiln_node *n)
{
    return node_tpl(g, n) != KILN_TPL_REF;
}

/* ---- tensors ------------------------------------------------------------------------ */

static int add_tensor(kiln_lowered *l, kiln_tensor_entry e)
{
    if (l->n_tensors == l->cap_tensors) {
        int nc = l->cap_tensors ? l->cap_tensors * 2 : 64;
        kiln_tensor_entry *p = realloc(l->tensors, sizeof *p * (size_t)nc);
        if (!p)
            return -1;
        l->tensors = p;
        l->cap_tensors = nc;
    }
    l->tensors[l->n_tensors] = e;
    return l->n_tensors++;
}

/* The weights tensor of constant v with layout `layout` (data: the packed
 * copy, owned by the table from now on, or NULL for the constant's own). */
static int weight_tensor(kiln_lowered *l, int v, const char *layout, void *owned, int64_t nbytes)
{
    const kiln_value *x = l->ctx->g->values[v];
    char lb[32];
    if (!layout)
        layout = kiln_layout_str(&x->shape, x->layout, lb, sizeof lb);
    if (!owned)
        for (int i = 0; i < l->n_tensors; i++)
            if (l->tensors[i].weights && l->tensors[i].value == v && !l->tensors[i].owned &&
                strcmp(l->tensors[i].layout, layout) == 0)
                return i;
    kiln_tensor_entry e = {.value = v, .weights = true, .owned = owned};
    snprintf(e.layout, sizeof e.layout, "%s", layout);
    e.data = owned ? owned : x->data;
    e.nbytes = owned ? nbytes : (int64_t)kiln_dtype_size(x->dtype) * kiln_shape_numel(&x->shape);
    int id = add_tensor(l, e);
    if (id < 0)
        free(owned);
    return id;
}

void kiln_lowered_destroy(kiln_lowered *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n_tensors; i++)
        free(l->tensors[i].owned);
    free(l->tensors);
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        free(t->args);
        free(t->arg_values);
        free(t->workload);
        free(t->config);
        free(t->shapes);
        free(t->layouts);
        free(t->params);
    }
    free(l->tasks);
    free(l->value_tensor);
    free(l);
}

/* ---- packing ---------------------------------------------------------------------- */

/* Dense B -> panels [ceil(N/nb)][K][nb], zero padded; B is [K,N] or, with
 * trans_b, [N,K]. */
static float *pack_dense(const float *bsrc, const kiln_dense *d, int nb, int64_t *nbytes)
{
    int64_t np = (d->N + nb - 1) / nb;
    *nbytes = (int64_t)sizeof(float) * np * d->K * nb;
    float *p = malloc((size_t)*nbytes + 1);
    if (!p)
        return NULL;
    for (int64_t pi = 0; pi < np; pi++)
        for (int64_t k = 0; k < d->K; k++)
            for (int j = 0; j < nb; j++) {
                int64_t col = pi * nb + j;
                float v = 0.0f;
                if (col < d->N)
                    v = d->trans_b ? bsrc[col * d->K + k] : bsrc[k * d->N + col];
                p[(pi * d->K + k) * nb + j] = v;
            }
    return p;
}

/* ---- one task ------------------------------------------------------------------ */

static void maybe_randomize(kiln_lowered *l, kiln_task *t);

/* The kernel headers' epilogue of a conv-like group: residual Add, Relu, Clip
 * (the fuse pass admits nothing else after a header-backed anchor). */
static int header_epilogue(const kiln_lowered *l, kiln_task *t, bool has_bias, float *lo,
                           float *hi)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    int epi = has_bias ? KILN_EPI_BIAS : 0;
    *lo = -3.4028234663852886e38f;
    *hi = 3.4028234663852886e38f;
    t->residual_arg = -1;
    for (int i = 1; i < gr->n_nodes; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        if (m->op == KILN_OP_ADD) {
            int prev = g->nodes[gr->nodes[i - 1]]->outputs[0];
            int other = m->inputs[0] == prev ? m->inputs[1] : m->inputs[0];
            epi |= KILN_EPI_RESIDUAL;
            t->residual_arg = kiln_task_arg(t, other);
        } else if (m->op == KILN_OP_RELU) {
            epi |= KILN_EPI_RELU;
        } else if (m->op == KILN_OP_CLIP) {
            epi |= KILN_EPI_CLIP;
            *lo = kiln_attr_float(m, "min", *lo);
            *hi = kiln_attr_float(m, "max", *hi);
        }
    }
    t->epi_from = gr->n_nodes; /* the header applies the whole epilogue */
    return epi;
}

static kiln_status lower_dwconv(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_dwconv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    *p = (kiln_dwconv_params){.n = (int)w.n, .c = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                              .oh = (int)w.oh, .ow = (int)w.ow, .kh = (int)w.kh, .kw = (int)w.kw,
                              .sh = (int)w.sh, .sw = (int)w.sw, .dh = (int)w.dh, .dw = (int)w.dw,
                              .pad_t = (int)w.pt, .pad_l = (int)w.pl, .pad_b = (int)w.pb,
                              .pad_r = (int)w.pr, .cb = w.bin};
    p->epilogue = header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0, &p->clip_min,
                                  &p->clip_max);
    t->params = p;
    if (!kiln_dwconv_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the depthwise template rejects it",
                           n->name);
    kiln_dwconv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    kiln_knobs_dwconv(t, p);
    maybe_randomize(l, t);
    kiln_knobs_apply_dwconv(t, p);
    int64_t floats = kiln_dwconv_packed_weight_floats(p);
    float *packed = malloc(sizeof(float) * (size_t)floats + 1);
    if (!packed)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory packing '%s'", n->name);
    kiln_dwconv_pack_weights(p, wv->data, packed);
    char lb[32];
    snprintf(lb, sizeof lb, "C%dc_HW%dc", p->cb, p->cb);
    int tid = weight_tensor(l, wv->id, lb, packed, (int64_t)sizeof(float) * floats);
    if (tid < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[kiln_task_arg(t, wv->id)] = tid;
    t->flops = kiln_dwconv_flops(p);
    return KILN_OK;
}

static kiln_status lower_conv_nchwc(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *wv = g->values[n->inputs[1]];
    kiln_win2d w;
    kiln_geom_win2d(g, n, &w);
    kiln_conv_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    *p = (kiln_conv_params){.n = (int)w.n, .c_in = (int)w.c, .h = (int)w.h, .w = (int)w.w,
                            .c_out = (int)w.m, .oh = (int)w.oh, .ow = (int)w.ow, .kh = (int)w.kh,
                            .kw = (int)w.kw, .sh = (int)w.sh, .sw = (int)w.sw, .dh = (int)w.dh,
                            .dw = (int)w.dw, .pad_t = (int)w.pt, .pad_l = (int)w.pl,
                            .pad_b = (int)w.pb, .pad_r = (int)w.pr, .groups = (int)w.groups,
                            .cb_in = wv->layout.block_a, .cb_out = wv->layout.block_b};
    p->epilogue = header_epilogue(l, t, n->n_inputs > 2 && n->inputs[2] >= 0, &p->clip_min,
                                  &p->clip_max);

    if (!kiln_conv_supported(p)) {
        free(p);
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': the blocked template rejects it",
                           n->name);
    }
    kiln_conv_default_params(p, l->ctx->target.l1_bytes, l->ctx->target.l2_bytes, 2);
    t->params = p;
    kiln_knobs_conv_nchwc(t, p);
    maybe_randomize(l, t);
    kiln_knobs_apply_conv(t, p);
    /* packed weights */
    int64_t floats = kiln_conv_packed_weight_floats(p);
    float *packed = malloc(sizeof(float) * (size_t)floats + 1);
    if (!packed)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory packing '%s'", n->name);
    kiln_conv_pack_weights(p, wv->data, packed);
    char lb[32];
    snprintf(lb, sizeof lb, "OIHW%di%do", p->cb_in, p->cb_out);
    int wa = kiln_task_arg(t, wv->id);
    int tid = weight_tensor(l, wv->id, lb, packed, (int64_t)sizeof(float) * floats);
    if (tid < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[wa] = tid;
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
        int bid = weight_tensor(l, bv->id, lb, pb, (int64_t)sizeof(float) * nb);
        if (bid < 0)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        t->args[kiln_task_arg(t, bv->id)] = bid;
    }
    t->flops = kiln_conv_flops(p);
    return KILN_OK;
}

/* Fills args with the group's tensors: inputs (constants as weights tensors in
 * their own layout), then outputs. */
static kiln_status task_args(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    const kiln_node *a = ctx->g->nodes[gr->anchor];
    int n_out = a->n_outputs > 1 ? a->n_outputs : gr->n_outputs;
    t->n_in = gr->n_inputs;
    t->n_args = gr->n_inputs + n_out;
    t->args = malloc(sizeof(int) * (size_t)(t->n_args + 1));
    t->arg_values = malloc(sizeof(int) * (size_t)(t->n_args + 1));
    if (!t->args || !t->arg_values)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < t->n_args; i++) {
        int v = i < t->n_in ? gr->inputs[i]
                            : (a->n_outputs > 1 ? a->outputs[i - t->n_in] : gr->outputs[i - t->n_in]);
        t->arg_values[i] = v;
        const kiln_value *x = ctx->g->values[v];
        int tid;
        if (x->kind == KILN_VALUE_CONST) {
            if (!x->data)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "constant '%s' has no data (graph built without weights)",
                                   x->name);
            tid = weight_tensor(l, v, NULL, NULL, 0);
        } else {
            tid = l->value_tensor[v];
        }
        if (tid < 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "value '%s' has no storage", x->name);
        t->args[i] = tid;
    }
    return KILN_OK;
}

static kiln_status lower_task(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_graph *g = ctx->g;
    const kiln_group *gr = &ctx->groups[t->group];
    const kiln_node *n = g->nodes[t->anchor];
    kiln_status s = task_args(l, t, err);
    if (s != KILN_OK)
        return s;
    t->epi_from = 1;
    t->residual_arg = -1;
    const kiln_value *y = g->values[gr->outputs[0]];
    int64_t out_numel = kiln_shape_numel(&y->shape);
    t->flops = (double)out_numel * gr->n_nodes;
    switch (t->tpl) {
    case KILN_TPL_CONV2D_NCHWC:
        return lower_conv_nchwc(l, t, err);
    case KILN_TPL_DWCONV2D_NCHWC:
        return lower_dwconv(l, t, err);
    case KILN_TPL_CONV2D_DIRECT: {
        kiln_win2d w;
        kiln_geom_win2d(g, n, &w);
        t->flops = 2.0 * w.n * w.m * w.oh * w.ow * (double)(w.c / w.groups) * w.kh * w.kw;
        return KILN_OK;
    }
    case KILN_TPL_DENSE: {
        kiln_dense d;
        kiln_geom_dense(g, n, &d);
        kiln_knobs_dense(t, &d, &ctx->target);
        maybe_randomize(l, t);
        int nb = kiln_task_knob(t, "nb", ctx->target.vec);
        const kiln_value *bv = g->values[n->inputs[1]];
        int64_t nbytes;
        float *p = pack_dense(bv->data, &d, nb, &nbytes);
        if (!p)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        char lb[32];
        snprintf(lb, sizeof lb, "KN%dn", nb);
        int tid = weight_tensor(l, bv->id, lb, p, nbytes);
        if (tid < 0)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        t->args[kiln_task_arg(t, bv->id)] = tid;
        t->flops = 2.0 * d.M * d.N * d.K;
        return KILN_OK;
    }
    case KILN_TPL_MATMUL: {
        kiln_bmm b;
        kiln_geom_bmm(g, n, &b);
        t->flops = 2.0 * b.batch * b.M * b.N * b.K;
        kiln_knobs_rows(t, b.batch, b.M, b.N * b.K);
        return KILN_OK;
    }
    case KILN_TPL_POOL2D: {
        kiln_win2d w;
        kiln_geom_win2d(g, n, &w);
        t->flops = (double)w.n * w.c * w.oh * w.ow * w.kh * w.kw;
        kiln_knobs_rows(t, w.n * ((w.c + w.bin - 1) / w.bin), w.oh, w.ow * w.kh * w.kw * w.bin);
        return KILN_OK;
    }
    case KILN_TPL_ELEMWISE:
        t->epi_from = 0;
        kiln_knobs_chunk(t, kiln_layout_nbytes(y->dtype, &y->shape, y->layout) / 4);
        return KILN_OK;
    default:
        return KILN_OK;
    }
}

/* Randomizes the knobs of templates whose knobs do not affect packing. */
static kiln_status lower_task_knobs(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    kiln_status s = lower_task(l, t, err);
    if (s == KILN_OK && t->tpl != KILN_TPL_CONV2D_NCHWC && t->tpl != KILN_TPL_DENSE &&
        t->tpl != KILN_TPL_DWCONV2D_NCHWC)
        maybe_randomize(l, t);
    return s;
}

/* ---- workload keys and dedupe ------------------------------------------------- */

static void value_desc(kiln_sb *b, const kiln_lowered *l, int tensor)
{
    const kiln_tensor_entry *e = &l->tensors[tensor];
    const kiln_value *v = l->ctx->g->values[e->value];
    char sb[160];
    kiln_shape_str(&v->shape, sb, sizeof sb);
    kiln_sb_printf(b, "%s%s:%s%s", kiln_dtype_name(v->dtype), sb, e->layout,
                   e->weights ? ":w" : "");
}

static void attr_desc(kiln_sb *b, const kiln_attr *a)
{
    kiln_sb_printf(b, "%s=", a->name);
    switch (a->type) {
    case KILN_ATTR_INT:
        kiln_sb_printf(b, "%lld", (long long)a->i);
        break;
    case KILN_ATTR_FLOAT:
        kiln_sb_printf(b, "%a", (double)a->f);
        break;
    case KILN_ATTR_STRING:
        kiln_sb_printf(b, "'%s'", a->s);
        break;
    case KILN_ATTR_INTS:
        for (int i = 0; i < a->n; i++)
            kiln_sb_printf(b, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        break;
    case KILN_ATTR_FLOATS:
        for (int i = 0; i < a->n; i++)
            kiln_sb_printf(b, "%s%a", i ? "," : "", (double)a->floats[i]);
        break;
    }
    kiln_sb_puts(b, ";");
}

static kiln_status name_task(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_graph *g = ctx->g;
    const kiln_group *gr = &ctx->groups[t->group];
    kiln_sb b = {0}, c = {0}, shp = {0}, lay = {0};
    kiln_sb_printf(&b, "%s|%s|", kiln_tpl_name(t->tpl), ctx->target.name);
    for (int i = 0; i < t->n_args; i++) {
        if (i)
            kiln_sb_puts(&b, ",");
        value_desc(&b, l, t->args[i]);
        const kiln_value *v = g->values[t->arg_values[i]];
        char sbuf[160];
        kiln_sb_printf(&shp, "%s%s", i ? ", " : "", kiln_shape_str(&v->shape, sbuf, sizeof sbuf));
        kiln_sb_printf(&lay, "%s%s", i ? "/" : "", l->tensors[t->args[i]].layout);
    }
    kiln_sb_puts(&b, "|");
    for (int i = 0; i < gr->n_nodes; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        kiln_sb_printf(&b, "%s%s(", i ? ">" : "", kiln_op_name(m->op));
        for (int k = 0; k < m->n_inputs; k++) {
            int a = kiln_task_arg(t, m->inputs[k]);
            if (a >= 0)
                kiln_sb_printf(&b, "%sa%d", k ? "," : "", a);
            else
                kiln_sb_printf(&b, "%st", k ? "," : "");
        }
        kiln_sb_puts(&b, "){");
        for (int k = 0; k < m->n_attrs; k++)
            attr_desc(&b, &m->attrs[k]);
        kiln_sb_puts(&b, "}");
        if (m->n_outputs == 1)
            kiln_sb_printf(&b, "->%s", kiln_layout_str(&g->values[m->outputs[0]]->shape,
                                                       g->values[m->outputs[0]]->layout,
                                                       (char[32]){0}, 32));
    }
    kiln_sb_puts(&c, "{");
    for (int i = 0; i < t->n_knobs; i++)
        kiln_sb_printf(&c, "\"%s\": %d, ", t->knobs[i].name, t->knobs[i].value);
    kiln_sb_puts(&c, "\"source\": \"default\"}");
    free(t->workload);
    free(t->config);
    free(t->shapes);
    free(t->layouts);
    t->workload = kiln_sb_take(&b);
    t->config = kiln_sb_take(&c);
    t->shapes = kiln_sb_take(&shp);
    t->layouts = kiln_sb_take(&lay);
    if (!t->workload || !t->config || !t->shapes || !t->layouts)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->workload_hash = kiln_hash64(t->workload, strlen(t->workload));
    kiln_hash h;
    kiln_hash_init(&h, 7);
    kiln_hash_str(&h, t->workload);
    kiln_hash_str(&h, t->config);
    char hex[33];
    kiln_hash_hex(&h, hex);
    hex[12] = 0;
    snprintf(t->fn_name, sizeof t->fn_name, "kiln_k_%s_f32_%s", kiln_tpl_name(t->tpl), hex);
    return KILN_OK;
}

kiln_status kiln_lowered_finalize(kiln_lowered *l, kiln_error *err)
{
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        if (t->tpl == KILN_TPL_CONV2D_NCHWC)
            kiln_knobs_apply_conv(t, t->params);
        if (t->tpl == KILN_TPL_DWCONV2D_NCHWC)
            kiln_knobs_apply_dwconv(t, t->params);
        kiln_status s = name_task(l, t, err);
        if (s != KILN_OK)
            return s;
        t->kernel = i;
        for (int j = 0; j < i; j++)
            if (strcmp(l->tasks[j].fn_name, t->fn_name) == 0) {
                t->kernel = l->tasks[j].kernel;
                break;
            }
        if (t->tpl == KILN_TPL_CONV2D_NCHWC)
            t->workspace = (int64_t)kiln_conv_workspace_bytes(t->params);
    }
    l->workspace = 0;
    for (int i = 0; i < l->n_tasks; i++)
        if (l->tasks[i].workspace > l->workspace)
            l->workspace = l->tasks[i].workspace;
    return KILN_OK;
}

bool kiln_task_set_knob(kiln_task *t, const char *name, int value)
{
    for (int i = 0; i < t->n_knobs; i++) {
        kiln_knob *k = &t->knobs[i];
        if (strcmp(k->name, name) != 0)
            continue;
        for (int c = 0; c < k->n_choices; c++)
            if (k->choices[c] == value) {
                k->value = value;
                return true;
            }
        return false;
    }
    return false;
}

/* Draws every knob of t from its space when the lowering is randomized. */
static void maybe_randomize(kiln_lowered *l, kiln_task *t)
{
    if (!l->knob_seed)
        return;
    kiln_rng r;
    memcpy(r.s, l->rng, sizeof r.s);
    for (int k = 0; k < t->n_knobs; k++) {
        kiln_knob *kb = &t->knobs[k];
        if (kb->n_choices > 0)
            kb->value = kb->choices[kiln_rng_next(&r) % (uint64_t)kb->n_choices];
    }
    memcpy(l->rng, r.s, sizeof r.s);
}

/* Drops weights tensors no task reads any more (a constant whose packed copy
 * replaced it), renumbering the task args. */
static bool compact_weights(kiln_lowered *l)
{
    int *map = malloc(sizeof(int) * (size_t)(l->n_tensors ? l->n_tensors : 1));
    bool *used = calloc((size_t)(l->n_tensors ? l->n_tensors : 1), sizeof(bool));
    if (!map || !used) {
        free(map);
        free(used);
        return false;
    }
    for (int i = 0; i < l->n_tasks; i++)
        for (int k = 0; k < l->tasks[i].n_args; k++)
            used[l->tasks[i].args[k]] = true;
    int n = 0;
    for (int i = 0; i < l->n_tensors; i++) {
        if (l->tensors[i].weights && !used[i]) {
            free(l->tensors[i].owned);
            map[i] = -1;
            continue;
        }
        map[i] = n;
        l->tensors[n++] = l->tensors[i];
    }
    l->n_tensors = n;
    for (int i = 0; i < l->n_tasks; i++)
        for (int k = 0; k < l->tasks[i].n_args; k++)
            l->tasks[i].args[k] = map[l->tasks[i].args[k]];
    for (int v = 0; v < l->ctx->g->n_values; v++)
        if (l->value_tensor[v] >= 0)
            l->value_tensor[v] = map[l->value_tensor[v]];
    free(map);
    free(used);
    return true;
}

/* ---- driver -------------------------------------------------------------------------- */

kiln_status kiln_lower(kiln_pass_ctx *ctx, uint64_t knob_seed, kiln_lowered **out,
                       kiln_error *err)
{
    if (!ctx->storage)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "lowering needs plan-memory first");
    const kiln_graph *g = ctx->g;
    kiln_lowered *l = calloc(1, sizeof *l);
    if (!l)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    l->ctx = ctx;
    l->knob_seed = knob_seed;
    if (knob_seed) {
        kiln_rng r;
        kiln_rng_seed(&r, knob_seed);
        memcpy(l->rng, r.s, sizeof l->rng);
    }
    kiln_status s = KILN_OK;
    l->value_tensor = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    l->tasks = calloc((size_t)(ctx->n_groups ? ctx->n_groups : 1), sizeof *l->tasks);
    if (!l->value_tensor || !l->tasks) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    /* arena tensors: every planned value */
    for (int v = 0; v < g->n_values; v++) {
        l->value_tensor[v] = -1;
        const kiln_storage *st = &ctx->storage[v];
        if (st->root < 0 || g->values[v]->kind == KILN_VALUE_CONST)
            continue;
        kiln_tensor_entry e = {.value = v, .nbytes = st->nbytes, .offset = st->offset};
        kiln_layout_str(&g->values[v]->shape, g->values[v]->layout, e.layout, sizeof e.layout);
        int id = add_tensor(l, e);
        if (id < 0) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
        l->value_tensor[v] = id;
    }
    for (int r = 0; r < ctx->n_groups; r++) {
        const kiln_group *gr = &ctx->groups[r];
        if (gr->kind != KILN_GROUP_KERNEL)
            continue;
        kiln_task *t = &l->tasks[l->n_tasks++];
        t->group = r;
        t->anchor = gr->anchor;
        t->tpl = node_tpl(g, g->nodes[gr->anchor]);
        if (t->tpl == KILN_TPL_REF) {
            const char *op = kiln_op_name(g->nodes[gr->anchor]->op);
            l->n_fallback++;
            if (!strstr(l->fallback_ops, op) &&
                strlen(l->fallback_ops) + strlen(op) + 3 < sizeof l->fallback_ops)
                snprintf(l->fallback_ops + strlen(l->fallback_ops),
                         sizeof l->fallback_ops - strlen(l->fallback_ops), "%s%s",
                         l->fallback_ops[0] ? ", " : "", op);
        }
        s = lower_task_knobs(l, t, err);
        if (s != KILN_OK) {
            kiln_error_prefix(err, s, "lowering '%s': ", g->nodes[gr->anchor]->name);
            goto fail;
        }
    }
    if (!compact_weights(l)) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    s = kiln_lowered_finalize(l, err);
    if (s != KILN_OK)
        goto fail;
    *out = l;
    return KILN_OK;
fail:
    kiln_lowered_destroy(l);
    return s;
}
