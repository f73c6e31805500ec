/* ref/elemwise.c: reference unary and broadcasting binary ops.
 *
 * Unary ops (float32) map each element through a scalar function. Binary ops
 * walk the output in rows of its innermost coalesced dimension (ir/broadcast.h):
 * an index counter over the outer dims updates both operand offsets, and the
 * inner loop reads each operand with a constant stride (0 when broadcast), so
 * no per-element div/mod is needed. Integer Add/Sub/Mul wrap around (two's
 * complement) instead of overflowing; integer Div truncates toward zero,
 * INT_MIN / -1 wraps to INT_MIN, and a zero divisor is an error reported
 * before anything is computed. */
#include <math.h>
#include <stdint.h>

#include "ir/broadcast.h"
#include "ref/ref.h"

/* ---- unary ---------------------------------------------------------------- */

typedef enum unary_kind { U_RELU, U_CLIP, U_SIGMOID, U_HARDSIGMOID, U_HARDSWISH, U_ERF, U_SQRT } unary_kind;

static kiln_status unary(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,
                         unary_kind kind, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    if (x->dtype != KILN_DTYPE_FLOAT32 || y->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "expected float32, got %s -> %s",
                           kiln_dtype_name(x->dtype),
                           kiln_dtype_name(y->dtype));
    int64_t count = kiln_shape_numel(&x->shape);
    if (count < 0 || count != kiln_shape_numel(&y->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input and output sizes differ");
    const float *a = x->data;
    float *o = y->data;
    switch (kind) {
    case U_RELU:
        for (int64_t i = 0; i < count; i++)
            o[i] = a[i] < 0.0f ? 0.0f : a[i]; /* NaN passes through */
        break;
    case U_CLIP: {
        float lo = kiln_attr_float(n, "min", -INFINITY);
        float hi = kiln_attr_float(n, "max", INFINITY);
        for (int64_t i = 0; i < count; i++) {
            float v = a[i] < lo ? lo : a[i];
            o[i] = v > hi ? hi : v;
        }
        break;
    }
    case U_SIGMOID:
        for (int64_t i = 0; i < count; i++) {
            /* exp of a non-positive argument only: no overflow */
            if (a[i] >= 0.0f) {
                o[i] = 1.0f / (1.0f + expf(-a[i]));
            } else {
                float e = expf(a[i]);
                o[i] = e / (1.0f + e);
            }
        }
        break;
    case U_HARDSIGMOID: {
        float alpha = kiln_attr_float(n, "alpha", 0.2f);
        float beta = kiln_attr_float(n, "beta", 0.5f);
        for (int64_t i = 0; i < count; i++)
            o[i] = fmaxf(0.0f, fminf(1.0f, alpha * a[i] + beta));
        break;
    }
    case U_HARDSWISH:
        for (int64_t i = 0; i < count; i++)
            o[i] = a[i] * fmaxf(0.0f, fminf(1.0f, a[i] / 6.0f + 0.5f));
        break;
    case U_ERF:
        for (int64_t i = 0; i < count; i++)
            o[i] = erff(a[i]);
        break;
    case U_SQRT:
        for (int64_t i = 0; i < count; i++)
            o[i] = sqrtf(a[i]);
        break;
    }
    return KILN_OK;
}

kiln_status kiln_ref_relu(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_RELU, err);
}

kiln_status kiln_ref_clip(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_CLIP, err);
}

kiln_status kiln_ref_sigmoid(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_SIGMOID, err);
}

kiln_status kiln_ref_hardsigmoid(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_HARDSIGMOID, err);
}

kiln_status kiln_ref_hardswish(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_HARDSWISH, err);
}

kiln_status kiln_ref_erf(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_ERF, err);
}

kiln_status kiln_ref_sqrt(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    return unary(n, in, out, U_SQRT, err);
}

/* ---- binary --------------------------------------------------------------- */

typedef enum binary_kind { B_ADD, B_SUB, B_MUL, B_DIV, B_POW } binary_kind;

/* The broadcast walk: for every output row, `BODY` runs with `ra`, `rb` (the
 * operand row bases), `sa`, `sb` (their inner strides), `ro` (the output row)
 * and `inner` in scope. */
#define BCAST_ROWS(TA, TB, TO, BODY)                                                              \
    do {                                                                                          \
        const TA *pa_ = a->data;                                                                  \
        const TB *pb_ = b->data;                                                                  \
        TO *po_ = o->data;                                                                        \
        int64_t idx_[KILN_MAX_RANK] = {0}, off_[KILN_BCAST_MAX_OPS] = {0};                        \
        const int64_t sa = bc.inner_stride[0], sb = bc.inner_stride[1], inner = bc.inner;         \
        for (int64_t r_ = 0; r_ < bc.rows; r_++) {                                                \
            const TA *ra = pa_ + off_[0];                                                         \
            const TB *rb = pb_ + off_[1];                                                         \
            TO *ro = po_ + r_ * inner;                                                            \
            BODY;                                                                                 \
            kiln_bcast_next_row(&bc, idx_, off_);                                                 \
        }                                                                                         \
    } while (0)

