/* ir/infer_elemwise.c: shape inference for the elementwise ops.
 *
 * Unary ops keep the input's shape. Float ops (activations, exp/log,
 * trigonometric, rounding; kiln_infer_unary_float) take float32, float64 or
 * float16 and keep the type; Relu and Clip also take integers. Abs, Neg and
 * Sign take any numeric type; IsNaN/IsInf map a float type to bool; Not takes
 * bool. The float attributes these ops read are type-checked here, and Gelu's
 * `approximate` must be "none" or "tanh".
 *
 * Broadcasting ops compute numpy's broadcast shape of their inputs
 * (ir/broadcast.c): binary arithmetic (Add, Sub, Mul, Div, Mod, PRelu,
 * BitShift) needs one dtype on both sides and keeps it (BitShift: unsigned
 * integers; PRelu: the slope must broadcast to X, the output is X's shape);
 * Pow takes any numeric base and exponent and keeps the base's type; the
 * variadic Min/Max/Sum/Mean fold the broadcast over all inputs (Mean: float
 * types); comparisons give bool; And/Or/Xor take and give bool; Where takes a
 * bool condition and two operands of one type, all three broadcast. Cast gives
 * the dtype in its "to" attribute (a kiln_dtype value). Identity: any type,
 * copied. */
#include <string.h>

#include "ir/broadcast.h"
#include "ir/graph.h"
#include "util/error.h"

static kiln_status need_input(const kiln_node *n, const kiln_value *const *in, int i,
                              kiln_error *err)
{
    if (i >= n->n_inputs || !in[i])
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "input %d is missing", i);
    return KILN_OK;
}

static bool is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}

static bool is_uint(kiln_dtype t)
{
    return t == KILN_DTYPE_UINT8 || t == KILN_DTYPE_UINT16 || t == KILN_DTYPE_UINT32 ||
           t == KILN_DTYPE_UINT64;
}

/* Every numeric type kiln has (not bool). */
static bool is_numeric(kiln_dtype t)
{
    return t > KILN_DTYPE_UNDEFINED && t < KILN_DTYPE_COUNT && t != KILN_DTYPE_BOOL;
}

static kiln_status type_error(const kiln_value *v, int k, const char *expected, kiln_error *err)
{
    return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d ('%s') is %s, expected %s", k,
                       v->name, kiln_dtype_name(v->dtype), expected);
}

static void set_out(kiln_value *o, kiln_dtype t, const kiln_shape *s)
{
    o->dtype = t;
    o->shape = *s;
}

