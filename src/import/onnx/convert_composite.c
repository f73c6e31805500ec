/* import/onnx/convert_composite.c: ONNX ops written as chains of kiln ops (so
 * they compile like any other chain): linear quantization, and batch
 * normalization in training mode.
 *
 *   BatchNormalization, training_mode=1:
 *     mean, var = ReduceMean(x), ReduceMean((x - mean)^2) over every axis but 1
 *     Y = (x - mean) / Sqrt(var + epsilon) * scale + B
 *     running_mean = input_mean * momentum + mean * (1 - momentum) (var alike)
 *
 * Quantization, in float and cast ops:
 *
 *   QuantizeLinear(x, s, zp)   -> Cast(Clip(Round(x / s) + zp, lo, hi), T(zp))
 *   DequantizeLinear(x, s, zp) -> (float(x) - float(zp)) * s
 *   DynamicQuantizeLinear(x)   -> s = (max(0, max x) - min(0, min x)) / 255,
 *                                 zp = Cast(Clip(Round(-min / s), 0, 255)), y as above
 *   MatMulInteger(a, b, azp, bzp), ConvInteger(x, w, xzp, wzp)
 *                              -> Cast(MatMul / Conv of the zero-point-shifted
 *                                 operands in float32, int32)
 *   QLinearMatMul              -> QuantizeLinear(MatMul(Dequantize(a), Dequantize(b)))
 *   QLinearConv                -> the same around Conv, with the int32 bias times a_s * w_s
 *
 * Round is ONNX's (half to even), T's range is [0, 255] for uint8 and
 * [-128, 127] for int8. A 1-D scale or zero point quantizes along `axis`
 * (reshaped to broadcast there). MatMulInteger and ConvInteger compute in
 * float32: exact while every partial sum stays below 2^24 (kiln's MatMul and
 * Conv take floats only); larger int8 GEMMs need an integer kernel. */
#include <stdio.h>
#include <string.h>

#include "import/onnx/convert_composite.h"
#include "import/onnx/onnx.h"
#include "ir/graph.h"
#include "util/error.h"

typedef struct qb {
    onnx_ctx *c;
    kiln_error *err;
    int n; /* suffix counter */
    bool failed;
} qb;

/* Emits op on ins (-1: absent) with attrs; returns output 0's value id, or -1. */
static int op(qb *b, kiln_op o, const int *ins, int n, const kiln_attr *a, int na)
{
    if (b->failed)
        return -1;
    for (int i = 0; i < n; i++)
        if (ins[i] < -1) {
            b->failed = true;
            return -1;
        }
    char suffix[32];
    snprintf(suffix, sizeof suffix, "q%d", b->n++);
    int node = onnx_emit(b->c, o, suffix, ins, n, 1, b->err);
    kiln_status s = node < 0 ? KILN_ERR_OUT_OF_MEMORY : KILN_OK;
    for (int i = 0; i < na && s == KILN_OK; i++) {
        if (a[i].type == KILN_ATTR_INT)
            s = kiln_node_set_int(b->c->g, node, a[i].name, a[i].i);
        else if (a[i].type == KILN_ATTR_FLOAT)
            s = kiln_node_set_float(b->c->g, node, a[i].name, a[i].f);
        else
            s = kiln_node_set_ints(b->c->g, node, a[i].name, a[i].ints, a[i].n);
    }
    if (s != KILN_OK) {
        if (node >= 0)
            kiln_errorf(b->err, s, "out of memory");
        b->failed = true;
        return -1;
    }
    return kiln_graph_node_output(b->c->g, node, 0);
}

static int op2(qb *b, kiln_op o, int x, int y)
{
    int ins[2] = {x, y};
    return op(b, o, ins, 2, NULL, 0);
}

static int cast(qb *b, int x, kiln_dtype to)
{
    if (x < 0)
        return x == -1 ? -2 : x;
    if (kiln_graph_value(b->c->g, x)->dtype == to)
        return x;
    kiln_attr a = onnx_attr_i("to", (int64_t)to);
    return op(b, KILN_OP_CAST, &x, 1, &a, 1);
}

static int clip(qb *b, int x, float lo, float hi)
{
    kiln_attr a[2] = {onnx_attr_f("min", lo), onnx_attr_f("max", hi)};
    return op(b, KILN_OP_CLIP, &x, 1, a, 2);
}

static int fconst(qb *b, kiln_dtype dt, double v)
{
    if (b->failed)
        return -1;
    unsigned char buf[8];
    float f = (float)v;
    if (dt == KILN_DTYPE_FLOAT64)
        memcpy(buf, &v, 8);
    else
        memcpy(buf, &f, 4);
    char name[600];
    snprintf(name, sizeof name, "%s/q%d", b->c->node_name, b->n++);
    kiln_tensor t = {.dtype = dt, .shape = {.rank = 0}, .data = buf};
    int id = onnx_add_const(b->c, name, &t, b->err);
    if (id < 0)
        b->failed = true;
    return id;
}

