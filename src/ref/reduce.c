/* ref/reduce.c: reference reductions (ReduceMean): for each output cell (the
 * kept dims in order), the sum over the reduced dims' sub-box in double,
 * divided by its size; no scratch. */
#include <math.h>

#include "ir/infer_util.h"
#include "ref/ref.h"

kiln_status kiln_ref_reducemean(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    const kiln_shape *xs = &in[0]->shape;
    bool reduced[KILN_MAX_RANK], keep;
    kiln_status s = kiln_reduce_axes(n, xs->rank, reduced, &keep, err);
    if (s != KILN_OK)
        return s;
    int64_t strides[KILN_MAX_RANK];
    kiln_ref_strides(xs, strides);
    /* kept and reduced dims with their extents and input strides */
    int64_t kdim[KILN_MAX_RANK], kstr[KILN_MAX_RANK], rdim[KILN_MAX_RANK], rstr[KILN_MAX_RANK];
    int nk = 0, nr = 0;
    int64_t n_out = 1, n_red = 1;
    for (int d = 0; d < xs->rank; d++) {
        if (reduced[d]) {
            rdim[nr] = xs->dims[d];
            rstr[nr++] = strides[d];
            n_red *= xs->dims[d];
        } else {
            kdim[nk] = xs->dims[d];
            kstr[nk++] = strides[d];
            n_out *= xs->dims[d];
        }
    }
    if (kiln_shape_numel(&out[0]->shape) != n_out || n_red < 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "ReduceMean: bad output or empty reduction");
    const float *x = in[0]->data;
    float *y = out[0]->data;
    int64_t kidx[KILN_MAX_RANK] = {0};
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base = 0;
        for (int i = 0; i < nk; i++)
            base += kidx[i] * kstr[i];
        int64_t ridx[KILN_MAX_RANK] = {0};
        double sum = 0.0;
        for (int64_t t = 0; t < n_red; t++) {
            int64_t off = base;
            for (int i = 0; i < nr; i++)
                off += ridx[i] * rstr[i];
            sum += x[off];
            for (int i = nr - 1; i >= 0; i--) {
                if (++ridx[i] < rdim[i])
                    break;
                ridx[i] = 0;
            }
        }
        y[o] = (float)(sum / (double)n_red);
        for (int i = nk - 1; i >= 0; i--) {
            if (++kidx[i] < kdim[i])
                break;
            kidx[i] = 0;
        }
    }
    return KILN_OK;
}

/* STUB */
kiln_status kiln_ref_reducesum(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducemax(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducemin(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reduceprod(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducel1(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducel2(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducelogsum(const kiln_node *n, const kiln_tensor *const *in,
                                  kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducelogsumexp(const kiln_node *n, const kiln_tensor *const *in,
                                     kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reducesumsquare(const kiln_node *n, const kiln_tensor *const *in,
                                     kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_argmax(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_argmin(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_cumsum(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_topk(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_einsum(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

