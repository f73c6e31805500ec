/* import/onnx/convert_elemwise.c: converters for the elementwise ops,
 * Constant, Identity and Cast/CastLike.
 *
 * Most ops map one to one onto a kiln op (onnx_convert_simple), with their
 * attributes copied; legacy opsets (< 6/7) are accepted where the only
 * difference is an ignored `consumed_inputs` or numpy-compatible `broadcast`
 * / `axis` attributes. Binary arithmetic and Equal on two constants, Where on
 * three and Cast of a constant are folded at import time (fold.c); otherwise
 * they become kiln nodes. Cast's `to` is translated from the ONNX type number
 * into a kiln dtype; CastLike becomes a Cast to its second input's dtype.
 * Clip from opset 11 takes min/max as inputs, which kiln keeps as attributes:
 * they must be constants. */
#include <stdio.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "util/error.h"

/* Binds output 0 to a folded tensor, releasing it. */
static kiln_status bind_folded(onnx_ctx *c, kiln_status s, kiln_tensor *t, kiln_error *err)
{
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "node '%s' (%s, opset %lld): ", c->node_name,
                                 c->node->op_type, (long long)c->opset);
    s = onnx_bind_const(c, 0, t, err);
    kiln_tensor_release(t);
    return s;
}

/* opset < 7: "broadcast" with an "axis" aligned B elsewhere than at the end
 * is not numpy broadcasting. */
static kiln_status legacy_axis(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_attr(c, "axis"))
        return KILN_OK;
    const kiln_value *a = onnx_in_value(c, 0), *b = onnx_in_value(c, 1);
    int64_t axis = onnx_attr_int(c, "axis", 0);
    if (a && b && axis != a->shape.rank - b->shape.rank && axis != -(int64_t)b->shape.rank)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "legacy broadcasting with axis=%lld is not supported",
                               (long long)axis);
    return KILN_OK;
}

