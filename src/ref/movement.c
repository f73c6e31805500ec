/* ref/movement.c: reference kernels for the index-driven data-movement ops
 * (Tile, Expand, GatherElements, GatherND, ScatterElements, ScatterND,
 * DepthToSpace, SpaceToDepth, Trilu, OneHot, ReverseSequence).
 *
 * All are dtype-generic: elements are moved as kiln_dtype_size bytes, so
 * every dtype works; only the scatter reductions (add, mul, max, min) do
 * arithmetic, through a typed loop per dtype (float16 via float). Shapes and
 * attributes were validated by shape inference (ir/infer_movement.c); the
 * kernels re-derive the output shape where cheap and check it, and check
 * every index value read from a tensor, so that a bad index is a status and
 * never a wild access.
 *
 * Walks: Tile copies each input row (last dim) repeats[-1] times per output
 * row, the row's source found from the output's outer coordinates modulo the
 * input extents. Expand is the broadcast walk of ir/broadcast.h with one
 * operand. GatherElements/ScatterElements visit the index tensor in row-major
 * order with a coordinate counter, replacing the coordinate on `axis` by the
 * index read. GatherND/ScatterND move one contiguous slice of
 * data.shape[batch_dims + m:] per index tuple of m entries. DepthToSpace and
 * SpaceToDepth map each output coordinate to its source directly (the
 * reshape-transpose-reshape of the ONNX definition folded into index
 * arithmetic). Trilu copies the kept range of each row and zeroes the rest. */
#include <math.h>
#include <string.h>

#include "ir/broadcast.h"
#include "ir/infer_transform.h"
#include "ref/ref.h"
#include "util/half.h"

/* ---- helpers ------------------------------------------------------------------ */

/* The scatter reductions; GatherElements shares the ScatterElements walk
 * (elements_walk) with RED_NONE, so they are declared ahead of it. */
typedef enum scatter_red { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } scatter_red;

static void reduce_into(kiln_dtype dt, scatter_red red, void *dst, const void *src,
                        int64_t count);

/* ---- Tile, Expand -------------------------------------------------------------- */

kiln_status kiln_ref_tile(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int r = x->shape.rank;
    const int64_t *rep = NULL;
    if (kiln_attr_ints(n, "repeats", &rep) != r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "'repeats' must have %d entries", r);
    kiln_shape want = x->shape;
    for (int d = 0; d < r; d++) {
        if (rep[d] < 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "negative repeat");
        want.dims[d] = x->shape.dims[d] * rep[d];
    }
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    if (kiln_ref_rows_trivial(x, y))
        return KILN_OK;
    size_t es = kiln_dtype_size(x->dtype);
    int64_t ist[KILN_MAX_RANK];
    kiln_ref_strides(&x->shape, ist);
    int64_t xrow = x->shape.dims[r - 1], yrow = y->shape.dims[r - 1];
    size_t rowbytes = (size_t)xrow * es;
    kiln_shape outer = y->shape;
    outer.dims[r - 1] = 1;
    int64_t idx[KILN_MAX_RANK] = {0};
    char *o = y->data;
    do {
        int64_t off = 0;
        for (int d = 0; d < r - 1; d++)
            off += (idx[d] % x->shape.dims[d]) * ist[d];
        const char *src = (const char *)x->data + (size_t)off * es;
        for (int64_t k = 0; k < yrow / xrow; k++, o += rowbytes)
            memcpy(o, src, rowbytes);
    } while (kiln_ref_next_coord(&outer, idx));
    return KILN_OK;
}

kiln_status kiln_ref_expand(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    if (!kiln_broadcasts_to(&x->shape, &y->shape)) {
        kiln_shape_buf a, b;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %s does not broadcast to %s",
                           kiln_shape_fmt(&x->shape, &a), kiln_shape_fmt(&y->shape, &b));
    }
    if (kiln_shape_numel(&y->shape) <= 0)
        return KILN_OK;
    size_t es = kiln_dtype_size(x->dtype);
    const kiln_shape *shapes[1] = {&x->shape};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &y->shape, shapes, 1);
    int64_t idx[KILN_MAX_RANK] = {0}, off[KILN_BCAST_MAX_OPS] = {0};
    char *o = y->data;
    for (int64_t row = 0; row < bc.rows; row++) {
        kiln_ref_copy_strided(o + (size_t)(row * bc.inner) * es,
                              (const char *)x->data + off[0] * (int64_t)es, bc.inner,
                              bc.inner_stride[0], es);
        kiln_bcast_next_row(&bc, idx, off);
    }
    return KILN_OK;
}

