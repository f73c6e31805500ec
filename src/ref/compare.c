/* ref/compare.c: reference comparisons (Equal, Greater, Less, GreaterOrEqual,
 * LessOrEqual -> bool), logic (And, Or, Xor on bool), Where and Cast.
 *
 * Comparisons and logic walk the broadcast output row by row like the
 * arithmetic kernels (ref/elemwise.c), one typed loop per dtype; float16
 * operands are compared in float32 (exact). Any comparison with NaN is false
 * except "not equal", which kiln does not have. bool is one byte, any nonzero
 * byte reads as true, and results are 0/1.
 *
 * Where only moves elements, so it dispatches on the element size alone; its
 * three operands broadcast together (a three-operand kiln_bcast walk).
 *
 * Cast converts element by element: from a float type through double (to an
 * integer: truncation toward zero, saturated at the type's limits, NaN -> 0;
 * to float16: round to nearest even), from an integer through int64 (to an
 * integer: the low bits, like a C cast; unsigned 64-bit values keep their
 * magnitude on the way to a float); to bool: x != 0. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ref/elemwise_common.h"

typedef enum cmp_kind { C_EQ, C_GT, C_LT, C_GE, C_LE, L_AND, L_OR, L_XOR } cmp_kind;

#define CMP_SWITCH(T)                                                                             \
    switch (kind) {                                                                               \
    case C_EQ: EW_BCAST_MAP(T, T, uint8_t, x == y); break;                                        \
    case C_GT: EW_BCAST_MAP(T, T, uint8_t, x > y); break;                                         \
    case C_LT: EW_BCAST_MAP(T, T, uint8_t, x < y); break;                                         \
    case C_GE: EW_BCAST_MAP(T, T, uint8_t, x >= y); break;                                        \
    case C_LE: EW_BCAST_MAP(T, T, uint8_t, x <= y); break;                                        \
    default: break;                                                                               \
    }

static kiln_status compare(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, cmp_kind kind, kiln_error *err)
{
    (void)n;
    const kiln_tensor *a = in[0], *b = in[1];
    kiln_tensor *o = out[0];
    kiln_status s = kiln_ew_check_bcast(in, 2, o, err);
    if (s != KILN_OK)
        return s;
    if (a->dtype != b->dtype || o->dtype != KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "inputs are %s and %s, output %s",
                           kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype),
                           kiln_dtype_name(o->dtype));
    const kiln_shape *shapes[2] = {&a->shape, &b->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &o->shape, shapes, 2);
    if (kind >= L_AND) {
        if (a->dtype != KILN_DTYPE_BOOL)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "logic ops take bool, got %s",
                               kiln_dtype_name(a->dtype));
        switch (kind) {
        case L_AND: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0)); break;
        case L_OR: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0)); break;
        default: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) ^ (y != 0)); break;
        }
        return KILN_OK;
    }
    switch (a->dtype) {
    case KILN_DTYPE_BOOL:
        switch (kind) {
        case C_EQ: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0)); break;
        case C_GT: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) > (y != 0)); break;
        case C_LT: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) < (y != 0)); break;
        case C_GE: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) >= (y != 0)); break;
        case C_LE: EW_BCAST_MAP(uint8_t, uint8_t, uint8_t, (x != 0) <= (y != 0)); break;
        default: break;
        }
        return KILN_OK;
#define CASE(D, T, U, MN, MX)                                                                     \
    case D: CMP_SWITCH(T) return KILN_OK;
        EW_SINT_TYPES(CASE)
        EW_UINT_TYPES(CASE)
        EW_FLOAT_TYPES(CASE)
#undef CASE
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s inputs are not supported",
                           kiln_dtype_name(a->dtype));
    }
}

#define REF_CMP(NAME, KIND) KILN_EW_KERNEL(NAME, compare(n, in, out, KIND, err))

REF_CMP(kiln_ref_equal, C_EQ)
REF_CMP(kiln_ref_greater, C_GT)
REF_CMP(kiln_ref_less, C_LT)
REF_CMP(kiln_ref_greaterorequal, C_GE)
REF_CMP(kiln_ref_lessorequal, C_LE)
REF_CMP(kiln_ref_and, L_AND)
REF_CMP(kiln_ref_or, L_OR)
REF_CMP(kiln_ref_xor, L_XOR)

/* ---- Where ---------------------------------------------------------------- */

