/* ir/infer_misc.c: shape inference of Det, DFT, STFT, MaxUnpool, RoiAlign and
 * TfIdfVectorizer (their reference kernels: ref/misc.c). Parameters that
 * ONNX passes as inputs are attributes here, as everywhere in kiln: DFT's
 * dft_length, STFT's frame_step and frame_length, MaxUnpool's output_shape. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_transform.h"
#include "util/error.h"

static const kiln_infer_input data_in[] = {{"X", KILN_INFER_DATA}};

static bool is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64;
}

kiln_status kiln_infer_det(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out,
                           kiln_error *err)
{
    kiln_status s = kiln_infer_check_inputs(n, in, data_in, 1, NULL, 0, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (!is_float(in[0]->dtype))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s, expected float32/64",
                           kiln_dtype_name(in[0]->dtype));
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %s is not [..., M, M]",
                           kiln_shape_fmt(x, &b));
    kiln_shape o = *x;
    o.rank -= 2;
    kiln_infer_set_out(out[0], in[0]->dtype, &o);
    return KILN_OK;
}

kiln_status kiln_infer_dft(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out,
                           kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT},
                                           {"inverse", KILN_ATTR_INT},
                                           {"onesided", KILN_ATTR_INT},
                                           {"dft_length", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, data_in, 1, specs, 4, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (!is_float(in[0]->dtype))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s, expected float32/64",
                           kiln_dtype_name(in[0]->dtype));
    int r = x->rank;
    if (r < 3 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input %s is not [batch, signal..., 1 or 2]", kiln_shape_fmt(x, &b));
    int64_t axis = kiln_attr_int(n, "axis", 1);
    if (axis < 0)
        axis += r;
    if (axis < 1 || axis > r - 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "axis %lld is not a signal axis of %s",
                           (long long)kiln_attr_int(n, "axis", 1), kiln_shape_fmt(x, &b));
    int64_t len = kiln_attr_int(n, "dft_length", x->dims[axis]);
    if (len < 1 || len > ((int64_t)1 << 24))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "dft_length %lld", (long long)len);
    bool onesided = kiln_attr_int(n, "onesided", 0) != 0;
    if (onesided && x->dims[r - 1] == 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "onesided needs a real input");
    kiln_shape o = *x;
    o.dims[axis] = onesided ? len / 2 + 1 : len;
    o.dims[r - 1] = 2;
    kiln_infer_set_out(out[0], in[0]->dtype, &o);
    return KILN_OK;
}

kiln_status kiln_infer_stft(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out,
                            kiln_error *err)
{
    static const kiln_infer_input ins[] = {{"signal", KILN_INFER_DATA}, {"window", KILN_INFER_DATA}};
    static const kiln_attr_spec specs[] = {{"frame_step", KILN_ATTR_INT},
                                           {"frame_length", KILN_ATTR_INT},
                                           {"onesided", KILN_ATTR_INT}};
    int nin = n->n_inputs > 1 && in[1] ? 2 : 1;
    kiln_status s = kiln_infer_check_inputs(n, in, ins, nin, specs, 3, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (!is_float(in[0]->dtype) || x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "signal %s must be float [batch, length, 1 or 2]", kiln_shape_fmt(x, &b));
    int64_t win = nin == 2 ? kiln_shape_numel(&in[1]->shape) : -1;
    int64_t len = kiln_attr_int(n, "frame_length", win), step = kiln_attr_int(n, "frame_step", 0);
    if (nin == 2 && (in[1]->shape.rank != 1 || in[1]->dtype != in[0]->dtype || win != len))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "window must be a vector of the signal's dtype, frame_length long");
    if (len < 1 || step < 1 || len > x->dims[1])
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "frame_length %lld, frame_step %lld for a signal of %lld",
                           (long long)len, (long long)step, (long long)x->dims[1]);
    bool onesided = kiln_attr_int(n, "onesided", 1) != 0;
    if (onesided && x->dims[2] == 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "onesided needs a real signal");
    kiln_shape o = {.rank = 4,
                    .dims = {x->dims[0], 1 + (x->dims[1] - len) / step,
                             onesided ? len / 2 + 1 : len, 2}};
    kiln_infer_set_out(out[0], in[0]->dtype, &o);
    return KILN_OK;
}

kiln_status kiln_infer_maxunpool(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_infer_input ins[] = {{"X", KILN_INFER_DATA}, {"I", KILN_INFER_INDEX}};
    static const kiln_attr_spec specs[] = {{"kernel_shape", KILN_ATTR_INTS},
                                           {"pads", KILN_ATTR_INTS},
                                           {"strides", KILN_ATTR_INTS},
                                           {"output_shape", KILN_ATTR_INTS}};
    kiln_status s = kiln_infer_check_inputs(n, in, ins, 2, specs, 4, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b, c;
    if (!kiln_shape_equal(x, &in[1]->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X %s and I %s differ",
                           kiln_shape_fmt(x, &b), kiln_shape_fmt(&in[1]->shape, &c));
    int nsp = x->rank - 2;
    const int64_t *k = NULL, *p = NULL, *st = NULL, *os = NULL;
    if (nsp < 1 || kiln_attr_ints(n, "kernel_shape", &k) != nsp)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kernel_shape must have %d entries for X %s", nsp > 0 ? nsp : 1,
                           kiln_shape_fmt(x, &b));
    int np = kiln_attr_ints(n, "pads", &p), ns = kiln_attr_ints(n, "strides", &st);
    int no = kiln_attr_ints(n, "output_shape", &os);
    if ((np >= 0 && np != 2 * nsp) || (ns >= 0 && ns != nsp) || (no >= 0 && no != x->rank))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "pads, strides or output_shape do not match X %s",
                           kiln_shape_fmt(x, &b));
    kiln_shape o = *x;
    for (int d = 0; d < nsp; d++) {
        int64_t stride = ns > 0 ? st[d] : 1, pb = np > 0 ? p[d] : 0, pe = np > 0 ? p[nsp + d] : 0;
        const int64_t lim = (int64_t)1 << 24; /* keeps the arithmetic below from overflowing */
        if (stride < 1 || stride > lim || k[d] < 1 || k[d] > lim || pb < 0 || pb > lim ||
            pe < 0 || pe > lim || x->dims[2 + d] > lim)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "spatial dim %d: kernel, stride or pads out of range", d);
        o.dims[2 + d] = (x->dims[2 + d] - 1) * stride + k[d] - pb - pe;
        if (o.dims[2 + d] < 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "spatial dim %d: empty output", d);
    }
    if (no > 0) {
        for (int d = 0; d < x->rank; d++)
            if (os[d] < (d < 2 ? x->dims[d] : o.dims[d]) || (d < 2 && os[d] != x->dims[d]))
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "output_shape dim %d (%lld) is smaller than the default", d,
                                   (long long)os[d]);
        memcpy(o.dims, os, sizeof(int64_t) * (size_t)x->rank);
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &o);
    return KILN_OK;
}

