/* ref/resize.c: reference Resize (N-d; nearest, linear, cubic) and GridSample
 * (4-D; bilinear, nearest, bicubic; zeros, border, reflection padding).
 *
 * Resize is separable: for every dim d and output coordinate x the kernel
 * first maps x back to the input coordinate x_ori with the coordinate
 * transformation (half_pixel: (x + 0.5)/scale - 0.5, asymmetric: x/scale,
 * align_corners: x*(in-1)/(scale*in-1), ...; scale*in is a real number, as
 * in ONNX's reference), then turns x_ori into at most 4 (index, weight)
 * taps: with r = x_ori - floor(x_ori) (r = 1 and base = x_ori - 1 when x_ori
 * is an integer, so that the left neighbour is preferred, as ONNX does),
 * nearest picks base or base + 1 by nearest_mode, linear weights base and
 * base + 1 by 1 - r and r, cubic weights base - 1 .. base + 2 by Keys'
 * kernel with coefficient A (exclude_outside zeroes taps outside the input
 * and renormalizes). Indices are then clamped into the input (edge padding).
 * tf_crop_and_resize coordinates outside [0, in - 1] yield
 * extrapolation_value. The output is the sum over the tensor product of the
 * per-dim taps, in double; zero-weight taps are dropped, so dims that are
 * not resized cost one tap.
 *
 * GridSample follows PyTorch's grid_sample: grid[n, h, w] = (x, y) in
 * [-1, 1] is unnormalized to ((c + 1)/2)*(size - 1) with align_corners, else
 * ((c + 1)*size - 1)/2; border clamps coordinates into [0, size - 1];
 * reflection reflects them about [0, size - 1] (align_corners) or
 * [-0.5, size - 0.5] and clamps; zeros reads 0 outside the input. Bilinear
 * weights the 4 neighbours, nearest rounds half to even, bicubic uses the
 * 4x4 neighbours with A = -0.75, applying the padding to each tap. */
#include <math.h>
#include <stdlib.h>

#include "ir/infer_nn.h"
#include "ref/ref.h"
#include "ref/scratch.h"

typedef struct resize_taps {
    int64_t *idx; /* [out][4] */
    double *w;    /* [out][4] */
    int *count;   /* [out] taps used; -1 = extrapolate */
} resize_taps;