/* ---- GatherElements, GatherND --------------------------------------------------- */

/* The walk shared by GatherElements (u NULL: y[i] = x[at(i)]) and
 * ScatterElements (y[at(i)] = y[at(i)] (red) u[i]): element i of the indices,
 * at coordinate idx, addresses the data at idx with its `axis` coordinate
 * replaced by the index read there. Resolves `axis` and checks that the
 * indices (and updates) fit the data off the axis first. */
static kiln_status elements_walk(const kiln_node *n, const kiln_tensor *x, const kiln_tensor *ix,
                                 const kiln_tensor *u, scatter_red red, kiln_tensor *y,
                                 kiln_error *err)
{
    int r = x->shape.rank, axis;
    kiln_status s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), r, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    if (ix->shape.rank != r || (u && !kiln_shape_equal(&ix->shape, &u->shape)))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s",
                           u ? "indices and updates shapes differ"
                             : "indices and data ranks differ");
    for (int d = 0; d < r; d++)
        if (d != axis && ix->shape.dims[d] > x->shape.dims[d])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "indices exceed data on dim %d", d);
    int64_t numel = kiln_shape_numel(&ix->shape);
    if (numel <= 0)
        return KILN_OK;
    size_t es = kiln_dtype_size(x->dtype);
    int64_t xst[KILN_MAX_RANK], idx[KILN_MAX_RANK] = {0};
    kiln_ref_strides(&x->shape, xst);
    /* run by run: a run is the indices' last dim, extended over the dims
     * after the axis that the indices cover whole (contiguous in both, so
     * the offset off the axis is computed once per run: Faster R-CNN
     * scatters [150, 256, 7, 7] floats along axis 0 as 150 runs of 12,544,
     * not 268,800 rows of 7); 4-byte elements without a reduction, with
     * int64 indices, are moved by a tight loop */
    int tail = r - 1; /* the run covers dims [tail, r) */
    while (tail - 1 > axis && ix->shape.dims[tail] == x->shape.dims[tail])
        tail--;
    int64_t inner = 1;
    for (int d = tail; d < r; d++)
        inner *= ix->shape.dims[d];
    const int64_t rows = numel / inner;
    const int64_t ax_dim = x->shape.dims[axis], ax_st = xst[axis];
    const int64_t last_st = axis == r - 1 ? 0 : xst[r - 1];
    const bool word = es == 4 && (!u || red == RED_NONE);
    const int64_t *ix64 = ix->dtype == KILN_DTYPE_INT64 ? ix->data : NULL;
    for (int64_t row = 0; row < rows; row++) {
        int64_t base = 0;
        for (int d = 0; d < tail; d++)
            if (d != axis)
                base += idx[d] * xst[d];
        int64_t j = 0, i = row * inner;
        if (word && ix64) { /* the common case: no dtype or reduction switch per element */
            uint32_t *yd = y->data;
            const uint32_t *src = u ? u->data : x->data;
            for (; j < inner; j++, i++) {
                int64_t v = ix64[i];
                v += v < 0 ? ax_dim : 0;
                if ((uint64_t)v >= (uint64_t)ax_dim)
                    break; /* the slow loop below names it */
                int64_t off = base + v * ax_st + j * last_st;
                if (u)
                    yd[off] = src[i];
                else
                    yd[i] = src[off];
            }
        }
        for (; j < inner; j++, i++) {
            int64_t p = 0;
            s = kiln_ref_norm_index(ix64 ? ix64[i] : kiln_ref_load_index(ix, i), ax_dim, i, axis,
                                    &p, err);
            if (s != KILN_OK)
                return s;
            int64_t off = base + p * ax_st + j * last_st;
            if (word && u)
                ((uint32_t *)y->data)[off] = ((const uint32_t *)u->data)[i];
            else if (word)
                ((uint32_t *)y->data)[i] = ((const uint32_t *)x->data)[off];
            else if (u)
                reduce_into(x->dtype, red, (char *)y->data + (size_t)off * es,
                            (const char *)u->data + (size_t)i * es, 1);
            else
                memcpy((char *)y->data + (size_t)i * es,
                       (const char *)x->data + (size_t)off * es, es);
        }
        for (int d = tail; d < r; d++) /* the next run */
            idx[d] = ix->shape.dims[d] - 1;
        kiln_ref_next_coord(&ix->shape, idx);
    }
    return KILN_OK;
}

