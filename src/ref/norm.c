/* ref/norm.c: reference normalizations. Statistics are computed in double,
 * with two passes (mean, then the mean of squared deviations), over groups of
 * elements that X's (outer, len, inner) decomposition makes contiguous or
 * strided:
 * - BatchNormalization (inference, float32): per channel c of (N, C, rest),
 *   y = (x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + B[c].
 * - LayerNormalization: per row of the trailing dims axis..rank-1,
 *   y = (x - mean) / sqrt(var + eps) * Scale + B; the optional outputs Mean
 *   and InvStdDev (float32) get one entry per row.
 * - InstanceNormalization: per (n, c) over the spatial dims,
 *   y = scale[c] * (x - mean) / sqrt(var + eps) + B[c].
 * - LRN: across channels, y = x / (bias + alpha / size * sum of x^2 over the
 *   channels c - floor((size-1)/2) .. c + ceil((size-1)/2))^beta.
 * - MeanVarianceNormalization: per group of elements sharing the dims not in
 *   `axes`, y = (x - mean) / (sqrt(var) + 1e-9) (ONNX's function body).
 * - LpNormalization: per line along `axis`, y = x / ||x||_p (p = 1 or 2; a
 *   zero norm gives 0).
 * float32 and float64 (except BatchNormalization: float32) through
 * ref/real.h.
 */
#include <math.h>

#include "ir/infer_norm.h"
#include "ir/infer_util.h"
#include "ref/real.h"
#include "ref/ref.h"

kiln_status kiln_ref_batchnorm(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "BatchNormalization: X has rank %d",
                           xs->rank);
    int64_t batch = xs->dims[0], channels = xs->dims[1], inner = kiln_ref_prod(xs, 2, xs->rank);
    for (int k = 1; k < 5; k++)
        if (kiln_shape_numel(&in[k]->shape) != channels)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "BatchNormalization: input %d does not have %lld entries", k,
                               (long long)channels);
    double eps = kiln_attr_float(n, "epsilon", 1e-5f);
    const float *x = in[0]->data, *scale = in[1]->data, *bias = in[2]->data;
    const float *mean = in[3]->data, *var = in[4]->data;
    float *y = out[0]->data;
    for (int64_t c = 0; c < channels; c++) {
        float mul = (float)((double)scale[c] / sqrt((double)var[c] + eps));
        float mu = mean[c], b = bias[c];
        for (int64_t nb = 0; nb < batch; nb++) {
            const float *xp = x + (nb * channels + c) * inner;
            float *yp = y + (nb * channels + c) * inner;
            for (int64_t i = 0; i < inner; i++)
                yp[i] = (xp[i] - mu) * mul + b;
        }
    }
    return KILN_OK;
}

/* Resolves attribute `axis` (default `def`) against the rank of `xs`. */
static kiln_status ref_axis(const kiln_node *n, const kiln_shape *xs, int64_t def, int *ax,
                            kiln_error *err)
{
    int r = xs->rank;
    int64_t axis = kiln_attr_int(n, "axis", def);
    if (r < 1 || axis < -r || axis >= r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s: axis %lld out of range for rank %d",
                           kiln_op_name(n->op), (long long)axis, r);
    *ax = (int)(axis < 0 ? axis + r : axis);
    return KILN_OK;
}

kiln_status kiln_ref_layernorm(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0], *st = in[1], *bt = n->n_inputs > 2 ? in[2] : NULL;
    const kiln_shape *xs = &xt->shape;
    int ax = 0;
    kiln_status s = ref_axis(n, xs, -1, &ax, err);
    if (s != KILN_OK)
        return s;
    int64_t rows = kiln_ref_prod(xs, 0, ax), size = kiln_ref_prod(xs, ax, xs->rank);
    if (kiln_shape_numel(&st->shape) != size || (bt && kiln_shape_numel(&bt->shape) != size))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "LayerNormalization: Scale/B do not have %lld entries", (long long)size);
    double eps = kiln_attr_float(n, "epsilon", 1e-5f);
    kiln_tensor *mean_t = n->n_outputs > 1 ? out[1] : NULL;
    kiln_tensor *inv_t = n->n_outputs > 2 ? out[2] : NULL;
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = row * size;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < size; i++)
            mean += kiln_real_ld(xt, off + i);
        mean /= (double)size;
        for (int64_t i = 0; i < size; i++) {
            double d = kiln_real_ld(xt, off + i) - mean;
            var += d * d;
        }
        var /= (double)size;
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < size; i++) {
            double v = (kiln_real_ld(xt, off + i) - mean) * inv * kiln_real_ld(st, i);
            kiln_real_st(out[0], off + i, bt ? v + kiln_real_ld(bt, i) : v);
        }
        if (mean_t)
            kiln_real_st(mean_t, row, mean);
        if (inv_t)
            kiln_real_st(inv_t, row, inv);
    }
    return KILN_OK;
}

