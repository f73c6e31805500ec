/* import/zoo/builder.c: the zoo's network builder (see builder.h).
 *
 * Each layer function: bail out if the sticky status is set or an input is -1;
 * compute the output shape from the tracked input shapes (refusing shapes that
 * do not fit with KILN_ERR_INTERNAL: a zoo definition bug); create the
 * constants, drawing their contents in order; add the node and its attributes.
 */
#include "import/zoo/builder.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    free(b->shapes);
    b->shapes = NULL;
    b->cap_shapes = 0;
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

/* Records the tracked shape of value `v`. */
static int track(zb *b, int v, const kiln_shape *s, const char *name)
{
    if (v < 0)
        return oom(b, name);
    if (v >= b->cap_shapes) {
        int ncap = b->cap_shapes ? b->cap_shapes : 256;
        while (ncap <= v)
            ncap *= 2;
        kiln_shape *p = realloc(b->shapes, sizeof *p * (size_t)ncap);
        if (!p)
            return oom(b, name);
        memset(p + b->cap_shapes, 0, sizeof *p * (size_t)(ncap - b->cap_shapes));
        b->shapes = p;
        b->cap_shapes = ncap;
    }
    b->shapes[v] = *s;
    return v;
}

const kiln_shape *zb_shape(const zb *b, int v)
{
    return (v >= 0 && v < b->cap_shapes) ? &b->shapes[v] : NULL;
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
    return track(b, v, &shape, name);
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
    return track(b, v, &shape, name);
}

int zb_scalar(zb *b, const char *name, float x)
{
    if (b->status != KILN_OK)
        return -1;
    kiln_shape s = {.rank = 0};
    int v = kiln_graph_add_const(b->g, name, KILN_DTYPE_FLOAT32, &s, &x);
    return track(b, v, &s, name);
}

/* ---- generic nodes ------------------------------------------------------------ */

int zb_node(zb *b, kiln_op op, const char *name, const int *in, int n_in,
            const kiln_shape *out_shape)
{
    if (!usable(b, in, n_in, name))
        return -1;
    int node = kiln_graph_add_node(b->g, op, name, in, n_in, 1);
    if (node < 0)
        return oom(b, name);
    return track(b, kiln_graph_node_output(b->g, node, 0), out_shape, name);
}

static int producer(zb *b, int v)
{
    if (b->status != KILN_OK)
        return -1;
    const kiln_value *val = kiln_graph_value(b->g, v);
    if (!val || val->producer < 0)
        return fail(b, KILN_ERR_INTERNAL, "zoo builder: attribute on a value without a node");
    return val->producer;
}

void zb_attr_int(zb *b, int v, const char *name, int64_t x)
{
    int node = producer(b, v);
    if (node >= 0 && kiln_node_set_int(b->g, node, name, x) != KILN_OK)
        oom(b, name);
}

void zb_attr_float(zb *b, int v, const char *name, float x)
{
    int node = producer(b, v);
    if (node >= 0 && kiln_node_set_float(b->g, node, name, x) != KILN_OK)
        oom(b, name);
}

void zb_attr_ints(zb *b, int v, const char *name, const int64_t *x, int n)
{
    int node = producer(b, v);
    if (node >= 0 && kiln_node_set_ints(b->g, node, name, x, n) != KILN_OK)
        oom(b, name);
}

/* ---- layers ------------------------------------------------------------------- */

/* Output extent of a window of size k over n with padding p0 + p1. */
static int64_t window_out(int64_t n, int k, int stride, int p0, int p1, bool ceil_mode)
{
    int64_t span = n + p0 + p1 - k;
    if (span < 0 || stride <= 0)
        return -1;
    int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    /* PyTorch/ONNX: the last window must start inside the input or the left
     * padding */
    if (ceil_mode && (out - 1) * stride >= n + p0)
        out--;
    return out;
}

