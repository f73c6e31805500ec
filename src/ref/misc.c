/* ref/misc.c: reference kernels of Det (LU with partial pivoting, in
 * double), DFT and STFT (the O(n^2) sums, in double), RoiAlign (bilinear
 * samples averaged or maxed per bin, ONNX Runtime's rules), MaxUnpool (a scatter into
 * zeros) and TfIdfVectorizer (n-gram counts with skips, like ONNX Runtime's:
 * unigrams are counted once, not once per skip distance). Shapes were
 * checked by ir/infer_misc.c. */
#include <math.h>
#include <string.h>

#include "ref/elemwise_common.h"
#include "ref/ref.h"
#include "util/error.h"

kiln_status kiln_ref_det(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,
                         kiln_error *err)
{
    (void)n;
    const kiln_tensor *x = in[0];
    int r = x->shape.rank;
    int64_t m = x->shape.dims[r - 1], mats = kiln_ref_prod(&x->shape, 0, r - 2);
    double lu[64 * 64]; /* no allocation: matrices up to 64 x 64 */
    if (m > 64)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "Det of a %lldx%lld matrix (at most 64x64)",
                           (long long)m, (long long)m);
    for (int64_t k = 0; k < mats; k++) {
        for (int64_t i = 0; i < m * m; i++)
            lu[i] = kiln_ew_load_f64(x->dtype, x->data, k * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t p = c;
            for (int64_t i = c + 1; i < m; i++)
                if (fabs(lu[i * m + c]) > fabs(lu[p * m + c]))
                    p = i;
            if (lu[p * m + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = lu[c * m + j];
                    lu[c * m + j] = lu[p * m + j];
                    lu[p * m + j] = t;
                }
                det = -det;
            }
            det *= lu[c * m + c];
            for (int64_t i = c + 1; i < m; i++) {
                double f = lu[i * m + c] / lu[c * m + c];
                for (int64_t j = c; j < m; j++)
                    lu[i * m + j] -= f * lu[c * m + j];
            }
        }
        kiln_ew_store_f64(out[0]->dtype, out[0]->data, k, det);
    }
    return KILN_OK;
}

kiln_status kiln_ref_dft(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,
                         kiln_error *err)
{
    (void)err;
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    int r = x->shape.rank;
    int64_t axis = kiln_attr_int(n, "axis", 1);
    if (axis < 0)
        axis += r;
    int64_t len = kiln_attr_int(n, "dft_length", x->shape.dims[axis]);
    bool inverse = kiln_attr_int(n, "inverse", 0) != 0;
    int64_t cx = x->shape.dims[r - 1]; /* 1: real, 2: complex */
    int64_t outer = kiln_ref_prod(&x->shape, 0, (int)axis);
    int64_t inner = kiln_ref_prod(&x->shape, (int)axis + 1, r - 1); /* without the last dim */
    int64_t nin = x->shape.dims[axis], nout = y->shape.dims[axis];
    double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / (double)len : 1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            for (int64_t k = 0; k < nout; k++) {
                double re = 0, im = 0;
                for (int64_t t = 0; t < len && t < nin; t++) {
                    int64_t at = ((o * nin + t) * inner + i) * cx;
                    double xr = kiln_ew_load_f64(x->dtype, x->data, at);
                    double xi = cx == 2 ? kiln_ew_load_f64(x->dtype, x->data, at + 1) : 0;
                    double ang = sign * 2 * M_PI * (double)((k * t) % len) / (double)len;
                    re += xr * cos(ang) - xi * sin(ang);
                    im += xr * sin(ang) + xi * cos(ang);
                }
                int64_t dst = ((o * nout + k) * inner + i) * 2;
                kiln_ew_store_f64(y->dtype, y->data, dst, re * scale);
                kiln_ew_store_f64(y->dtype, y->data, dst + 1, im * scale);
            }
    return KILN_OK;
}

kiln_status kiln_ref_stft(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,
                          kiln_error *err)
{
    (void)err;
    const kiln_tensor *x = in[0], *w = n->n_inputs > 1 ? in[1] : NULL;
    kiln_tensor *y = out[0];
    int64_t batch = x->shape.dims[0], slen = x->shape.dims[1], cx = x->shape.dims[2];
    int64_t frames = y->shape.dims[1], bins = y->shape.dims[2];
    int64_t len = kiln_attr_int(n, "frame_length", w ? kiln_shape_numel(&w->shape) : 0);
    int64_t step = kiln_attr_int(n, "frame_step", 1);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t f = 0; f < frames; f++)
            for (int64_t k = 0; k < bins; k++) {
                double re = 0, im = 0;
                for (int64_t t = 0; t < len; t++) {
                    int64_t at = (b * slen + f * step + t) * cx;
                    double wt = w ? kiln_ew_load_f64(w->dtype, w->data, t) : 1;
                    double xr = kiln_ew_load_f64(x->dtype, x->data, at) * wt;
                    double xi = cx == 2 ? kiln_ew_load_f64(x->dtype, x->data, at + 1) * wt : 0;
                    double ang = -2 * M_PI * (double)((k * t) % len) / (double)len;
                    re += xr * cos(ang) - xi * sin(ang);
                    im += xr * sin(ang) + xi * cos(ang);
                }
                int64_t dst = ((b * frames + f) * bins + k) * 2;
                kiln_ew_store_f64(y->dtype, y->data, dst, re);
                kiln_ew_store_f64(y->dtype, y->data, dst + 1, im);
            }
    return KILN_OK;
}

