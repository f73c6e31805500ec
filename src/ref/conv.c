/* ref/conv.c: reference Conv (NCHW, 1-D/2-D/3-D, groups, dilation, strides,
 * explicit or auto pads).
 *
 * 1-D and 2-D convolutions are run as 3-D ones with leading spatial extents
 * of 1. For each image and output channel, the output plane is set to the
 * bias and then, for every input channel of the group and every kernel tap,
 * the tap's weight times the shifted input is accumulated into the plane:
 *     y[od, oh, ow] += w * x[od*sd + kd*dd - pd, oh*sh + kh*dh - ph, ow*sw + kw*dw - pw]
 * The output ranges whose input index falls inside X are computed once per
 * tap, so the innermost loop runs over output columns with no branches (and
 * over whole planes when the tap maps whole rows onto whole rows); gcc
 * vectorizes it for unit stride. Accumulation is in float. */
#include "ir/infer_util.h"
#include "ref/ref.h"

/* The outputs o in [*lo, *hi) whose input index o*stride + offset lies in
 * [0, in); an empty range has *lo >= *hi. */
static void valid_range(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t *lo,
                        int64_t *hi)
{
    int64_t l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int64_t h = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
    *lo = l;
    *hi = h < out ? h : out;
}

/* y[i] += w * x[i * stride] for i in [0, count). */
static void axpy_strided(float *restrict y, const float *restrict x, float w, int64_t count,
                         int64_t stride)
{
    if (stride == 1) {
        for (int64_t i = 0; i < count; i++)
            y[i] += w * x[i];
    } else {
        for (int64_t i = 0; i < count; i++)
            y[i] += w * x[i * stride];
    }
}

kiln_status kiln_ref_conv(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0], *wt = in[1], *bt = n->n_inputs > 2 ? in[2] : NULL;
    kiln_tensor *yt = out[0];
    kiln_window g;
    kiln_status s = kiln_window_resolve(n, "Conv", &xt->shape, wt->shape.dims + 2, false, &g, err);
    if (s != KILN_OK)
        return s;
    /* 3-D geometry: index 0 = depth, 1 = height, 2 = width */
    int64_t I[3], K[3], S[3], D[3], P[3], O[3];
    int lead = 3 - g.nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        I[i] = j < 0 ? 1 : g.in[j];
        K[i] = j < 0 ? 1 : g.kernel[j];
        S[i] = j < 0 ? 1 : g.stride[j];
        D[i] = j < 0 ? 1 : g.dilation[j];
        P[i] = j < 0 ? 0 : g.pad_begin[j];
        O[i] = j < 0 ? 1 : g.out[j];
    }
    int64_t batch = xt->shape.dims[0], c_in = xt->shape.dims[1], m_out = wt->shape.dims[0];
    int64_t group = kiln_attr_int(n, "group", 1);
    int64_t cg = c_in / group, mg = m_out / group;
    int64_t in_plane = I[0] * I[1] * I[2], out_plane = O[0] * O[1] * O[2];
    int64_t taps = K[0] * K[1] * K[2];
    if (kiln_shape_numel(&yt->shape) != batch * m_out * out_plane)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "Conv: output buffer has the wrong size");
    const float *x = xt->data, *w = wt->data, *bias = bt ? bt->data : NULL;
    float *y = yt->data;

    for (int64_t nb = 0; nb < batch; nb++) {
        for (int64_t m = 0; m < m_out; m++) {
            float *yp = y + (nb * m_out + m) * out_plane;
            float b0 = bias ? bias[m] : 0.0f;
            for (int64_t i = 0; i < out_plane; i++)
                yp[i] = b0;
            int64_t c0 = (m / mg) * cg; /* first input channel of m's group */
            for (int64_t c = 0; c < cg; c++) {
                const float *xp = x + (nb * c_in + c0 + c) * in_plane;
                const float *wp = w + (m * cg + c) * taps;
                for (int64_t kd = 0; kd < K[0]; kd++) {
                    int64_t offd = kd * D[0] - P[0], dlo, dhi;
                    valid_range(offd, S[0], I[0], O[0], &dlo, &dhi);
                    for (int64_t kh = 0; kh < K[1]; kh++) {
                        int64_t offh = kh * D[1] - P[1], hlo, hhi;
                        valid_range(offh, S[1], I[1], O[1], &hlo, &hhi);
                        for (int64_t kw = 0; kw < K[2]; kw++) {
                            int64_t offw = kw * D[2] - P[2], wlo, whi;
                            valid_range(offw, S[2], I[2], O[2], &wlo, &whi);
                            if (dlo >= dhi || hlo >= hhi || wlo >= whi)
                                continue;
                            float wv = wp[(kd * K[1] + kh) * K[2] + kw];
                            /* whole rows onto whole rows: one flat loop per depth slice */
                            bool flat = S[1] == 1 && S[2] == 1 && offw == 0 && O[2] == I[2];
                            for (int64_t od = dlo; od < dhi; od++) {
                                int64_t id = od * S[0] + offd;
                                const float *xs = xp + id * I[1] * I[2];
                                float *ys = yp + od * O[1] * O[2];
                                if (flat) {
                                    axpy_strided(ys + hlo * O[2], xs + (hlo + offh) * I[2], wv,
                                                 (hhi - hlo) * O[2], 1);
                                    continue;
                                }
                                for (int64_t oh = hlo; oh < hhi; oh++) {
                                    int64_t ih = oh * S[1] + offh;
                                    axpy_strided(ys + oh * O[2] + wlo,
                                                 xs + ih * I[2] + wlo * S[2] + offw, wv, whi - wlo,
                                                 S[2]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return KILN_OK;
}