int zb_conv_rect(zb *b, const char *name, int x, int64_t out_ch, int kh, int kw, int sh, int sw,
                 int ph, int pw, int groups, bool bias)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank != 4 || groups <= 0 || xs->dims[1] % groups || out_ch % groups)
        return bad_shape(b, name, "Conv2d needs NCHW input with channels divisible by groups",
                         xs);
    kiln_shape ys = *xs;
    ys.dims[1] = out_ch;
    ys.dims[2] = window_out(xs->dims[2], kh, sh, ph, ph, false);
    ys.dims[3] = window_out(xs->dims[3], kw, sw, pw, pw, false);
    if (ys.dims[2] <= 0 || ys.dims[3] <= 0)
        return bad_shape(b, name, "kernel larger than the padded input", xs);

    int64_t in_per_group = xs->dims[1] / groups;
    int64_t fan_in = in_per_group * kh * kw;
    float wb = sqrtf(6.0f / (float)fan_in), bb = 1.0f / sqrtf((float)fan_in);
    int in[3] = {x, -1, -1};
    int64_t wd[4] = {out_ch, in_per_group, kh, kw};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), shape_of(4, wd), -wb, wb);
    if (bias)
        in[2] = zb_param(b, zb_name(b, "%s.bias", name), shape_of(1, &out_ch), -bb, bb);
    int y = zb_node(b, KILN_OP_CONV, name, in, bias ? 3 : 2, &ys);
    int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, p[4] = {ph, pw, ph, pw}, d[2] = {1, 1};
    zb_attr_ints(b, y, "kernel_shape", k, 2);
    zb_attr_ints(b, y, "strides", s, 2);
    zb_attr_ints(b, y, "pads", p, 4);
    zb_attr_ints(b, y, "dilations", d, 2);
    zb_attr_int(b, y, "group", groups);
    return b->status == KILN_OK ? y : -1;
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
    kiln_shape ys = *xs;
    int in[5] = {x};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), cs, gamma_lo, gamma_hi);
    in[2] = zb_param(b, zb_name(b, "%s.bias", name), cs, -0.1f, 0.1f);
    in[3] = zb_param(b, zb_name(b, "%s.running_mean", name), cs, -0.1f, 0.1f);
    in[4] = zb_param(b, zb_name(b, "%s.running_var", name), cs, 0.8f, 1.2f);
    int y = zb_node(b, KILN_OP_BATCHNORM, name, in, 5, &ys);
    zb_attr_float(b, y, "epsilon", eps);
    return b->status == KILN_OK ? y : -1;
}

int zb_bn(zb *b, const char *name, int x, float eps)
{
    return zb_bn_gamma(b, name, x, eps, 0.8f, 1.2f);
}

int zb_unary(zb *b, kiln_op op, const char *name, int x)
{
    if (!usable(b, &x, 1, name))
        return -1;
    kiln_shape ys = *zb_shape(b, x);
    return zb_node(b, op, name, &x, 1, &ys);
}

int zb_relu(zb *b, const char *name, int x)
{
    return zb_unary(b, KILN_OP_RELU, name, x);
}

int zb_relu6(zb *b, const char *name, int x)
{
    int y = zb_unary(b, KILN_OP_CLIP, name, x);
    zb_attr_float(b, y, "min", 0.0f);
    zb_attr_float(b, y, "max", 6.0f);
    return b->status == KILN_OK ? y : -1;
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
    if (!usable(b, in, bias >= 0 ? 3 : 2, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x), *ws = zb_shape(b, w);
    if (xs->rank != 2 || ws->rank != 2 || xs->dims[1] != ws->dims[1])
        return bad_shape(b, name, "Gemm operands do not fit (x [m, k], w [n, k])", xs);
    int64_t yd[2] = {xs->dims[0], ws->dims[0]};
    kiln_shape ys = shape_of(2, yd);
    int y = zb_node(b, KILN_OP_GEMM, name, in, bias >= 0 ? 3 : 2, &ys);
    zb_attr_int(b, y, "transB", 1);
    return b->status == KILN_OK ? y : -1;
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

static int pool(zb *b, kiln_op op, const char *name, int x, int k, int stride, int pad,
                bool ceil_mode)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (xs->rank != 4)
        return bad_shape(b, name, "pooling needs NCHW input", xs);
    kiln_shape ys = *xs;
    ys.dims[2] = window_out(xs->dims[2], k, stride, pad, pad, ceil_mode);
    ys.dims[3] = window_out(xs->dims[3], k, stride, pad, pad, ceil_mode);
    if (ys.dims[2] <= 0 || ys.dims[3] <= 0)
        return bad_shape(b, name, "window larger than the padded input", xs);
    int y = zb_node(b, op, name, &x, 1, &ys);
    int64_t ks[2] = {k, k}, s[2] = {stride, stride}, p[4] = {pad, pad, pad, pad};
    zb_attr_ints(b, y, "kernel_shape", ks, 2);
    zb_attr_ints(b, y, "strides", s, 2);
    zb_attr_ints(b, y, "pads", p, 4);
    if (ceil_mode)
        zb_attr_int(b, y, "ceil_mode", 1);
    return b->status == KILN_OK ? y : -1;
}

int zb_maxpool(zb *b, const char *name, int x, int k, int stride, int pad, bool ceil_mode)
{
    return pool(b, KILN_OP_MAXPOOL, name, x, k, stride, pad, ceil_mode);
}

int zb_avgpool(zb *b, const char *name, int x, int k, int stride, int pad,
               bool count_include_pad)
{
    int y = pool(b, KILN_OP_AVERAGEPOOL, name, x, k, stride, pad, false);
    zb_attr_int(b, y, "count_include_pad", count_include_pad ? 1 : 0);
    return b->status == KILN_OK ? y : -1;
}

int zb_global_avgpool(zb *b, const char *name, int x)
{
    if (!usable(b, &x, 1, name))
        return -1;
    kiln_shape ys = *zb_shape(b, x);
    if (ys.rank < 3)
        return bad_shape(b, name, "global pooling needs spatial axes", &ys);
    for (int i = 2; i < ys.rank; i++)
        ys.dims[i] = 1;
    return zb_node(b, KILN_OP_GLOBALAVERAGEPOOL, name, &x, 1, &ys);
}

int zb_flatten(zb *b, const char *name, int x, int axis)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (axis < 0 || axis > xs->rank)
        return bad_shape(b, name, "Flatten axis out of range", xs);
    int64_t d[2] = {1, 1};
    for (int i = 0; i < xs->rank; i++)
        d[i < axis ? 0 : 1] *= xs->dims[i];
    kiln_shape ys = shape_of(2, d);
    int y = zb_node(b, KILN_OP_FLATTEN, name, &x, 1, &ys);
    zb_attr_int(b, y, "axis", axis);
    return b->status == KILN_OK ? y : -1;
}

