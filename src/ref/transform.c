/* ref/transform.c: reference data-movement ops, dtype-generic (elements are
 * moved by kiln_dtype_size bytes).
 *
 * Transpose and Slice are one strided walk: the output is visited in row-major
 * order with an index counter over all dims but the last, keeping the source
 * offset up to date incrementally (each output dim has a source stride:
 * in_strides[perm[d]] for Transpose, step[d] * in_strides[d] for Slice), and
 * the innermost dim is a strided (often contiguous) copy. Concat and Split
 * copy contiguous blocks of dims[axis:] per outer index. Gather copies one
 * block of data.dims[axis+1:] per (outer index, index), checking every index.
 * Pad fills each output row from three pieces: the begin pad, the contiguous
 * middle copied from the (cropped) input row, and the end pad; a row whose
 * outer coordinates fall in a pad region comes from the constant or from the
 * reflected / edge source row. */
#include <math.h>
#include <string.h>

#include "ir/infer_transform.h"
#include "ref/ref.h"
#include "util/half.h"

/* Copies `count` elements of `es` bytes from src (element stride src_stride,
 * may be negative) to contiguous dst. */
void kiln_ref_copy_strided(void *dst, const void *src, int64_t count, int64_t src_stride,
                           size_t es)
{
    if (count <= 0)
        return;
    if (src_stride == 1) {
        memcpy(dst, src, (size_t)count * es);
        return;
    }
#define COPY_T(T)                                                                                 \
    do {                                                                                          \
        T *d_ = dst;                                                                              \
        const T *s_ = src;                                                                        \
        for (int64_t i = 0; i < count; i++)                                                       \
            d_[i] = s_[i * src_stride];                                                           \
    } while (0)
    switch (es) {
    case 1: COPY_T(uint8_t); break;
    case 2: COPY_T(uint16_t); break;
    case 4: COPY_T(uint32_t); break;
    case 8: COPY_T(uint64_t); break;
    default:
        for (int64_t i = 0; i < count; i++)
            memcpy((char *)dst + (size_t)i * es, (const char *)src + i * src_stride * (int64_t)es,
                   es);
    }
#undef COPY_T
}

/* Fills dst (`shape`, row-major) with src[base + sum_d idx[d] * strides[d]]. */
static void strided_walk(void *dst, const void *src, const kiln_shape *shape, int64_t base,
                         const int64_t *strides, size_t es)
{
    int64_t numel = kiln_shape_numel(shape);
    if (numel <= 0)
        return;
    if (shape->rank == 0) {
        memcpy(dst, (const char *)src + base * (int64_t)es, es);
        return;
    }
    int r = shape->rank;
    int64_t inner = shape->dims[r - 1];
    int64_t idx[KILN_MAX_RANK] = {0};
    int64_t off = base;
    char *o = dst;
    for (int64_t row = 0; row < numel / inner; row++) {
        kiln_ref_copy_strided(o + (size_t)(row * inner) * es,
                              (const char *)src + off * (int64_t)es, inner, strides[r - 1], es);
        for (int d = r - 2; d >= 0; d--) {
            idx[d]++;
            off += strides[d];
            if (idx[d] < shape->dims[d])
                break;
            off -= strides[d] * shape->dims[d];
            idx[d] = 0;
        }
    }
}

kiln_status kiln_ref_copy(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    kiln_status s = kiln_ref_check_same_dtype(in[0], out[0], err);
    if (s != KILN_OK)
        return s;
    int64_t nb = kiln_tensor_nbytes(in[0]);
    if (nb < 0 || nb != kiln_tensor_nbytes(out[0]))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input and output sizes differ");
    if (nb > 0 && in[0]->data != out[0]->data)
        memcpy(out[0]->data, in[0]->data, (size_t)nb);
    return KILN_OK;
}

