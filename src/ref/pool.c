/* ref/pool.c: reference MaxPool, AveragePool and GlobalAveragePool (NCHW,
 * 1-D/2-D/3-D).
 *
 * Window ops run as 3-D ones with leading spatial extents of 1. Each output
 * cell visits its window taps start + k*dilation (start = o*stride -
 * pad_begin) per dimension; taps outside X are padding. MaxPool takes the
 * maximum over real cells only (padding never wins; a window without any
 * real cell, possible only with dilation, yields -inf). AveragePool divides
 * the sum of the real cells by the number of real taps (count_include_pad=0)
 * or by the number of taps inside the padded extent [-pad_begin,
 * in + pad_end) (count_include_pad=1, i.e. the window clipped to the padded
 * input, as ONNX's reference does with ceil_mode). Sums are in double. */
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

/* Shared driver: max when `is_max`, else average. */
static kiln_status pool(const kiln_node *n, const kiln_tensor *xt, kiln_tensor *yt, bool is_max,
                        kiln_error *err)
{
    const char *op = is_max ? "MaxPool" : "AveragePool";
    geom3 g;
    kiln_status s = pool_geometry(n, op, xt, yt, &g, err);
    if (s != KILN_OK)
        return s;
    bool include_pad = kiln_attr_int(n, "count_include_pad", 0) == 1;
    int64_t planes = xt->shape.dims[0] * xt->shape.dims[1];
    int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
    int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
    const float *x = xt->data;
    float *y = yt->data;
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * in_plane;
        float *yp = y + p * out_plane;
        for (int64_t od = 0; od < g.out[0]; od++) {
            int64_t sd = od * g.s[0] - g.pb[0];
            for (int64_t oh = 0; oh < g.out[1]; oh++) {
                int64_t sh = oh * g.s[1] - g.pb[1];
                for (int64_t ow = 0; ow < g.out[2]; ow++) {
                    int64_t sw = ow * g.s[2] - g.pb[2];
                    float best = -INFINITY;
                    double sum = 0.0;
                    int64_t real = 0;
                    for (int64_t kd = 0; kd < g.k[0]; kd++) {
                        int64_t id = sd + kd * g.d[0];
                        if (id < 0 || id >= g.in[0])
                            continue;
                        for (int64_t kh = 0; kh < g.k[1]; kh++) {
                            int64_t ih = sh + kh * g.d[1];
                            if (ih < 0 || ih >= g.in[1])
                                continue;
                            const float *row = xp + (id * g.in[1] + ih) * g.in[2];
                            for (int64_t kw = 0; kw < g.k[2]; kw++) {
                                int64_t iw = sw + kw * g.d[2];
                                if (iw < 0 || iw >= g.in[2])
                                    continue;
                                float v = row[iw];
                                if (real == 0 || v > best)
                                    best = v;
                                sum += v;
                                real++;
                            }
                        }
                    }
                    float *dst = &yp[(od * g.out[1] + oh) * g.out[2] + ow];
                    if (is_max) {
                        *dst = best;
                        continue;
                    }
                    int64_t count = real;
                    if (include_pad) {
                        count = taps_inside(sd, g.k[0], g.d[0], -g.pb[0], g.in[0] + g.pe[0]) *
                                taps_inside(sh, g.k[1], g.d[1], -g.pb[1], g.in[1] + g.pe[1]) *
                                taps_inside(sw, g.k[2], g.d[2], -g.pb[2], g.in[2] + g.pe[2]);
                    }
                    *dst = count > 0 ? (float)(sum / (double)count) : 0.0f;
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_maxpool(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    return pool(n, in[0], out[0], true, err);
}

kiln_status kiln_ref_averagepool(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, kiln_error *err)
{
    return pool(n, in[0], out[0], false, err);
}

kiln_status kiln_ref_global_averagepool(const kiln_node *n, const kiln_tensor *const *in,
                                        kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_tensor *xt = in[0];
    if (xt->shape.rank < 3)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "GlobalAveragePool: X has rank %d, expected >= 3",
                           xt->shape.rank);
    int64_t planes = xt->shape.dims[0] * xt->shape.dims[1], size = 1;
    for (int i = 2; i < xt->shape.rank; i++)
        size *= xt->shape.dims[i];
    if (size < 1 || kiln_shape_numel(&out[0]->shape) != planes)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "GlobalAveragePool: bad output or empty input");
    const float *x = xt->data;
    float *y = out[0]->data;
    for (int64_t p = 0; p < planes; p++) {
        double sum = 0.0;
        for (int64_t i = 0; i < size; i++)
            sum += x[p * size + i];
        y[p] = (float)(sum / (double)size);
    }
    return KILN_OK;
}