kiln_status kiln_ref_gather_elements(const kiln_node *n, const kiln_tensor *const *in,
                                     kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *ix = in[1];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_gather_dtypes(x, ix, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_shape(&y->shape, &ix->shape, err);
    if (s != KILN_OK)
        return s;
    return elements_walk(n, x, ix, NULL, RED_NONE, y, err);
}

/* Source offset (in elements) of the slice addressed by the m-entry index
 * tuple starting at element `t0` of `ix`, into dims [first, first+m) of `x`
 * with strides `xst`. */
static kiln_status tuple_offset(const kiln_tensor *ix, int64_t t0, int64_t m,
                                const kiln_shape *x, int first, const int64_t *xst, int64_t *off,
                                kiln_error *err)
{
    int64_t o = 0;
    for (int64_t j = 0; j < m; j++) {
        int64_t p = 0;
        int d = first + (int)j;
        kiln_status s = kiln_ref_norm_index(kiln_ref_load_index(ix, t0 + j), x->dims[d], t0 + j,
                                            d, &p, err);
        if (s != KILN_OK)
            return s;
        o += p * xst[d];
    }
    *off = o;
    return KILN_OK;
}

kiln_status kiln_ref_gather_nd(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *ix = in[1];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_gather_dtypes(x, ix, y, err);
    if (s != KILN_OK)
        return s;
    int64_t bd = kiln_attr_int(n, "batch_dims", 0);
    const kiln_shape *xs = &x->shape, *is = &ix->shape;
    if (is->rank < 1 || bd < 0 || bd >= xs->rank || bd >= is->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bad batch_dims or ranks");
    int64_t m = is->dims[is->rank - 1];
    if (m < 1 || m > xs->rank - bd)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "bad index tuple length %lld",
                           (long long)m);
    kiln_shape want = {.rank = is->rank - 1 + xs->rank - (int)(bd + m)};
    if (want.rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank too large");
    int k = 0;
    for (int d = 0; d < is->rank - 1; d++)
        want.dims[k++] = is->dims[d];
    for (int d = (int)(bd + m); d < xs->rank; d++)
        want.dims[k++] = xs->dims[d];
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    for (int d = 0; d < bd; d++)
        if (xs->dims[d] != is->dims[d])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "batch dimension %d differs", d);
    size_t es = kiln_dtype_size(x->dtype);
    int64_t xst[KILN_MAX_RANK];
    kiln_ref_strides(xs, xst);
    int64_t batches = kiln_ref_prod(xs, 0, (int)bd);
    int64_t tuples = kiln_ref_prod(is, (int)bd, is->rank - 1);
    int64_t slice = kiln_ref_prod(xs, (int)(bd + m), xs->rank);
    int64_t bstride = kiln_ref_prod(xs, (int)bd, xs->rank);
    char *o = y->data;
    for (int64_t b = 0; b < batches; b++)
        for (int64_t t = 0; t < tuples; t++) {
            int64_t off = 0;
            s = tuple_offset(ix, (b * tuples + t) * m, m, xs, (int)bd, xst, &off, err);
            if (s != KILN_OK)
                return s;
            size_t nb = (size_t)slice * es;
            if (nb > 0)
                memcpy(o, (const char *)x->data + (size_t)(b * bstride + off) * es, nb);
            o += nb;
        }
    return KILN_OK;
}

/* ---- ScatterElements, ScatterND --------------------------------------------------- */

static kiln_status read_reduction(const kiln_node *n, kiln_dtype dt, scatter_red *r,
                                  kiln_error *err)
{
    const char *s = kiln_attr_string(n, "reduction", "none");
    if (strcmp(s, "none") == 0)
        *r = RED_NONE;
    else if (strcmp(s, "add") == 0)
        *r = RED_ADD;
    else if (strcmp(s, "mul") == 0)
        *r = RED_MUL;
    else if (strcmp(s, "max") == 0)
        *r = RED_MAX;
    else if (strcmp(s, "min") == 0)
        *r = RED_MIN;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "reduction '%s'", s);
    if (*r != RED_NONE && dt == KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "reduction '%s' on bool data", s);
    return KILN_OK;
}