kiln_status kiln_ref_maxunpool(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *ix = in[1];
    kiln_tensor *y = out[0];
    size_t es = kiln_dtype_size(x->dtype);
    int r = x->shape.rank, nsp = r - 2;
    /* indices address the default output ((in - 1) * stride + kernel - pads);
     * a larger output_shape pads that at the end of each dim (ONNX's reference) */
    const int64_t *k = NULL, *p = NULL, *st = NULL;
    kiln_attr_ints(n, "kernel_shape", &k);
    int np = kiln_attr_ints(n, "pads", &p), ns = kiln_attr_ints(n, "strides", &st);
    kiln_shape def = x->shape;
    for (int d = 0; d < nsp; d++)
        def.dims[2 + d] = (x->shape.dims[2 + d] - 1) * (ns > 0 ? st[d] : 1) + k[d] -
                          (np > 0 ? p[d] + p[nsp + d] : 0);
    int64_t ny = kiln_shape_numel(&y->shape), nd = kiln_shape_numel(&def),
            nx = kiln_shape_numel(&x->shape);
    memset(y->data, 0, (size_t)ny * es);
    for (int64_t i = 0; i < nx; i++) {
        int64_t at = kiln_ew_load_i64(ix->dtype, ix->data, i);
        if (at < 0 || at >= nd)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "index %lld (element %lld) is outside the unpooled %lld elements",
                               (long long)at, (long long)i, (long long)nd);
        int64_t dst = 0, rest = at, stride = 1;
        for (int d = r - 1; d >= 0; d--) {
            dst += (rest % def.dims[d]) * stride;
            rest /= def.dims[d];
            stride *= y->shape.dims[d];
        }
        memcpy((char *)y->data + (size_t)dst * es, (const char *)x->data + (size_t)i * es, es);
    }
    return KILN_OK;
}

/* Bilinear sample of plane p (h x w) at (y, x), ONNX Runtime's RoiAlign rules:
 * a point more than one pixel outside is 0, edges clamp. Corner terms
 * (weight * value) go to c[4]. */
static void roi_sample(const kiln_tensor *t, int64_t p, int64_t h, int64_t w, double y, double x,
                       double c[4])
{
    c[0] = c[1] = c[2] = c[3] = 0;
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)
        return;
    y = y < 0 ? 0 : y;
    x = x < 0 ? 0 : x;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
    if (y0 >= h - 1) {
        y0 = y1 = h - 1;
        y = (double)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= w - 1) {
        x0 = x1 = w - 1;
        x = (double)x0;
    } else {
        x1 = x0 + 1;
    }
    double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
    int64_t base = p * h * w;
    c[0] = hy * hx * kiln_ew_load_f64(t->dtype, t->data, base + y0 * w + x0);
    c[1] = hy * lx * kiln_ew_load_f64(t->dtype, t->data, base + y0 * w + x1);
    c[2] = ly * hx * kiln_ew_load_f64(t->dtype, t->data, base + y1 * w + x0);
    c[3] = ly * lx * kiln_ew_load_f64(t->dtype, t->data, base + y1 * w + x1);
}

