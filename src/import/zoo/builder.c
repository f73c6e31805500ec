/* import/zoo/builder.c: the zoo's network builder (see builder.h).
 *
 * Each layer function: bail out if the sticky status is set or an input is -1;
 * create the constants, drawing their contents in order (sized from the input
 * shapes: the only shape checks here are the ones sizing a weight needs); add
 * the node and its attributes; then run the op registry's shape inference on
 * the new node (zb_infer), which records its outputs' dtype and shape in the
 * graph, as the ONNX importer does per converted node. No shape is computed
 * here: the next layer reads its input's from the graph, and a shape the op
 * refuses fails with KILN_ERR_INTERNAL (a zoo definition bug) and the
 * registry's message.
 */
#include "import/zoo/builder.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/op.h"
#include "util/error.h"

/* ---- status and bookkeeping ------------------------------------------------ */

static int fail(zb *b, kiln_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(zb *b, kiln_status s, const char *fmt, ...)
{
    if (b->status != KILN_OK)
        return -1;
    b->status = s;
    if (b->err) {
        va_list ap;
        va_start(ap, fmt);
        char msg[sizeof b->err->msg];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        kiln_errorf(b->err, s, "%s", msg);
    }
    return -1;
}

static int oom(zb *b, const char *name)
{
    return fail(b, KILN_ERR_OUT_OF_MEMORY, "zoo builder: out of memory at '%s'", name);
}

void zb_init(zb *b, kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    memset(b, 0, sizeof *b);
    b->g = g;
    b->rng = rng;
    b->weights = weights;
    b->err = err;
    b->status = KILN_OK;
}

kiln_status zb_finish(zb *b, int out)
{
    if (b->status == KILN_OK) {
        if (out < 0)
            fail(b, KILN_ERR_INTERNAL, "zoo builder: no output value");
        else if (kiln_graph_add_output(b->g, out) != KILN_OK)
            oom(b, "output");
    }
    return b->status;
}

const char *zb_name(zb *b, const char *fmt, ...)
{
    char *buf = b->names[b->name_next];
    b->name_next = (b->name_next + 1) % (int)(sizeof b->names / sizeof b->names[0]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof b->names[0], fmt, ap);
    va_end(ap);
    return buf;
}

const kiln_shape *zb_shape(const zb *b, int v)
{
    /* a node's output has a dtype once infer has run on its node */
    const kiln_value *val = kiln_graph_value(b->g, v);
    return (val && val->dtype != KILN_DTYPE_UNDEFINED) ? &val->shape : NULL;
}

int64_t zb_dim(const zb *b, int v, int axis)
{
    const kiln_shape *s = zb_shape(b, v);
    if (!s)
        return -1;
    if (axis < 0)
        axis += s->rank;
    return (axis >= 0 && axis < s->rank) ? s->dims[axis] : -1;
}

/* True when the builder may go on with inputs xs[0..n-1]. */
static bool usable(zb *b, const int *xs, int n, const char *name)
{
    if (b->status != KILN_OK)
        return false;
    for (int i = 0; i < n; i++)
        if (xs[i] < 0 || !zb_shape(b, xs[i])) {
            fail(b, KILN_ERR_INTERNAL, "zoo builder: '%s': input %d is not a built value", name,
                 i);
            return false;
        }
    return true;
}

static kiln_shape shape_of(int rank, const int64_t *dims)
{
    kiln_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}

static int bad_shape(zb *b, const char *name, const char *what, const kiln_shape *s)
{
    kiln_shape_buf sb;
    return fail(b, KILN_ERR_INTERNAL, "zoo builder: '%s': %s (input shape %s)", name, what,
                kiln_shape_fmt(s, &sb));
}

/* ---- values ---------------------------------------------------------------- */

int zb_input(zb *b, const char *name, kiln_shape shape)
{
    if (b->status != KILN_OK)
        return -1;
    int v = kiln_graph_add_input(b->g, name, KILN_DTYPE_FLOAT32, &shape);
    return v >= 0 ? v : oom(b, name);
}

int zb_param(zb *b, const char *name, kiln_shape shape, float lo, float hi)
{
    if (b->status != KILN_OK)
        return -1;
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(b->g, name, KILN_DTYPE_FLOAT32, &shape, b->weights,
                                        &data);
    if (v < 0)
        return oom(b, name);
    if (b->weights)
        kiln_rng_fill_uniform(b->rng, data, kiln_shape_numel(&shape), lo, hi);
    return v;
}

int zb_scalar(zb *b, const char *name, float x)
{
    if (b->status != KILN_OK)
        return -1;
    kiln_shape s = {.rank = 0};
    int v = kiln_graph_add_const(b->g, name, KILN_DTYPE_FLOAT32, &s, &x);
    return v >= 0 ? v : oom(b, name);
}

/* ---- generic nodes ------------------------------------------------------------ */

int zb_node(zb *b, kiln_op op, const char *name, const int *in, int n_in)
{
    if (!usable(b, in, n_in, name))
        return -1;
    int node = kiln_graph_add_node(b->g, op, name, in, n_in, 1);
    if (node < 0)
        return oom(b, name);
    return kiln_graph_node_output(b->g, node, 0);
}

/* The node producing value `v`; `what` names the use in the error. */
static int producer(zb *b, int v, const char *what)
{
    if (b->status != KILN_OK)
        return -1;
    const kiln_value *val = kiln_graph_value(b->g, v);
    if (!val || val->producer < 0)
        return fail(b, KILN_ERR_INTERNAL, "zoo builder: %s on a value without a node", what);
    return val->producer;
}

void zb_attr_int(zb *b, int v, const char *name, int64_t x)
{
    int node = producer(b, v, "attribute");
    if (node >= 0 && kiln_node_set_int(b->g, node, name, x) != KILN_OK)
        oom(b, name);
}

void zb_attr_float(zb *b, int v, const char *name, float x)
{
    int node = producer(b, v, "attribute");
    if (node >= 0 && kiln_node_set_float(b->g, node, name, x) != KILN_OK)
        oom(b, name);
}

void zb_attr_ints(zb *b, int v, const char *name, const int64_t *x, int n)
{
    int node = producer(b, v, "attribute");
    if (node >= 0 && kiln_node_set_ints(b->g, node, name, x, n) != KILN_OK)
        oom(b, name);
}

int zb_infer(zb *b, int v)
{
    int node = producer(b, v, "shape inference");
    if (node < 0)
        return -1;
    const kiln_node *n = kiln_graph_node(b->g, node);
    const kiln_op_info *info = kiln_op_get(n->op);
    const kiln_value *ins[64];
    kiln_value *outs[64];
    /* the registry's inference trusts the arity (kiln_graph_validate checks
     * it), and zb_node takes any */
    if (n->n_inputs < info->min_inputs || n->n_inputs > info->max_inputs ||
        n->n_outputs < info->min_outputs || n->n_outputs > info->max_outputs ||
        n->n_inputs > 64 || n->n_outputs > 64)
        return fail(b, KILN_ERR_INTERNAL, "zoo builder: '%s': %s with %d inputs and %d outputs",
                    n->name, info->name, n->n_inputs, n->n_outputs);
    for (int k = 0; k < n->n_inputs; k++)
        ins[k] = kiln_graph_value(b->g, n->inputs[k]); /* NULL: an absent optional input */
    for (int k = 0; k < n->n_outputs; k++)
        outs[k] = kiln_graph_value(b->g, n->outputs[k]);
    kiln_error e = {0};
    if (info->infer(n, ins, outs, &e) != KILN_OK)
        return fail(b, KILN_ERR_INTERNAL, "zoo builder: '%s' (%s): %s", n->name, info->name,
                    e.msg);
    return v;
}

/* ---- layers ------------------------------------------------------------------- */

int zb_conv_rect(zb *b, const char *name, int x, int64_t out_ch, int kh, int kw, int sh, int sw,
                 int ph, int pw, int groups, bool bias)
{
    if (!usable(b, &x, 1, name))
        return -1;
    /* the weight is sized from the input channels; the rest is the registry's */
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank != 4 || groups <= 0 || xs->dims[1] % groups)
        return bad_shape(b, name, "Conv2d needs NCHW input with channels divisible by groups",
                         xs);
    int64_t in_per_group = xs->dims[1] / groups;
    int64_t fan_in = in_per_group * kh * kw;
    float wb = sqrtf(6.0f / (float)fan_in), bb = 1.0f / sqrtf((float)fan_in);
    int in[3] = {x, -1, -1};
    int64_t wd[4] = {out_ch, in_per_group, kh, kw};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), shape_of(4, wd), -wb, wb);
    if (bias)
        in[2] = zb_param(b, zb_name(b, "%s.bias", name), shape_of(1, &out_ch), -bb, bb);
    int y = zb_node(b, KILN_OP_CONV, name, in, bias ? 3 : 2);
    int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, p[4] = {ph, pw, ph, pw}, d[2] = {1, 1};
    zb_attr_ints(b, y, "kernel_shape", k, 2);
    zb_attr_ints(b, y, "strides", s, 2);
    zb_attr_ints(b, y, "pads", p, 4);
    zb_attr_ints(b, y, "dilations", d, 2);
    zb_attr_int(b, y, "group", groups);
    return zb_infer(b, y);
}

