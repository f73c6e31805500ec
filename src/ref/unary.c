/* ref/unary.c: reference unary elementwise kernels.
 *
 * Float ops (activations, exp/log, trigonometric and hyperbolic functions,
 * rounding) map each element through a scalar function evaluated in double
 * (so one definition serves float32, float64 and float16, which is widened
 * exactly and rounded back to nearest-even) and stored in the input's dtype.
 * Abs, Neg, Sign, Relu and Clip also take integers, with typed loops per
 * signed/unsigned class: Abs and Neg of the most negative value wrap to
 * itself (two's complement) instead of overflowing. IsNaN / IsInf produce
 * bool; Not negates bool. Attribute defaults follow ONNX. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ref/elemwise_common.h"

/* ---- float ops: one scalar function each -------------------------------- */

typedef struct uparams {
    double a, b, c;
} uparams;

typedef double (*ufn)(double x, const uparams *p);

static kiln_status map_float(const kiln_tensor *const *in, kiln_tensor *const *out, ufn f,
                             const uparams *p, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    if (x->dtype != y->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s, output %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    int64_t count;
    kiln_status s = kiln_ew_check_same_numel(x, y, &count, err);
    if (s != KILN_OK)
        return s;
    switch (x->dtype) {
    case KILN_DTYPE_FLOAT32: {
        const float *a = x->data;
        float *o = y->data;
        for (int64_t i = 0; i < count; i++)
            o[i] = (float)f((double)a[i], p);
        return KILN_OK;
    }
    case KILN_DTYPE_FLOAT64: {
        const double *a = x->data;
        double *o = y->data;
        for (int64_t i = 0; i < count; i++)
            o[i] = f(a[i], p);
        return KILN_OK;
    }
    case KILN_DTYPE_FLOAT16: {
        const uint16_t *a = x->data;
        uint16_t *o = y->data;
        for (int64_t i = 0; i < count; i++)
            o[i] = kiln_f64_to_f16(f(kiln_f16_to_f64(a[i]), p));
        return KILN_OK;
    }
    default:
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input is %s, expected float32, float64 or float16",
                           kiln_dtype_name(x->dtype));
    }
}

static double f_relu(double x, const uparams *p)
{
    (void)p;
    return x < 0.0 ? 0.0 : x; /* NaN passes through */
}

static double f_clip(double x, const uparams *p)
{
    double v = x < p->a ? p->a : x;
    return v > p->b ? p->b : v;
}