kiln_status kiln_infer_roialign(const kiln_node *n, const kiln_value *const *in,
                                kiln_value *const *out, kiln_error *err)
{
    static const kiln_infer_input ins[] = {
        {"X", KILN_INFER_DATA}, {"rois", KILN_INFER_DATA}, {"batch_indices", KILN_INFER_INDEX}};
    static const kiln_attr_spec specs[] = {
        {"coordinate_transformation_mode", KILN_ATTR_STRING}, {"mode", KILN_ATTR_STRING},
        {"output_height", KILN_ATTR_INT}, {"output_width", KILN_ATTR_INT},
        {"sampling_ratio", KILN_ATTR_INT}, {"spatial_scale", KILN_ATTR_FLOAT}};
    kiln_status s = kiln_infer_check_inputs(n, in, ins, 3, specs, 6, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape, *r = &in[1]->shape, *bi = &in[2]->shape;
    kiln_shape_buf b, c, d;
    if (!is_float(in[0]->dtype) || in[1]->dtype != in[0]->dtype || x->rank != 4 ||
        r->rank != 2 || r->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != r->dims[0])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "X %s, rois %s, batch_indices %s: need float [N, C, H, W], [R, 4], [R]",
                           kiln_shape_fmt(x, &b), kiln_shape_fmt(r, &c), kiln_shape_fmt(bi, &d));
    const char *mode = kiln_attr_string(n, "mode", "avg");
    const char *ct = kiln_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    if ((strcmp(mode, "avg") && strcmp(mode, "max")) ||
        (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel")))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "mode '%s' (avg, max), coordinate_transformation_mode '%s' "
                           "(half_pixel, output_half_pixel)",
                           mode, ct);
    int64_t oh = kiln_attr_int(n, "output_height", 1), ow = kiln_attr_int(n, "output_width", 1);
    if (oh < 1 || ow < 1 || oh > 65536 || ow > 65536 || kiln_attr_int(n, "sampling_ratio", 0) < 0 ||
        kiln_attr_int(n, "sampling_ratio", 0) > 65536)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "output_height/width must be in [1, 65536], sampling_ratio in [0, "
                           "65536]");
    kiln_shape o = {.rank = 4, .dims = {r->dims[0], x->dims[1], oh, ow}};
    kiln_infer_set_out(out[0], in[0]->dtype, &o);
    return KILN_OK;
}

