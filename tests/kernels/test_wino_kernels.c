/* tests/kernels/test_wino_kernels.c: the Winograd F(4x4, 3x3) conv kernel
 * (codegen/c/kernels/kiln_kernels_wino.h) against the reference Conv
 * (ref/conv.c) on random shapes: 3x3 stride 1, dilation 1 (pads 0-2 on
 * each side, asymmetric) and, one case in three, dilation 2 or 3 (pads up
 * to twice the dilation: every output phase, short phases too), extents that are and are not multiples of the 4x4 tile,
 * channel counts that do not fill the last block, blocks 16 (AVX-512), 8
 * (AVX2) and 4 and 6 (portable), batch 2, every epilogue combination,
 * random knobs (tile, oc tile, tile rows per task; out of range too) and
 * task splits. The workspace and output start as NaN, so a value the kernel
 * forgot shows.
 * Tolerance: 1e-4 relative plus 2e-4 x max(1, c_in / 32) absolute: the
 * transforms' rounding grows with the output's magnitude, ~10 here for 32
 * channels (the direct conv's tests use 1e-4). */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_wino.h"
#include "conv_test_util.h"

KT_TEMPLATE_RUN(wi, kiln_wino_params, kiln_wino_run)

static void check_wino(kiln_conv_params g, kt_rng *r, int knobs)
{
    kt_conv_extent(&g);
    kiln_wino_params p = {.n = g.n, .c_in = g.c_in, .h = g.h, .w = g.w, .c_out = g.c_out,
                          .oh = g.oh, .ow = g.ow, .pad_t = g.pad_t, .pad_l = g.pad_l,
                          .dil = g.dh, .cb = g.cb_out, .epilogue = g.epilogue, .clip_min = g.clip_min,
                          .clip_max = g.clip_max};
    assert_true(kiln_wino_supported(&p));
    kiln_wino_default_params(&p, 2 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.oc_tile = kt_int(r, 0, KILN_CONV_MAXO);
        p.tile_T = kt_int(r, 0, KILN_CONV_MAXT + 1); /* clamped to the oc tile's budget */
        p.th = kt_int(r, 0, (p.oh + 3) / 4 + 1);
    }
    kt_conv_data d = kt_conv_data_make(&g, r);
    float *wp = kt_nan_buf(kiln_wino_packed_weight_floats(&p));
    kiln_wino_pack_weights(&p, d.w, wp);
    float *ws = kt_nan_buf((int64_t)(kiln_wino_workspace_bytes(&p) / sizeof(float)));
    wi_case c = {p, d.xb, wp, d.bb, d.rb, d.ob, ws};
    /* only the tile widths generated code instantiates: none may take the
     * slow fallback */
    kiln_wino_tile_sets(&p, kiln_conv_isa(p.cb), &kt_conv_tiles_t, &kt_conv_tiles_o);
    kt_conv_ps = kiln_conv_ps_bit(kiln_conv_isa(p.cb), p.cb, p.cb);
    kt_split(r, kt_int(r, 0, 3), kiln_wino_tasks(&p), wi_range, &c);
    assert_int_equal(kt_conv_slow_tiles, 0);
    if (getenv("KT_VERBOSE"))
        printf("wino n%d %d>%d %dx%d d%d pad %d,%d,%d,%d cb %d epi %d T%d O%d th%d\n", p.n,
               p.c_in, p.c_out, p.h, p.w, p.dil, g.pad_t, g.pad_l, g.pad_b, g.pad_r, p.cb,
               p.epilogue, p.tile_T, p.oc_tile, p.th);
    kt_conv_data_check(&d, &g, 2e-4 * (g.c_in > 32 ? g.c_in / 32.0 : 1.0));
    free(ws);
    free(wp);
    kt_conv_data_free(&d);
}

static void random_wino(kt_rng *r, int cb, int knobs)
{
    kiln_conv_params g = {0};
    g.n = kt_int(r, 1, 2);
    g.c_in = kt_int(r, 1, 3 * cb);
    g.c_out = kt_int(r, 1, 3 * cb);
    g.groups = 1;
    g.cb_in = g.cb_out = cb;
    g.kh = g.kw = 3;
    g.sh = g.sw = 1;
    g.dh = g.dw = kt_int(r, 0, 2) ? 1 : kt_int(r, 2, 3);
    g.pad_t = kt_int(r, 0, 2 * g.dh);
    g.pad_b = kt_int(r, 0, 2 * g.dh);
    g.pad_l = kt_int(r, 0, 2 * g.dh);
    g.pad_r = kt_int(r, 0, 2 * g.dh);
    g.h = kt_int(r, 1, 23);
    g.w = kt_int(r, 1, 23);
    if (g.h + g.pad_t + g.pad_b < 2 * g.dh + 1)
        g.h = 2 * g.dh + 1;
    if (g.w + g.pad_l + g.pad_r < 2 * g.dh + 1)
        g.w = 2 * g.dh + 1;
    g.epilogue = kt_int(r, 0, 15);
    g.clip_min = 0.0f;
    g.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.5f;
    check_wino(g, r, knobs);
}

KT_RANDOM_TESTS(test_wino_random, random_wino, 0x7171ull, 0x7272ull, 0x7373ull, 0x7474ull, 6)

/* The layers the template takes in resnets, vgg and inception: 56x56 and
 * 35x35 maps (a partial last tile), 64-192 channels, pad 1 and pad 0, with
 * the folded-BN bias, a residual and Relu. */
static void test_wino_networks(void **state)
{
    (void)state;
    kt_rng r = {11};
    static const int shapes[][5] = {{64, 64, 56, 1, 1}, {48, 64, 35, 1, 0}, {64, 96, 35, 1, 0},
                                    {80, 48, 37, 0, 0}, {128, 128, 28, 1, 1}, {32, 32, 149, 0, 0},
                                    {32, 64, 147, 1, 0}, {80, 192, 73, 0, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int pad = shapes[i][3];
        kiln_conv_params g = {.n = 1, .c_in = shapes[i][0], .c_out = shapes[i][1], .groups = 1,
                              .h = shapes[i][2], .w = shapes[i][2], .kh = 3, .kw = 3, .sh = 1,
                              .sw = 1, .dh = 1, .dw = 1, .pad_t = pad, .pad_l = pad,
                              .pad_b = pad, .pad_r = pad, .cb_in = 16, .cb_out = 16,
                              .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU |
                                          (shapes[i][4] ? KILN_EPI_RESIDUAL : 0)};
        check_wino(g, &r, 0);
    }
    /* FCN / DeepLab atrous layers: dilation 2 and 4 with "same" padding on
     * 32x32 maps, and dilation 3 on an odd map (short phases) */
    static const int dil[][3] = {{2, 32, 2}, {4, 32, 4}, {3, 19, 3}};
    for (size_t i = 0; i < sizeof dil / sizeof dil[0]; i++) {
        int d = dil[i][0], pad = dil[i][2];
        kiln_conv_params g = {.n = 1, .c_in = 48, .c_out = 32, .groups = 1, .h = dil[i][1],
                              .w = dil[i][1], .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = d,
                              .dw = d, .pad_t = pad, .pad_l = pad, .pad_b = pad, .pad_r = pad,
                              .cb_in = 16, .cb_out = 16,
                              .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU | KILN_EPI_RESIDUAL};
        check_wino(g, &r, 0);
    }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_wino_random),
        cmocka_unit_test(test_wino_networks),
    };
    return KT_RUN_TESTS(tests);
}
