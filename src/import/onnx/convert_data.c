/* import/onnx/convert_data.c: ops whose result's shape depends on input
 * values, computed at conversion: window functions and MelWeightMatrix
 * (their sizes), NonZero,
 * Compress, Unique and NonMaxSuppression (the data).
 *
 * Each converter needs its inputs as constants ("must be a constant"
 * otherwise) and binds its outputs as constants computed here. NonZero,
 * Compress and NonMaxSuppression compute them with the kernels the VM runs
 * on run-time tensors (ref/data_dependent.c), so both give the same result.
 * A model where such inputs are run-time data runs on the VM (docs/VM.md):
 * those three, and TopK, run as the VM's own kernels; Unique and the
 * generators are converted per shape class with their inputs bound to their
 * run-time values, so the result is computed here then (each new input
 * value is a new class: a conversion and its allocations). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "ref/data_dependent.h"
#include "ref/elemwise_common.h"
#include "util/error.h"

/* Input k as a constant tensor (folding a chain of constants first). */
static kiln_status in_tensor(onnx_ctx *c, int k, const char *what, kiln_tensor *t,
                             kiln_error *err)
{
    kiln_status s = KILN_OK;
    if (onnx_in(c, k) < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input %d (%s) is missing", k,
                               what);
    onnx_in_const_eval(c, k, what, err, &s);
    if (s != KILN_OK)
        return s;
    return onnx_in_tensor(c, k, what, t, err);
}

/* Allocates *t (dtype, shape) or fails naming the node. */
static kiln_status alloc_out(onnx_ctx *c, kiln_tensor *t, kiln_dtype dt, const kiln_shape *sh,
                             kiln_error *err)
{
    kiln_status s = kiln_tensor_alloc(t, dt, sh, err);
    return s == KILN_OK ? s : onnx_node_prefix(c, s, err);
}

/* Binds *t as output k and releases it. */
static kiln_status bind_release(onnx_ctx *c, int k, kiln_tensor *t, kiln_error *err)
{
    kiln_status s = onnx_bind_const(c, k, t, err);
    kiln_tensor_release(t);
    return s;
}

/* Sorts idx[0..n) stably by cmp(ctx, a, b) (merge sort through tmp[0..n)):
 * no global comparator state, so imports may run on several threads. */
typedef int (*idx_cmp)(const void *ctx, int64_t a, int64_t b);
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, idx_cmp cmp, const void *ctx)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    sort_idx(idx, tmp, h, cmp, ctx);
    sort_idx(idx + h, tmp, n - h, cmp, ctx);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp(ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
}

static bool is_int(kiln_dtype t)
{
    return t != KILN_DTYPE_FLOAT32 && t != KILN_DTYPE_FLOAT64 && t != KILN_DTYPE_FLOAT16;
}

/* ---- window functions ---------------------------------------------------------- */

/* a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N'), N' = size (periodic) or size - 1 */
static kiln_status window(onnx_ctx *c, double a0, double a1, double a2, kiln_error *err)
{
    double size = 0;
    kiln_status s = onnx_in_scalar_eval(c, 0, "size", &size, err);
    if (s != KILN_OK)
        return s;
    if (size < 0 || size > (1 << 28) || size != floor(size))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err, "size %g", size);
    kiln_dtype dt = kiln_dtype_from_onnx((int32_t)onnx_attr_int(c, "output_datatype", 1));
    if (kiln_dtype_size(dt) == 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "output_datatype %lld",
                               (long long)onnx_attr_int(c, "output_datatype", 1));
    int64_t n = (int64_t)size;
    double den = onnx_attr_int(c, "periodic", 1) ? (double)n : (double)(n - 1);
    kiln_shape sh = {.rank = 1, .dims = {n}};
    kiln_tensor t;
    if ((s = alloc_out(c, &t, dt, &sh, err)) != KILN_OK)
        return s;
    for (int64_t i = 0; i < n; i++) {
        double x = den != 0 ? 2 * M_PI * (double)i / den : 0;
        kiln_ew_store_f64(dt, t.data, i, a0 - a1 * cos(x) + a2 * cos(2 * x));
    }
    return bind_release(c, 0, &t, err);
}

static kiln_status conv_hann(onnx_ctx *c, kiln_error *err)
{
    return window(c, 0.5, 0.5, 0, err);
}

static kiln_status conv_hamming(onnx_ctx *c, kiln_error *err)
{
    return window(c, 25.0 / 46.0, 1 - 25.0 / 46.0, 0, err);
}