kiln_status kiln_infer_tfidf(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    static const kiln_infer_input ins[] = {{"X", KILN_INFER_INDEX}};
    static const kiln_attr_spec specs[] = {
        {"mode", KILN_ATTR_STRING},           {"min_gram_length", KILN_ATTR_INT},
        {"max_gram_length", KILN_ATTR_INT},   {"max_skip_count", KILN_ATTR_INT},
        {"ngram_counts", KILN_ATTR_INTS},     {"ngram_indexes", KILN_ATTR_INTS},
        {"pool_int64s", KILN_ATTR_INTS},      {"weights", KILN_ATTR_FLOATS}};
    kiln_status s = kiln_infer_check_inputs(n, in, ins, 1, specs, 8, err);
    if (s != KILN_OK)
        return s;
    const char *mode = kiln_attr_string(n, "mode", "");
    if (strcmp(mode, "TF") != 0 && strcmp(mode, "IDF") != 0 && strcmp(mode, "TFIDF") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "mode '%s' (TF, IDF or TFIDF)", mode);
    int64_t lo = kiln_attr_int(n, "min_gram_length", 0), hi = kiln_attr_int(n, "max_gram_length", 0);
    const int64_t *counts, *idx, *pool;
    int nc = kiln_attr_ints(n, "ngram_counts", &counts), ni = kiln_attr_ints(n, "ngram_indexes", &idx);
    int np = kiln_attr_ints(n, "pool_int64s", &pool);
    if (lo < 1 || hi < lo || nc < 1 || ni < 1 || np < 1 || kiln_attr_int(n, "max_skip_count", 0) < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "needs 1 <= min_gram_length <= max_gram_length, max_skip_count >= 0, "
                           "ngram_counts, ngram_indexes and pool_int64s");
    const float *w;
    int nw = kiln_attr_floats(n, "weights", &w);
    if (nw >= 0 && nw != ni)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%d weights for %d n-grams", nw, ni);
    int64_t width = 0;
    for (int i = 0; i < ni; i++) {
        if (idx[i] < 0 || idx[i] > (1 << 24))
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "ngram_indexes[%d] = %lld", i,
                               (long long)idx[i]);
        if (idx[i] + 1 > width)
            width = idx[i] + 1;
    }
    for (int i = 0; i < nc; i++)
        if (counts[i] < 0 || counts[i] > np || (i && counts[i] < counts[i - 1]))
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "ngram_counts[%d] = %lld", i,
                               (long long)counts[i]);
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (x->rank != 1 && x->rank != 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X %s must be [C] or [N, C]",
                           kiln_shape_fmt(x, &b));
    kiln_shape o = {.rank = x->rank};
    if (x->rank == 2)
        o.dims[0] = x->dims[0];
    o.dims[x->rank - 1] = width;
    kiln_infer_set_out(out[0], KILN_DTYPE_FLOAT32, &o);
    return KILN_OK;
}