kiln_status kiln_ref_transpose(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int r = x->shape.rank;
    int64_t perm[KILN_MAX_RANK];
    const int64_t *pv = NULL;
    int np = kiln_attr_ints(n, "perm", &pv);
    if (np >= 0 && np != r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "'perm' has %d entries for rank %d",
                           np, r);
    bool seen[KILN_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) {
        perm[i] = np >= 0 ? pv[i] : r - 1 - i;
        if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "'perm' is not a permutation");
        seen[perm[i]] = true;
    }
    int64_t ist[KILN_MAX_RANK], st[KILN_MAX_RANK];
    kiln_shape want = {.rank = r};
    kiln_ref_strides(&x->shape, ist);
    for (int i = 0; i < r; i++) {
        want.dims[i] = x->shape.dims[perm[i]];
        st[i] = ist[perm[i]];
    }
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    strided_walk(y->data, x->data, &y->shape, 0, st, kiln_dtype_size(x->dtype));
    return KILN_OK;
}

/* Concat and Split move the same blocks in opposite directions: per outer
 * index (dims before `axis`), each part's block of dims[axis:] in turn, the
 * blocks contiguous in `whole`. `parts` are Concat's inputs (`whole` its
 * output) or, with `split`, Split's outputs (`whole` its input); either
 * side's data is written through its (non-const) data pointer. The parts are
 * checked against the whole first, and the messages name them so. */