int zb_layernorm(zb *b, const char *name, int x, float eps)
{
    if (!usable(b, &x, 1, name))
        return -1;
    kiln_shape ys = *zb_shape(b, x);
    if (ys.rank < 1)
        return bad_shape(b, name, "LayerNorm needs an axis", &ys);
    kiln_shape cs = {.rank = 1, .dims = {ys.dims[ys.rank - 1]}};
    int in[3] = {x};
    in[1] = zb_param(b, zb_name(b, "%s.weight", name), cs, 0.9f, 1.1f);
    in[2] = zb_param(b, zb_name(b, "%s.bias", name), cs, -0.05f, 0.05f);
    int y = zb_node(b, KILN_OP_LAYERNORM, name, in, 3, &ys);
    zb_attr_int(b, y, "axis", -1);
    zb_attr_float(b, y, "epsilon", eps);
    return b->status == KILN_OK ? y : -1;
}

/* ---- tensor ops ----------------------------------------------------------------- */

int zb_binary(zb *b, kiln_op op, const char *name, int x, int y)
{
    int in[2] = {x, y};
    if (!usable(b, in, 2, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x), *ys = zb_shape(b, y);
    kiln_shape zs = {.rank = xs->rank > ys->rank ? xs->rank : ys->rank};
    for (int i = 0; i < zs.rank; i++) {
        int ix = i - (zs.rank - xs->rank), iy = i - (zs.rank - ys->rank);
        int64_t dx = ix >= 0 ? xs->dims[ix] : 1, dy = iy >= 0 ? ys->dims[iy] : 1;
        if (dx != dy && dx != 1 && dy != 1)
            return bad_shape(b, name, "operands do not broadcast", xs);
        zs.dims[i] = dx == 1 ? dy : dx;
    }
    return zb_node(b, op, name, in, 2, &zs);
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
    if (!usable(b, in, 2, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x), *ys = zb_shape(b, y);
    /* the zoo only multiplies equal-rank batches: [..., m, k] x [..., k, n] */
    if (xs->rank < 2 || xs->rank != ys->rank ||
        xs->dims[xs->rank - 1] != ys->dims[ys->rank - 2])
        return bad_shape(b, name, "MatMul operands do not fit", xs);
    kiln_shape zs = *xs;
    for (int i = 0; i < xs->rank - 2; i++)
        if (xs->dims[i] != ys->dims[i])
            return bad_shape(b, name, "MatMul batch extents differ", xs);
    zs.dims[zs.rank - 1] = ys->dims[ys->rank - 1];
    return zb_node(b, KILN_OP_MATMUL, name, in, 2, &zs);
}

int zb_concat(zb *b, const char *name, const int *xs, int n, int axis)
{
    if (n < 1 || !usable(b, xs, n, name))
        return -1;
    kiln_shape ys = *zb_shape(b, xs[0]);
    int ax = axis < 0 ? axis + ys.rank : axis;
    if (ax < 0 || ax >= ys.rank)
        return bad_shape(b, name, "Concat axis out of range", &ys);
    for (int i = 1; i < n; i++) {
        const kiln_shape *s = zb_shape(b, xs[i]);
        if (s->rank != ys.rank)
            return bad_shape(b, name, "Concat inputs of different ranks", s);
        for (int d = 0; d < ys.rank; d++)
            if (d != ax && s->dims[d] != ys.dims[d])
                return bad_shape(b, name, "Concat inputs differ off the axis", s);
        ys.dims[ax] += s->dims[ax];
    }
    int y = zb_node(b, KILN_OP_CONCAT, name, xs, n, &ys);
    zb_attr_int(b, y, "axis", axis);
    return b->status == KILN_OK ? y : -1;
}

int zb_reshape(zb *b, const char *name, int x, const int64_t *dims, int rank)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    kiln_shape ys = shape_of(rank, dims);
    if (rank > KILN_MAX_RANK || kiln_shape_numel(&ys) != kiln_shape_numel(xs))
        return bad_shape(b, name, "Reshape changes the number of elements", xs);
    int y = zb_node(b, KILN_OP_RESHAPE, name, &x, 1, &ys);
    zb_attr_ints(b, y, "shape", dims, rank);
    return b->status == KILN_OK ? y : -1;
}

int zb_transpose(zb *b, const char *name, int x, const int64_t *perm, int rank)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    if (rank != xs->rank)
        return bad_shape(b, name, "Transpose perm of the wrong rank", xs);
    kiln_shape ys = {.rank = rank};
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank)
            return bad_shape(b, name, "Transpose perm out of range", xs);
        ys.dims[i] = xs->dims[perm[i]];
    }
    int y = zb_node(b, KILN_OP_TRANSPOSE, name, &x, 1, &ys);
    zb_attr_ints(b, y, "perm", perm, rank);
    return b->status == KILN_OK ? y : -1;
}