static kiln_status binary_fold(onnx_ctx *c, kiln_op op, onnx_binop bop, kiln_error *err)
{
    kiln_status s = legacy_axis(c, err);
    if (s != KILN_OK)
        return s;
    if (onnx_in_const(c, 0) && onnx_in_const(c, 1)) {
        kiln_tensor a = onnx_value_tensor(onnx_in_value(c, 0));
        kiln_tensor b = onnx_value_tensor(onnx_in_value(c, 1));
        kiln_tensor r;
        s = onnx_fold_binary(bop, &a, &b, &r, err);
        if (s == KILN_OK || s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
        /* too large (or a type fold.c does not handle): compute it at run time */
    }
    return onnx_convert_simple(c, op, NULL, err);
}

static kiln_status binary(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    kiln_status s = legacy_axis(c, err);
    if (s != KILN_OK)
        return s;
    return onnx_convert_simple(c, op, NULL, err);
}

#define CONV_FOLD(NAME, OP, BOP)                                                                  \
    static kiln_status NAME(onnx_ctx *c, kiln_error *err)                                         \
    {                                                                                             \
        return binary_fold(c, OP, BOP, err);                                                      \
    }
CONV_FOLD(conv_add, KILN_OP_ADD, ONNX_BIN_ADD)
CONV_FOLD(conv_sub, KILN_OP_SUB, ONNX_BIN_SUB)
CONV_FOLD(conv_mul, KILN_OP_MUL, ONNX_BIN_MUL)
CONV_FOLD(conv_div, KILN_OP_DIV, ONNX_BIN_DIV)
CONV_FOLD(conv_equal, KILN_OP_EQUAL, ONNX_BIN_EQUAL)

#define CONV_BINARY(NAME, OP)                                                                     \
    static kiln_status NAME(onnx_ctx *c, kiln_error *err)                                         \
    {                                                                                             \
        return binary(c, OP, err);                                                                \
    }
CONV_BINARY(conv_pow, KILN_OP_POW)
CONV_BINARY(conv_greater, KILN_OP_GREATER)
CONV_BINARY(conv_less, KILN_OP_LESS)
CONV_BINARY(conv_greaterorequal, KILN_OP_GREATEROREQUAL)
CONV_BINARY(conv_lessorequal, KILN_OP_LESSOREQUAL)
CONV_BINARY(conv_and, KILN_OP_AND)
CONV_BINARY(conv_or, KILN_OP_OR)
CONV_BINARY(conv_xor, KILN_OP_XOR)
CONV_BINARY(conv_prelu, KILN_OP_PRELU)

/* One kiln op, the listed attributes copied. */
#define CONV_SIMPLE(NAME, OP, ATTRS)                                                              \
    static kiln_status NAME(onnx_ctx *c, kiln_error *err)                                         \
    {                                                                                             \
        return onnx_convert_simple(c, OP, ATTRS, err);                                            \
    }
CONV_SIMPLE(conv_relu, KILN_OP_RELU, NULL)
CONV_SIMPLE(conv_sigmoid, KILN_OP_SIGMOID, NULL)
CONV_SIMPLE(conv_erf, KILN_OP_ERF, NULL)
CONV_SIMPLE(conv_sqrt, KILN_OP_SQRT, NULL)
CONV_SIMPLE(conv_hardsigmoid, KILN_OP_HARDSIGMOID, "alpha beta")
CONV_SIMPLE(conv_hardswish, KILN_OP_HARDSWISH, NULL)
CONV_SIMPLE(conv_abs, KILN_OP_ABS, NULL)
CONV_SIMPLE(conv_neg, KILN_OP_NEG, NULL)
CONV_SIMPLE(conv_sign, KILN_OP_SIGN, NULL)
CONV_SIMPLE(conv_exp, KILN_OP_EXP, NULL)
CONV_SIMPLE(conv_log, KILN_OP_LOG, NULL)
CONV_SIMPLE(conv_tanh, KILN_OP_TANH, NULL)
CONV_SIMPLE(conv_sin, KILN_OP_SIN, NULL)
CONV_SIMPLE(conv_cos, KILN_OP_COS, NULL)
CONV_SIMPLE(conv_tan, KILN_OP_TAN, NULL)
CONV_SIMPLE(conv_asin, KILN_OP_ASIN, NULL)
CONV_SIMPLE(conv_acos, KILN_OP_ACOS, NULL)
CONV_SIMPLE(conv_atan, KILN_OP_ATAN, NULL)
CONV_SIMPLE(conv_sinh, KILN_OP_SINH, NULL)
CONV_SIMPLE(conv_cosh, KILN_OP_COSH, NULL)
CONV_SIMPLE(conv_asinh, KILN_OP_ASINH, NULL)
CONV_SIMPLE(conv_acosh, KILN_OP_ACOSH, NULL)
CONV_SIMPLE(conv_atanh, KILN_OP_ATANH, NULL)
CONV_SIMPLE(conv_softplus, KILN_OP_SOFTPLUS, NULL)
CONV_SIMPLE(conv_softsign, KILN_OP_SOFTSIGN, NULL)
CONV_SIMPLE(conv_elu, KILN_OP_ELU, "alpha")
CONV_SIMPLE(conv_selu, KILN_OP_SELU, "alpha gamma")
CONV_SIMPLE(conv_celu, KILN_OP_CELU, "alpha")
CONV_SIMPLE(conv_leakyrelu, KILN_OP_LEAKYRELU, "alpha")
CONV_SIMPLE(conv_thresholdedrelu, KILN_OP_THRESHOLDEDRELU, "alpha")
CONV_SIMPLE(conv_shrink, KILN_OP_SHRINK, "bias lambd")
CONV_SIMPLE(conv_mish, KILN_OP_MISH, NULL)
CONV_SIMPLE(conv_ceil, KILN_OP_CEIL, NULL)
CONV_SIMPLE(conv_floor, KILN_OP_FLOOR, NULL)
CONV_SIMPLE(conv_round, KILN_OP_ROUND, NULL)
CONV_SIMPLE(conv_reciprocal, KILN_OP_RECIPROCAL, NULL)
CONV_SIMPLE(conv_gelu, KILN_OP_GELU, "approximate")
CONV_SIMPLE(conv_isnan, KILN_OP_ISNAN, NULL)
CONV_SIMPLE(conv_isinf, KILN_OP_ISINF, "detect_negative detect_positive")
CONV_SIMPLE(conv_not, KILN_OP_NOT, NULL)
CONV_SIMPLE(conv_mod, KILN_OP_MOD, "fmod")
CONV_SIMPLE(conv_bitshift, KILN_OP_BITSHIFT, "direction")
CONV_SIMPLE(conv_min, KILN_OP_MIN, NULL)
CONV_SIMPLE(conv_max, KILN_OP_MAX, NULL)
CONV_SIMPLE(conv_sum, KILN_OP_SUM, NULL)
CONV_SIMPLE(conv_mean, KILN_OP_MEAN, NULL)

/* PRelu before opset 7: a 1-D slope of X's channel count C applies per
 * channel (dim 1), as PyTorch exports it; kiln's PRelu broadcasts numpy-style,
 * so the slope is reshaped to [C, 1, ..., 1] (a new constant, or a Reshape). */
static kiln_status conv_prelu6(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "X", err);
    const kiln_value *slope = x ? onnx_need(c, 1, "slope", err) : NULL;
    if (!slope)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (x->shape.rank < 3 || slope->shape.rank != 1 || slope->shape.dims[0] == 1 ||
        slope->shape.dims[0] != x->shape.dims[1])
        return onnx_convert_simple(c, KILN_OP_PRELU, NULL, err);
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    kiln_shape sh = {.rank = x->shape.rank - 1};
    sh.dims[0] = slope->shape.dims[0];
    for (int d = 1; d < sh.rank; d++)
        sh.dims[d] = 1;
    int sid;
    if (onnx_in_const(c, 1)) {
        kiln_tensor t = onnx_value_tensor(slope);
        t.shape = sh;
        char name[512];
        snprintf(name, sizeof name, "%s/slope", c->node_name);
        sid = onnx_add_const(c, name, &t, err);
        if (sid < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    } else {
        int in = slope->id;
        int node = onnx_emit(c, KILN_OP_RESHAPE, "slope", &in, 1, 1, err);
        if (node < 0)
            return KILN_ERR_OUT_OF_MEMORY;
        if (kiln_node_set_ints(c->g, node, "shape", sh.dims, sh.rank) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        sid = kiln_graph_node_output(c->g, node, 0);
    }
    int ins[2] = {x->id, sid};
    int node = onnx_emit(c, KILN_OP_PRELU, NULL, ins, 2, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

static kiln_status conv_where(onnx_ctx *c, kiln_error *err)
{
    if (onnx_in_const(c, 0) && onnx_in_const(c, 1) && onnx_in_const(c, 2)) {
        kiln_tensor k = onnx_value_tensor(onnx_in_value(c, 0));
        kiln_tensor x = onnx_value_tensor(onnx_in_value(c, 1));
        kiln_tensor y = onnx_value_tensor(onnx_in_value(c, 2));
        kiln_tensor r;
        kiln_status s = onnx_fold_where(&k, &x, &y, &r, err);
        if (s == KILN_OK || s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
    }
    return onnx_convert_simple(c, KILN_OP_WHERE, NULL, err);
}

/* Cast of input 0 to `to`: the input itself when the type already matches,
 * a folded constant when it is constant, else a kiln Cast node. */
static kiln_status emit_cast(onnx_ctx *c, const kiln_value *x, kiln_dtype to, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    if (x->dtype == to)
        return onnx_bind(c, 0, x->id, err);
    if (onnx_in_const(c, 0)) {
        kiln_tensor t = onnx_value_tensor(x), r;
        s = onnx_fold_cast(&t, to, &r, err);
        if (s == KILN_OK || s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
    }
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_CAST, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    s = kiln_node_set_int(c->g, node, "to", (int64_t)to);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

static kiln_status conv_cast(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int64_t to_onnx = onnx_attr_int(c, "to", 0);
    kiln_dtype to = (to_onnx > 0 && to_onnx < 64) ? kiln_dtype_from_onnx((int32_t)to_onnx)
                                                   : KILN_DTYPE_UNDEFINED;
    if (to == KILN_DTYPE_UNDEFINED)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "cast to ONNX type %lld is not supported", (long long)to_onnx);
    return emit_cast(c, x, to, err);
}

static kiln_status conv_castlike(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    const kiln_value *like = onnx_need(c, 1, "target_type", err);
    if (!like)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (like->dtype == KILN_DTYPE_UNDEFINED)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "input 1 (target_type) has no known type");
    return emit_cast(c, x, like->dtype, err);
}

static kiln_status conv_identity(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    return onnx_bind(c, 0, x->id, err);
}
static kiln_status conv_constant(onnx_ctx *c, kiln_error *err)
{
    static const char *const keys[] = {"value",      "value_float",  "value_floats",
                                       "value_int",  "value_ints",   "value_string",
                                       "value_strings", "sparse_value"};
    const Onnx__AttributeProto *a = NULL;
    int which = -1;
    for (int i = 0; i < 8; i++) {
        const Onnx__AttributeProto *x = onnx_attr(c, keys[i]);
        if (!x)
            continue;
        if (a)
            return onnx_node_error(c, KILN_ERR_PARSE, err,
                                   "both '%s' and '%s' are set: a Constant has one value",
                                   keys[which], keys[i]);
        a = x;
        which = i;
    }
    if (!a)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "no value attribute");
    kiln_tensor t = {0};
    kiln_status s = KILN_OK;
    switch (which) {
    case 0:
        if (!a->t)
            return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'value' holds no tensor");
        s = onnx_tensor_load(c, a->t, &t, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (Constant, opset %lld): ", c->node_name,
                                     (long long)c->opset);
        break;
    case 1:
    case 2: {
        size_t n = which == 1 ? 1 : a->n_floats;
        kiln_shape sh = {.rank = which == 1 ? 0 : 1, .dims = {(int64_t)n}};
        s = kiln_tensor_alloc(&t, KILN_DTYPE_FLOAT32, &sh, err);
        if (s == KILN_OK && n)
            memcpy(t.data, which == 1 ? &a->f : a->floats, n * sizeof(float));
        break;
    }
    case 3:
    case 4: {
        size_t n = which == 3 ? 1 : a->n_ints;
        kiln_shape sh = {.rank = which == 3 ? 0 : 1, .dims = {(int64_t)n}};
        s = kiln_tensor_alloc(&t, KILN_DTYPE_INT64, &sh, err);
        if (s == KILN_OK && n)
            memcpy(t.data, which == 3 ? &a->i : a->ints, n * sizeof(int64_t));
        break;
    }
    default:
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "'%s' constants are not supported (kiln has no string or sparse "
                               "tensors)",
                               keys[which]);
    }
    if (s != KILN_OK)
        return s;
    int id = onnx_add_const(c, c->node->n_output ? c->node->output[0] : c->node_name, &t, err);
    kiln_tensor_release(&t);
    if (id < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    return onnx_bind(c, 0, id, err);
}

/* Clip before opset 11: min/max attributes, as in kiln. */
static kiln_status conv_clip6(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_CLIP, "min max", err);
}

/* Clip from opset 11: min and max are optional constant inputs. */
static kiln_status conv_clip11(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    double lo = 0, hi = 0;
    bool has_lo = onnx_in(c, 1) >= 0, has_hi = onnx_in(c, 2) >= 0;
    if (has_lo && (s = onnx_in_scalar(c, 1, "min", &lo, err)) != KILN_OK)
        return s;
    if (has_hi && (s = onnx_in_scalar(c, 2, "max", &hi, err)) != KILN_OK)
        return s;
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_CLIP, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    if (has_lo)
        s = kiln_node_set_float(c->g, node, "min", (float)lo);
    if (s == KILN_OK && has_hi)
        s = kiln_node_set_float(c->g, node, "max", (float)hi);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}


#define LEGACY_BINARY "axis:int broadcast:int"
#define LEGACY_UNARY "consumed_inputs:ints"

/* An op unchanged since opset 1 but for `consumed_inputs` (dropped in 6). */
#define UNARY_1_6(NAME, FN) {NAME, 1, FN, LEGACY_UNARY}, {NAME, 6, FN, ""}

const onnx_converter onnx_elemwise_converters[] = {
    {"Add", 1, conv_add, LEGACY_BINARY " consumed_inputs:ints"},
    {"Add", 6, conv_add, LEGACY_BINARY},
    {"Add", 7, conv_add, ""},
    {"Sub", 1, conv_sub, LEGACY_BINARY " consumed_inputs:ints"},
    {"Sub", 6, conv_sub, LEGACY_BINARY},
    {"Sub", 7, conv_sub, ""},
    {"Mul", 1, conv_mul, LEGACY_BINARY " consumed_inputs:ints"},
    {"Mul", 6, conv_mul, LEGACY_BINARY},
    {"Mul", 7, conv_mul, ""},
    {"Div", 1, conv_div, LEGACY_BINARY " consumed_inputs:ints"},
    {"Div", 6, conv_div, LEGACY_BINARY},
    {"Div", 7, conv_div, ""},
    {"Pow", 1, conv_pow, LEGACY_BINARY},
    {"Pow", 7, conv_pow, ""},
    {"Mod", 10, conv_mod, "fmod:int"},
    {"BitShift", 11, conv_bitshift, "direction:string"},
    {"PRelu", 1, conv_prelu6, LEGACY_UNARY},
    {"PRelu", 6, conv_prelu6, ""},
    {"PRelu", 7, conv_prelu, ""},
    {"Equal", 1, conv_equal, LEGACY_BINARY},
    {"Equal", 7, conv_equal, ""},
    {"Greater", 1, conv_greater, LEGACY_BINARY},
    {"Greater", 7, conv_greater, ""},
    {"Less", 1, conv_less, LEGACY_BINARY},
    {"Less", 7, conv_less, ""},
    {"GreaterOrEqual", 12, conv_greaterorequal, ""},
    {"LessOrEqual", 12, conv_lessorequal, ""},
    {"And", 1, conv_and, LEGACY_BINARY},
    {"And", 7, conv_and, ""},
    {"Or", 1, conv_or, LEGACY_BINARY},
    {"Or", 7, conv_or, ""},
    {"Xor", 1, conv_xor, LEGACY_BINARY},
    {"Xor", 7, conv_xor, ""},
    {"Not", 1, conv_not, ""},
    UNARY_1_6("Min", conv_min),
    UNARY_1_6("Max", conv_max),
    UNARY_1_6("Sum", conv_sum),
    UNARY_1_6("Mean", conv_mean),
    {"Where", 9, conv_where, ""},
    {"Cast", 6, conv_cast, "to:int"},
    {"CastLike", 15, conv_castlike, ""},
    {"Identity", 1, conv_identity, ""},
    {"Constant", 1, conv_constant, "value:tensor"},
    {"Constant", 12, conv_constant,
     "value:tensor value_float:float value_floats:floats value_int:int value_ints:ints "
     "value_string:string value_strings:strings sparse_value:sparse_tensor"},
    UNARY_1_6("Relu", conv_relu),
    UNARY_1_6("Sigmoid", conv_sigmoid),
    UNARY_1_6("Sqrt", conv_sqrt),
    UNARY_1_6("Abs", conv_abs),
    UNARY_1_6("Neg", conv_neg),
    UNARY_1_6("Exp", conv_exp),
    UNARY_1_6("Log", conv_log),
    UNARY_1_6("Tanh", conv_tanh),
    UNARY_1_6("Ceil", conv_ceil),
    UNARY_1_6("Floor", conv_floor),
    UNARY_1_6("Reciprocal", conv_reciprocal),
    {"Erf", 9, conv_erf, ""},
    {"Sign", 9, conv_sign, ""},
    {"Sin", 7, conv_sin, ""},
    {"Cos", 7, conv_cos, ""},
    {"Tan", 7, conv_tan, ""},
    {"Asin", 7, conv_asin, ""},
    {"Acos", 7, conv_acos, ""},
    {"Atan", 7, conv_atan, ""},
    {"Sinh", 9, conv_sinh, ""},
    {"Cosh", 9, conv_cosh, ""},
    {"Asinh", 9, conv_asinh, ""},
    {"Acosh", 9, conv_acosh, ""},
    {"Atanh", 9, conv_atanh, ""},
    {"Softplus", 1, conv_softplus, ""},
    {"Softsign", 1, conv_softsign, ""},
    {"Round", 11, conv_round, ""},
    {"Mish", 18, conv_mish, ""},
    {"Gelu", 20, conv_gelu, "approximate:string"},
    {"IsNaN", 9, conv_isnan, ""},
    {"IsInf", 10, conv_isinf, "detect_negative:int detect_positive:int"},
    {"Elu", 1, conv_elu, "alpha:float " LEGACY_UNARY},
    {"Elu", 6, conv_elu, "alpha:float"},
    {"Selu", 1, conv_selu, "alpha:float gamma:float " LEGACY_UNARY},
    {"Selu", 6, conv_selu, "alpha:float gamma:float"},
    {"Celu", 12, conv_celu, "alpha:float"},
    {"LeakyRelu", 1, conv_leakyrelu, "alpha:float " LEGACY_UNARY},
    {"LeakyRelu", 6, conv_leakyrelu, "alpha:float"},
    {"ThresholdedRelu", 10, conv_thresholdedrelu, "alpha:float"},
    {"Shrink", 9, conv_shrink, "bias:float lambd:float"},
    {"HardSigmoid", 1, conv_hardsigmoid, "alpha:float beta:float " LEGACY_UNARY},
    {"HardSigmoid", 6, conv_hardsigmoid, "alpha:float beta:float"},
    {"HardSwish", 14, conv_hardswish, ""},
    {"Clip", 1, conv_clip6, "min:float max:float " LEGACY_UNARY},
    {"Clip", 6, conv_clip6, "min:float max:float"},
    {"Clip", 11, conv_clip11, ""},
    {NULL, 0, NULL, NULL},
};