/* dst[i] = dst[i] (red) src[i] for i < count, elements of dtype `dt`.
 * Integer add/mul wrap around (computed unsigned). */
static void reduce_into(kiln_dtype dt, scatter_red red, void *dst, const void *src, int64_t count)
{
    if (red == RED_NONE) {
        memcpy(dst, src, (size_t)count * kiln_dtype_size(dt));
        return;
    }
#define RED_LOOP(T, U)                                                                            \
    do {                                                                                          \
        T *d_ = dst;                                                                              \
        const T *s_ = src;                                                                        \
        for (int64_t i = 0; i < count; i++) {                                                     \
            T a = d_[i], b = s_[i];                                                               \
            switch (red) {                                                                        \
            case RED_ADD: d_[i] = (T)((U)a + (U)b); break;                                        \
            case RED_MUL: d_[i] = (T)((U)a * (U)b); break;                                        \
            case RED_MAX: d_[i] = a > b ? a : b; break;                                           \
            case RED_MIN: d_[i] = a < b ? a : b; break;                                           \
            default: break;                                                                       \
            }                                                                                     \
        }                                                                                         \
    } while (0)
    switch (dt) {
    case KILN_DTYPE_FLOAT32: RED_LOOP(float, float); break;
    case KILN_DTYPE_FLOAT64: RED_LOOP(double, double); break;
    case KILN_DTYPE_INT8: RED_LOOP(int8_t, uint32_t); break;
    case KILN_DTYPE_UINT8: RED_LOOP(uint8_t, uint32_t); break;
    case KILN_DTYPE_INT16: RED_LOOP(int16_t, uint32_t); break;
    case KILN_DTYPE_UINT16: RED_LOOP(uint16_t, uint32_t); break;
    case KILN_DTYPE_INT32: RED_LOOP(int32_t, uint32_t); break;
    case KILN_DTYPE_UINT32: RED_LOOP(uint32_t, uint32_t); break;
    case KILN_DTYPE_INT64: RED_LOOP(int64_t, uint64_t); break;
    case KILN_DTYPE_UINT64: RED_LOOP(uint64_t, uint64_t); break;
    case KILN_DTYPE_FLOAT16: {
        uint16_t *d_ = dst;
        const uint16_t *s_ = src;
        for (int64_t i = 0; i < count; i++) {
            float a = kiln_f16_to_f32(d_[i]), b = kiln_f16_to_f32(s_[i]), z = a;
            switch (red) {
            case RED_ADD: z = a + b; break;
            case RED_MUL: z = a * b; break;
            case RED_MAX: z = a > b ? a : b; break;
            case RED_MIN: z = a < b ? a : b; break;
            default: break;
            }
            d_[i] = kiln_f32_to_f16(z);
        }
        break;
    }
    default: break; /* bool was rejected */
    }
#undef RED_LOOP
}

/* Common start of both scatters: output = copy of data. */
static kiln_status scatter_begin(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, scatter_red *red, kiln_error *err)
{
    const kiln_tensor *x = in[0], *ix = in[1], *u = in[2];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_same_dtype(u, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_index_dtype(ix, "indices", err);
    if (s == KILN_OK)
        s = kiln_ref_check_shape(&y->shape, &x->shape, err);
    if (s == KILN_OK)
        s = read_reduction(n, x->dtype, red, err);
    if (s != KILN_OK)
        return s;
    int64_t nb = kiln_tensor_nbytes(x);
    if (nb > 0 && y->data != x->data)
        memcpy(y->data, x->data, (size_t)nb);
    return KILN_OK;
}

kiln_status kiln_ref_scatter_elements(const kiln_node *n, const kiln_tensor *const *in,
                                      kiln_tensor *const *out, kiln_error *err)
{
    scatter_red red = RED_NONE;
    kiln_status s = scatter_begin(n, in, out, &red, err);
    if (s != KILN_OK)
        return s;
    return elements_walk(n, in[0], in[1], in[2], red, out[0], err);
}

kiln_status kiln_ref_scatter_nd(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    scatter_red red = RED_NONE;
    kiln_status s = scatter_begin(n, in, out, &red, err);
    if (s != KILN_OK)
        return s;
    const kiln_tensor *x = in[0], *ix = in[1], *u = in[2];
    kiln_tensor *y = out[0];
    const kiln_shape *xs = &x->shape, *is = &ix->shape;
    if (is->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "indices are a scalar");
    int64_t m = is->dims[is->rank - 1];
    if (m < 1 || m > xs->rank)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "bad index tuple length %lld",
                           (long long)m);
    int64_t tuples = kiln_ref_prod(is, 0, is->rank - 1);
    int64_t slice = kiln_ref_prod(xs, (int)m, xs->rank);
    if (kiln_shape_numel(&u->shape) != tuples * slice)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "updates have the wrong size");
    size_t es = kiln_dtype_size(x->dtype);
    int64_t xst[KILN_MAX_RANK];
    kiln_ref_strides(xs, xst);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = 0;
        s = tuple_offset(ix, t * m, m, xs, 0, xst, &off, err);
        if (s != KILN_OK)
            return s;
        if (slice > 0)
            reduce_into(x->dtype, red, (char *)y->data + (size_t)off * es,
                        (const char *)u->data + (size_t)(t * slice) * es, slice);
    }
    return KILN_OK;
}