static double f_sigmoid(double x, const uparams *p)
{
    (void)p;
    /* exp of a non-positive argument only: no overflow */
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static double f_hardsigmoid(double x, const uparams *p)
{
    return fmax(0.0, fmin(1.0, p->a * x + p->b));
}

static double f_hardswish(double x, const uparams *p)
{
    (void)p;
    return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
}

static double f_softplus(double x, const uparams *p)
{
    (void)p;
    /* log(1 + e^x) without overflow for large x */
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

#define SIMPLE(NAME, EXPR)                                                                        \
    static double NAME(double x, const uparams *p)                                                \
    {                                                                                             \
        (void)p;                                                                                  \
        return (EXPR);                                                                            \
    }

SIMPLE(f_erf, erf(x))
SIMPLE(f_sqrt, sqrt(x))
SIMPLE(f_exp, exp(x))
SIMPLE(f_log, log(x))
SIMPLE(f_tanh, tanh(x))
SIMPLE(f_sin, sin(x))
SIMPLE(f_cos, cos(x))
SIMPLE(f_tan, tan(x))
SIMPLE(f_asin, asin(x))
SIMPLE(f_acos, acos(x))
SIMPLE(f_atan, atan(x))
SIMPLE(f_sinh, sinh(x))
SIMPLE(f_cosh, cosh(x))
SIMPLE(f_asinh, asinh(x))
SIMPLE(f_acosh, acosh(x))
SIMPLE(f_atanh, atanh(x))
SIMPLE(f_softsign, x / (1.0 + fabs(x)))
SIMPLE(f_mish, x * tanh(f_softplus(x, p)))
SIMPLE(f_ceil, ceil(x))
SIMPLE(f_floor, floor(x))
SIMPLE(f_round, nearbyint(x)) /* default rounding mode: half to even */
SIMPLE(f_reciprocal, 1.0 / x)
SIMPLE(f_abs, fabs(x))
SIMPLE(f_neg, -x)
SIMPLE(f_sign, x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x) /* 0 and NaN pass through */

static double f_elu(double x, const uparams *p)
{
    return x < 0.0 ? p->a * expm1(x) : x;
}

static double f_selu(double x, const uparams *p)
{
    return x <= 0.0 ? p->b * (p->a * exp(x) - p->a) : p->b * x;
}

static double f_celu(double x, const uparams *p)
{
    return fmax(0.0, x) + fmin(0.0, p->a * expm1(x / p->a));
}

static double f_leakyrelu(double x, const uparams *p)
{
    return x < 0.0 ? p->a * x : x;
}

static double f_thresholdedrelu(double x, const uparams *p)
{
    return x > p->a ? x : 0.0;
}

static double f_shrink(double x, const uparams *p)
{
    /* a = bias, b = lambd */
    return x < -p->b ? x + p->a : x > p->b ? x - p->a : 0.0;
}

static double f_gelu(double x, const uparams *p)
{
    (void)p;
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double f_gelu_tanh(double x, const uparams *p)
{
    (void)p;
    const double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

/* ---- integer loops for Abs, Neg, Sign, Relu, Clip ------------------------ */

typedef enum int_kind { I_ABS, I_NEG, I_SIGN, I_RELU, I_CLIP } int_kind;

static kiln_status map_int(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, int_kind kind, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    int64_t count;
    kiln_status s = kiln_ew_check_same_numel(x, y, &count, err);
    if (s != KILN_OK)
        return s;
    /* Clip bounds in the integer domain: [ceil(min), floor(max)], saturated */
    double lo = kiln_attr_float(n, "min", -INFINITY), hi = kiln_attr_float(n, "max", INFINITY);
    int64_t lo_s = kiln_ew_sat_i64(ceil(lo)), hi_s = kiln_ew_sat_i64(floor(hi));
    uint64_t lo_u = kiln_ew_sat_u64(ceil(lo)), hi_u = kiln_ew_sat_u64(floor(hi));
    switch (x->dtype) {
#define SINT_CASE(D, T, U, MN, MX)                                                                \
    case D: {                                                                                     \
        const T *a = x->data;                                                                     \
        T *o = y->data;                                                                           \
        int64_t l = lo_s < (MN) ? (MN) : lo_s > (MX) ? (MX) : lo_s;                               \
        int64_t h = hi_s < (MN) ? (MN) : hi_s > (MX) ? (MX) : hi_s;                               \
        for (int64_t i = 0; i < count; i++) {                                                     \
            T v = a[i];                                                                           \
            switch (kind) {                                                                       \
            case I_ABS: o[i] = v < 0 ? (T)(0 - (U)v) : v; break;                                  \
            case I_NEG: o[i] = (T)(0 - (U)v); break;                                              \
            case I_SIGN: o[i] = (T)((v > 0) - (v < 0)); break;                                    \
            case I_RELU: o[i] = v < 0 ? 0 : v; break;                                             \
            case I_CLIP: o[i] = (T)(v < l ? l : v > h ? h : v); break;                            \
            }                                                                                     \
        }                                                                                         \
        return KILN_OK;                                                                           \
    }
        EW_SINT_TYPES(SINT_CASE)
#undef SINT_CASE
#define UINT_CASE(D, T, U, MN, MX)                                                                \
    case D: {                                                                                     \
        const T *a = x->data;                                                                     \
        T *o = y->data;                                                                           \
        uint64_t l = lo_u > (MX) ? (MX) : lo_u, h = hi_u > (MX) ? (MX) : hi_u;                    \
        for (int64_t i = 0; i < count; i++) {                                                     \
            T v = a[i];                                                                           \
            switch (kind) {                                                                       \
            case I_ABS:                                                                           \
            case I_RELU: o[i] = v; break;                                                         \
            case I_NEG: o[i] = (T)(0 - (U)v); break;                                              \
            case I_SIGN: o[i] = (T)(v > 0); break;                                                \
            case I_CLIP: o[i] = (T)(v < l ? l : v > h ? h : v); break;                            \
            }                                                                                     \
        }                                                                                         \
        return KILN_OK;                                                                           \
    }
        EW_UINT_TYPES(UINT_CASE)
#undef UINT_CASE
    default:
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s, expected a numeric type",
                           kiln_dtype_name(x->dtype));
    }
}

/* Float types through map_float, integers through map_int (when `ik` >= 0). */
static kiln_status unary(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, ufn f, const uparams *p, int ik,
                         kiln_error *err)
{
    if (in[0]->dtype != out[0]->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s, output %s",
                           kiln_dtype_name(in[0]->dtype), kiln_dtype_name(out[0]->dtype));
    if (ik >= 0 && !kiln_ew_is_float(in[0]->dtype))
        return map_int(n, in, out, (int_kind)ik, err);
    return map_float(in, out, f, p, err);
}

#define REF_UNARY(NAME, F, IK)                                                                    \
    kiln_status NAME(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,   \
                     kiln_error *err)                                                             \
    {                                                                                             \
        return unary(n, in, out, F, NULL, IK, err);                                               \
    }

REF_UNARY(kiln_ref_relu, f_relu, I_RELU)
REF_UNARY(kiln_ref_sigmoid, f_sigmoid, -1)
REF_UNARY(kiln_ref_hardswish, f_hardswish, -1)
REF_UNARY(kiln_ref_erf, f_erf, -1)
REF_UNARY(kiln_ref_sqrt, f_sqrt, -1)
REF_UNARY(kiln_ref_abs, f_abs, I_ABS)
REF_UNARY(kiln_ref_neg, f_neg, I_NEG)
REF_UNARY(kiln_ref_sign, f_sign, I_SIGN)
REF_UNARY(kiln_ref_exp, f_exp, -1)
REF_UNARY(kiln_ref_log, f_log, -1)
REF_UNARY(kiln_ref_tanh, f_tanh, -1)
REF_UNARY(kiln_ref_sin, f_sin, -1)
REF_UNARY(kiln_ref_cos, f_cos, -1)
REF_UNARY(kiln_ref_tan, f_tan, -1)
REF_UNARY(kiln_ref_asin, f_asin, -1)
REF_UNARY(kiln_ref_acos, f_acos, -1)
REF_UNARY(kiln_ref_atan, f_atan, -1)
REF_UNARY(kiln_ref_sinh, f_sinh, -1)
REF_UNARY(kiln_ref_cosh, f_cosh, -1)
REF_UNARY(kiln_ref_asinh, f_asinh, -1)
REF_UNARY(kiln_ref_acosh, f_acosh, -1)
REF_UNARY(kiln_ref_atanh, f_atanh, -1)
REF_UNARY(kiln_ref_softplus, f_softplus, -1)
REF_UNARY(kiln_ref_softsign, f_softsign, -1)
REF_UNARY(kiln_ref_mish, f_mish, -1)
REF_UNARY(kiln_ref_ceil, f_ceil, -1)
REF_UNARY(kiln_ref_floor, f_floor, -1)
REF_UNARY(kiln_ref_round, f_round, -1)
REF_UNARY(kiln_ref_reciprocal, f_reciprocal, -1)

/* Ops with attributes: parameters read once, then the same map. */
#define REF_UNARY_P(NAME, F, A, B, IK)                                                            \
    kiln_status NAME(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,   \
                     kiln_error *err)                                                             \
    {                                                                                             \
        uparams p = {A, B, 0.0};                                                                  \
        return unary(n, in, out, F, &p, IK, err);                                                 \
    }

REF_UNARY_P(kiln_ref_clip, f_clip, kiln_attr_float(n, "min", -INFINITY),
            kiln_attr_float(n, "max", INFINITY), I_CLIP)
REF_UNARY_P(kiln_ref_hardsigmoid, f_hardsigmoid, kiln_attr_float(n, "alpha", 0.2f),
            kiln_attr_float(n, "beta", 0.5f), -1)
REF_UNARY_P(kiln_ref_elu, f_elu, kiln_attr_float(n, "alpha", 1.0f), 0.0, -1)
REF_UNARY_P(kiln_ref_selu, f_selu, kiln_attr_float(n, "alpha", 1.67326319217681884765625f),
            kiln_attr_float(n, "gamma", 1.05070102214813232421875f), -1)
REF_UNARY_P(kiln_ref_celu, f_celu, kiln_attr_float(n, "alpha", 1.0f), 0.0, -1)
REF_UNARY_P(kiln_ref_leakyrelu, f_leakyrelu, kiln_attr_float(n, "alpha", 0.01f), 0.0, -1)
REF_UNARY_P(kiln_ref_thresholdedrelu, f_thresholdedrelu, kiln_attr_float(n, "alpha", 1.0f), 0.0,
            -1)
REF_UNARY_P(kiln_ref_shrink, f_shrink, kiln_attr_float(n, "bias", 0.0f),
            kiln_attr_float(n, "lambd", 0.5f), -1)

kiln_status kiln_ref_gelu(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const char *approx = kiln_attr_string(n, "approximate", "none");
    return unary(n, in, out, strcmp(approx, "tanh") == 0 ? f_gelu_tanh : f_gelu, NULL, -1, err);
}

/* ---- to bool ------------------------------------------------------------- */

static kiln_status classify(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, bool is_inf, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    if (y->dtype != KILN_DTYPE_BOOL || !kiln_ew_is_float(x->dtype))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "expected float -> bool, got %s -> %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    int64_t count;
    kiln_status s = kiln_ew_check_same_numel(x, y, &count, err);
    if (s != KILN_OK)
        return s;
    bool neg = kiln_attr_int(n, "detect_negative", 1) != 0;
    bool pos = kiln_attr_int(n, "detect_positive", 1) != 0;
    uint8_t *o = y->data;
    for (int64_t i = 0; i < count; i++) {
        double v = kiln_ew_load_f64(x->dtype, x->data, i);
        if (is_inf)
            o[i] = isinf(v) && (v > 0 ? pos : neg);
        else
            o[i] = isnan(v) != 0;
    }
    return KILN_OK;
}

kiln_status kiln_ref_isnan(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    return classify(n, in, out, false, err);
}

kiln_status kiln_ref_isinf(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    return classify(n, in, out, true, err);
}

kiln_status kiln_ref_not(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    if (x->dtype != KILN_DTYPE_BOOL || y->dtype != KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "expected bool -> bool, got %s -> %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    int64_t count;
    kiln_status s = kiln_ew_check_same_numel(x, y, &count, err);
    if (s != KILN_OK)
        return s;
    const uint8_t *a = x->data;
    uint8_t *o = y->data;
    for (int64_t i = 0; i < count; i++)
        o[i] = a[i] == 0;
    return KILN_OK;
}