int zb_conv(zb *b, const char *name, int x, int64_t out_ch, int k, int stride, int pad,
            int groups, bool bias)
{
    return zb_conv_rect(b, name, x, out_ch, k, k, stride, stride, pad, pad, groups, bias);
}

int zb_bn_gamma(zb *b, const char *name, int x, float eps, float gamma_lo, float gamma_hi)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank < 2)
        return bad_shape(b, name, "BatchNorm needs a channel axis", xs);
    kiln_shape cs = {.rank = 1, .dims = {xs->dims[1]}};
    int in[5] = {x};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), cs, gamma_lo, gamma_hi);
    in[2] = zb_param(b, zb_name(b, "%s.bias", name), cs, -0.1f, 0.1f);
    in[3] = zb_param(b, zb_name(b, "%s.running_mean", name), cs, -0.1f, 0.1f);
    in[4] = zb_param(b, zb_name(b, "%s.running_var", name), cs, 0.8f, 1.2f);
    int y = zb_node(b, KILN_OP_BATCHNORM, name, in, 5);
    zb_attr_float(b, y, "epsilon", eps);
    return zb_infer(b, y);
}

int zb_bn(zb *b, const char *name, int x, float eps)
{
    return zb_bn_gamma(b, name, x, eps, 0.8f, 1.2f);
}

