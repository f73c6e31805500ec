/* ref/conv_transpose.c: reference ConvTranspose (NCHW, 1-D/2-D/3-D, groups,
 * strides, dilations, pads, output_padding, output_shape, auto_pad).
 *
 * The geometry comes from kiln_convt_resolve (ir/infer_nn.h); 1-D and 2-D
 * run as 3-D with leading extents of 1. Each output plane starts at the bias;
 * then every input cell x[n, c, i] scatters x * w[c, m, k] into
 *     y[n, g*M/group + m, i*stride + k*dilation - pad_begin]
 * for each tap k of each output channel m of c's group, skipping positions
 * outside the output (pads crop, output_padding/output_shape add cells that
 * only the bias reaches). The valid input range of each tap is computed once,
 * so the inner loop runs over input columns without branches. Accumulation
 * in float. */
#include "ir/infer_nn.h"
#include "ref/ref.h"

/* The inputs i whose output o = i*stride + offset lies in [0, out):
 * [*lo, *hi), empty when *lo >= *hi. */
static void scatter_range(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t *lo,
                          int64_t *hi)
{
    int64_t l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int64_t h = out - 1 - offset < 0 ? 0 : (out - 1 - offset) / stride + 1;
    *lo = l;
    *hi = h < in ? h : in;
}

kiln_status kiln_ref_conv_transpose(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0], *wt = in[1], *bt = n->n_inputs > 2 ? in[2] : NULL;
    kiln_tensor *yt = out[0];
    kiln_convt_geom g;
    kiln_status s = kiln_convt_resolve(n, &xt->shape, &wt->shape, &g, err);
    if (s != KILN_OK)
        return s;
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
    int64_t batch = xt->shape.dims[0], cg = g.c_in / g.group, mg = g.m_out / g.group;
    int64_t in_plane = I[0] * I[1] * I[2], out_plane = O[0] * O[1] * O[2];
    int64_t taps = K[0] * K[1] * K[2];
    if (kiln_shape_numel(&yt->shape) != batch * g.m_out * out_plane ||
        yt->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "ConvTranspose: output buffer is wrong");
    const float *x = xt->data, *w = wt->data, *bias = bt ? bt->data : NULL;
    float *y = yt->data;
    for (int64_t nb = 0; nb < batch; nb++) {
        for (int64_t m = 0; m < g.m_out; m++) {
            float *yp = y + (nb * g.m_out + m) * out_plane;
            float b0 = bias ? bias[m] : 0.0f;
            for (int64_t i = 0; i < out_plane; i++)
                yp[i] = b0;
        }
        for (int64_t c = 0; c < g.c_in; c++) {
            int64_t grp = c / cg;
            const float *xp = x + (nb * g.c_in + c) * in_plane;
            for (int64_t mm = 0; mm < mg; mm++) {
                int64_t m = grp * mg + mm;
                float *yp = y + (nb * g.m_out + m) * out_plane;
                const float *wp = w + (c * mg + mm) * taps;
                for (int64_t kd = 0; kd < K[0]; kd++) {
                    int64_t offd = kd * D[0] - P[0], dlo, dhi;
                    scatter_range(offd, S[0], I[0], O[0], &dlo, &dhi);
                    for (int64_t kh = 0; kh < K[1]; kh++) {
                        int64_t offh = kh * D[1] - P[1], hlo, hhi;
                        scatter_range(offh, S[1], I[1], O[1], &hlo, &hhi);
                        for (int64_t kw = 0; kw < K[2]; kw++) {
                            int64_t offw = kw * D[2] - P[2], wlo, whi;
                            scatter_range(offw, S[2], I[2], O[2], &wlo, &whi);
                            if (dlo >= dhi || hlo >= hhi || wlo >= whi)
                                continue;
                            float wv = wp[(kd * K[1] + kh) * K[2] + kw];
                            for (int64_t id = dlo; id < dhi; id++) {
                                int64_t od = id * S[0] + offd;
                                for (int64_t ih = hlo; ih < hhi; ih++) {
                                    int64_t oh = ih * S[1] + offh;
                                    const float *xr = xp + (id * I[1] + ih) * I[2];
                                    /* base + iw*S >= 0 for iw in [wlo, whi) */
                                    int64_t base = (od * O[1] + oh) * O[2] + offw;
                                    if (S[2] == 1) {
                                        for (int64_t iw = wlo; iw < whi; iw++)
                                            yp[base + iw] += wv * xr[iw];
                                    } else {
                                        for (int64_t iw = wlo; iw < whi; iw++)
                                            yp[base + iw * S[2]] += wv * xr[iw];
                                    }
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