static kiln_status conv_blackman(onnx_ctx *c, kiln_error *err)
{
    return window(c, 0.42, 0.5, 0.08, err);
}

/* MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters
 * between mel-spaced points, as ONNX's reference computes them (points
 * mel_step = (high - low) / (bins + 2) apart, floored to spectrogram bins). */
static kiln_status conv_mel(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"num_mel_bins", "dft_length", "sample_rate",
                                       "lower_edge_hertz", "upper_edge_hertz"};
    double v[5];
    for (int k = 0; k < 5; k++) {
        kiln_status s = onnx_in_scalar_eval(c, k, what[k], &v[k], err);
        if (s != KILN_OK)
            return s;
    }
    int64_t mels = (int64_t)v[0], dft = (int64_t)v[1], rate = (int64_t)v[2];
    if (mels < 1 || mels > 65536 || dft < 1 || dft > (1 << 24) || rate < 1)
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "num_mel_bins %lld, dft_length %lld, sample_rate %lld",
                               (long long)mels, (long long)dft, (long long)rate);
    kiln_dtype dt = kiln_dtype_from_onnx((int32_t)onnx_attr_int(c, "output_datatype", 1));
    if (kiln_dtype_size(dt) == 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "output_datatype");
    int64_t nspec = dft / 2 + 1;
    kiln_shape sh = {.rank = 2, .dims = {nspec, mels}};
    kiln_tensor t;
    kiln_status s = alloc_out(c, &t, dt, &sh, err);
    if (s != KILN_OK)
        return s;
    int64_t *pt = malloc(sizeof(int64_t) * (size_t)(mels + 2));
    double *w = calloc((size_t)(nspec * mels), sizeof(double));
    if (!pt || !w) {
        free(pt);
        free(w);
        kiln_tensor_release(&t);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    double lo = 2595 * log10(1 + v[3] / 700), hi = 2595 * log10(1 + v[4] / 700);
    double step = (hi - lo) / (double)(mels + 2);
    for (int64_t i = 0; i < mels + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + lo) / 2595) - 1);
        pt[i] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
    }
    for (int64_t m = 0; m < mels && s == KILN_OK; m++) {
        int64_t l = pt[m], ce = pt[m + 1], h = pt[m + 2];
        if (l < 0 || h >= nspec || ce < l || h < ce) {
            s = onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                                "mel band %lld falls outside the spectrogram", (long long)m);
            break;
        }
        if (ce == l)
            w[ce * mels + m] = 1;
        else
            for (int64_t j = l; j <= ce; j++)
                w[j * mels + m] = (double)(j - l) / (double)(ce - l);
        for (int64_t j = ce; j < h; j++)
            w[j * mels + m] = (double)(h - j) / (double)(h - ce);
    }
    for (int64_t i = 0; i < nspec * mels && s == KILN_OK; i++)
        kiln_ew_store_f64(dt, t.data, i, w[i]);
    free(pt);
    free(w);
    if (s != KILN_OK) {
        kiln_tensor_release(&t);
        return s;
    }
    return bind_release(c, 0, &t, err);
}

/* ---- NonZero, Compress ----------------------------------------------------------- */

static kiln_status conv_nonzero(onnx_ctx *c, kiln_error *err)
{
    kiln_tensor x, t;
    kiln_status s = in_tensor(c, 0, "X", &x, err);
    if (s != KILN_OK)
        return s;
    kiln_shape sh = kiln_dd_nonzero_shape(&x);
    if ((s = alloc_out(c, &t, KILN_DTYPE_INT64, &sh, err)) != KILN_OK)
        return s;
    kiln_dd_nonzero(&x, sh.dims[1], t.data);
    return bind_release(c, 0, &t, err);
}

static kiln_status conv_compress(onnx_ctx *c, kiln_error *err)
{
    kiln_tensor x, cond, t;
    kiln_status s = in_tensor(c, 0, "input", &x, err);
    if (s == KILN_OK)
        s = in_tensor(c, 1, "condition", &cond, err);
    if (s != KILN_OK)
        return s;
    kiln_dd_compress_plan p;
    s = kiln_dd_compress_plan_make(&x, &cond, onnx_attr(c, "axis") != NULL,
                                   onnx_attr_int(c, "axis", 0), &p, err);
    if (s != KILN_OK)
        return onnx_node_prefix(c, s, err);
    if ((s = alloc_out(c, &t, x.dtype, &p.shape, err)) != KILN_OK)
        return s;
    kiln_dd_compress(&x, &cond, &p, t.data);
    return bind_release(c, 0, &t, err);
}

