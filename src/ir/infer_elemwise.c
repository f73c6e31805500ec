/* ir/infer_elemwise.c: shape inference for the elementwise ops.
 *
 * Unary float ops (Relu, Clip, Sigmoid, HardSigmoid, HardSwish, Erf, Sqrt):
 * float32 in, same type and shape out; the float attributes they read are
 * type-checked here. Binary ops (Add, Sub, Mul, Div, Pow): numpy broadcasting
 * of the two shapes (ir/broadcast.c); both operands of one dtype among
 * float32/int32/int64, except Pow: float32 base, float32/int32/int64 exponent.
 * The output takes the first input's dtype. Identity: any type, copied. */
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

kiln_status kiln_infer_unary_float(const kiln_node *n, const kiln_value *const *in,
                                   kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s != KILN_OK)
        return s;
    static const char *const float_attrs[] = {"min", "max", "alpha", "beta"};
    for (int i = 0; i < 4; i++) {
        s = kiln_node_attr_check(n, float_attrs[i], KILN_ATTR_FLOAT, err);
        if (s != KILN_OK)
            return s;
    }
    if (in[0]->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input 0 ('%s') is %s, expected float32",
                           in[0]->name, kiln_dtype_name(in[0]->dtype));
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = in[0]->shape;
    return KILN_OK;
}

kiln_status kiln_infer_broadcast(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s == KILN_OK)
        s = need_input(n, in, 1, err);
    if (s != KILN_OK)
        return s;
    kiln_dtype ta = in[0]->dtype, tb = in[1]->dtype;
    if (n->op == KILN_OP_POW) {
        if (ta != KILN_DTYPE_FLOAT32)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "input 0 (base, '%s') is %s: only float32 is supported",
                               in[0]->name, kiln_dtype_name(ta));
        if (tb != KILN_DTYPE_FLOAT32 && tb != KILN_DTYPE_INT32 && tb != KILN_DTYPE_INT64)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "input 1 (exponent, '%s') is %s, expected float32, int32 or int64",
                               in[1]->name, kiln_dtype_name(tb));
    } else {
        if (ta != tb)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "inputs have different types: input 0 ('%s') is %s, input 1 ('%s') "
                               "is %s",
                               in[0]->name, kiln_dtype_name(ta), in[1]->name, kiln_dtype_name(tb));
        if (ta != KILN_DTYPE_FLOAT32 && ta != KILN_DTYPE_INT32 && ta != KILN_DTYPE_INT64)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "inputs are %s: only float32, int32 and int64 are supported",
                               kiln_dtype_name(ta));
    }
    kiln_shape shape;
    s = kiln_broadcast_shape(&in[0]->shape, &in[1]->shape, &shape, err);
    if (s != KILN_OK)
        return s;
    out[0]->dtype = ta;
    out[0]->shape = shape;
    return KILN_OK;
}

kiln_status kiln_infer_identity(const kiln_node *n, const kiln_value *const *in,
                                kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need_input(n, in, 0, err);
    if (s != KILN_OK)
        return s;
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = in[0]->shape;
    return KILN_OK;
}

/* STUB */
kiln_status kiln_infer_unary_numeric(const kiln_node *n, const kiln_value *const *in,
                                     kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_unary_to_bool(const kiln_node *n, const kiln_value *const *in,
                                     kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_unary_bool(const kiln_node *n, const kiln_value *const *in,
                                  kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_broadcast_variadic(const kiln_node *n, const kiln_value *const *in,
                                          kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_compare(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_logic(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_where(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_cast(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