/* out[i] = EXPR(x, y) over the broadcast walk. */
#define BCAST_MAP(TA, TB, TO, EXPR)                                                               \
    BCAST_ROWS(TA, TB, TO, for (int64_t i_ = 0; i_ < inner; i_++) {                               \
        TA x = ra[i_ * sa];                                                                       \
        TB y = rb[i_ * sb];                                                                       \
        ro[i_] = (TO)(EXPR);                                                                      \
    })

/* Wrapping integer arithmetic through the unsigned type of the same width. */
#define WRAP(T, U, X, OP, Y) ((T)((U)(X)OP(U)(Y)))
/* Truncating division with INT_MIN / -1 wrapping; y != 0. */
#define IDIV(T, U, X, Y) ((Y) == -1 ? (T)(0 - (U)(X)) : (T)((X) / (Y)))

static kiln_status int_div_check(const kiln_tensor *b, kiln_error *err)
{
    int64_t count = kiln_shape_numel(&b->shape);
    for (int64_t i = 0; i < count; i++) {
        int64_t v = b->dtype == KILN_DTYPE_INT32 ? ((const int32_t *)b->data)[i]
                                                 : ((const int64_t *)b->data)[i];
        if (v == 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "integer division by zero (divisor element %lld)", (long long)i);
    }
    return KILN_OK;
}

static kiln_status binary(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, binary_kind kind, kiln_error *err)
{
    (void)n;
    const kiln_tensor *a = in[0], *b = in[1];
    kiln_tensor *o = out[0];
    kiln_shape shape;
    kiln_status s = kiln_broadcast_shape(&a->shape, &b->shape, &shape, err);
    if (s != KILN_OK)
        return s;
    if (!kiln_shape_equal(&shape, &o->shape)) {
        kiln_shape_buf x, y;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output is %s, expected %s",
                           kiln_shape_fmt(&o->shape, &x), kiln_shape_fmt(&shape, &y));
    }
    if (o->dtype != a->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "output is %s, input 0 is %s",
                           kiln_dtype_name(o->dtype), kiln_dtype_name(a->dtype));
    const kiln_shape *shapes[2] = {&a->shape, &b->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &o->shape, shapes, 2);

    if (kind == B_POW) {
        if (a->dtype != KILN_DTYPE_FLOAT32)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "base is %s, only float32 supported",
                               kiln_dtype_name(a->dtype));
        switch (b->dtype) {
        case KILN_DTYPE_FLOAT32:
            BCAST_MAP(float, float, float, powf(x, y));
            return KILN_OK;
        case KILN_DTYPE_INT32:
            BCAST_MAP(float, int32_t, float, pow((double)x, (double)y));
            return KILN_OK;
        case KILN_DTYPE_INT64:
            BCAST_MAP(float, int64_t, float, pow((double)x, (double)y));
            return KILN_OK;
        default:
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "exponent is %s, expected float32, int32 or int64",
                               kiln_dtype_name(b->dtype));
        }
    }
    if (a->dtype != b->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "inputs are %s and %s",
                           kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype));
    if (kind == B_DIV && (a->dtype == KILN_DTYPE_INT32 || a->dtype == KILN_DTYPE_INT64) &&
        bc.rows > 0) {
        s = int_div_check(b, err);
        if (s != KILN_OK)
            return s;
    }
    switch (a->dtype) {
    case KILN_DTYPE_FLOAT32:
        switch (kind) {
        case B_ADD: BCAST_MAP(float, float, float, x + y); break;
        case B_SUB: BCAST_MAP(float, float, float, x - y); break;
        case B_MUL: BCAST_MAP(float, float, float, x * y); break;
        default: BCAST_MAP(float, float, float, x / y); break;
        }
        return KILN_OK;
    case KILN_DTYPE_INT32:
        switch (kind) {
        case B_ADD: BCAST_MAP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, x, +, y)); break;
        case B_SUB: BCAST_MAP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, x, -, y)); break;
        case B_MUL: BCAST_MAP(int32_t, int32_t, int32_t, WRAP(int32_t, uint32_t, x, *, y)); break;
        default: BCAST_MAP(int32_t, int32_t, int32_t, IDIV(int32_t, uint32_t, x, y)); break;
        }
        return KILN_OK;
    case KILN_DTYPE_INT64:
        switch (kind) {
        case B_ADD: BCAST_MAP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, x, +, y)); break;
        case B_SUB: BCAST_MAP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, x, -, y)); break;
        case B_MUL: BCAST_MAP(int64_t, int64_t, int64_t, WRAP(int64_t, uint64_t, x, *, y)); break;
        default: BCAST_MAP(int64_t, int64_t, int64_t, IDIV(int64_t, uint64_t, x, y)); break;
        }
        return KILN_OK;
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s inputs are not supported",
                           kiln_dtype_name(a->dtype));
    }
}

kiln_status kiln_ref_add(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, B_ADD, err);
}

kiln_status kiln_ref_sub(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, B_SUB, err);
}

kiln_status kiln_ref_mul(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, B_MUL, err);
}

kiln_status kiln_ref_div(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, B_DIV, err);
}

kiln_status kiln_ref_pow(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, B_POW, err);
}