/* ---- Unique ---------------------------------------------------------------------- */

typedef struct slices {
    const kiln_tensor *x;
    int64_t n, outer, len, inner; /* slice j: elements (o, j, i) over o < outer, i < inner */
} slices;

static int cmp_elem(const kiln_tensor *x, int64_t a, int64_t b)
{
    if (is_int(x->dtype)) {
        int64_t p = kiln_ew_load_i64(x->dtype, x->data, a), q = kiln_ew_load_i64(x->dtype, x->data, b);
        if (x->dtype == KILN_DTYPE_UINT64)
            return (uint64_t)p < (uint64_t)q ? -1 : (uint64_t)p > (uint64_t)q;
        return p < q ? -1 : p > q;
    }
    double p = kiln_ew_load_f64(x->dtype, x->data, a), q = kiln_ew_load_f64(x->dtype, x->data, b);
    return p < q ? -1 : p > q;
}

/* Lexicographic comparison of slices a and b. */
static int cmp_slice(const slices *s, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            int r = cmp_elem(s->x, (o * s->len + a) * s->inner + i, (o * s->len + b) * s->inner + i);
            if (r)
                return r;
        }
    return 0;
}

static int cmp_order(const void *ctx, int64_t a, int64_t b)
{
    return cmp_slice(ctx, a, b);
}

static kiln_status conv_unique(onnx_ctx *c, kiln_error *err)
{
    kiln_tensor x;
    kiln_status s = in_tensor(c, 0, "X", &x, err);
    if (s != KILN_OK)
        return s;
    bool has_axis = onnx_attr(c, "axis") != NULL, sorted = onnx_attr_int(c, "sorted", 1) != 0;
    int rank = x.shape.rank;
    int64_t axis = onnx_attr_int(c, "axis", 0);
    if (has_axis && axis < 0)
        axis += rank;
    if (has_axis && (axis < 0 || axis >= rank))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err, "axis out of range");
    slices sl = {.x = &x, .outer = 1, .inner = 1, .len = kiln_shape_numel(&x.shape)};
    if (has_axis) {
        sl.len = x.shape.dims[axis];
        for (int d = 0; d < axis; d++)
            sl.outer *= x.shape.dims[d];
        for (int d = (int)axis + 1; d < rank; d++)
            sl.inner *= x.shape.dims[d];
    }
    int64_t n = sl.len;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(4 * n + 1));
    if (!order)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t *first = order + n, *inverse = order + 2 * n; /* first: unique j -> slice */
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    sort_idx(order, order + 3 * n, n, cmp_order, &sl); /* stable: first occurrence first */
    /* groups of equal slices in sorted order; each group's first is its first occurrence */
    int64_t nu = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || cmp_slice(&sl, order[i - 1], order[i]) != 0)
            first[nu++] = order[i];
        inverse[order[i]] = nu - 1; /* group index in sorted order, renumbered below */
    }
    /* unsorted: groups in order of first occurrence */
    int64_t *rank_of = malloc(sizeof(int64_t) * (size_t)(nu + 1));
    int64_t *counts = calloc((size_t)(nu + 1), sizeof(int64_t));
    if (!rank_of || !counts) {
        free(order);
        free(rank_of);
        free(counts);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t g = 0; g < nu; g++)
        rank_of[g] = g;
    if (!sorted) {
        int64_t *by_first = malloc(sizeof(int64_t) * (size_t)(nu + 1));
        if (by_first) {
            for (int64_t g = 0; g < nu; g++)
                by_first[g] = g;
            /* insertion by first occurrence (nu is small for these tests; fine) */
            for (int64_t a = 1; a < nu; a++)
                for (int64_t b = a; b > 0 && first[by_first[b - 1]] > first[by_first[b]]; b--) {
                    int64_t t = by_first[b];
                    by_first[b] = by_first[b - 1];
                    by_first[b - 1] = t;
                }
            for (int64_t r = 0; r < nu; r++)
                rank_of[by_first[r]] = r;
            int64_t *f2 = malloc(sizeof(int64_t) * (size_t)(nu + 1));
            if (f2) {
                for (int64_t g = 0; g < nu; g++)
                    f2[rank_of[g]] = first[g];
                memcpy(first, f2, sizeof(int64_t) * (size_t)nu);
                free(f2);
            }
            free(by_first);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        inverse[i] = rank_of[inverse[i]];
        counts[inverse[i]]++;
    }
    kiln_shape ys = has_axis ? x.shape : (kiln_shape){.rank = 1, .dims = {nu}};
    if (has_axis)
        ys.dims[axis] = nu;
    kiln_shape s_nu = {.rank = 1, .dims = {nu}}, s_n = {.rank = 1, .dims = {n}};
    kiln_tensor y, idx, inv, cnt;
    s = alloc_out(c, &y, x.dtype, &ys, err);
    if (s == KILN_OK) {
        size_t es = kiln_dtype_size(x.dtype), row = es * (size_t)sl.inner;
        for (int64_t o = 0; o < sl.outer; o++)
            for (int64_t g = 0; g < nu; g++)
                memcpy((char *)y.data + (size_t)(o * nu + g) * row,
                       (const char *)x.data + (size_t)(o * n + first[g]) * row, row);
        s = bind_release(c, 0, &y, err);
    }
    const int64_t *src[3] = {first, inverse, counts};
    const kiln_shape *shp[3] = {&s_nu, &s_n, &s_nu};
    kiln_tensor *outs[3] = {&idx, &inv, &cnt};
    for (int k = 0; k < 3 && s == KILN_OK; k++) {
        if (!onnx_out_used(c, k + 1))
            continue;
        s = alloc_out(c, outs[k], KILN_DTYPE_INT64, shp[k], err);
        if (s == KILN_OK) {
            memcpy(outs[k]->data, src[k], sizeof(int64_t) * (size_t)shp[k]->dims[0]);
            s = bind_release(c, k + 1, outs[k], err);
        }
    }
    free(order);
    free(rank_of);
    free(counts);
    return s;
}