/* A per-axis parameter p (1-D, not one element) reshaped to broadcast along
 * `axis` of a rank-`rank` operand; a scalar one as it is. */
static int along(qb *b, int p, int rank, int64_t axis)
{
    if (p < 0)
        return p;
    const kiln_value *v = kiln_graph_value(b->c->g, p);
    if (v->shape.rank == 0 || kiln_shape_numel(&v->shape) == 1 || rank <= 1)
        return p;
    if (axis < 0)
        axis += rank;
    int64_t dims[KILN_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = d == axis ? v->shape.dims[0] : 1;
    kiln_attr a = onnx_attr_is("shape", dims, rank);
    return op(b, KILN_OP_RESHAPE, &p, 1, &a, 1);
}

static void range_of(kiln_dtype t, float *lo, float *hi)
{
    if (t == KILN_DTYPE_INT8) {
        *lo = -128;
        *hi = 127;
    } else if (t == KILN_DTYPE_INT32) {
        *lo = -2147483648.0f;
        *hi = 2147483520.0f; /* the largest float below 2^31 */
    } else {
        *lo = 0;
        *hi = 255;
    }
}

/* Cast(Clip(Round(x / s) + zp, lo, hi), t): x, s float; zp float or -1 */
static int quantize(qb *b, int x, int s, int zp, kiln_dtype t)
{
    int y = op2(b, KILN_OP_DIV, x, s);
    y = op(b, KILN_OP_ROUND, &y, 1, NULL, 0);
    if (zp >= 0)
        y = op2(b, KILN_OP_ADD, y, zp);
    float lo, hi;
    range_of(t, &lo, &hi);
    return cast(b, clip(b, y, lo, hi), t);
}

/* (float(x) - float(zp)) * s, in dtype ft */
static int dequantize(qb *b, int x, int s, int zp, kiln_dtype ft)
{
    int y = cast(b, x, ft);
    if (zp >= 0)
        y = op2(b, KILN_OP_SUB, y, cast(b, zp, ft));
    return s >= 0 ? op2(b, KILN_OP_MUL, y, cast(b, s, ft)) : y;
}

static kiln_status finish(qb *b, int k, int v)
{
    if (b->failed || v < 0)
        return b->err && b->err->status != KILN_OK ? b->err->status : KILN_ERR_INTERNAL;
    return onnx_bind(b->c, k, v, b->err);
}

static int rank_of(qb *b, int v)
{
    return v >= 0 ? kiln_graph_value(b->c->g, v)->shape.rank : 0;
}

static kiln_status conv_quantize(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int x = onnx_in(c, 0), s = onnx_in(c, 1), zp = onnx_in(c, 2);
    if (x < 0 || s < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "x and y_scale are required");
    kiln_dtype t = zp >= 0 ? kiln_graph_value(c->g, zp)->dtype : KILN_DTYPE_UINT8;
    if (t != KILN_DTYPE_UINT8 && t != KILN_DTYPE_INT8)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "quantization to %s",
                               kiln_dtype_name(t));
    int64_t axis = onnx_attr_int(c, "axis", 1);
    int r = rank_of(&b, x);
    int xf = cast(&b, x, KILN_DTYPE_FLOAT32);
    /* reshape first: values emitted here get their shapes after the converter */
    int sf = cast(&b, along(&b, s, r, axis), KILN_DTYPE_FLOAT32);
    int zf = zp >= 0 ? cast(&b, along(&b, zp, r, axis), KILN_DTYPE_FLOAT32) : -1;
    return finish(&b, 0, quantize(&b, xf, sf, zf, t));
}

static kiln_status conv_dequantize(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int x = onnx_in(c, 0), s = onnx_in(c, 1), zp = onnx_in(c, 2);
    if (x < 0 || s < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "x and x_scale are required");
    int64_t axis = onnx_attr_int(c, "axis", 1);
    int r = rank_of(&b, x);
    kiln_dtype ft = kiln_graph_value(c->g, s)->dtype;
    int sf = along(&b, s, r, axis), zf = zp >= 0 ? along(&b, zp, r, axis) : -1;
    return finish(&b, 0, dequantize(&b, x, sf, zf, ft));
}