int zb_unary(zb *b, kiln_op op, const char *name, int x)
{
    return zb_infer(b, zb_node(b, op, name, &x, 1));
}

int zb_relu(zb *b, const char *name, int x)
{
    return zb_unary(b, KILN_OP_RELU, name, x);
}

int zb_relu6(zb *b, const char *name, int x)
{
    int y = zb_node(b, KILN_OP_CLIP, name, &x, 1);
    zb_attr_float(b, y, "min", 0.0f);
    zb_attr_float(b, y, "max", 6.0f);
    return zb_infer(b, y);
}

int zb_conv_bn_relu(zb *b, const char *conv_name, const char *bn_name, const char *relu_name,
                    int x, int64_t out_ch, int k, int stride, int pad, int groups, float eps)
{
    x = zb_conv(b, conv_name, x, out_ch, k, stride, pad, groups, false);
    x = zb_bn(b, bn_name, x, eps);
    return relu_name ? zb_relu(b, relu_name, x) : x;
}

int zb_gemm(zb *b, const char *name, int x, int w, int bias)
{
    int in[3] = {x, w, bias};
    int y = zb_node(b, KILN_OP_GEMM, name, in, bias >= 0 ? 3 : 2);
    zb_attr_int(b, y, "transB", 1);
    return zb_infer(b, y);
}

int zb_linear_bound(zb *b, const char *name, int x, int64_t out_features, bool bias,
                    float bound)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank != 2)
        return bad_shape(b, name, "Linear (Gemm) needs a 2-D input", xs);
    int64_t in_features = xs->dims[1];
    float bb = 1.0f / sqrtf((float)in_features);
    int in[3] = {x, -1, -1};
    int64_t wd[2] = {out_features, in_features};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), shape_of(2, wd), -bound, bound);
    if (bias)
        in[2] = zb_param(b, zb_name(b, "%s.bias", name), shape_of(1, &out_features), -bb, bb);
    return zb_gemm(b, name, x, in[1], in[2]);
}

int zb_linear(zb *b, const char *name, int x, int64_t out_features, bool bias)
{
    int64_t in_features = zb_dim(b, x, -1);
    float bound = in_features > 0 ? sqrtf(6.0f / (float)in_features) : 0.0f;
    return zb_linear_bound(b, name, x, out_features, bias, bound);
}

/* A square-window pool node with its window attributes, not yet inferred (the
 * caller may add attributes first). */
static int pool(zb *b, kiln_op op, const char *name, int x, int k, int stride, int pad,
                bool ceil_mode)
{
    int y = zb_node(b, op, name, &x, 1);
    int64_t ks[2] = {k, k}, s[2] = {stride, stride}, p[4] = {pad, pad, pad, pad};
    zb_attr_ints(b, y, "kernel_shape", ks, 2);
    zb_attr_ints(b, y, "strides", s, 2);
    zb_attr_ints(b, y, "pads", p, 4);
    if (ceil_mode)
        zb_attr_int(b, y, "ceil_mode", 1);
    return y;
}

int zb_maxpool(zb *b, const char *name, int x, int k, int stride, int pad, bool ceil_mode)
{
    return zb_infer(b, pool(b, KILN_OP_MAXPOOL, name, x, k, stride, pad, ceil_mode));
}