/* ---- NonMaxSuppression ------------------------------------------------------------ */

static kiln_status conv_nms(onnx_ctx *c, kiln_error *err)
{
    kiln_tensor boxes, scores, t;
    kiln_status s = in_tensor(c, 0, "boxes", &boxes, err);
    if (s == KILN_OK)
        s = in_tensor(c, 1, "scores", &scores, err);
    if (s != KILN_OK)
        return s;
    kiln_dd_nms_params prm = {.score_threshold = -INFINITY,
                              .has_score_threshold = onnx_in(c, 4) >= 0,
                              .center_point_box = onnx_attr_int(c, "center_point_box", 0) != 0};
    if (onnx_in(c, 2) >= 0 && (s = onnx_in_scalar_eval(c, 2, "max_output_boxes_per_class",
                                                       &prm.max_output_boxes_per_class,
                                                       err)) != KILN_OK)
        return s;
    if (onnx_in(c, 3) >= 0 &&
        (s = onnx_in_scalar_eval(c, 3, "iou_threshold", &prm.iou_threshold, err)) != KILN_OK)
        return s;
    if (prm.has_score_threshold &&
        (s = onnx_in_scalar_eval(c, 4, "score_threshold", &prm.score_threshold, err)) != KILN_OK)
        return s;
    kiln_dd_nms_plan p;
    if ((s = kiln_dd_nms_plan_make(&boxes, &scores, &prm, &p, err)) != KILN_OK)
        return onnx_node_prefix(c, s, err);
    void *w = malloc(p.workspace);
    if (!w)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    const int64_t *sel;
    int64_t n_sel = kiln_dd_nms(&boxes, &scores, &prm, &p, w, &sel);
    kiln_shape sh = {.rank = 2, .dims = {n_sel, 3}};
    s = alloc_out(c, &t, KILN_DTYPE_INT64, &sh, err);
    if (s == KILN_OK) {
        memcpy(t.data, sel, sizeof(int64_t) * (size_t)(3 * n_sel));
        s = bind_release(c, 0, &t, err);
    }
    free(w);
    return s;
}

const onnx_converter onnx_data_converters[] = {
    {"HannWindow", 17, conv_hann, "periodic:int output_datatype:int"},
    {"HammingWindow", 17, conv_hamming, "periodic:int output_datatype:int"},
    {"BlackmanWindow", 17, conv_blackman, "periodic:int output_datatype:int"},
    {"MelWeightMatrix", 17, conv_mel, "output_datatype:int"},
    {"NonZero", 9, conv_nonzero, ""},
    {"Compress", 9, conv_compress, "axis:int"},
    {"Compress", 11, conv_compress, "axis:int"},
    {"Unique", 11, conv_unique, "axis:int sorted:int"},
    {"NonMaxSuppression", 10, conv_nms, "center_point_box:int"},
    {"NonMaxSuppression", 11, conv_nms, "center_point_box:int"},
    {NULL, 0, NULL, NULL},
};