/* ---- DepthToSpace, SpaceToDepth ------------------------------------------------- */

kiln_status kiln_ref_depth_to_space(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int64_t bs = kiln_attr_int(n, "blocksize", 0);
    bool crd = strcmp(kiln_attr_string(n, "mode", "DCR"), "CRD") == 0;
    const int64_t *xd = x->shape.dims;
    if (x->shape.rank != 4 || bs < 1 || xd[1] % (bs * bs) != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "bad input shape or blocksize");
    int64_t N = xd[0], C = xd[1] / (bs * bs), H = xd[2], W = xd[3];
    kiln_shape want = {.rank = 4, .dims = {N, C, H * bs, W * bs}};
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(x->dtype);
    char *o = y->data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < H * bs; oh++)
                for (int64_t ow = 0; ow < W * bs; ow++, o += es) {
                    int64_t by = oh % bs, bx = ow % bs;
                    int64_t ic = crd ? (c * bs + by) * bs + bx : (by * bs + bx) * C + c;
                    int64_t off = ((b * xd[1] + ic) * H + oh / bs) * W + ow / bs;
                    memcpy(o, (const char *)x->data + (size_t)off * es, es);
                }
    return KILN_OK;
}

kiln_status kiln_ref_space_to_depth(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s != KILN_OK)
        return s;
    int64_t bs = kiln_attr_int(n, "blocksize", 0);
    const int64_t *xd = x->shape.dims;
    if (x->shape.rank != 4 || bs < 1 || xd[2] % bs != 0 || xd[3] % bs != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "bad input shape or blocksize");
    int64_t N = xd[0], C = xd[1], OH = xd[2] / bs, OW = xd[3] / bs;
    kiln_shape want = {.rank = 4, .dims = {N, C * bs * bs, OH, OW}};
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(x->dtype);
    char *o = y->data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t oc = 0; oc < C * bs * bs; oc++) {
            /* output channel = (by * bs + bx) * C + c */
            int64_t c = oc % C, blk = oc / C, by = blk / bs, bx = blk % bs;
            for (int64_t h = 0; h < OH; h++)
                for (int64_t w = 0; w < OW; w++, o += es) {
                    int64_t off = ((b * C + c) * xd[2] + h * bs + by) * xd[3] + w * bs + bx;
                    memcpy(o, (const char *)x->data + (size_t)off * es, es);
                }
        }
    return KILN_OK;
}

/* ---- Trilu ------------------------------------------------------------------------ */

kiln_status kiln_ref_trilu(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_shape(&y->shape, &x->shape, err);
    if (s != KILN_OK)
        return s;
    int r = x->shape.rank;
    if (r < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input rank %d < 2", r);
    bool upper = kiln_attr_int(n, "upper", 1) != 0;
    int64_t k = kiln_attr_int(n, "k", 0);
    int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
    int64_t mats = kiln_ref_prod(&x->shape, 0, r - 2);
    /* keep k in a range where i + k cannot overflow */
    if (k > cols + 1)
        k = cols + 1;
    if (k < -rows - 1)
        k = -rows - 1;
    size_t es = kiln_dtype_size(x->dtype);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            size_t base = (size_t)((m * rows + i) * cols) * es;
            const char *src = (const char *)x->data + base;
            char *dst = (char *)y->data + base;
            /* kept columns [lo, hi): upper keeps j - i >= k, lower j - i <= k */
            int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
            lo = lo < 0 ? 0 : lo > cols ? cols : lo;
            hi = hi < lo ? lo : hi > cols ? cols : hi;
            memset(dst, 0, (size_t)cols * es);
            if (hi > lo)
                memcpy(dst + (size_t)lo * es, src + (size_t)lo * es, (size_t)(hi - lo) * es);
        }
    return KILN_OK;
}