kiln_status kiln_ref_instancenorm(const kiln_node *n, const kiln_tensor *const *in,
                                  kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0], *st = in[1], *bt = in[2];
    const kiln_shape *xs = &xt->shape;
    if (xs->rank < 2 || kiln_shape_numel(&st->shape) != xs->dims[1] ||
        kiln_shape_numel(&bt->shape) != xs->dims[1])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "InstanceNormalization: X needs rank >= 2 and scale/B one entry per "
                           "channel");
    int64_t groups = xs->dims[0] * xs->dims[1], channels = xs->dims[1];
    int64_t size = kiln_ref_prod(xs, 2, xs->rank);
    double eps = kiln_attr_float(n, "epsilon", 1e-5f);
    for (int64_t g = 0; g < groups; g++) {
        int64_t off = g * size, c = g % channels;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < size; i++)
            mean += kiln_real_ld(xt, off + i);
        mean /= (double)(size ? size : 1);
        for (int64_t i = 0; i < size; i++) {
            double d = kiln_real_ld(xt, off + i) - mean;
            var += d * d;
        }
        var /= (double)(size ? size : 1);
        double mul = kiln_real_ld(st, c) / sqrt(var + eps), b = kiln_real_ld(bt, c);
        for (int64_t i = 0; i < size; i++)
            kiln_real_st(out[0], off + i, (kiln_real_ld(xt, off + i) - mean) * mul + b);
    }
    return KILN_OK;
}

kiln_status kiln_ref_lrn(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    int64_t size = kiln_attr_int(n, "size", 0);
    if (xs->rank < 2 || size < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "LRN: X needs rank >= 2 and size >= 1 (size %lld)", (long long)size);
    double alpha = kiln_attr_float(n, "alpha", 1e-4f), beta = kiln_attr_float(n, "beta", 0.75f);
    double bias = kiln_attr_float(n, "bias", 1.0f);
    int64_t batch = xs->dims[0], channels = xs->dims[1], inner = kiln_ref_prod(xs, 2, xs->rank);
    int64_t before = (size - 1) / 2, after = size - 1 - before; /* floor, ceil of (size-1)/2 */
    for (int64_t b = 0; b < batch; b++)
        for (int64_t c = 0; c < channels; c++) {
            int64_t lo = c - before < 0 ? 0 : c - before;
            int64_t hi = c + after >= channels ? channels - 1 : c + after;
            for (int64_t i = 0; i < inner; i++) {
                double sq = 0.0;
                for (int64_t k = lo; k <= hi; k++) {
                    double v = kiln_real_ld(xt, (b * channels + k) * inner + i);
                    sq += v * v;
                }
                int64_t at = (b * channels + c) * inner + i;
                double den = pow(bias + alpha / (double)size * sq, beta);
                kiln_real_st(out[0], at, kiln_real_ld(xt, at) / den);
            }
        }
    return KILN_OK;
}

kiln_status kiln_ref_mvn(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    bool reduced[KILN_MAX_RANK];
    kiln_status s = kiln_mvn_axes(n, xs, reduced, err);
    if (s != KILN_OK)
        return s;
    int64_t strides[KILN_MAX_RANK];
    kiln_ref_strides(xs, strides);
    /* kept dims enumerate the groups, reduced dims the members of a group */
    kiln_shape kept = {.rank = 0}, red = {.rank = 0};
    int64_t kst[KILN_MAX_RANK], rst[KILN_MAX_RANK];
    for (int d = 0; d < xs->rank; d++) {
        if (reduced[d]) {
            rst[red.rank] = strides[d];
            red.dims[red.rank++] = xs->dims[d];
        } else {
            kst[kept.rank] = strides[d];
            kept.dims[kept.rank++] = xs->dims[d];
        }
    }
    int64_t groups = kiln_shape_numel(&kept), members = kiln_shape_numel(&red);
    if (members == 0)
        return KILN_OK;
    for (int64_t g = 0; g < groups; g++) {
        int64_t base = 0, rem = g;
        for (int d = kept.rank - 1; d >= 0; d--) {
            base += (rem % kept.dims[d]) * kst[d];
            rem /= kept.dims[d];
        }
        double mean = 0.0, var = 0.0;
        for (int pass = 0; pass < 3; pass++) {
            double sd = sqrt(var) + 1e-9;
            for (int64_t m = 0; m < members; m++) {
                int64_t off = base, r2 = m;
                for (int d = red.rank - 1; d >= 0; d--) {
                    off += (r2 % red.dims[d]) * rst[d];
                    r2 /= red.dims[d];
                }
                double v = kiln_real_ld(xt, off);
                if (pass == 0)
                    mean += v;
                else if (pass == 1)
                    var += (v - mean) * (v - mean);
                else
                    kiln_real_st(out[0], off, (v - mean) / sd);
            }
            if (pass == 0)
                mean /= (double)members;
            else if (pass == 1)
                var /= (double)members;
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_lpnorm(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    int ax = 0;
    kiln_status s = ref_axis(n, xs, -1, &ax, err);
    if (s != KILN_OK)
        return s;
    int64_t p = kiln_attr_int(n, "p", 2);
    if (p != 1 && p != 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "LpNormalization: p %lld", (long long)p);
    int64_t outer = kiln_ref_prod(xs, 0, ax), len = xs->dims[ax];
    int64_t inner = kiln_ref_prod(xs, ax + 1, xs->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double norm = 0.0;
            for (int64_t j = 0; j < len; j++) {
                double v = kiln_real_ld(xt, base + j * inner);
                norm += p == 1 ? fabs(v) : v * v;
            }
            if (p == 2)
                norm = sqrt(norm);
            for (int64_t j = 0; j < len; j++) {
                double v = kiln_real_ld(xt, base + j * inner);
                kiln_real_st(out[0], base + j * inner, norm > 0 ? v / norm : 0.0);
            }
        }
    return KILN_OK;
}
