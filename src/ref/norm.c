/* ref/norm.c: reference BatchNormalization, Softmax and LayerNormalization.
 *
 * All three view X as (outer, len, inner) blocks around the dims they work on:
 * - BatchNormalization (inference): per channel c of (N, C, rest),
 *   y = (x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + B[c].
 * - Softmax: along one axis, outer = dims before, inner = dims after; per
 *   line, subtract the max, exponentiate, divide by the sum (in double).
 * - LayerNormalization: per row of the trailing dims axis..rank-1, the mean
 *   and (population) variance in double, then
 *   y = (x - mean) / sqrt(var + eps) * Scale + B.
 */
#include <math.h>

#include "ir/infer_util.h"
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

kiln_status kiln_ref_softmax(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    const kiln_shape *xs = &in[0]->shape;
    int r = xs->rank;
    int64_t axis = kiln_attr_int(n, "axis", -1);
    if (r < 1 || axis < -r || axis >= r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "Softmax: axis %lld out of range",
                           (long long)axis);
    int ax = (int)(axis < 0 ? axis + r : axis);
    int64_t outer = kiln_ref_prod(xs, 0, ax), len = xs->dims[ax], inner = kiln_ref_prod(xs, ax + 1, r);
    const float *x = in[0]->data;
    float *y = out[0]->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const float *xl = x + o * len * inner + i;
            float *yl = y + o * len * inner + i;
            float mx = -INFINITY;
            for (int64_t j = 0; j < len; j++)
                if (xl[j * inner] > mx)
                    mx = xl[j * inner];
            double sum = 0.0;
            for (int64_t j = 0; j < len; j++) {
                float e = expf(xl[j * inner] - mx);
                yl[j * inner] = e;
                sum += e;
            }
            for (int64_t j = 0; j < len; j++)
                yl[j * inner] = (float)(yl[j * inner] / sum);
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_layernorm(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_shape *xs = &in[0]->shape;
    const kiln_tensor *st = in[1], *bt = n->n_inputs > 2 ? in[2] : NULL;
    int r = xs->rank;
    int64_t axis = kiln_attr_int(n, "axis", -1);
    if (r < 1 || axis < -r || axis >= r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "LayerNormalization: axis %lld out of range",
                           (long long)axis);
    int ax = (int)(axis < 0 ? axis + r : axis);
    int64_t rows = kiln_ref_prod(xs, 0, ax), size = kiln_ref_prod(xs, ax, r);
    if (kiln_shape_numel(&st->shape) != size || (bt && kiln_shape_numel(&bt->shape) != size))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "LayerNormalization: Scale/B do not have %lld entries", (long long)size);
    double eps = kiln_attr_float(n, "epsilon", 1e-5f);
    const float *x = in[0]->data, *scale = st->data, *bias = bt ? bt->data : NULL;
    float *y = out[0]->data;
    for (int64_t row = 0; row < rows; row++) {
        const float *xr = x + row * size;
        float *yr = y + row * size;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < size; i++)
            mean += xr[i];
        mean /= (double)size;
        for (int64_t i = 0; i < size; i++)
            var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        var /= (double)size;
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < size; i++) {
            double v = ((double)xr[i] - mean) * inv * scale[i];
            yr[i] = (float)(bias ? v + bias[i] : v);
        }
    }
    return KILN_OK;
}

