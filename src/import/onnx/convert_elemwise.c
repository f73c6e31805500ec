/* import/onnx/convert_elemwise.c: converters for the elementwise ops,
 * Constant, Identity and Cast/CastLike.
 *
 * Most ops map one to one onto a kiln op (onnx_convert_simple), with their
 * attributes copied; legacy opsets (< 6/7) are accepted where the only
 * difference is an ignored `consumed_inputs` or numpy-compatible `broadcast`
 * / `axis` attributes. Binary arithmetic and Equal on two constants, Where on
 * three and Cast of a constant are folded at import time by their reference
 * kernels (onnx_emit_or_fold, fold_op.h); otherwise they become kiln nodes.
 * Cast's `to` is translated from the ONNX type number into a kiln dtype;
 * CastLike becomes a Cast to its second input's dtype.
 * Clip from opset 11 takes min/max as inputs, which kiln keeps as attributes:
 * they must be constants. */
#include <stdio.h>
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "import/onnx/convert_rtparams.h"
#include "import/onnx/fold_op.h"
#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "util/error.h"

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

/* onnx_convert_simple (op without attributes), but folded when every input
 * is a constant; a result too large to fold is computed at run time. */
static kiln_status fold_simple(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    int n = onnx_n_in(c), ins[ONNX_FOLD_MAX_IO];
    if (n > ONNX_FOLD_MAX_IO)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "%d inputs", n);
    for (int k = 0; k < n; k++)
        ins[k] = onnx_in(c, k);
    return onnx_emit_or_fold(c, op, ins, n, NULL, 0, 1, err);
}

static kiln_status binary_fold(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    kiln_status s = legacy_axis(c, err);
    if (s != KILN_OK)
        return s;
    return fold_simple(c, op, err);
}

static kiln_status binary(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    kiln_status s = legacy_axis(c, err);
    if (s != KILN_OK)
        return s;
    return onnx_convert_simple(c, op, NULL, err);
}

#define CONV_FOLD(NAME, OP)                                                                       \
    static kiln_status NAME(onnx_ctx *c, kiln_error *err)                                         \
    {                                                                                             \
        return binary_fold(c, OP, err);                                                           \
    }
CONV_FOLD(conv_add, KILN_OP_ADD)
CONV_FOLD(conv_sub, KILN_OP_SUB)
CONV_FOLD(conv_mul, KILN_OP_MUL)
CONV_FOLD(conv_div, KILN_OP_DIV)
CONV_FOLD(conv_equal, KILN_OP_EQUAL)

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
    return onnx_emit_bind(c, KILN_OP_PRELU, ins, 2, NULL, 0, NULL, 1, err);
}