static void cubic_coeffs(double r, double A, double *c)
{
    double x0 = r + 1, x1 = r, x2 = 1 - r, x3 = 2 - r;
    c[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
    c[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* Fills the taps of output coordinate x in dim d (ref/ref.h; the compiled
 * Resize template tabulates the same taps). */
void kiln_resize_dim_taps(const kiln_resize_params *p, int d, int64_t in, int64_t x, int64_t *idx,
                          double *w, int *count)
{
    double scale = p->scale[d], ow = scale * (double)in, xo = 0.0, xf = (double)x;
    switch (p->coord) {
    case KILN_COORD_HALF_PIXEL:
        xo = (xf + 0.5) / scale - 0.5;
        break;
    case KILN_COORD_PYTORCH_HALF_PIXEL:
        xo = ow == 1.0 ? -0.5 : (xf + 0.5) / scale - 0.5;
        break;
    case KILN_COORD_ALIGN_CORNERS:
        xo = ow == 1.0 ? 0.0 : xf * (double)(in - 1) / (ow - 1.0);
        break;
    case KILN_COORD_ASYMMETRIC:
        xo = xf / scale;
        break;
    case KILN_COORD_TF_HALF_PIXEL_FOR_NN:
        xo = (xf + 0.5) / scale;
        break;
    case KILN_COORD_TF_CROP_AND_RESIZE: {
        double span = p->roi_end[d] - p->roi_start[d];
        xo = ow == 1.0 ? span * (double)(in - 1) / 2.0
                       : xf * span * (double)(in - 1) / (ow - 1.0);
        xo += p->roi_start[d] * (double)(in - 1);
        if (!(xo >= 0.0 && xo <= (double)(in - 1))) { /* also NaN */
            *count = -1;
            return;
        }
        break;
    }
    }
    /* A dim that is not resized maps x to x in every mode but
     * tf_crop_and_resize (whose roi may still crop it), as ONNX Runtime
     * does: tf_half_pixel_for_nn's (x + 0.5) / 1 with nearest_mode ceil or
     * round_prefer_ceil would otherwise read element x + 1 of a batch or
     * channel dim. The other modes compute x there anyway (or, for
     * pytorch_half_pixel with one element, taps that all clamp to it). */
    if (scale == 1.0 && p->coord != KILN_COORD_TF_CROP_AND_RESIZE)
        xo = xf;
    double fl = floor(xo), r = xo - fl;
    int64_t base = (int64_t)fl;
    if (r == 0.0) { /* prefer the left neighbour: ratio 1 */
        r = 1.0;
        base -= 1;
    }
    int64_t cand[4];
    double cw[4];
    int nc = 0;
    if (p->mode == KILN_RESIZE_NEAREST) {
        bool up;
        if (r == 1.0)
            up = true;
        else if (p->nearest == KILN_NEAREST_ROUND_PREFER_FLOOR)
            up = r > 0.5;
        else if (p->nearest == KILN_NEAREST_ROUND_PREFER_CEIL)
            up = r >= 0.5;
        else
            up = p->nearest == KILN_NEAREST_CEIL;
        cand[0] = up ? base + 1 : base;
        cw[0] = 1.0;
        nc = 1;
    } else if (p->mode == KILN_RESIZE_LINEAR) {
        cand[0] = base;
        cand[1] = base + 1;
        cw[0] = 1.0 - r;
        cw[1] = r;
        nc = 2;
    } else {
        cubic_coeffs(r, p->cubic_a, cw);
        for (int t = 0; t < 4; t++)
            cand[t] = base - 1 + t;
        nc = 4;
        if (p->exclude_outside) {
            double sum = 0.0;
            for (int t = 0; t < 4; t++) {
                if (cand[t] < 0 || cand[t] >= in)
                    cw[t] = 0.0;
                sum += cw[t];
            }
            for (int t = 0; t < 4; t++)
                cw[t] = sum != 0.0 ? cw[t] / sum : 0.0;
        }
    }
    int k = 0;
    for (int t = 0; t < nc; t++) {
        if (cw[t] == 0.0 && nc > 1)
            continue;
        int64_t i = cand[t] < 0 ? 0 : cand[t] >= in ? in - 1 : cand[t];
        idx[k] = i;
        w[k] = cw[t];
        k++;
    }
    *count = k;
}

/* The common case, only the last two dims resized and nothing
 * extrapolated (every Resize of an NCHW image): plane by plane, the taps of
 * an output row times those of an output column, in the order and with the
 * products of the general loop below (a leading dim's tap has weight 1.0
 * and index x, so the product is the same double), so the result is
 * bit-identical; without the general loop's per-element odometer over
 * every dim. False when the case does not apply. */
static bool resize_planes(const kiln_resize_params *p, const resize_taps *taps,
                          const kiln_tensor *xt, float *yp)
{
    int rank = p->rank;
    if (rank < 2)
        return false;
    int64_t outer = 1;
    for (int d = 0; d < rank - 2; d++) {
        if (p->out[d] != xt->shape.dims[d])
            return false;
        for (int64_t x = 0; x < p->out[d]; x++)
            if (taps[d].count[x] != 1 || taps[d].idx[4 * x] != x || taps[d].w[4 * x] != 1.0)
                return false;
        outer *= p->out[d];
    }
    const resize_taps *th = &taps[rank - 2], *tw = &taps[rank - 1];
    int64_t oh = p->out[rank - 2], ow = p->out[rank - 1];
    for (int64_t y = 0; y < oh; y++)
        if (th->count[y] < 0)
            return false;
    for (int64_t x = 0; x < ow; x++)
        if (tw->count[x] < 0)
            return false;
    int64_t ih = xt->shape.dims[rank - 2], iw = xt->shape.dims[rank - 1];
    const float *xp = xt->data;
    for (int64_t q = 0; q < outer; q++) {
        const float *plane = xp + q * ih * iw;
        float *dst = yp + q * oh * ow;
        for (int64_t y = 0; y < oh; y++) {
            const int64_t *iy = th->idx + 4 * y;
            const double *wy = th->w + 4 * y;
            int ny = th->count[y];
            for (int64_t x = 0; x < ow; x++) {
                const int64_t *ix = tw->idx + 4 * x;
                const double *wx = tw->w + 4 * x;
                int nx = tw->count[x];
                double acc = 0.0;
                for (int a = 0; a < ny; a++) {
                    const float *row = plane + iy[a] * iw;
                    for (int c = 0; c < nx; c++)
                        acc += wy[a] * wx[c] * (double)row[ix[c]];
                }
                dst[y * ow + x] = (float)acc;
            }
        }
    }
    return true;
}

/* The taps of every output coordinate of every dim, total_out the sum of
 * the output dims: 4 indices, 4 weights and a count each, in one piece of
 * scratch (ref/scratch.h). */
typedef struct taps_mem {
    int64_t *idx;
    double *w;
    int *count;
} taps_mem;

static size_t taps_bytes(int64_t total_out)
{
    return kiln_ref_scratch_round(sizeof(int64_t) * 4 * (size_t)total_out) +
           kiln_ref_scratch_round(sizeof(double) * 4 * (size_t)total_out) +
           sizeof(int) * (size_t)total_out;
}

static bool taps_get(int64_t total_out, taps_mem *m)
{
    char *b = kiln_ref_scratch_get(taps_bytes(total_out));
    if (!b)
        return false;
    m->idx = (int64_t *)b;
    b += kiln_ref_scratch_round(sizeof(int64_t) * 4 * (size_t)total_out);
    m->w = (double *)b;
    m->count = (int *)(b + kiln_ref_scratch_round(sizeof(double) * 4 * (size_t)total_out));
    return true;
}

size_t kiln_ref_resize_scratch(const kiln_node *n, const kiln_tensor *const *in)
{
    kiln_resize_params p;
    kiln_error err = {0};
    if (kiln_resize_resolve(n, &in[0]->shape, &p, &err) != KILN_OK)
        return 0;
    int64_t total_out = 0;
    for (int d = 0; d < p.rank; d++)
        total_out += p.out[d];
    return kiln_ref_scratch_round(taps_bytes(total_out));
}

kiln_status kiln_ref_resize(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    kiln_tensor *yt = out[0];
    kiln_resize_params p;
    kiln_status s = kiln_resize_resolve(n, &xt->shape, &p, err);
    if (s != KILN_OK)
        return s;
    int rank = p.rank;
    int64_t total_out = 0, numel = 1;
    for (int d = 0; d < rank; d++) {
        total_out += p.out[d];
        numel *= p.out[d];
    }
    if (yt->dtype != KILN_DTYPE_FLOAT32 || kiln_shape_numel(&yt->shape) != numel)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "Resize: output buffer is wrong");
    if (numel == 0)
        return KILN_OK;
    taps_mem tm;
    if (!taps_get(total_out, &tm))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "Resize: out of memory for taps");
    int64_t *idx = tm.idx;
    double *w = tm.w;
    int *count = tm.count;
    resize_taps taps[KILN_MAX_RANK];
    int64_t off = 0, xstr[KILN_MAX_RANK];
    kiln_ref_strides(&xt->shape, xstr);
    for (int d = 0; d < rank; d++) {
        taps[d].idx = idx + 4 * off;
        taps[d].w = w + 4 * off;
        taps[d].count = count + off;
        for (int64_t x = 0; x < p.out[d]; x++)
            kiln_resize_dim_taps(&p, d, xt->shape.dims[d], x, taps[d].idx + 4 * x,
                                 taps[d].w + 4 * x, taps[d].count + x);
        off += p.out[d];
    }
    const float *xp = xt->data;
    float *yp = yt->data;
    if (resize_planes(&p, taps, xt, yp)) {
        kiln_ref_scratch_put(idx);
        return KILN_OK;
    }
    int64_t o[KILN_MAX_RANK] = {0};
    for (int64_t q = 0; q < numel; q++) {
        bool extrap = false;
        for (int d = 0; d < rank; d++)
            extrap |= taps[d].count[o[d]] < 0;
        double acc = 0.0;
        if (extrap) {
            acc = p.extrapolation;
        } else {
            int t[KILN_MAX_RANK] = {0};
            for (;;) { /* every combination of the dims' taps */
                int64_t src = 0;
                double wt = 1.0;
                for (int d = 0; d < rank; d++) {
                    src += taps[d].idx[4 * o[d] + t[d]] * xstr[d];
                    wt *= taps[d].w[4 * o[d] + t[d]];
                }
                acc += wt * (double)xp[src];
                int d = rank - 1;
                while (d >= 0 && ++t[d] == taps[d].count[o[d]]) {
                    t[d] = 0;
                    d--;
                }
                if (d < 0)
                    break;
            }
        }
        yp[q] = (float)acc;
        for (int d = rank - 1; d >= 0; d--) {
            if (++o[d] < p.out[d])
                break;
            o[d] = 0;
        }
    }
    kiln_ref_scratch_put(idx);
    return KILN_OK;
}

/* ---- GridSample ---------------------------------------------------------- */

static double unnormalize(double c, int64_t size, bool ac)
{
    return ac ? (c + 1.0) / 2.0 * (double)(size - 1) : ((c + 1.0) * (double)size - 1.0) / 2.0;
}

static double clip_coord(double c, int64_t size)
{
    double hi = (double)(size - 1);
    return c < 0.0 ? 0.0 : c > hi ? hi : c;
}

/* Reflects c about [twice_low/2, twice_high/2]. */
static double reflect_coord(double c, double twice_low, double twice_high)
{
    if (twice_low == twice_high)
        return 0.0;
    double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
    c = fabs(c - lo);
    double extra = fmod(c, span);
    double flips = floor(c / span);
    return fmod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

/* Padding applied to a (real or tap) coordinate. */
static double pad_coord(double c, int64_t size, kiln_grid_pad pad, bool ac)
{
    if (pad == KILN_GRID_BORDER)
        return clip_coord(c, size);
    if (pad == KILN_GRID_REFLECTION) {
        c = ac ? reflect_coord(c, 0.0, 2.0 * (double)(size - 1))
               : reflect_coord(c, -1.0, 2.0 * (double)size - 1.0);
        return clip_coord(c, size);
    }
    return c;
}

/* A coordinate as an index; far outside (even after +-2) when it is not
 * finite or beyond any extent. */
static int64_t to_index(double c)
{
    return (c >= -1e15 && c <= 1e15) ? (int64_t)c : -((int64_t)1 << 60);
}

/* X[y, x] of one plane, 0 outside. */
static double grid_at(const float *plane, int64_t h, int64_t w, int64_t y, int64_t x)
{
    return (y >= 0 && y < h && x >= 0 && x < w) ? (double)plane[y * w + x] : 0.0;
}

kiln_status kiln_ref_grid_sample(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, kiln_error *err)
{
    kiln_grid_mode mode;
    kiln_grid_pad pad;
    bool ac;
    kiln_status s = kiln_grid_sample_resolve(n, &mode, &pad, &ac, err);
    if (s != KILN_OK)
        return s;
    const kiln_tensor *xt = in[0], *gt = in[1];
    if (xt->shape.rank != 4 || gt->shape.rank != 4 || gt->shape.dims[3] != 2 ||
        out[0]->shape.rank != 4)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "GridSample: bad X or grid shape");
    int64_t N = xt->shape.dims[0], C = xt->shape.dims[1], H = xt->shape.dims[2],
            W = xt->shape.dims[3];
    int64_t Ho = gt->shape.dims[1], Wo = gt->shape.dims[2];
    const float *x = xt->data, *grid = gt->data;
    float *y = out[0]->data;
    for (int64_t nb = 0; nb < N; nb++) {
        for (int64_t oh = 0; oh < Ho; oh++) {
            for (int64_t ow = 0; ow < Wo; ow++) {
                const float *gp = grid + ((nb * Ho + oh) * Wo + ow) * 2;
                double ix = unnormalize(gp[0], W, ac), iy = unnormalize(gp[1], H, ac);
                if (mode != KILN_GRID_BICUBIC) {
                    ix = pad_coord(ix, W, pad, ac);
                    iy = pad_coord(iy, H, pad, ac);
                }
                for (int64_t c = 0; c < C; c++) {
                    const float *plane = x + (nb * C + c) * H * W;
                    double v = 0.0;
                    if (mode == KILN_GRID_NEAREST) {
                        v = grid_at(plane, H, W, to_index(nearbyint(iy)),
                                    to_index(nearbyint(ix)));
                    } else if (mode == KILN_GRID_BILINEAR) {
                        double fx = floor(ix), fy = floor(iy);
                        int64_t x0 = to_index(fx), y0 = to_index(fy);
                        double tx = ix - fx, ty = iy - fy;
                        v = grid_at(plane, H, W, y0, x0) * (1 - tx) * (1 - ty) +
                            grid_at(plane, H, W, y0, x0 + 1) * tx * (1 - ty) +
                            grid_at(plane, H, W, y0 + 1, x0) * (1 - tx) * ty +
                            grid_at(plane, H, W, y0 + 1, x0 + 1) * tx * ty;
                    } else {
                        double fx = floor(ix), fy = floor(iy), cx[4], cy[4];
                        cubic_coeffs(ix - fx, -0.75, cx);
                        cubic_coeffs(iy - fy, -0.75, cy);
                        for (int j = 0; j < 4; j++) {
                            double ty = pad_coord(fy - 1 + j, H, pad, ac);
                            for (int i = 0; i < 4; i++) {
                                double tx = pad_coord(fx - 1 + i, W, pad, ac);
                                v += cy[j] * cx[i] *
                                     grid_at(plane, H, W, to_index(ty), to_index(tx));
                            }
                        }
                    }
                    y[((nb * C + c) * Ho + oh) * Wo + ow] = (float)v;
                }
            }
        }
    }
    return KILN_OK;
}
