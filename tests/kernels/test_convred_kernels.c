/* tests/kernels/test_convred_kernels.c: the few-output-channel convolution
 * (codegen/c/kernels/kiln_kernels_convred.h) against the reference Conv
 * (ref/conv.c) on random shapes: 1 to 4 output channels, input blocks 16
 * (AVX-512), 8 (AVX2), 4 and 6 (portable) with partial input blocks (the
 * padding lanes hold garbage that zero weights must cancel), 1x1 to 7x7 and
 * asymmetric windows, strides, dilations, pads wider than the input, batch
 * 2, every epilogue combination, random tile widths (the instantiated ones
 * and others, which run the portable tile) and task splits; the output
 * starts as NaN, so a value the kernel forgot shows. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_convred.h"
#include "conv_test_util.h"

KT_TEMPLATE_RUN(cr, kiln_convred_params, kiln_convred_run)

static void check_convred(kiln_conv_params g, kt_rng *r, int knobs)
{
    kt_conv_extent(&g);
    kiln_convred_params p = {.n = g.n, .c_in = g.c_in, .h = g.h, .w = g.w, .c_out = g.c_out,
                             .oh = g.oh, .ow = g.ow, .kh = g.kh, .kw = g.kw, .sh = g.sh,
                             .sw = g.sw, .dh = g.dh, .dw = g.dw, .pad_t = g.pad_t,
                             .pad_l = g.pad_l, .pad_b = g.pad_b, .pad_r = g.pad_r, .cb = g.cb_in,
                             .epilogue = g.epilogue, .clip_min = g.clip_min,
                             .clip_max = g.clip_max};
    assert_true(kiln_convred_supported(&p));
    kiln_convred_default_params(&p, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 3) ? kiln_convred_tile_width(p.c_out, p.cb) : kt_int(r, 1, 16);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
    }
    kt_conv_data d = kt_conv_data_make(&g, r);
    /* garbage (finite) in the input's padding lanes */
    int64_t hw = (int64_t)g.h * g.w, cbk = (g.c_in + g.cb_in - 1) / g.cb_in;
    for (int64_t i = 0; i < (int64_t)g.n * cbk * hw * g.cb_in; i++)
        if ((i / (hw * g.cb_in)) % cbk * g.cb_in + i % g.cb_in >= g.c_in)
            d.xb[i] = 1e3f;
    float *wp = kt_nan_buf(kiln_convred_packed_weight_floats(&p));
    kiln_convred_pack_weights(&p, d.w, wp);
    cr_case c = {p, d.xb, wp, d.b, d.res, d.ob, NULL};
    kt_split(r, kt_int(r, 0, 3), kiln_convred_tasks(&p), cr_range, &c);
    if (getenv("KT_VERBOSE"))
        printf("convred n%d c%d->%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d cb %d epi %d "
               "T%d ohb%d\n",
               p.n, p.c_in, p.c_out, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t,
               p.pad_l, p.pad_b, p.pad_r, p.cb, p.epilogue, p.ow_tile, p.oh_tile);
    kt_conv_data_check(&d, &g, 1e-4);
    free(wp);
    kt_conv_data_free(&d);
}

static void random_convred(kt_rng *r, int cb, int knobs)
{
    static const int ks_[] = {1, 1, 3, 3, 3, 5, 7};
    kiln_conv_params g = {0};
    g.n = kt_int(r, 1, 2);
    g.c_in = kt_int(r, 0, 2) ? cb * kt_int(r, 1, 3) : kt_int(r, 1, 3 * cb);
    g.c_out = kt_int(r, 1, KILN_CONVRED_MAXO);
    g.groups = 1;
    g.cb_in = cb;
    g.cb_out = 1; /* the output is row-major */
    kt_random_window(r, &g, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 20, 40);
    g.epilogue = kt_int(r, 0, 15);
    g.clip_min = 0.0f;
    g.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.5f;
    check_convred(g, r, knobs);
}

KT_RANDOM_TESTS(test_convred_random, random_convred, 0x7171ull, 0x7272ull, 0x7373ull, 0x7474ull,
                6)

/* The last conv of an image-to-image network (32 -> 3, 3x3, pad 1) and a
 * 2-class 1x1 segmentation head, with bias, on both SIMD blocks. */
static void test_convred_heads(void **state)
{
    (void)state;
    kt_rng r = {11};
    for (int cb = 8; cb <= 16; cb += 8) {
        kiln_conv_params g = {.n = 1, .c_in = 32, .c_out = 3, .groups = 1, .h = 23, .w = 37,
                              .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .pad_t = 1,
                              .pad_l = 1, .pad_b = 1, .pad_r = 1, .cb_in = cb, .cb_out = 1,
                              .epilogue = KILN_EPI_BIAS};
        check_convred(g, &r, 0);
        g.c_in = 64;
        g.c_out = 2;
        g.kh = g.kw = 1;
        g.pad_t = g.pad_l = g.pad_b = g.pad_r = 0;
        check_convred(g, &r, 0);
    }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_convred_random),
        cmocka_unit_test(test_convred_heads),
    };
    return KT_RUN_TESTS(tests);
}