static kiln_status conv_dynamic_quantize(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int x = onnx_in(c, 0);
    if (x < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "x is required");
    kiln_attr keep = onnx_attr_i("keepdims", 0);
    int zero = fconst(&b, KILN_DTYPE_FLOAT32, 0);
    int mn = op2(&b, KILN_OP_MIN, op(&b, KILN_OP_REDUCEMIN, &x, 1, &keep, 1), zero);
    int mx = op2(&b, KILN_OP_MAX, op(&b, KILN_OP_REDUCEMAX, &x, 1, &keep, 1), zero);
    int s = op2(&b, KILN_OP_DIV, op2(&b, KILN_OP_SUB, mx, mn), fconst(&b, KILN_DTYPE_FLOAT32, 255));
    int zpf = op2(&b, KILN_OP_SUB, zero, op2(&b, KILN_OP_DIV, mn, s));
    zpf = clip(&b, op(&b, KILN_OP_ROUND, &zpf, 1, NULL, 0), 0, 255);
    int zp = cast(&b, zpf, KILN_DTYPE_UINT8);
    kiln_status st = finish(&b, 1, s);
    if (st == KILN_OK)
        st = finish(&b, 2, zp);
    return st == KILN_OK ? finish(&b, 0, quantize(&b, x, s, zpf, KILN_DTYPE_UINT8)) : st;
}

/* (x - zp) as dtype ft; zp along `axis` of x when per-axis */
static int shifted(qb *b, int x, int zp, kiln_dtype ft, int64_t axis)
{
    int y = cast(b, x, ft);
    if (zp < 0)
        return y;
    return op2(b, KILN_OP_SUB, y, cast(b, along(b, zp, rank_of(b, x), axis), ft));
}

static kiln_status conv_matmul_integer(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int a = onnx_in(c, 0), w = onnx_in(c, 1);
    if (a < 0 || w < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "A and B are required");
    /* a's zero point is per row (axis -2 of a), b's per column (the last axis) */
    int y = op2(&b, KILN_OP_MATMUL, shifted(&b, a, onnx_in(c, 2), KILN_DTYPE_FLOAT32, -2),
                shifted(&b, w, onnx_in(c, 3), KILN_DTYPE_FLOAT32, -1));
    return finish(&b, 0, cast(&b, y, KILN_DTYPE_INT32));
}