static kiln_status check_float_attrs(const kiln_node *n, kiln_error *err)
{
    static const char *const names[] = {"min", "max", "alpha", "beta", "gamma", "bias", "lambd"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kiln_status s = kiln_node_attr_check(n, names[i], KILN_ATTR_FLOAT, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

kiln_status kiln_infer_unary_float(const kiln_node *n, const kiln_value *const *in,
                                   kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s == KILN_OK)
        s = check_float_attrs(n, err);
    if (s != KILN_OK)
        return s;
    if (n->op == KILN_OP_GELU) {
        s = kiln_node_attr_check(n, "approximate", KILN_ATTR_STRING, err);
        if (s != KILN_OK)
            return s;
        const char *a = kiln_attr_string(n, "approximate", "none");
        if (strcmp(a, "none") != 0 && strcmp(a, "tanh") != 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'approximate' is '%s', expected 'none' or 'tanh'", a);
    }
    if (n->op == KILN_OP_CELU && kiln_attr_float(n, "alpha", 1.0f) == 0.0f)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'alpha' must not be 0");
    kiln_dtype t = in[0]->dtype;
    bool ints_ok = n->op == KILN_OP_RELU || n->op == KILN_OP_CLIP;
    if (ints_ok ? !is_numeric(t) : !is_float(t))
        return type_error(in[0], 0,
                          ints_ok ? "float32, float64, float16 or an integer type"
                                  : "float32, float64 or float16",
                          err);
    set_out(out[0], t, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_unary_numeric(const kiln_node *n, const kiln_value *const *in,
                                     kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s != KILN_OK)
        return s;
    if (!is_numeric(in[0]->dtype))
        return type_error(in[0], 0, "a numeric type", err);
    set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_unary_to_bool(const kiln_node *n, const kiln_value *const *in,
                                     kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s == KILN_OK)
        s = kiln_node_attr_check(n, "detect_negative", KILN_ATTR_INT, err);
    if (s == KILN_OK)
        s = kiln_node_attr_check(n, "detect_positive", KILN_ATTR_INT, err);
    if (s != KILN_OK)
        return s;
    if (!is_float(in[0]->dtype))
        return type_error(in[0], 0, "float32, float64 or float16", err);
    set_out(out[0], KILN_DTYPE_BOOL, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_unary_bool(const kiln_node *n, const kiln_value *const *in,
                                  kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s != KILN_OK)
        return s;
    if (in[0]->dtype != KILN_DTYPE_BOOL)
        return type_error(in[0], 0, "bool", err);
    set_out(out[0], KILN_DTYPE_BOOL, &in[0]->shape);
    return KILN_OK;
}

/* Inputs 0..count-1 present, and their broadcast shape. */
static kiln_status bcast_inputs(const kiln_node *n, const kiln_value *const *in, int count,
                                kiln_shape *shape, kiln_error *err)
{
    for (int i = 0; i < count; i++) {
        kiln_status s = need_input(n, in, i, err);
        if (s != KILN_OK)
            return s;
    }
    *shape = in[0]->shape;
    for (int i = 1; i < count; i++) {
        kiln_status s = kiln_broadcast_shape(shape, &in[i]->shape, shape, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

static kiln_status same_types(const kiln_value *const *in, int count, kiln_error *err)
{
    for (int i = 1; i < count; i++)
        if (in[i]->dtype != in[0]->dtype)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "inputs have different types: input 0 ('%s') is %s, input %d "
                               "('%s') is %s",
                               in[0]->name, kiln_dtype_name(in[0]->dtype), i, in[i]->name,
                               kiln_dtype_name(in[i]->dtype));
    return KILN_OK;
}

kiln_status kiln_infer_broadcast(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    kiln_shape shape;
    kiln_status s = bcast_inputs(n, in, 2, &shape, err);
    if (s != KILN_OK)
        return s;
    kiln_dtype ta = in[0]->dtype, tb = in[1]->dtype;
    if (n->op == KILN_OP_POW) {
        if (!is_numeric(ta))
            return type_error(in[0], 0, "a numeric type (base)", err);
        if (!is_numeric(tb))
            return type_error(in[1], 1, "a numeric type (exponent)", err);
        set_out(out[0], ta, &shape);
        return KILN_OK;
    }
    s = same_types(in, 2, err);
    if (s != KILN_OK)
        return s;
    switch (n->op) {
    case KILN_OP_BITSHIFT: {
        if (!is_uint(ta))
            return type_error(in[0], 0, "an unsigned integer type", err);
        s = kiln_node_attr_check(n, "direction", KILN_ATTR_STRING, err);
        if (s != KILN_OK)
            return s;
        const char *d = kiln_attr_string(n, "direction", NULL);
        if (!d || (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0))
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'direction' is %s%s%s, expected \"LEFT\" or \"RIGHT\"",
                               d ? "'" : "", d ? d : "missing", d ? "'" : "");
        break;
    }
    case KILN_OP_MOD: {
        s = kiln_node_attr_check(n, "fmod", KILN_ATTR_INT, err);
        if (s != KILN_OK)
            return s;
        int64_t f = kiln_attr_int(n, "fmod", 0);
        if (f != 0 && f != 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'fmod' is %lld, expected 0 or 1", (long long)f);
        break;
    }
    case KILN_OP_PRELU:
        if (!kiln_shape_equal(&shape, &in[0]->shape)) {
            kiln_shape_buf a, b;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input 1 (slope, '%s') %s does not broadcast to X %s",
                               in[1]->name, kiln_shape_fmt(&in[1]->shape, &a),
                               kiln_shape_fmt(&in[0]->shape, &b));
        }
        break;
    default:
        break;
    }
    if (!is_numeric(ta))
        return type_error(in[0], 0, "a numeric type", err);
    set_out(out[0], ta, &shape);
    return KILN_OK;
}

kiln_status kiln_infer_broadcast_variadic(const kiln_node *n, const kiln_value *const *in,
                                          kiln_value *const *out, kiln_error *err)
{
    if (n->n_inputs < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "needs at least one input");
    kiln_shape shape;
    kiln_status s = bcast_inputs(n, in, n->n_inputs, &shape, err);
    if (s == KILN_OK)
        s = same_types(in, n->n_inputs, err);
    if (s != KILN_OK)
        return s;
    if (n->op == KILN_OP_MEAN ? !is_float(in[0]->dtype) : !is_numeric(in[0]->dtype))
        return type_error(in[0], 0,
                          n->op == KILN_OP_MEAN ? "float32, float64 or float16" : "a numeric type",
                          err);
    set_out(out[0], in[0]->dtype, &shape);
    return KILN_OK;
}

kiln_status kiln_infer_compare(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    kiln_shape shape;
    kiln_status s = bcast_inputs(n, in, 2, &shape, err);
    if (s == KILN_OK)
        s = same_types(in, 2, err);
    if (s != KILN_OK)
        return s;
    if (!is_numeric(in[0]->dtype) && in[0]->dtype != KILN_DTYPE_BOOL)
        return type_error(in[0], 0, "a numeric type or bool", err);
    set_out(out[0], KILN_DTYPE_BOOL, &shape);
    return KILN_OK;
}

kiln_status kiln_infer_logic(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    kiln_shape shape;
    kiln_status s = bcast_inputs(n, in, 2, &shape, err);
    if (s != KILN_OK)
        return s;
    for (int i = 0; i < 2; i++)
        if (in[i]->dtype != KILN_DTYPE_BOOL)
            return type_error(in[i], i, "bool", err);
    set_out(out[0], KILN_DTYPE_BOOL, &shape);
    return KILN_OK;
}

kiln_status kiln_infer_where(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    kiln_shape shape;
    kiln_status s = bcast_inputs(n, in, 3, &shape, err);
    if (s != KILN_OK)
        return s;
    if (in[0]->dtype != KILN_DTYPE_BOOL)
        return type_error(in[0], 0, "bool (condition)", err);
    if (in[2]->dtype != in[1]->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "X ('%s') is %s but Y ('%s') is %s: they must have one type",
                           in[1]->name, kiln_dtype_name(in[1]->dtype), in[2]->name,
                           kiln_dtype_name(in[2]->dtype));
    if (kiln_dtype_size(in[1]->dtype) == 0)
        return type_error(in[1], 1, "a defined type", err);
    set_out(out[0], in[1]->dtype, &shape);
    return KILN_OK;
}

kiln_status kiln_infer_cast(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s == KILN_OK)
        s = kiln_node_attr_check(n, "to", KILN_ATTR_INT, err);
    if (s != KILN_OK)
        return s;
    if (!kiln_node_attr(n, "to"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'to' is missing");
    int64_t to = kiln_attr_int(n, "to", 0);
    if (to <= KILN_DTYPE_UNDEFINED || to >= KILN_DTYPE_COUNT)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'to' is %lld, not a kiln dtype (1..%d)", (long long)to,
                           KILN_DTYPE_COUNT - 1);
    if (kiln_dtype_size(in[0]->dtype) == 0)
        return type_error(in[0], 0, "a defined type", err);
    set_out(out[0], (kiln_dtype)to, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_identity(const kiln_node *n, const kiln_value *const *in,
                                kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s != KILN_OK)
        return s;
    set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}
