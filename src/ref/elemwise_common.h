/* ref/elemwise_common.h: helpers shared by the elementwise reference kernels
 * (ref/elemwise.c, ref/unary.c, ref/compare.c).
 *
 * - X-macro lists of the C types behind kiln's dtypes, so that a kernel writes
 *   one typed loop per class (signed ints, unsigned ints, floats) and expands
 *   it for every member: X(DTYPE, T, U, MIN, MAX) where U is the unsigned type
 *   wrapping arithmetic goes through (at least 32 bits, so that uint16 * uint16
 *   never overflows int) and MIN/MAX are T's limits.
 * - Element access as double / int64 / uint64 for any dtype (Cast, Pow).
 * - float16: kernels that compute in float32 call kiln_ew_via_f32, which runs
 *   the kernel on float32 copies of every float16 operand and rounds the
 *   float32 results back (util/half.h).
 * - The output check every broadcasting kernel starts with.
 */
#ifndef KILN_REF_ELEMWISE_COMMON_H
#define KILN_REF_ELEMWISE_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ir/broadcast.h"
#include "ref/ref.h"
#include "util/half.h"

#define EW_SINT_TYPES(X)                                                                          \
    X(KILN_DTYPE_INT8, int8_t, uint32_t, INT8_MIN, INT8_MAX)                                      \
    X(KILN_DTYPE_INT16, int16_t, uint32_t, INT16_MIN, INT16_MAX)                                  \
    X(KILN_DTYPE_INT32, int32_t, uint32_t, INT32_MIN, INT32_MAX)                                  \
    X(KILN_DTYPE_INT64, int64_t, uint64_t, INT64_MIN, INT64_MAX)

#define EW_UINT_TYPES(X)                                                                          \
    X(KILN_DTYPE_UINT8, uint8_t, uint32_t, 0, UINT8_MAX)                                          \
    X(KILN_DTYPE_UINT16, uint16_t, uint32_t, 0, UINT16_MAX)                                       \
    X(KILN_DTYPE_UINT32, uint32_t, uint32_t, 0, UINT32_MAX)                                       \
    X(KILN_DTYPE_UINT64, uint64_t, uint64_t, 0, UINT64_MAX)

/* float16 is not listed: kernels reach it through kiln_ew_via_f32. */
#define EW_FLOAT_TYPES(X)                                                                         \
    X(KILN_DTYPE_FLOAT32, float, float, -INFINITY, INFINITY)                                      \
    X(KILN_DTYPE_FLOAT64, double, double, -INFINITY, INFINITY)

static inline bool kiln_ew_is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}

static inline bool kiln_ew_is_sint(kiln_dtype t)
{
    return t == KILN_DTYPE_INT8 || t == KILN_DTYPE_INT16 || t == KILN_DTYPE_INT32 ||
           t == KILN_DTYPE_INT64;
}

static inline bool kiln_ew_is_uint(kiln_dtype t)
{
    return t == KILN_DTYPE_UINT8 || t == KILN_DTYPE_UINT16 || t == KILN_DTYPE_UINT32 ||
           t == KILN_DTYPE_UINT64;
}

/* double -> int64 / uint64, saturating, NaN -> 0, truncating toward zero. */
static inline int64_t kiln_ew_sat_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t kiln_ew_sat_u64(double v)
{
    if (v != v || v <= 0.0)
        return 0;
    if (v >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

/* Element i of `data` (dtype t) as double (exact for every dtype but 64-bit
 * integers beyond 2^53). bool reads as 0/1. */
double kiln_ew_load_f64(kiln_dtype t, const void *data, int64_t i);
/* Element i of an integer or bool tensor as int64 (uint64 keeps its bits). */
int64_t kiln_ew_load_i64(kiln_dtype t, const void *data, int64_t i);
/* Stores v (a float value) into element i: rounded for floats, truncated
 * toward zero and saturated at the type's limits for integers (NaN -> 0),
 * v != 0 for bool. */
void kiln_ew_store_f64(kiln_dtype t, void *data, int64_t i, double v);
/* Stores the low bits of v into integer element i (modular, like a C cast). */
void kiln_ew_store_i64(kiln_dtype t, void *data, int64_t i, int64_t v);

/* Whether any present input or output is float16. */
bool kiln_ew_has_f16(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out);

/* Runs `fn` with every float16 input and output replaced by a float32 copy,
 * then rounds the float32 outputs back into the float16 ones. */
kiln_status kiln_ew_via_f32(kiln_ref_fn fn, const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err);

/* Defines the kernel NAME as CALL (an expression over n, in, out, err), run
 * through float32 copies when a tensor is float16 (kiln_ew_via_f32). */
#define KILN_EW_KERNEL(NAME, CALL)                                                                \
    static kiln_status NAME##_f32(const kiln_node *n, const kiln_tensor *const *in,               \
                                  kiln_tensor *const *out, kiln_error *err)                       \
    {                                                                                             \
        return CALL;                                                                              \
    }                                                                                             \
    kiln_status NAME(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,   \
                     kiln_error *err)                                                             \
    {                                                                                             \
        if (kiln_ew_has_f16(n, in, out))                                                          \
            return kiln_ew_via_f32(NAME##_f32, n, in, out, err);                                  \
        return CALL;                                                                              \
    }

/* Checks that the output of a broadcasting op over `in[0..n_in)` has their
 * broadcast shape (and that every input broadcasts to it). */
kiln_status kiln_ew_check_bcast(const kiln_tensor *const *in, int n_in, const kiln_tensor *o,
                                kiln_error *err);

/* Checks that x and y hold the same number of elements; *count gets it. */
kiln_status kiln_ew_check_same_numel(const kiln_tensor *x, const kiln_tensor *y, int64_t *count,
                                     kiln_error *err);

/* The broadcast walk over output `o` with two operands a, b (kiln_bcast
 * `bc` initialised on them): for every output row, BODY runs with `ra`, `rb`
 * (operand row bases), `sa`, `sb` (their inner strides), `ro` (output row)
 * and `inner` in scope. */
#define EW_BCAST_ROWS(TA, TB, TO, BODY)                                                           \
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

/* o[i] = EXPR(x, y) over the broadcast walk (x from a, y from b). */
#define EW_BCAST_MAP(TA, TB, TO, EXPR)                                                            \
    EW_BCAST_ROWS(TA, TB, TO, for (int64_t i_ = 0; i_ < inner; i_++) {                            \
        TA x = ra[i_ * sa];                                                                       \
        TB y = rb[i_ * sb];                                                                       \
        (void)x;                                                                                  \
        (void)y;                                                                                  \
        ro[i_] = (TO)(EXPR);                                                                      \
    })

/* The same walk with element indices: BODY sees `ia`, `ib`, `io`. */
#define EW_BCAST_INDEX(BODY)                                                                      \
    do {                                                                                          \
        int64_t idx_[KILN_MAX_RANK] = {0}, off_[KILN_BCAST_MAX_OPS] = {0};                        \
        for (int64_t r_ = 0; r_ < bc.rows; r_++) {                                                \
            for (int64_t i_ = 0; i_ < bc.inner; i_++) {                                           \
                const int64_t ia = off_[0] + i_ * bc.inner_stride[0];                             \
                const int64_t ib = off_[1] + i_ * bc.inner_stride[1];                             \
                const int64_t io = r_ * bc.inner + i_;                                            \
                BODY;                                                                             \
            }                                                                                     \
            kiln_bcast_next_row(&bc, idx_, off_);                                                 \
        }                                                                                         \
    } while (0)

#endif