static kiln_status concat_split(const kiln_node *n, const kiln_tensor *whole,
                                const kiln_tensor *const *parts, int n_parts, bool split,
                                kiln_error *err)
{
    const char *part = split ? "output" : "input", *other = split ? "input" : "output";
    int r = whole->shape.rank;
    int axis;
    kiln_status s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), r, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    int64_t total = 0;
    for (int k = 0; k < n_parts; k++) {
        const kiln_tensor *p = parts[k];
        if (!p)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s %d is missing", part, k);
        s = split ? kiln_ref_check_same_dtype(whole, p, err)
                  : kiln_ref_check_same_dtype(p, whole, err);
        if (s != KILN_OK)
            return s;
        bool ok = p->shape.rank == r;
        for (int d = 0; d < r && ok; d++)
            ok = d == axis || p->shape.dims[d] == whole->shape.dims[d];
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s %d does not fit the %s", part,
                               k, other);
        total += p->shape.dims[axis];
    }
    if (total != whole->shape.dims[axis])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "%ss sum to %lld on axis %d, %s has %lld", part, (long long)total,
                           axis, other, (long long)whole->shape.dims[axis]);
    size_t es = kiln_dtype_size(whole->dtype);
    int64_t outer = kiln_ref_prod(&whole->shape, 0, axis);
    int64_t inner = kiln_ref_prod(&whole->shape, axis + 1, r);
    char *w = whole->data;
    for (int64_t j = 0; j < outer; j++) {
        for (int k = 0; k < n_parts; k++) {
            size_t block = (size_t)(parts[k]->shape.dims[axis] * inner) * es;
            if (block == 0)
                continue;
            char *p = (char *)parts[k]->data + (size_t)j * block;
            if (split)
                memcpy(p, w, block);
            else
                memcpy(w, p, block);
            w += block;
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_concat(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    return concat_split(n, out[0], in, n->n_inputs, false, err);
}

kiln_status kiln_ref_split(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    /* C does not convert T *const * to const T *const * implicitly; the
     * outputs are still written through their (non-const) data pointers. */
    return concat_split(n, in[0], (const kiln_tensor *const *)out, n->n_outputs, true, err);
}

kiln_status kiln_ref_slice(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int64_t start[KILN_MAX_RANK], step[KILN_MAX_RANK], ist[KILN_MAX_RANK], st[KILN_MAX_RANK];
    kiln_shape want;
    s = kiln_slice_resolve(n, &x->shape, start, step, &want, err);
    if (s == KILN_OK)
        s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    kiln_ref_strides(&x->shape, ist);
    int64_t base = 0;
    for (int d = 0; d < x->shape.rank; d++) {
        base += start[d] * ist[d];
        /* a step beyond the dim takes one element at most: its stride is
         * never used (and step * stride could overflow: steps of 2^63 - 1) */
        st[d] = want.dims[d] <= 1 ? 0 : step[d] * ist[d];
    }
    strided_walk(y->data, x->data, &y->shape, base, st, kiln_dtype_size(x->dtype));
    return KILN_OK;
}

kiln_status kiln_ref_gather(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *ix = in[1];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_gather_dtypes(x, ix, y, err);
    if (s != KILN_OK)
        return s;
    int r = x->shape.rank;
    int axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), r, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    kiln_shape want = {.rank = r - 1 + ix->shape.rank};
    if (want.rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank too large");
    int k = 0;
    for (int d = 0; d < axis; d++)
        want.dims[k++] = x->shape.dims[d];
    for (int d = 0; d < ix->shape.rank; d++)
        want.dims[k++] = ix->shape.dims[d];
    for (int d = axis + 1; d < r; d++)
        want.dims[k++] = x->shape.dims[d];
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(x->dtype);
    int64_t outer = kiln_ref_prod(&x->shape, 0, axis), dim = x->shape.dims[axis];
    int64_t block = kiln_ref_prod(&x->shape, axis + 1, r) * (int64_t)es;
    int64_t n_idx = kiln_shape_numel(&ix->shape);
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t j = 0; j < outer; j++) {
        for (int64_t i = 0; i < n_idx; i++) {
            int64_t p = 0;
            s = kiln_ref_norm_index(kiln_ref_load_index(ix, i), dim, i, axis, &p, err);
            if (s != KILN_OK)
                return s;
            if (block > 0)
                memcpy(dst + (j * n_idx + i) * block, src + (j * dim + p) * block, (size_t)block);
        }
    }
    return KILN_OK;
}

/* ---- Pad -------------------------------------------------------------------- */

/* Clamped conversion of a float to an integer range (NaN -> 0). */
static double clampd(float v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    return v < lo ? lo : v > hi ? hi : (double)v;
}

/* The pad value as one element of `dt` in `buf`. */
static void pad_value(kiln_dtype dt, float v, unsigned char *buf)
{
    memset(buf, 0, 8);
#define PUT(T, X)                                                                                 \
    do {                                                                                          \
        T t_ = (T)(X);                                                                            \
        memcpy(buf, &t_, sizeof t_);                                                              \
    } while (0)
    switch (dt) {
    case KILN_DTYPE_FLOAT32: PUT(float, v); break;
    case KILN_DTYPE_FLOAT64: PUT(double, v); break;
    case KILN_DTYPE_FLOAT16: PUT(uint16_t, kiln_f32_to_f16(v)); break;
    case KILN_DTYPE_INT8: PUT(int8_t, clampd(v, INT8_MIN, INT8_MAX)); break;
    case KILN_DTYPE_UINT8: PUT(uint8_t, clampd(v, 0, UINT8_MAX)); break;
    case KILN_DTYPE_INT16: PUT(int16_t, clampd(v, INT16_MIN, INT16_MAX)); break;
    case KILN_DTYPE_UINT16: PUT(uint16_t, clampd(v, 0, UINT16_MAX)); break;
    case KILN_DTYPE_INT32: PUT(int32_t, clampd(v, INT32_MIN, INT32_MAX)); break;
    case KILN_DTYPE_UINT32: PUT(uint32_t, clampd(v, 0, UINT32_MAX)); break;
    case KILN_DTYPE_INT64: {
        double c = clampd(v, -9223372036854775808.0, 9223372036854775808.0);
        PUT(int64_t, c >= 9223372036854775808.0 ? INT64_MAX : (int64_t)c);
        break;
    }
    case KILN_DTYPE_UINT64: {
        double c = clampd(v, 0, 18446744073709551616.0);
        PUT(uint64_t, c >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)c);
        break;
    }
    case KILN_DTYPE_BOOL: PUT(uint8_t, v != 0.0f); break;
    default: break;
    }
#undef PUT
}

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } pad_mode;

/* Per dimension: b = begin pad, [lo, hi) = the input range kept after
 * cropping (negative pads). Maps output coordinate o to an input coordinate,
 * or -1 for the constant. */
typedef struct pad_dim {
    int64_t b, lo, hi;
} pad_dim;

