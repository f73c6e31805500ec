/* ref/pool.c: reference MaxPool (with its Indices output), AveragePool,
 * LpPool, GlobalAveragePool and GlobalMaxPool (NCHW, 1-D/2-D/3-D; float32 and
 * float64, MaxPool also int8/uint8).
 *
 * Window ops run as 3-D ones with leading spatial extents of 1. Each output
 * cell visits its window taps start + k*dilation (start = o*stride -
 * pad_begin) per dimension; taps outside X are padding. MaxPool takes the
 * maximum over real cells only (padding never wins; a window without any
 * real cell, possible only with dilation, yields -inf). AveragePool divides
 * the sum of the real cells by the number of real taps (count_include_pad=0)
 * or by the number of taps inside the padded extent [-pad_begin,
 * in + pad_end) (count_include_pad=1, i.e. the window clipped to the padded
 * input, as ONNX's reference does with ceil_mode). LpPool takes
 * (sum over real cells of |x|^p)^(1/p). MaxPool's Indices are flat offsets
 * into X of the first maximum in tap order: row-major, or with
 * storage_order=1 column-major over the spatial dims (h + H*w in 2-D), plus
 * the plane offset (n*C + c) * spatial size. Sums are in double. */
#include <math.h>

#include "ir/infer_util.h"
#include "ref/ref.h"

typedef struct geom3 {
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
} geom3;

/* Resolves the pooling geometry of node `n` for X and promotes it to 3-D. */
static kiln_status pool_geometry(const kiln_node *n, const char *op, const kiln_tensor *x,
                                 const kiln_tensor *y, geom3 *g3, kiln_error *err)
{
    const int64_t *ks = NULL;
    int klen = kiln_attr_ints(n, "kernel_shape", &ks);
    if (klen != x->shape.rank - 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s: bad or missing kernel_shape", op);
    kiln_window g;
    kiln_status s = kiln_window_resolve(n, op, &x->shape, ks, true, &g, err);
    if (s != KILN_OK)
        return s;
    int lead = 3 - g.nsp;
    int64_t out_numel = x->shape.dims[0] * x->shape.dims[1];
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        g3->in[i] = j < 0 ? 1 : g.in[j];
        g3->k[i] = j < 0 ? 1 : g.kernel[j];
        g3->s[i] = j < 0 ? 1 : g.stride[j];
        g3->d[i] = j < 0 ? 1 : g.dilation[j];
        g3->pb[i] = j < 0 ? 0 : g.pad_begin[j];
        g3->pe[i] = j < 0 ? 0 : g.pad_end[j];
        g3->out[i] = j < 0 ? 1 : g.out[j];
        out_numel *= g3->out[i];
    }
    if (kiln_shape_numel(&y->shape) != out_numel)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: output buffer has the wrong size", op);
    return KILN_OK;
}

/* Number of taps start + k*d (0 <= k < taps) in [lo, hi). */
static int64_t taps_inside(int64_t start, int64_t taps, int64_t d, int64_t lo, int64_t hi)
{
    int64_t count = 0;
    for (int64_t k = 0; k < taps; k++) {
        int64_t p = start + k * d;
        count += p >= lo && p < hi;
    }
    return count;
}

enum { POOL_MAX, POOL_AVG, POOL_LP };

typedef struct pool_args {
    const geom3 *g;
    int kind;
    bool include_pad, col_major;
    int64_t p;      /* LpPool's exponent */
    int64_t planes; /* N * C */
    int64_t *ind;   /* MaxPool's Indices, or NULL */
} pool_args;

/* One typed pooling loop per element type: every output cell visits its
 * window's real taps; max compares in T, the sums are in double. */
