/* ref/elemwise.c: reference broadcasting arithmetic: Add, Sub, Mul, Div, Mod,
 * PRelu, BitShift, Pow, and the variadic Min, Max, Sum, Mean.
 *
 * Binary ops walk the output in rows of its innermost coalesced dimension
 * (ir/broadcast.h): an index counter over the outer dims updates both operand
 * offsets, and the inner loop reads each operand with a constant stride (0
 * when broadcast), so no per-element div/mod is needed. One typed loop per
 * dtype class (signed, unsigned, float), expanded for each member type
 * (ref/elemwise_common.h); float16 runs in float32 and is rounded back.
 *
 * Integers: Add/Sub/Mul wrap around (two's complement, through the unsigned
 * type) instead of overflowing; Div truncates toward zero and INT_MIN / -1
 * wraps to INT_MIN; Mod with fmod=0 takes the divisor's sign (Python's %),
 * with fmod=1 the dividend's (C's %); a zero divisor in Div or Mod is an
 * error reported before anything is computed. Float Mod: fmod, or with
 * fmod=0 fmod shifted by the divisor when the signs differ.
 *
 * Pow reads both operands as double (integers: exact integer power by
 * squaring when both are integers, wrapping) and stores in the base's dtype.
 * The variadic ops copy input 0 broadcast into the output, then fold each
 * further input into it in place (output as operand 0 of the binary walk). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ref/elemwise_common.h"

typedef enum binary_kind {
    B_ADD,
    B_SUB,
    B_MUL,
    B_DIV,
    B_MOD,   /* Python-style (fmod=0) */
    B_FMOD,  /* C-style (fmod=1) */
    B_PRELU,
    B_SHL,
    B_SHR,
    B_MIN,
    B_MAX,
} binary_kind;

/* Wrapping integer arithmetic through the unsigned type U. */
#define WRAP(T, U, X, OP, Y) ((T)((U)(X)OP(U)(Y)))

static inline int64_t pymod_i64(int64_t x, int64_t y)
{
    if (y == -1)
        return 0; /* also avoids INT64_MIN % -1 */
    int64_t r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

static inline double pymod_f64(double x, double y)
{
    double r = fmod(x, y);
    return (r != 0.0 && ((r < 0.0) != (y < 0.0))) ? r + y : r;
}

/* Any zero element in an integer divisor tensor. */
static kiln_status check_divisor(const kiln_tensor *b, kiln_error *err)
{
    int64_t count = kiln_shape_numel(&b->shape);
    for (int64_t i = 0; i < count; i++)
        if (kiln_ew_load_i64(b->dtype, b->data, i) == 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "integer division by zero (divisor element %lld)", (long long)i);
    return KILN_OK;
}

/* o = a (op) b for a, b, o of one dtype; `bc` initialised on them. */
static kiln_status binary_walk(const kiln_tensor *a, const kiln_tensor *b, kiln_tensor *o,
                               binary_kind kind, kiln_bcast bc, kiln_error *err)
{
    if ((kind == B_DIV || kind == B_MOD || kind == B_FMOD) && !kiln_ew_is_float(a->dtype) &&
        bc.rows > 0) {
        kiln_status s = check_divisor(b, err);
        if (s != KILN_OK)
            return s;
    }
    switch (a->dtype) {
#define SINT_CASE(D, T, U, MN, MX)                                                                \
    case D:                                                                                       \
        switch (kind) {                                                                           \
        case B_ADD: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, +, y)); break;                            \
        case B_SUB: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, -, y)); break;                            \
        case B_MUL: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, *, y)); break;                            \
        case B_DIV: EW_BCAST_MAP(T, T, T, y == -1 ? (T)(0 - (U)x) : (T)(x / y)); break;           \
        case B_MOD: EW_BCAST_MAP(T, T, T, pymod_i64(x, y)); break;                                \
        case B_FMOD: EW_BCAST_MAP(T, T, T, y == -1 ? 0 : x % y); break;                           \
        case B_PRELU: EW_BCAST_MAP(T, T, T, x < 0 ? WRAP(T, U, x, *, y) : x); break;              \
        case B_MIN: EW_BCAST_MAP(T, T, T, y < x ? y : x); break;                                  \
        case B_MAX: EW_BCAST_MAP(T, T, T, y > x ? y : x); break;                                  \
        default: goto bad_kind;                                                                   \
        }                                                                                         \
        return KILN_OK;
        EW_SINT_TYPES(SINT_CASE)