int zb_slice(zb *b, const char *name, int x, const int64_t *starts, const int64_t *ends,
             const int64_t *axes, int n)
{
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    kiln_shape ys = *xs;
    for (int i = 0; i < n; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + xs->rank : axes[i];
        if (ax < 0 || ax >= xs->rank || starts[i] < 0 || ends[i] > xs->dims[ax] ||
            starts[i] >= ends[i])
            return bad_shape(b, name, "Slice out of range", xs);
        ys.dims[ax] = ends[i] - starts[i];
    }
    int y = zb_node(b, KILN_OP_SLICE, name, &x, 1, &ys);
    zb_attr_ints(b, y, "starts", starts, n);
    zb_attr_ints(b, y, "ends", ends, n);
    zb_attr_ints(b, y, "axes", axes, n);
    return b->status == KILN_OK ? y : -1;
}

int zb_split(zb *b, const char *name, int x, int axis, const int64_t *sizes, int n, int *outs)
{
    for (int i = 0; i < n; i++)
        outs[i] = -1;
    if (!usable(b, &x, 1, name))
        return -1;
    const kiln_shape *xs = zb_shape(b, x);
    int ax = axis < 0 ? axis + xs->rank : axis;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += sizes[i];
    if (ax < 0 || ax >= xs->rank || total != xs->dims[ax])
        return bad_shape(b, name, "Split sizes do not add up", xs);
    int node = kiln_graph_add_node(b->g, KILN_OP_SPLIT, name, &x, 1, n);
    if (node < 0)
        return oom(b, name);
    for (int i = 0; i < n; i++) {
        kiln_shape ys = *xs;
        ys.dims[ax] = sizes[i];
        if (track(b, kiln_graph_node_output(b->g, node, i), &ys, name) < 0)
            return -1;
    }
    if (kiln_node_set_int(b->g, node, "axis", axis) != KILN_OK ||
        kiln_node_set_ints(b->g, node, "split", sizes, n) != KILN_OK)
        return oom(b, name);
    for (int i = 0; i < n; i++)
        outs[i] = kiln_graph_node_output(b->g, node, i);
    return 0;
}

int zb_softmax(zb *b, const char *name, int x, int axis)
{
    int y = zb_unary(b, KILN_OP_SOFTMAX, name, x);
    zb_attr_int(b, y, "axis", axis);
    return b->status == KILN_OK ? y : -1;
}
