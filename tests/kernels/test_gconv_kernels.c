/* tests/kernels/test_gconv_kernels.c: the narrow-group convolution kernel
 * (codegen/c/kernels/kiln_kernels_gconv.h) against the reference Conv
 * (ref/conv.c) on random shapes: group widths 2, 4 and 8 (every width that
 * divides the block and is narrower than it), blocks 16 (AVX-512), 8 (AVX2)
 * and 4 and 6 (portable), 1x1/3x3/5x5/7x7 and asymmetric windows, strides, row
 * dilations, asymmetric pads (including pads wider than the input), batch 2,
 * every epilogue combination, random knobs and task splits; the workspace
 * starts as NaN, so a plane value the kernel forgot to write shows. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_gconv.h"
#include "conv_test_util.h"

KT_TEMPLATE_RUN(gc, kiln_gconv_params, kiln_gconv_run)

static void check_gconv(kiln_conv_params g, int gw, kt_rng *r, int knobs)
{
    g.dw = 1; /* the kernel's planes need a column dilation of 1 */
    kt_conv_extent(&g);
    kiln_gconv_params p = {.n = g.n, .c = g.c_out, .h = g.h, .w = g.w, .oh = g.oh, .ow = g.ow,
                           .kh = g.kh, .kw = g.kw, .sh = g.sh, .sw = g.sw, .dh = g.dh,
                           .pad_t = g.pad_t, .pad_l = g.pad_l, .pad_b = g.pad_b,
                           .pad_r = g.pad_r, .gw = gw, .cb = g.cb_out, .epilogue = g.epilogue,
                           .clip_min = g.clip_min, .clip_max = g.clip_max};
    assert_true(kiln_gconv_supported(&p));
    kiln_gconv_default_params(&p, 48 << 10, 2 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 18);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
    }
    kt_conv_data d = kt_conv_data_make(&g, r);
    float *wp = kt_nan_buf(kiln_gconv_packed_weight_floats(&p));
    kiln_gconv_pack_weights(&p, d.w, wp);
    float *ws = kt_nan_buf((int64_t)(kiln_gconv_workspace_bytes(&p) / sizeof(float)));
    gc_case c = {p, d.xb, wp, d.bb, d.rb, d.ob, ws};
    kt_split(r, kt_int(r, 0, 3), kiln_gconv_tasks(&p), gc_range, &c);
    if (getenv("KT_VERBOSE"))
        printf("gconv n%d c%d gw%d %dx%d k%dx%d s%d,%d dh%d pad %d,%d,%d,%d cb %d epi %d T%d "
               "ohb%d\n",
               p.n, p.c, p.gw, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.pad_t, p.pad_l, p.pad_b,
               p.pad_r, p.cb, p.epilogue, p.ow_tile, p.oh_tile);
    kt_conv_data_check(&d, &g, 1e-4);
    free(ws);
    free(wp);
    kt_conv_data_free(&d);
}

static void random_gconv(kt_rng *r, int cb, int knobs)
{
    static const int ks_[] = {1, 3, 3, 3, 5, 7};
    int div[8], nd = 0; /* the widths a block holds whole: 2 <= gw < cb (1 when none) */
    for (int d = 2; d < cb && nd < 8; d++)
        if (cb % d == 0)
            div[nd++] = d;
    int gw = nd ? div[kt_int(r, 0, nd - 1)] : 1;
    kiln_conv_params g = {0};
    g.n = kt_int(r, 1, 2);
    g.c_in = g.c_out = cb * kt_int(r, 1, 4);
    g.groups = g.c_in / gw;
    g.cb_in = g.cb_out = cb;
    kt_random_window(r, &g, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 20, 40);
    g.epilogue = kt_int(r, 0, 15);
    g.clip_min = 0.0f;
    g.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.5f;
    check_gconv(g, gw, r, knobs);
}

KT_RANDOM_TESTS(test_gconv_random, random_gconv, 0x6161ull, 0x6262ull, 0x6363ull, 0x6464ull, 6)

/* resnext50_32x4d's grouped 3x3 layers (32 groups of 4, 8, 16 / 2 ...),
 * spatially reduced, with its folded-BN bias and Relu */
static void test_gconv_resnext(void **state)
{
    (void)state;
    kt_rng r = {10};
    static const int shapes[][4] = {{128, 4, 14, 1}, {256, 8, 14, 2}, {256, 8, 7, 1},
                                    {64, 2, 9, 1},   {96, 4, 11, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int cb = 8; cb <= 16; cb += 8) {
            int c = shapes[i][0], gw = shapes[i][1];
            if (gw >= cb)
                continue;
            kiln_conv_params g = {.n = 1, .c_in = c, .c_out = c, .groups = c / gw,
                                  .h = shapes[i][2], .w = shapes[i][2], .kh = 3, .kw = 3,
                                  .sh = shapes[i][3], .sw = shapes[i][3], .dh = 1, .dw = 1,
                                  .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .cb_in = cb,
                                  .cb_out = cb, .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU};
            check_gconv(g, gw, &r, 0);
        }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_gconv_random),
        cmocka_unit_test(test_gconv_resnext),
    };
    return KT_RUN_TESTS(tests);
}