kiln_status kiln_ref_roialign(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *x = in[0], *rois = in[1], *bi = in[2];
    kiln_tensor *y = out[0];
    int64_t nb = x->shape.dims[0], ch = x->shape.dims[1], h = x->shape.dims[2], w = x->shape.dims[3];
    int64_t nr = rois->shape.dims[0], oh = y->shape.dims[2], ow = y->shape.dims[3];
    bool half = strcmp(kiln_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                       "half_pixel") == 0;
    bool avg = strcmp(kiln_attr_string(n, "mode", "avg"), "avg") == 0;
    double scale = kiln_attr_float(n, "spatial_scale", 1.0f), off = half ? 0.5 : 0;
    int64_t ratio = kiln_attr_int(n, "sampling_ratio", 0);
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = kiln_ew_load_i64(bi->dtype, bi->data, r);
        if (b < 0 || b >= nb)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "batch_indices[%lld] = %lld, the batch has %lld", (long long)r,
                               (long long)b, (long long)nb);
        double c4[4];
        for (int k = 0; k < 4; k++)
            c4[k] = kiln_ew_load_f64(rois->dtype, rois->data, r * 4 + k) * scale - off;
        double rw = c4[2] - c4[0], rh = c4[3] - c4[1];
        if (!half) {
            rw = rw > 1 ? rw : 1;
            rh = rh > 1 ? rh : 1;
        }
        double bh = rh / (double)oh, bw = rw / (double)ow;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)oh);
        int64_t gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)ow);
        double count = gh * gw > 1 ? (double)(gh * gw) : 1;
        for (int64_t cc = 0; cc < ch; cc++)
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++) {
                    double acc = avg ? 0 : -INFINITY;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double yy = c4[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = c4[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double s[4];
                            roi_sample(x, b * ch + cc, h, w, yy, xx, s);
                            if (avg)
                                acc += s[0] + s[1] + s[2] + s[3];
                            else
                                acc = fmax(acc, fmax(fmax(s[0], s[1]), fmax(s[2], s[3])));
                        }
                    int64_t dst = ((r * ch + cc) * oh + ph) * ow + pw;
                    kiln_ew_store_f64(y->dtype, y->data, dst,
                                      avg ? acc / count : (gh > 0 && gw > 0 ? acc : 0));
                }
    }
    return KILN_OK;
}

/* The output column of the n-gram of length `len` at tokens row[pos],
 * row[pos + step], ...: -1 when it is not in the pool. */
static int64_t ngram_column(const kiln_node *n, const kiln_tensor *x, int64_t row, int64_t pos,
                            int64_t step, int64_t len)
{
    const int64_t *counts, *idx, *pool;
    int nc = kiln_attr_ints(n, "ngram_counts", &counts);
    kiln_attr_ints(n, "ngram_indexes", &idx);
    int np = kiln_attr_ints(n, "pool_int64s", &pool);
    if (len > nc)
        return -1;
    int64_t first = counts[len - 1], end = len < nc ? counts[len] : np;
    int64_t before = 0; /* n-grams of shorter lengths */
    for (int64_t l = 1; l < len; l++)
        before += ((l < nc ? counts[l] : np) - counts[l - 1]) / l;
    for (int64_t g = first, j = 0; g + len <= end; g += len, j++) {
        int64_t t = 0;
        while (t < len && pool[g + t] == kiln_ew_load_i64(x->dtype, x->data, row + pos + t * step))
            t++;
        if (t == len)
            return idx[before + j];
    }
    return -1;
}

kiln_status kiln_ref_tfidf(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)err;
    const kiln_tensor *x = in[0];
    kiln_tensor *y = out[0];
    int64_t rows = x->shape.rank == 2 ? x->shape.dims[0] : 1;
    int64_t cols = x->shape.dims[x->shape.rank - 1], width = y->shape.dims[y->shape.rank - 1];
    int64_t lo = kiln_attr_int(n, "min_gram_length", 1), hi = kiln_attr_int(n, "max_gram_length", 1);
    int64_t skips = kiln_attr_int(n, "max_skip_count", 0);
    const char *mode = kiln_attr_string(n, "mode", "TF");
    const float *w;
    int nw = kiln_attr_floats(n, "weights", &w);
    float *yv = y->data;
    memset(yv, 0, sizeof(float) * (size_t)(rows * width));
    for (int64_t r = 0; r < rows; r++) {
        int64_t start = lo;
        for (int64_t s = 0; s <= skips; s++) {
            for (int64_t pos = 0; pos < cols; pos++)
                for (int64_t len = start; len <= hi; len++) {
                    if (pos + (len - 1) * (s + 1) >= cols)
                        break;
                    int64_t col = ngram_column(n, x, r * cols, pos, s + 1, len);
                    if (col >= 0)
                        yv[r * width + col] += 1;
                }
            if (start == 1 && ++start > hi)
                break; /* unigrams once, whatever the skip */
        }
    }
    bool idf = strcmp(mode, "IDF") == 0, tfidf = strcmp(mode, "TFIDF") == 0;
    if (idf || tfidf) {
        const int64_t *idx;
        int ni = kiln_attr_ints(n, "ngram_indexes", &idx);
        for (int64_t r = 0; r < rows; r++)
            for (int i = 0; i < ni; i++) {
                float *v = &yv[r * width + idx[i]];
                float wt = nw > 0 ? w[i] : 1.0f;
                *v = idf ? (*v > 0 ? wt : 0) : *v * wt;
            }
    }
    return KILN_OK;
}
