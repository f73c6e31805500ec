/* tests/kernels/test_dwconv_kernels.c: the depthwise convolution template
 * (codegen/c/kernels/kiln_kernels_dwconv.h) against the reference Conv
 * (ref/conv.c, group == channels) on random shapes: channel counts not
 * divisible by the block, blocks 16 (AVX-512), 8 (AVX2) and others
 * (portable), 3x3/5x5/7x7/1x1 and asymmetric windows, strides, dilations,
 * asymmetric pads (including pads that leave border pixels with no tap),
 * batch 2, every epilogue combination, random knobs and task splits, with
 * the workspace (border pixels gathered into register tiles) and without
 * (one at a time). */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_dwconv.h"
#include "conv_test_util.h"

KT_TEMPLATE_RUN(dw, kiln_dwconv_params, kiln_dwconv_run)

/* The template's params for a case described by its Conv. */
static kiln_dwconv_params dw_params(const kiln_conv_params *g)
{
    return (kiln_dwconv_params){.n = g->n, .c = g->c_out, .h = g->h, .w = g->w, .oh = g->oh,
                                .ow = g->ow, .kh = g->kh, .kw = g->kw, .sh = g->sh, .sw = g->sw,
                                .dh = g->dh, .dw = g->dw, .pad_t = g->pad_t, .pad_l = g->pad_l,
                                .pad_b = g->pad_b, .pad_r = g->pad_r, .cb = g->cb_out,
                                .epilogue = g->epilogue, .clip_min = g->clip_min,
                                .clip_max = g->clip_max};
}

/* Checks one configuration, given as the Conv it computes (c_in = c_out =
 * groups, cb_in = cb_out) with its window, block and epilogue set; random
 * knobs unless `knobs` is 0 (the analytic defaults). */
static void check_dw(kiln_conv_params g, kt_rng *r, int knobs)
{
    kt_conv_extent(&g);
    kiln_dwconv_params p = dw_params(&g);
    assert_true(kiln_dwconv_supported(&p));
    kiln_dwconv_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 18);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
    }
    kt_conv_data d = kt_conv_data_make(&g, r);
    float *wp = kt_nan_buf(kiln_dwconv_packed_weight_floats(&p));
    kiln_dwconv_pack_weights(&p, d.w, wp);
    /* the workspace holds gathered border windows; without one (a filter
     * too large for it) border pixels run one at a time: both paths, the
     * workspace starting as NaN so a window element it misses shows */
    size_t wsb = kiln_dwconv_workspace_bytes(&p);
    float *ws = wsb && kt_int(r, 0, 3) ? kt_nan_buf((int64_t)(wsb / sizeof(float))) : NULL;
    dw_case c = {p, d.xb, wp, d.bb, d.rb, d.ob, ws};
    kt_split(r, kt_int(r, 0, 3), kiln_dwconv_tasks(&p), dw_range, &c);
    if (getenv("KT_VERBOSE"))
        printf("dw n%d c%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d cb %d epi %d T%d ohb%d\n",
               p.n, p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t, p.pad_l, p.pad_b,
               p.pad_r, p.cb, p.epilogue, p.ow_tile, p.oh_tile);
    kt_conv_data_check(&d, &g, 1e-4);
    free(ws);
    free(wp);
    kt_conv_data_free(&d);
}

static void random_dw(kt_rng *r, int cb, int knobs)
{
    static const int ks_[] = {1, 3, 3, 3, 5, 7};
    kiln_conv_params g = {0};
    g.n = kt_int(r, 1, 2);
    g.c_in = g.c_out = g.groups = kt_int(r, 1, 50);
    g.cb_in = g.cb_out = cb;
    kt_random_window(r, &g, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 20, 40);
    g.epilogue = kt_int(r, 0, 15);
    g.clip_min = 0.0f;
    g.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.5f;
    check_dw(g, r, knobs);
}

KT_RANDOM_TESTS(test_dwconv_random, random_dw, 0x5151ull, 0x5252ull, 0x5353ull, 0x5454ull, 3)

/* mobilenet-v2's depthwise layers, spatially reduced */
static void test_dwconv_mobilenet(void **state)
{
    (void)state;
    kt_rng r = {8};
    static const int shapes[][3] = {{32, 28, 1}, {96, 28, 2}, {144, 14, 1}, {144, 14, 2},
                                    {384, 14, 1}, {576, 14, 2}, {960, 7, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int cb = 8; cb <= 16; cb += 8) {
            int c = shapes[i][0];
            kiln_conv_params g = {.n = 1, .c_in = c, .c_out = c, .groups = c, .h = shapes[i][1],
                                  .w = shapes[i][1], .kh = 3, .kw = 3, .sh = shapes[i][2],
                                  .sw = shapes[i][2], .dh = 1, .dw = 1, .pad_t = 1, .pad_l = 1,
                                  .pad_b = 1, .pad_r = 1, .cb_in = cb, .cb_out = cb,
                                  .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP, .clip_min = 0,
                                  .clip_max = 6};
            check_dw(g, &r, 0);
        }
}

/* ConvNeXt's 7x7 depthwise layers (pad 3): rows wider than a gathered
 * tile (borders gathered on each side) and narrower ones (the whole row one
 * gathered tile) */
static void test_dwconv_convnext(void **state)
{
    (void)state;
    kt_rng r = {9};
    static const int shapes[][3] = {{96, 9, 56}, {32, 9, 7}, {48, 14, 14}, {64, 7, 7}, {40, 5, 17}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int cb = 8; cb <= 16; cb += 8) {
            int c = shapes[i][0];
            kiln_conv_params g = {.n = 1, .c_in = c, .c_out = c, .groups = c, .h = shapes[i][1],
                                  .w = shapes[i][2], .kh = 7, .kw = 7, .sh = 1, .sw = 1, .dh = 1,
                                  .dw = 1, .pad_t = 3, .pad_l = 3, .pad_b = 3, .pad_r = 3,
                                  .cb_in = cb, .cb_out = cb, .epilogue = KILN_EPI_BIAS};
            check_dw(g, &r, 0);
        }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_dwconv_random),
        cmocka_unit_test(test_dwconv_mobilenet),
        cmocka_unit_test(test_dwconv_convnext),
    };
    return KT_RUN_TESTS(tests);
}