static kiln_status conv_where(onnx_ctx *c, kiln_error *err)
{
    return fold_simple(c, KILN_OP_WHERE, err);
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
    int in = x->id;
    kiln_attr a = onnx_attr_i("to", (int64_t)to);
    return onnx_emit_or_fold(c, KILN_OP_CAST, &in, 1, &a, 1, 1, err);
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

/* The tensor of value_float(s) / value_int(s): a scalar, or a vector of n. */
static kiln_status list_tensor(kiln_tensor *t, kiln_dtype dt, bool scalar, size_t n,
                               const void *v, kiln_error *err)
{
    kiln_shape sh = {.rank = scalar ? 0 : 1, .dims = {(int64_t)n}};
    kiln_status s = kiln_tensor_alloc(t, dt, &sh, err);
    if (s == KILN_OK && n)
        memcpy(t->data, v, n * kiln_dtype_size(dt));
    return s;
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
            return onnx_node_prefix(c, s, err);
        break;
    case 1: s = list_tensor(&t, KILN_DTYPE_FLOAT32, true, 1, &a->f, err); break;
    case 2: s = list_tensor(&t, KILN_DTYPE_FLOAT32, false, a->n_floats, a->floats, err); break;
    case 3: s = list_tensor(&t, KILN_DTYPE_INT64, true, 1, &a->i, err); break;
    case 4: s = list_tensor(&t, KILN_DTYPE_INT64, false, a->n_ints, a->ints, err); break;
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
CONV_SIMPLE(conv_clip6, KILN_OP_CLIP, "min max")

/* Clip from opset 11: min and max are optional constant inputs. */
static kiln_status conv_clip11(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = onnx_need_in0(c, "input", &x, err);
    if (s != KILN_OK)
        return s;
    double lo = 0, hi = 0;
    kiln_attr a[2];
    int na = 0;
    for (int k = 1; k <= 2; k++) {
        static const char *const what[] = {NULL, "min", "max"};
        if (onnx_in(c, k) >= 0 && onnx_rt_is_data(c, k, what[k], err, &s))
            return s != KILN_OK ? s : onnx_rt_clip(c, err); /* a bound is data */
    }
    if (onnx_in(c, 1) >= 0) {
        if ((s = onnx_in_scalar(c, 1, "min", &lo, err)) != KILN_OK)
            return s;
        a[na++] = onnx_attr_f("min", (float)lo);
    }
    if (onnx_in(c, 2) >= 0) {
        if ((s = onnx_in_scalar(c, 2, "max", &hi, err)) != KILN_OK)
            return s;
        a[na++] = onnx_attr_f("max", (float)hi);
    }
    int in = x->id;
    return onnx_emit_bind(c, KILN_OP_CLIP, &in, 1, a, na, NULL, 1, err);
}

#define LEGACY_BINARY "axis:int broadcast:int"
#define LEGACY_UNARY "consumed_inputs:ints"

/* An op unchanged since opset 1 but for `consumed_inputs` (dropped in 6). */
#define UNARY_1_6(NAME, FN) {NAME, 1, FN, LEGACY_UNARY}, {NAME, 6, FN, ""}
/* The same with attributes of its own. */
#define UNARY_ATTRS_1_6(NAME, FN, ATTRS)                                                          \
    {NAME, 1, FN, ATTRS " " LEGACY_UNARY}, {NAME, 6, FN, ATTRS}
/* A binary op whose legacy `broadcast` / `axis` attributes went in opset 7. */
#define BINARY_1_7(NAME, FN) {NAME, 1, FN, LEGACY_BINARY}, {NAME, 7, FN, ""}
/* The same, for the arithmetic that also had `consumed_inputs` until 6. */
#define ARITH_1_6_7(NAME, FN)                                                                     \
    {NAME, 1, FN, LEGACY_BINARY " " LEGACY_UNARY}, {NAME, 6, FN, LEGACY_BINARY},                  \
        {NAME, 7, FN, ""}

const onnx_converter onnx_elemwise_converters[] = {
    ARITH_1_6_7("Add", conv_add),
    ARITH_1_6_7("Sub", conv_sub),
    ARITH_1_6_7("Mul", conv_mul),
    ARITH_1_6_7("Div", conv_div),
    BINARY_1_7("Pow", conv_pow),
    {"Mod", 10, conv_mod, "fmod:int"},
    {"BitShift", 11, conv_bitshift, "direction:string"},
    {"PRelu", 1, conv_prelu6, LEGACY_UNARY},
    {"PRelu", 6, conv_prelu6, ""},
    {"PRelu", 7, conv_prelu, ""},
    BINARY_1_7("Equal", conv_equal),
    BINARY_1_7("Greater", conv_greater),
    BINARY_1_7("Less", conv_less),
    {"GreaterOrEqual", 12, conv_greaterorequal, ""},
    {"LessOrEqual", 12, conv_lessorequal, ""},
    BINARY_1_7("And", conv_and),
    BINARY_1_7("Or", conv_or),
    BINARY_1_7("Xor", conv_xor),
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
    UNARY_ATTRS_1_6("Elu", conv_elu, "alpha:float"),
    UNARY_ATTRS_1_6("Selu", conv_selu, "alpha:float gamma:float"),
    {"Celu", 12, conv_celu, "alpha:float"},
    UNARY_ATTRS_1_6("LeakyRelu", conv_leakyrelu, "alpha:float"),
    {"ThresholdedRelu", 10, conv_thresholdedrelu, "alpha:float"},
    {"Shrink", 9, conv_shrink, "bias:float lambd:float"},
    UNARY_ATTRS_1_6("HardSigmoid", conv_hardsigmoid, "alpha:float beta:float"),
    {"HardSwish", 14, conv_hardswish, ""},
    UNARY_ATTRS_1_6("Clip", conv_clip6, "min:float max:float"),
    {"Clip", 11, conv_clip11, ""},
    {NULL, 0, NULL, NULL},
};