#define WHERE_LOOP(T)                                                                             \
    do {                                                                                          \
        const uint8_t *pc = c->data;                                                              \
        const T *px = x->data, *py = y->data;                                                     \
        T *po = o->data;                                                                          \
        int64_t idx[KILN_MAX_RANK] = {0}, off[KILN_BCAST_MAX_OPS] = {0};                          \
        const int64_t s0 = bc.inner_stride[0], s1 = bc.inner_stride[1], s2 = bc.inner_stride[2];  \
        for (int64_t r = 0; r < bc.rows; r++) {                                                   \
            const uint8_t *rc = pc + off[0];                                                      \
            const T *rx = px + off[1], *ry = py + off[2];                                         \
            T *ro = po + r * bc.inner;                                                            \
            for (int64_t i = 0; i < bc.inner; i++)                                                \
                ro[i] = rc[i * s0] ? rx[i * s1] : ry[i * s2];                                     \
            kiln_bcast_next_row(&bc, idx, off);                                                   \
        }                                                                                         \
    } while (0)

kiln_status kiln_ref_where(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_tensor *c = in[0], *x = in[1], *y = in[2];
    kiln_tensor *o = out[0];
    kiln_status s = kiln_ew_check_bcast(in, 3, o, err);
    if (s != KILN_OK)
        return s;
    if (c->dtype != KILN_DTYPE_BOOL || x->dtype != y->dtype || o->dtype != x->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "condition %s, X %s, Y %s, output %s (expected bool, T, T, T)",
                           kiln_dtype_name(c->dtype), kiln_dtype_name(x->dtype),
                           kiln_dtype_name(y->dtype), kiln_dtype_name(o->dtype));
    const kiln_shape *shapes[3] = {&c->shape, &x->shape, &y->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &o->shape, shapes, 3);
    switch (kiln_dtype_size(o->dtype)) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    case 8: WHERE_LOOP(uint64_t); break;
    default:
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s elements are not supported",
                           kiln_dtype_name(o->dtype));
    }
    return KILN_OK;
}

/* ---- Cast ------------------------------------------------------------------ */

kiln_status kiln_ref_cast(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    int64_t to = kiln_attr_int(n, "to", KILN_DTYPE_UNDEFINED);
    if (to != (int64_t)y->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "output is %s, attribute 'to' is %lld",
                           kiln_dtype_name(y->dtype), (long long)to);
    int64_t count;
    kiln_status s = kiln_ew_check_same_numel(x, y, &count, err);
    if (s != KILN_OK)
        return s;
    if (kiln_dtype_size(x->dtype) == 0 || kiln_dtype_size(y->dtype) == 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "cast from %s to %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    if (x->dtype == y->dtype) {
        memcpy(y->data, x->data, (size_t)count * kiln_dtype_size(x->dtype));
        return KILN_OK;
    }
    bool from_float = kiln_ew_is_float(x->dtype), to_float = kiln_ew_is_float(y->dtype);
    if (x->dtype == KILN_DTYPE_FLOAT32 && y->dtype == KILN_DTYPE_FLOAT16) {
        /* directly from float: no detour through double */
        const float *a = x->data;
        uint16_t *o = y->data;
        for (int64_t i = 0; i < count; i++)
            o[i] = kiln_f32_to_f16(a[i]);
    } else if (y->dtype == KILN_DTYPE_FLOAT32 &&
               (x->dtype == KILN_DTYPE_INT64 || x->dtype == KILN_DTYPE_UINT64)) {
        /* 64-bit integer -> float32 directly: through double, a value beyond
         * 2^53 would round twice (2^60 + 2^36 + 1 -> 2^60 instead of
         * 2^60 + 2^37) */
        float *o = y->data;
        if (x->dtype == KILN_DTYPE_INT64)
            for (int64_t i = 0; i < count; i++)
                o[i] = (float)((const int64_t *)x->data)[i];
        else
            for (int64_t i = 0; i < count; i++)
                o[i] = (float)((const uint64_t *)x->data)[i];
    } else if (from_float || to_float || y->dtype == KILN_DTYPE_BOOL) {
        /* float -> anything, integer -> float, anything -> bool: through double
         * (exact for all but 64-bit integers beyond 2^53 to float64, which
         * round once) */
        for (int64_t i = 0; i < count; i++)
            kiln_ew_store_f64(y->dtype, y->data, i, kiln_ew_load_f64(x->dtype, x->data, i));
    } else {
        /* integer/bool -> integer: the low bits */
        for (int64_t i = 0; i < count; i++)
            kiln_ew_store_i64(y->dtype, y->data, i, kiln_ew_load_i64(x->dtype, x->data, i));
    }
    return KILN_OK;
}