#define DEFINE_POOL(SUF, T)                                                                        \
    static void pool_##SUF(const pool_args *a, const T *x, T *y)                                   \
    {                                                                                              \
        const geom3 *g = a->g;                                                                     \
        int64_t in_plane = g->in[0] * g->in[1] * g->in[2];                                         \
        int64_t out_plane = g->out[0] * g->out[1] * g->out[2];                                     \
        for (int64_t p = 0; p < a->planes; p++) {                                                  \
            const T *xp = x + p * in_plane;                                                        \
            for (int64_t od = 0; od < g->out[0]; od++) {                                           \
                int64_t sd = od * g->s[0] - g->pb[0];                                              \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                       \
                    int64_t sh = oh * g->s[1] - g->pb[1];                                          \
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {                                   \
                        int64_t sw = ow * g->s[2] - g->pb[2];                                      \
                        T best = 0;                                                                \
                        int64_t best_at = 0;                                                       \
                        double sum = 0.0;                                                          \
                        int64_t real = 0;                                                          \
                        for (int64_t kd = 0; kd < g->k[0]; kd++) {                                 \
                            int64_t id = sd + kd * g->d[0];                                        \
                            if (id < 0 || id >= g->in[0])                                          \
                                continue;                                                          \
                            for (int64_t kh = 0; kh < g->k[1]; kh++) {                             \
                                int64_t ih = sh + kh * g->d[1];                                    \
                                if (ih < 0 || ih >= g->in[1])                                      \
                                    continue;                                                      \
                                const T *row = xp + (id * g->in[1] + ih) * g->in[2];               \
                                for (int64_t kw = 0; kw < g->k[2]; kw++) {                         \
                                    int64_t iw = sw + kw * g->d[2];                                \
                                    if (iw < 0 || iw >= g->in[2])                                  \
                                        continue;                                                  \
                                    T v = row[iw];                                                 \
                                    if (a->kind == POOL_MAX) {                                     \
                                        if (real == 0 || v > best) {                               \
                                            best = v;                                              \
                                            best_at = a->col_major                                 \
                                                          ? id + g->in[0] * (ih + g->in[1] * iw)   \
                                                          : (id * g->in[1] + ih) * g->in[2] + iw;  \
                                        }                                                          \
                                    } else if (a->kind == POOL_AVG) {                              \
                                        sum += (double)v;                                          \
                                    } else {                                                       \
                                        sum += pow(fabs((double)v), (double)a->p);                 \
                                    }                                                              \
                                    real++;                                                        \
                                }                                                                  \
                            }                                                                      \
                        }                                                                          \
                        int64_t q = p * out_plane + (od * g->out[1] + oh) * g->out[2] + ow;        \
                        if (a->kind == POOL_MAX) {                                                 \
                            y[q] = real ? best : pool_lowest_##SUF();                              \
                            if (a->ind)                                                            \
                                a->ind[q] = p * in_plane + best_at;                                \
                        } else if (a->kind == POOL_LP) {                                           \
                            y[q] = (T)pow(sum, 1.0 / (double)a->p);                                \
                        } else {                                                                   \
                            int64_t count = real;                                                  \
                            if (a->include_pad)                                                    \
                                count = taps_inside(sd, g->k[0], g->d[0], -g->pb[0],               \
                                                    g->in[0] + g->pe[0]) *                         \
                                        taps_inside(sh, g->k[1], g->d[1], -g->pb[1],               \
                                                    g->in[1] + g->pe[1]) *                         \
                                        taps_inside(sw, g->k[2], g->d[2], -g->pb[2],               \
                                                    g->in[2] + g->pe[2]);                          \
                            y[q] = count > 0 ? (T)(sum / (double)count) : (T)0;                    \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* The value of an empty max window (possible only with dilation). */
static inline float pool_lowest_f32(void) { return -INFINITY; }
static inline double pool_lowest_f64(void) { return -INFINITY; }
static inline int8_t pool_lowest_i8(void) { return INT8_MIN; }
static inline uint8_t pool_lowest_u8(void) { return 0; }

DEFINE_POOL(f32, float)
DEFINE_POOL(f64, double)
DEFINE_POOL(i8, int8_t)
DEFINE_POOL(u8, uint8_t)

/* Shared driver for MaxPool, AveragePool and LpPool. */
static kiln_status pool(const kiln_node *n, const kiln_tensor *xt, kiln_tensor *yt,
                        kiln_tensor *it, int kind, kiln_error *err)
{
    const char *op = kind == POOL_MAX ? "MaxPool" : kind == POOL_LP ? "LpPool" : "AveragePool";
    geom3 g;
    kiln_status s = pool_geometry(n, op, xt, yt, &g, err);
    if (s != KILN_OK)
        return s;
    if (yt->dtype != xt->dtype || (it && (it->dtype != KILN_DTYPE_INT64 ||
                                          kiln_shape_numel(&it->shape) !=
                                              kiln_shape_numel(&yt->shape))))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: output types or sizes are wrong", op);
    pool_args a = {.g = &g,
                   .kind = kind,
                   .include_pad = kiln_attr_int(n, "count_include_pad", 0) == 1,
                   .col_major = kiln_attr_int(n, "storage_order", 0) == 1,
                   .p = kiln_attr_int(n, "p", 2),
                   .planes = xt->shape.dims[0] * xt->shape.dims[1],
                   .ind = it ? it->data : NULL};
    switch (xt->dtype) {
    case KILN_DTYPE_FLOAT32:
        pool_f32(&a, xt->data, yt->data);
        return KILN_OK;
    case KILN_DTYPE_FLOAT64:
        pool_f64(&a, xt->data, yt->data);
        return KILN_OK;
    case KILN_DTYPE_INT8:
        if (kind == POOL_MAX) {
            pool_i8(&a, xt->data, yt->data);
            return KILN_OK;
        }
        break;
    case KILN_DTYPE_UINT8:
        if (kind == POOL_MAX) {
            pool_u8(&a, xt->data, yt->data);
            return KILN_OK;
        }
        break;
    default:
        break;
    }
    return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "%s: X is %s, not supported", op,
                       kiln_dtype_name(xt->dtype));
}

kiln_status kiln_ref_maxpool(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    return pool(n, in[0], out[0], n->n_outputs > 1 ? out[1] : NULL, POOL_MAX, err);
}

kiln_status kiln_ref_averagepool(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, kiln_error *err)
{
    return pool(n, in[0], out[0], NULL, POOL_AVG, err);
}

kiln_status kiln_ref_lppool(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    return pool(n, in[0], out[0], NULL, POOL_LP, err);
}

/* GlobalAveragePool / GlobalMaxPool: one mean or max per (n, c) plane. */
static kiln_status global_pool(const kiln_tensor *xt, kiln_tensor *yt, bool is_max,
                               kiln_error *err)
{
    const char *op = is_max ? "GlobalMaxPool" : "GlobalAveragePool";
    if (xt->shape.rank < 3)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s: X has rank %d, expected >= 3", op,
                           xt->shape.rank);
    int64_t planes = xt->shape.dims[0] * xt->shape.dims[1], size = 1;
    for (int i = 2; i < xt->shape.rank; i++)
        size *= xt->shape.dims[i];
    if (size < 1 || kiln_shape_numel(&yt->shape) != planes || yt->dtype != xt->dtype)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: bad output or empty input", op);
    bool f64 = xt->dtype == KILN_DTYPE_FLOAT64;
    if (!f64 && xt->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "%s: X is %s, not supported", op,
                           kiln_dtype_name(xt->dtype));
    const float *xf = xt->data;
    const double *xd = xt->data;
    for (int64_t p = 0; p < planes; p++) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < size; i++) {
            double v = f64 ? xd[p * size + i] : (double)xf[p * size + i];
            if (is_max)
                acc = (v > acc || i == 0) ? v : acc;
            else
                acc += v;
        }
        if (!is_max)
            acc /= (double)size;
        if (f64)
            ((double *)yt->data)[p] = acc;
        else
            ((float *)yt->data)[p] = (float)acc;
    }
    return KILN_OK;
}

kiln_status kiln_ref_global_averagepool(const kiln_node *n, const kiln_tensor *const *in,
                                        kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    return global_pool(in[0], out[0], false, err);
}

kiln_status kiln_ref_global_maxpool(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    return global_pool(in[0], out[0], true, err);
}