/* ---- OneHot ----------------------------------------------------------------------- */

/* Element i of a numeric tensor as double. */
static double load_f64(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_DTYPE_FLOAT32: return ((const float *)t->data)[i];
    case KILN_DTYPE_FLOAT64: return ((const double *)t->data)[i];
    case KILN_DTYPE_FLOAT16: return kiln_f16_to_f32(((const uint16_t *)t->data)[i]);
    case KILN_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case KILN_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    case KILN_DTYPE_UINT64: return (double)((const uint64_t *)t->data)[i];
    default: return NAN;
    }
}

kiln_status kiln_ref_onehot(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *ix = in[0], *vals = in[1];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(vals, y, err);
    if (s != KILN_OK)
        return s;
    if (kiln_shape_numel(&vals->shape) != 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "values must have 2 elements");
    if (ix->dtype == KILN_DTYPE_BOOL || kiln_dtype_size(ix->dtype) == 0)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "indices are %s",
                           kiln_dtype_name(ix->dtype));
    int64_t depth = kiln_attr_int(n, "depth", 0);
    int rank = ix->shape.rank + 1, axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", -1), rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    kiln_shape want = {.rank = rank};
    for (int d = 0, k = 0; d < rank; d++)
        want.dims[d] = d == axis ? depth : ix->shape.dims[k++];
    s = kiln_ref_check_shape(&y->shape, &want, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(vals->dtype);
    const char *off_v = vals->data, *on_v = (const char *)vals->data + es;
    int64_t outer = kiln_ref_prod(&ix->shape, 0, axis);
    int64_t inner = kiln_ref_prod(&ix->shape, axis, ix->shape.rank);
    char *o = y->data;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++, o += es) {
                /* an index outside [-depth, depth - 1] (or NaN) selects no class */
                double v = load_f64(ix, a * inner + i);
                bool hit = false;
                if (v >= (double)-depth && v < (double)depth) {
                    int64_t p = (int64_t)v;
                    if (p < 0)
                        p += depth;
                    hit = p == d;
                }
                memcpy(o, hit ? on_v : off_v, es);
            }
    return KILN_OK;
}

/* ---- ReverseSequence ----------------------------------------------------------------- */

kiln_status kiln_ref_reverse_sequence(const kiln_node *n, const kiln_tensor *const *in,
                                      kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *sl = in[1];
    kiln_tensor *y = out[0];
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_shape(&y->shape, &x->shape, err);
    if (s == KILN_OK)
        s = kiln_ref_check_index_dtype(sl, "sequence_lens", err);
    if (s != KILN_OK)
        return s;
    int64_t ba = kiln_attr_int(n, "batch_axis", 1), ta = kiln_attr_int(n, "time_axis", 0);
    if (x->shape.rank < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bad batch_axis/time_axis");
    int64_t B = x->shape.dims[ba], T = x->shape.dims[ta];
    if (kiln_shape_numel(&sl->shape) != B)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "sequence_lens must have %lld entries",
                           (long long)B);
    int64_t inner = kiln_ref_prod(&x->shape, 2, x->shape.rank);
    /* element strides of the batch and time coordinates */
    int64_t bst = ba == 0 ? T * inner : inner, tst = ta == 0 ? B * inner : inner;
    size_t es = kiln_dtype_size(x->dtype), nb = (size_t)inner * es;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = kiln_ref_load_index(sl, b);
        if (len < 0 || len > T)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                               (long long)len, (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src_t = t < len ? len - 1 - t : t;
            if (nb > 0)
                memcpy((char *)y->data + (size_t)(b * bst + t * tst) * es,
                       (const char *)x->data + (size_t)(b * bst + src_t * tst) * es, nb);
        }
    }
    return KILN_OK;
}