int zb_avgpool(zb *b, const char *name, int x, int k, int stride, int pad,
               bool count_include_pad)
{
    int y = pool(b, KILN_OP_AVERAGEPOOL, name, x, k, stride, pad, false);
    zb_attr_int(b, y, "count_include_pad", count_include_pad ? 1 : 0);
    return zb_infer(b, y);
}

int zb_global_avgpool(zb *b, const char *name, int x)
{
    return zb_infer(b, zb_node(b, KILN_OP_GLOBALAVERAGEPOOL, name, &x, 1));
}

int zb_flatten(zb *b, const char *name, int x, int axis)
{
    int y = zb_node(b, KILN_OP_FLATTEN, name, &x, 1);
    zb_attr_int(b, y, "axis", axis);
    return zb_infer(b, y);
}

int zb_layernorm(zb *b, const char *name, int x, float eps)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank < 1)
        return bad_shape(b, name, "LayerNorm needs an axis", xs);
    kiln_shape cs = {.rank = 1, .dims = {xs->dims[xs->rank - 1]}};
    int in[3] = {x};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), cs, 0.9f, 1.1f);
    in[2] = zb_param(b, zb_name(b, "%s.bias", name), cs, -0.05f, 0.05f);
    int y = zb_node(b, KILN_OP_LAYERNORM, name, in, 3);
    zb_attr_int(b, y, "axis", -1);
    zb_attr_float(b, y, "epsilon", eps);
    return zb_infer(b, y);
}

/* ---- tensor ops ----------------------------------------------------------------- */

int zb_binary(zb *b, kiln_op op, const char *name, int x, int y)
{
    int in[2] = {x, y};
    return zb_infer(b, zb_node(b, op, name, in, 2));
}

int zb_add(zb *b, const char *name, int x, int y)
{
    return zb_binary(b, KILN_OP_ADD, name, x, y);
}

int zb_mul(zb *b, const char *name, int x, int y)
{
    return zb_binary(b, KILN_OP_MUL, name, x, y);
}

int zb_matmul(zb *b, const char *name, int x, int y)
{
    int in[2] = {x, y};
    return zb_infer(b, zb_node(b, KILN_OP_MATMUL, name, in, 2));
}

int zb_concat(zb *b, const char *name, const int *xs, int n, int axis)
{
    int y = zb_node(b, KILN_OP_CONCAT, name, xs, n);
    zb_attr_int(b, y, "axis", axis);
    return zb_infer(b, y);
}

int zb_reshape(zb *b, const char *name, int x, const int64_t *dims, int rank)
{
    int y = zb_node(b, KILN_OP_RESHAPE, name, &x, 1);
    zb_attr_ints(b, y, "shape", dims, rank);
    return zb_infer(b, y);
}

int zb_transpose(zb *b, const char *name, int x, const int64_t *perm, int rank)
{
    int y = zb_node(b, KILN_OP_TRANSPOSE, name, &x, 1);
    zb_attr_ints(b, y, "perm", perm, rank);
    return zb_infer(b, y);
}

int zb_slice(zb *b, const char *name, int x, const int64_t *starts, const int64_t *ends,
             const int64_t *axes, int n)
{
    int y = zb_node(b, KILN_OP_SLICE, name, &x, 1);
    zb_attr_ints(b, y, "starts", starts, n);
    zb_attr_ints(b, y, "ends", ends, n);
    zb_attr_ints(b, y, "axes", axes, n);
    return zb_infer(b, y);
}

int zb_split(zb *b, const char *name, int x, int axis, const int64_t *sizes, int n, int *outs)
{
    for (int i = 0; i < n; i++)
        outs[i] = -1;
    if (!usable(b, &x, 1, name))
        return -1;
    int node = kiln_graph_add_node(b->g, KILN_OP_SPLIT, name, &x, 1, n);
    if (node < 0)
        return oom(b, name);
    if (kiln_node_set_int(b->g, node, "axis", axis) != KILN_OK ||
        kiln_node_set_ints(b->g, node, "split", sizes, n) != KILN_OK)
        return oom(b, name);
    /* one inference records every part's shape */
    if (zb_infer(b, kiln_graph_node_output(b->g, node, 0)) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        outs[i] = kiln_graph_node_output(b->g, node, i);
    return 0;
}

int zb_softmax(zb *b, const char *name, int x, int axis)
{
    int y = zb_node(b, KILN_OP_SOFTMAX, name, &x, 1);
    zb_attr_int(b, y, "axis", axis);
    return zb_infer(b, y);
}