#undef SINT_CASE
#define UINT_CASE(D, T, U, MN, MX)                                                                \
    case D:                                                                                       \
        switch (kind) {                                                                           \
        case B_ADD: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, +, y)); break;                            \
        case B_SUB: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, -, y)); break;                            \
        case B_MUL: EW_BCAST_MAP(T, T, T, WRAP(T, U, x, *, y)); break;                            \
        case B_DIV: EW_BCAST_MAP(T, T, T, x / y); break;                                          \
        case B_MOD:                                                                               \
        case B_FMOD: EW_BCAST_MAP(T, T, T, x % y); break;                                         \
        case B_PRELU: EW_BCAST_MAP(T, T, T, x); break;                                            \
        case B_SHL: EW_BCAST_MAP(T, T, T, y >= sizeof(T) * 8 ? 0 : (U)x << y); break;             \
        case B_SHR: EW_BCAST_MAP(T, T, T, y >= sizeof(T) * 8 ? 0 : x >> y); break;                \
        case B_MIN: EW_BCAST_MAP(T, T, T, y < x ? y : x); break;                                  \
        case B_MAX: EW_BCAST_MAP(T, T, T, y > x ? y : x); break;                                  \
        }                                                                                         \
        return KILN_OK;
        EW_UINT_TYPES(UINT_CASE)
#undef UINT_CASE
    /* Min/Max propagate NaN from either side (numpy's minimum/maximum) */
#define FLOAT_CASE(D, T, U, MN, MX)                                                               \
    case D:                                                                                       \
        switch (kind) {                                                                           \
        case B_ADD: EW_BCAST_MAP(T, T, T, x + y); break;                                          \
        case B_SUB: EW_BCAST_MAP(T, T, T, x - y); break;                                          \
        case B_MUL: EW_BCAST_MAP(T, T, T, x * y); break;                                          \
        case B_DIV: EW_BCAST_MAP(T, T, T, x / y); break;                                          \
        case B_MOD: EW_BCAST_MAP(T, T, T, pymod_f64(x, y)); break;                                \
        case B_FMOD: EW_BCAST_MAP(T, T, T, fmod(x, y)); break;                                    \
        case B_PRELU: EW_BCAST_MAP(T, T, T, x < 0 ? x * y : x); break;                            \
        case B_MIN: EW_BCAST_MAP(T, T, T, (y < x || y != y) ? y : x); break;                      \
        case B_MAX: EW_BCAST_MAP(T, T, T, (y > x || y != y) ? y : x); break;                      \
        default: goto bad_kind;                                                                   \
        }                                                                                         \
        return KILN_OK;
        EW_FLOAT_TYPES(FLOAT_CASE)
#undef FLOAT_CASE
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s inputs are not supported",
                           kiln_dtype_name(a->dtype));
    }
bad_kind:
    return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "bit shifts need unsigned integers, got %s",
                       kiln_dtype_name(a->dtype));
}

static kiln_status binary(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, binary_kind kind, kiln_error *err)
{
    const kiln_tensor *a = in[0], *b = in[1];
    kiln_tensor *o = out[0];
    kiln_status s = kiln_ew_check_bcast(in, 2, o, err);
    if (s != KILN_OK)
        return s;
    if (a->dtype != b->dtype || o->dtype != a->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "inputs are %s and %s, output %s",
                           kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype),
                           kiln_dtype_name(o->dtype));
    const kiln_shape *shapes[2] = {&a->shape, &b->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &o->shape, shapes, 2);
    (void)n;
    return binary_walk(a, b, o, kind, bc, err);
}

#define REF_BINARY(NAME, KIND) KILN_EW_KERNEL(NAME, binary(n, in, out, KIND, err))

REF_BINARY(kiln_ref_add, B_ADD)
REF_BINARY(kiln_ref_sub, B_SUB)
REF_BINARY(kiln_ref_mul, B_MUL)
REF_BINARY(kiln_ref_div, B_DIV)
REF_BINARY(kiln_ref_prelu, B_PRELU)

static kiln_status mod_f32(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    return binary(n, in, out, kiln_attr_int(n, "fmod", 0) ? B_FMOD : B_MOD, err);
}

kiln_status kiln_ref_mod(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    if (kiln_ew_has_f16(n, in, out))
        return kiln_ew_via_f32(mod_f32, n, in, out, err);
    return mod_f32(n, in, out, err);
}

kiln_status kiln_ref_bitshift(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    const char *dir = kiln_attr_string(n, "direction", "");
    binary_kind kind;
    if (strcmp(dir, "LEFT") == 0)
        kind = B_SHL;
    else if (strcmp(dir, "RIGHT") == 0)
        kind = B_SHR;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'direction' is '%s', expected LEFT or RIGHT", dir);
    return binary(n, in, out, kind, err);
}