static kiln_status conv_conv_integer(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int x = onnx_in(c, 0), w = onnx_in(c, 1);
    if (x < 0 || w < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "x and w are required");
    int ins[2] = {shifted(&b, x, onnx_in(c, 2), KILN_DTYPE_FLOAT32, 1),
                  shifted(&b, w, onnx_in(c, 3), KILN_DTYPE_FLOAT32, 0)};
    if (b.failed)
        return finish(&b, 0, -1);
    int node = onnx_emit(c, KILN_OP_CONV, "conv", ins, 2, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s =
        onnx_copy_attrs(c, node, "auto_pad dilations group kernel_shape pads strides", err);
    if (s != KILN_OK)
        return s;
    return finish(&b, 0, cast(&b, kiln_graph_node_output(c->g, node, 0), KILN_DTYPE_INT32));
}

static kiln_status conv_qlinear_matmul(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int in[8];
    for (int k = 0; k < 8; k++)
        if ((in[k] = onnx_in(c, k)) < 0)
            return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input %d is required", k);
    kiln_dtype t = kiln_graph_value(c->g, in[7])->dtype;
    int a = dequantize(&b, in[0], along(&b, in[1], rank_of(&b, in[0]), -2),
                       along(&b, in[2], rank_of(&b, in[0]), -2), KILN_DTYPE_FLOAT32);
    int w = dequantize(&b, in[3], along(&b, in[4], rank_of(&b, in[3]), -1),
                       along(&b, in[5], rank_of(&b, in[3]), -1), KILN_DTYPE_FLOAT32);
    int y = op2(&b, KILN_OP_MATMUL, a, w);
    return finish(&b, 0,
                  quantize(&b, y, cast(&b, in[6], KILN_DTYPE_FLOAT32),
                           cast(&b, in[7], KILN_DTYPE_FLOAT32), t));
}

static kiln_status conv_qlinear_conv(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int in[9];
    for (int k = 0; k < 9; k++)
        if ((in[k] = onnx_in(c, k)) < 0 && k < 8)
            return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input %d is required", k);
    kiln_dtype t = kiln_graph_value(c->g, in[7])->dtype;
    int x = dequantize(&b, in[0], in[1], in[2], KILN_DTYPE_FLOAT32);
    int ws = cast(&b, along(&b, in[4], rank_of(&b, in[3]), 0), KILN_DTYPE_FLOAT32);
    int w = dequantize(&b, in[3], ws, along(&b, in[5], rank_of(&b, in[3]), 0), KILN_DTYPE_FLOAT32);
    int ins[3] = {x, w, -1};
    if (in[8] >= 0) {
        /* the int32 bias is in units of x_scale * w_scale (per output channel) */
        int ws1 = cast(&b, in[4], KILN_DTYPE_FLOAT32);
        ins[2] = op2(&b, KILN_OP_MUL, cast(&b, in[8], KILN_DTYPE_FLOAT32),
                     op2(&b, KILN_OP_MUL, cast(&b, in[1], KILN_DTYPE_FLOAT32), ws1));
    }
    if (b.failed)
        return finish(&b, 0, -1);
    int node = onnx_emit(c, KILN_OP_CONV, "conv", ins, in[8] >= 0 ? 3 : 2, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s =
        onnx_copy_attrs(c, node, "auto_pad dilations group kernel_shape pads strides", err);
    if (s != KILN_OK)
        return s;
    int y = kiln_graph_node_output(c->g, node, 0);
    return finish(&b, 0,
                  quantize(&b, y, cast(&b, in[6], KILN_DTYPE_FLOAT32),
                           cast(&b, in[7], KILN_DTYPE_FLOAT32), t));
}

kiln_status onnx_convert_batchnorm_training(onnx_ctx *c, kiln_error *err)
{
    qb b = {.c = c, .err = err};
    int x = onnx_in(c, 0), in[5];
    for (int k = 0; k < 5; k++)
        if ((in[k] = onnx_in(c, k)) < 0)
            return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input %d is required", k);
    const kiln_value *xv = kiln_graph_value(c->g, x);
    int r = xv->shape.rank;
    if (r < 2 || xv->dtype != KILN_DTYPE_FLOAT32)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "training mode needs a float32 input of rank >= 2");
    int64_t axes[KILN_MAX_RANK], na = 0, ch[1] = {xv->shape.dims[1]};
    for (int d = 0; d < r; d++)
        if (d != 1)
            axes[na++] = d;
    kiln_attr red[2] = {onnx_attr_is("axes", axes, (int)na), onnx_attr_i("keepdims", 1)};
    float eps = onnx_attr_float(c, "epsilon", 1e-5f), mom = onnx_attr_float(c, "momentum", 0.9f);
    int mean = op(&b, KILN_OP_REDUCEMEAN, &x, 1, red, 2);
    int d = op2(&b, KILN_OP_SUB, x, mean);
    int sq = op2(&b, KILN_OP_MUL, d, d);
    int var = op(&b, KILN_OP_REDUCEMEAN, &sq, 1, red, 2);
    int den = op(&b, KILN_OP_SQRT, (int[]){op2(&b, KILN_OP_ADD, var, fconst(&b, KILN_DTYPE_FLOAT32, eps))}, 1, NULL, 0);
    int y = op2(&b, KILN_OP_DIV, d, den);
    y = op2(&b, KILN_OP_MUL, y, along(&b, in[1], r, 1));
    y = op2(&b, KILN_OP_ADD, y, along(&b, in[2], r, 1));
    kiln_status s = finish(&b, 0, y);
    int m = fconst(&b, KILN_DTYPE_FLOAT32, mom), m1 = fconst(&b, KILN_DTYPE_FLOAT32, 1 - mom);
    kiln_attr to_c = onnx_attr_is("shape", ch, 1);
    int stats[2] = {mean, var};
    for (int k = 1; k <= 2 && s == KILN_OK; k++) {
        if (!onnx_out_used(c, k))
            continue;
        int cur = op(&b, KILN_OP_RESHAPE, &stats[k - 1], 1, &to_c, 1);
        int run = op2(&b, KILN_OP_ADD, op2(&b, KILN_OP_MUL, in[2 + k], m),
                      op2(&b, KILN_OP_MUL, cur, m1));
        s = finish(&b, k, run);
    }
    return s;
}

#define CONV_ATTRS "auto_pad:string dilations:ints group:int kernel_shape:ints pads:ints strides:ints"

const onnx_converter onnx_composite_converters[] = {
    {"QuantizeLinear", 10, conv_quantize, ""},
    {"QuantizeLinear", 13, conv_quantize, "axis:int"},
    {"DequantizeLinear", 10, conv_dequantize, ""},
    {"DequantizeLinear", 13, conv_dequantize, "axis:int"},
    {"DynamicQuantizeLinear", 11, conv_dynamic_quantize, ""},
    {"MatMulInteger", 10, conv_matmul_integer, ""},
    {"ConvInteger", 10, conv_conv_integer, CONV_ATTRS},
    {"QLinearMatMul", 10, conv_qlinear_matmul, ""},
    {"QLinearConv", 10, conv_qlinear_conv, CONV_ATTRS},
    {NULL, 0, NULL, NULL},
};
