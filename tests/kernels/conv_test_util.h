/* tests/kernels/conv_test_util.h: shared by the convolution template tests
 * (test_conv_kernels.c, test_dwconv_kernels.c). A depthwise case is described
 * by the Conv it computes (c_in = c_out = groups, cb_in = cb_out), so both
 * tests draw their windows, make their data and check the kernel's output
 * against the reference Conv (ref/conv.c) the same way; each packs the
 * weights and runs its own template in between. Include it between
 * KT_BEGIN_SIMD and KT_END_SIMD, like the kernel headers. */
#ifndef KILN_TESTS_CONV_TEST_UTIL_H
#define KILN_TESTS_CONV_TEST_UTIL_H

#include "../ops/nn_helpers.h"
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "kernel_test_util.h"

/* Draws p's window: kernel sizes from ksz[0..n_ksz) (one case in five with
 * another width: 1x7 / 7x1 style), strides 1-2 (one in three with a
 * horizontal one of its own, up to 3), a dilation one case in four, pads up
 * to the kernel size, and an input of up to max_h x max_w, grown where the
 * padded input would be smaller than the dilated window. */
static inline void kt_random_window(kt_rng *r, kiln_conv_params *p, const int *ksz, int n_ksz,
                                    int max_h, int max_w)
{
    p->kh = ksz[kt_int(r, 0, n_ksz - 1)];
    p->kw = kt_int(r, 0, 4) == 0 ? ksz[kt_int(r, 0, n_ksz - 1)] : p->kh;
    p->sh = kt_int(r, 1, 2);
    p->sw = kt_int(r, 0, 2) ? p->sh : kt_int(r, 1, 3);
    p->dh = kt_int(r, 0, 3) ? 1 : 2;
    p->dw = kt_int(r, 0, 3) ? 1 : kt_int(r, 1, 2);
    p->pad_t = kt_int(r, 0, p->kh);
    p->pad_b = kt_int(r, 0, p->kh);
    p->pad_l = kt_int(r, 0, p->kw);
    p->pad_r = kt_int(r, 0, p->kw);
    int ekh = (p->kh - 1) * p->dh + 1, ekw = (p->kw - 1) * p->dw + 1;
    p->h = kt_int(r, 1, max_h);
    p->w = kt_int(r, 1, max_w);
    if (p->h + p->pad_t + p->pad_b < ekh)
        p->h = ekh;
    if (p->w + p->pad_l + p->pad_r < ekw)
        p->w = ekw;
}

/* Sets p's output extent from its window (which must fit the padded input). */
static inline void kt_conv_extent(kiln_conv_params *p)
{
    int ekh = (p->kh - 1) * p->dh + 1, ekw = (p->kw - 1) * p->dw + 1;
    p->oh = (p->h + p->pad_t + p->pad_b - ekh) / p->sh + 1;
    p->ow = (p->w + p->pad_l + p->pad_r - ekw) / p->sw + 1;
    assert_true(p->oh >= 1 && p->ow >= 1);
}

/* Runs the reference conv (with bias) on NCHW data; returns the output. */
static inline float *kt_ref_conv(const kiln_conv_params *p, const float *x, const float *w,
                                 const float *b)
{
    kiln_shape sh[3] = {ks(4, p->n, p->c_in, p->h, p->w),
                        ks(4, p->c_out, p->c_in / p->groups, p->kh, p->kw), ks(1, p->c_out)};
    nn_graph t = nn_build(KILN_OP_CONV, 3, sh);
    int64_t strides[2] = {p->sh, p->sw}, dil[2] = {p->dh, p->dw};
    int64_t pads[4] = {p->pad_t, p->pad_l, p->pad_b, p->pad_r};
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "strides", strides, 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "dilations", dil, 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "pads", pads, 4), KILN_OK);
    assert_int_equal(kiln_node_set_int(t.g, t.node, "group", p->groups), KILN_OK);
    kiln_shape expect = ks(4, p->n, p->c_out, p->oh, p->ow);
    float *data[3] = {(float *)x, (float *)w, (float *)b};
    int64_t count;
    float *y = nn_run(&t, data, &expect, &count);
    nn_free(&t);
    return y;
}

/* One case's data: random NCHW input, weights (OIHW), bias and residual; the
 * reference output with the epilogue applied; the blocked input, residual
 * and bias (zeros in the padding channels) the kernel reads, and the blocked
 * output it writes, NaN-filled so that a cell it skips fails the check. */
typedef struct kt_conv_data {
    float *x, *w, *b, *res, *ref;
    float *xb, *rb, *bb, *ob;
} kt_conv_data;

/* p's extent (kt_conv_extent) and epilogue are set. */
static inline kt_conv_data kt_conv_data_make(const kiln_conv_params *p, kt_rng *r)
{
    int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
    int64_t out = (int64_t)p->n * p->c_out * ohw;
    int cob = (p->c_out + p->cb_out - 1) / p->cb_out;
    kt_conv_data d;
    d.x = kt_rand_buf(r, (int64_t)p->n * p->c_in * hw);
    d.w = kt_rand_buf(r, (int64_t)p->c_out * (p->c_in / p->groups) * p->kh * p->kw);
    d.b = kt_rand_buf(r, p->c_out);
    d.res = kt_rand_buf(r, out);
    /* the reference always adds a bias: zeros where the epilogue has none */
    float *zb = calloc((size_t)p->c_out, sizeof(float));
    assert_non_null(zb);
    d.ref = kt_ref_conv(p, d.x, d.w, (p->epilogue & KILN_EPI_BIAS) ? d.b : zb);
    free(zb);
    kt_epilogue(d.ref, d.res, out, p->epilogue, p->clip_min, p->clip_max);
    d.xb = kt_to_blocked(d.x, p->n, p->c_in, hw, p->cb_in, 0.0f);
    d.rb = kt_to_blocked(d.res, p->n, p->c_out, ohw, p->cb_out, 0.0f);
    d.bb = kt_to_blocked(d.b, 1, p->c_out, 1, p->cb_out, 0.0f); /* one "pixel" of c_out */
    d.ob = kt_nan_buf((int64_t)p->n * cob * p->cb_out * ohw);
    return d;
}

/* Unblocks the kernel's output (failing on a non-finite padding channel) and
 * compares it with the reference: within 1e-4 relative plus `atol`. */
static inline void kt_conv_data_check(const kt_conv_data *d, const kiln_conv_params *p,
                                      double atol)
{
    int64_t ohw = (int64_t)p->oh * p->ow;
    float *got = kt_from_blocked(d->ob, p->n, p->c_out, ohw, p->cb_out);
    assert_allclose(got, d->ref, (int64_t)p->n * p->c_out * ohw, 1e-4, atol);
    free(got);
}

static inline void kt_conv_data_free(kt_conv_data *d)
{
    float *bufs[] = {d->x, d->w, d->b, d->res, d->ref, d->xb, d->rb, d->bb, d->ob};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

#endif