static int64_t pad_map(const pad_dim *p, int64_t o, pad_mode mode)
{
    int64_t i = o - p->b;
    if (i >= p->lo && i < p->hi)
        return i;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return i < p->lo ? p->lo : p->hi - 1;
    return i < p->lo ? 2 * p->lo - i : 2 * (p->hi - 1) - i; /* reflect, edge not repeated */
}

kiln_status kiln_ref_pad(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int r = x->shape.rank;
    const int64_t *pads = NULL;
    if (kiln_attr_ints(n, "pads", &pads) != 2 * r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "'pads' must have %d entries", 2 * r);
    const char *ms = kiln_attr_string(n, "mode", "constant");
    pad_mode mode = strcmp(ms, "reflect") == 0 ? PAD_REFLECT
                    : strcmp(ms, "edge") == 0  ? PAD_EDGE
                                               : PAD_CONSTANT;
    if (mode == PAD_CONSTANT && strcmp(ms, "constant") != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "mode '%s'", ms);
    pad_dim pd[KILN_MAX_RANK];
    kiln_shape want = {.rank = r};
    for (int d = 0; d < r; d++) {
        int64_t b = pads[d], e = pads[d + r], dim = x->shape.dims[d];
        pd[d].b = b;
        pd[d].lo = b < 0 ? -b : 0;
        pd[d].hi = dim - (e < 0 ? -e : 0);
        want.dims[d] = dim + b + e;
        int64_t eff = pd[d].hi - pd[d].lo;
        bool bad = eff < 0 || want.dims[d] < 0;
        if (mode == PAD_REFLECT && ((b > 0 && b >= eff) || (e > 0 && e >= eff)))
            bad = true;
        if (mode == PAD_EDGE && (b > 0 || e > 0) && eff <= 0)
            bad = true;
        if (bad)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "pads (%lld, %lld) do not fit dimension %d of size %lld",
                               (long long)b, (long long)e, d, (long long)dim);
    }
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(x->dtype);
    unsigned char val[8];
    pad_value(x->dtype, kiln_attr_float(n, "value", 0.0f), val);
    if (kiln_ref_rows_trivial(x, y))
        return KILN_OK;
    int64_t ist[KILN_MAX_RANK];
    kiln_ref_strides(&x->shape, ist);
    const pad_dim *pl = &pd[r - 1];
    int64_t inner = y->shape.dims[r - 1];
    int64_t mid_begin = pl->b > 0 ? pl->b : 0;       /* first output column read from input */
    int64_t mid_end = pl->b + pl->hi;                /* one past the last */
    kiln_shape outer = y->shape; /* the rows' coordinates */
    outer.dims[r - 1] = 1;
    int64_t rows = kiln_ref_prod(&outer, 0, r);
    int64_t idx[KILN_MAX_RANK] = {0};
    char *o = y->data;
    const char *src = x->data;
    for (int64_t row = 0; row < rows;
         row++, o += (size_t)inner * es, kiln_ref_next_coord(&outer, idx)) {
        int64_t off = 0;
        bool constant_row = false;
        for (int d = 0; d < r - 1; d++) {
            int64_t i = pad_map(&pd[d], idx[d], mode);
            if (i < 0) {
                constant_row = true;
                break;
            }
            off += i * ist[d];
        }
        if (constant_row) {
            for (int64_t c = 0; c < inner; c++)
                memcpy(o + (size_t)c * es, val, es);
        } else {
            const char *srow = src + off * (int64_t)es;
            for (int64_t c = 0; c < inner; c++) {
                if (c == mid_begin && mid_end > mid_begin) {
                    memcpy(o + (size_t)c * es, srow + (c - pl->b) * (int64_t)es,
                           (size_t)(mid_end - mid_begin) * es);
                    c = mid_end - 1;
                    continue;
                }
                int64_t i = pad_map(pl, c, mode);
                memcpy(o + (size_t)c * es, i < 0 ? (const char *)val : srow + i * (int64_t)es, es);
            }
        }
    }
    return KILN_OK;
}