/* ---- Pow ----------------------------------------------------------------- */

/* x^y for integers, wrapping; a negative exponent gives 1/x^|y| truncated. */
static int64_t ipow(int64_t x, int64_t y)
{
    if (y < 0)
        return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    uint64_t e = (uint64_t)y;
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

kiln_status kiln_ref_pow(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_tensor *a = in[0], *b = in[1];
    kiln_tensor *o = out[0];
    kiln_status s = kiln_ew_check_bcast(in, 2, o, err);
    if (s != KILN_OK)
        return s;
    if (o->dtype != a->dtype || a->dtype == KILN_DTYPE_BOOL || b->dtype == KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "base %s, exponent %s, output %s",
                           kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype),
                           kiln_dtype_name(o->dtype));
    const kiln_shape *shapes[2] = {&a->shape, &b->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &o->shape, shapes, 2);
    if (a->dtype == KILN_DTYPE_FLOAT32 && b->dtype == KILN_DTYPE_FLOAT32) {
        EW_BCAST_MAP(float, float, float, powf(x, y));
        return KILN_OK;
    }
    bool int_base = !kiln_ew_is_float(a->dtype), int_exp = !kiln_ew_is_float(b->dtype);
    if (int_base && int_exp) {
        bool uexp = b->dtype == KILN_DTYPE_UINT64;
        EW_BCAST_INDEX({
            int64_t y = kiln_ew_load_i64(b->dtype, b->data, ib);
            if (uexp && y < 0)
                y = INT64_MAX; /* a huge unsigned exponent */
            kiln_ew_store_i64(o->dtype, o->data, io,
                              ipow(kiln_ew_load_i64(a->dtype, a->data, ia), y));
        });
        return KILN_OK;
    }
    EW_BCAST_INDEX({
        double x = kiln_ew_load_f64(a->dtype, a->data, ia);
        double y = kiln_ew_load_f64(b->dtype, b->data, ib);
        kiln_ew_store_f64(o->dtype, o->data, io, pow(x, y));
    });
    return KILN_OK;
}

/* ---- variadic Min, Max, Sum, Mean ---------------------------------------- */

static kiln_status variadic(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, binary_kind kind, bool mean, kiln_error *err)
{
    int n_in = n->n_inputs;
    kiln_tensor *o = out[0];
    if (n_in < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "no inputs");
    for (int i = 0; i < n_in; i++) {
        if (!in[i])
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "input %d is missing", i);
        if (in[i]->dtype != o->dtype)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d is %s, output %s", i,
                               kiln_dtype_name(in[i]->dtype), kiln_dtype_name(o->dtype));
    }
    kiln_status s = kiln_ew_check_bcast(in, n_in, o, err);
    if (s != KILN_OK)
        return s;
    /* o = input 0 broadcast: a walk with the output as a dummy operand 0 */
    size_t es = kiln_dtype_size(o->dtype);
    {
        const kiln_shape *shapes[2] = {&o->shape, &in[0]->shape};
        kiln_bcast bc;
        kiln_bcast_init(&bc, &o->shape, shapes, 2);
        const char *src = in[0]->data;
        char *dst = o->data;
        EW_BCAST_INDEX(memcpy(dst + io * es, src + ib * es, es); (void)ia);
    }
    for (int k = 1; k < n_in; k++) {
        const kiln_shape *shapes[2] = {&o->shape, &in[k]->shape};
        kiln_bcast bc;
        kiln_bcast_init(&bc, &o->shape, shapes, 2);
        s = binary_walk(o, in[k], o, kind, bc, err);
        if (s != KILN_OK)
            return s;
    }
    if (mean) {
        int64_t count = kiln_shape_numel(&o->shape);
        switch (o->dtype) {
        case KILN_DTYPE_FLOAT32:
            for (int64_t i = 0; i < count; i++)
                ((float *)o->data)[i] /= (float)n_in;
            break;
        case KILN_DTYPE_FLOAT64:
            for (int64_t i = 0; i < count; i++)
                ((double *)o->data)[i] /= (double)n_in;
            break;
        default:
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "Mean of %s: float types only",
                               kiln_dtype_name(o->dtype));
        }
    }
    return KILN_OK;
}

#define REF_VARIADIC(NAME, KIND, MEAN) KILN_EW_KERNEL(NAME, variadic(n, in, out, KIND, MEAN, err))

REF_VARIADIC(kiln_ref_min, B_MIN, false)
REF_VARIADIC(kiln_ref_max, B_MAX, false)
REF_VARIADIC(kiln_ref_sum, B_ADD, false)
REF_VARIADIC(kiln_ref_mean, B_ADD, true)
