/* tests/kernels/test_expdw_kernels.c: the fused expand 1x1 + depthwise
 * template (codegen/c/kernels/kiln_kernels_expdw.h) against the reference
 * Conv run twice (the 1x1 expand, its epilogue, then the depthwise on the
 * wide tensor) on random shapes: input channel counts not divisible by the
 * block, blocks 16 (AVX-512), 8 (AVX2) and others (portable), 3x3/5x5/7x7
 * and asymmetric windows, strides, dilations, asymmetric pads, batch 2,
 * every Relu/Clip epilogue, random knobs (bands, channel groups, sub-bands,
 * order) and task splits.
 *
 * Each case also sets the expand's tile-width sets the template emits
 * (kiln_expdw_pixel_tiles, kiln_expdw_oc_tiles) and asserts no tile ran on
 * the slow fallback: a set that misses a width the walk takes fails here,
 * not as a slow kernel nobody notices. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_expdw.h"
#include "conv_test_util.h"

typedef struct expdw_case {
    kiln_expdw_params p;
    const float *in, *we, *be, *wd, *bd;
    float *out;
    void *ws;
} expdw_case;

static void expdw_range(void *ctx, int64_t b, int64_t e)
{
    expdw_case *c = ctx;
    kiln_expdw_run(&c->p, c->in, c->we, c->be, c->wd, c->bd, c->out, b, e, c->ws, NULL, NULL,
                   NULL);
}

/* g: the depthwise as a Conv (c_in = c_out = groups = the wide channels,
 * cb_in = cb_out = cb), its window, extent and epilogue set; c_in, cbi: the
 * expand's input channels and block. */
static void check_expdw(kiln_conv_params g, int c_in, int cbi, int e_epi, kt_rng *r, int knobs)
{
    const int cb = g.cb_out, cw = g.c_out;
    kiln_conv_params ec = {.n = g.n, .c_in = c_in, .h = g.h, .w = g.w, .c_out = cw, .oh = g.h,
                           .ow = g.w, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                           .groups = 1, .cb_in = cbi, .cb_out = cb, .epilogue = e_epi,
                           .clip_min = 0.0f, .clip_max = 6.0f};
    kiln_expdw_params p = {.e = ec};
    p.d = (kiln_dwconv_params){.n = g.n, .c = cw, .h = g.h, .w = g.w, .oh = g.oh, .ow = g.ow,
                               .kh = g.kh, .kw = g.kw, .sh = g.sh, .sw = g.sw, .dh = g.dh,
                               .dw = g.dw, .pad_t = g.pad_t, .pad_l = g.pad_l, .pad_b = g.pad_b,
                               .pad_r = g.pad_r, .cb = cb, .epilogue = g.epilogue,
                               .clip_min = g.clip_min, .clip_max = g.clip_max};
    assert_true(kiln_expdw_supported(&p));
    kiln_expdw_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.e.ow_tile = kt_int(r, 0, 17);
        p.e.oc_tile = kt_int(r, 0, 5);
        p.d.ow_tile = kt_int(r, 0, 18);
        p.oh_tile = kt_int(r, 0, p.d.oh + 1);
        p.oc_group = kt_int(r, 0, cw / cb + 1);
        p.sub_rows = kt_int(r, 0, p.d.oh + 1);
        p.order = kt_int(r, 0, 1);
    }
    /* the reference: the expand (a 1x1 Conv with bias) and its epilogue,
     * then the depthwise on that */
    const int64_t hw = (int64_t)g.h * g.w, ohw = (int64_t)g.oh * g.ow;
    float *x = kt_rand_buf(r, (int64_t)g.n * c_in * hw), *we = kt_rand_buf(r, (int64_t)cw * c_in);
    float *be = kt_rand_buf(r, cw), *wd = kt_rand_buf(r, (int64_t)cw * g.kh * g.kw);
    float *bd = kt_rand_buf(r, cw);
    float *zb = calloc((size_t)cw, sizeof(float));
    assert_non_null(zb);
    float *wide = kt_ref_conv(&ec, x, we, (e_epi & KILN_EPI_BIAS) ? be : zb);
    kt_epilogue(wide, NULL, (int64_t)g.n * cw * hw, e_epi, ec.clip_min, ec.clip_max);
    float *ref = kt_ref_conv(&g, wide, wd, (g.epilogue & KILN_EPI_BIAS) ? bd : zb);
    kt_epilogue(ref, NULL, (int64_t)g.n * cw * ohw, g.epilogue, g.clip_min, g.clip_max);
    /* the kernel's operands */
    float *xb = kt_to_blocked(x, g.n, c_in, hw, cbi, 0.0f);
    float *wep = kt_nan_buf(kiln_conv_packed_weight_floats(&p.e));
    kiln_conv_pack_weights(&p.e, we, wep);
    float *wdp = kt_nan_buf(kiln_dwconv_packed_weight_floats(&p.d));
    kiln_dwconv_pack_weights(&p.d, wd, wdp);
    float *out = kt_nan_buf((int64_t)g.n * cw * ohw);
    size_t wsb = kiln_expdw_workspace_bytes(&p);
    void *ws = malloc(wsb);
    assert_non_null(ws);
    const int isa = kiln_conv_isa(cb);
    kt_conv_tiles_t = kiln_expdw_pixel_tiles(&p, isa);
    kt_conv_tiles_o = kiln_expdw_oc_tiles(&p, isa);
    kt_conv_ps = kiln_conv_ps_bit(isa, p.e.cb_in, p.e.cb_in);
    kt_conv_slow_tiles = 0;
    expdw_case c = {p, xb, wep, be, wdp, bd, out, ws};
    kt_split(r, kt_int(r, 0, 3), kiln_expdw_tasks(&p), expdw_range, &c);
    if (getenv("KT_VERBOSE"))
        printf("expdw n%d c%d->%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d cbi %d cb %d epi %d,%d "
               "T%d O%d band %d ocg %d sub %d order %d sets T 0x%x O 0x%x\n",
               g.n, c_in, cw, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_t, g.pad_l,
               g.pad_b, g.pad_r, cbi, cb, e_epi, g.epilogue, p.e.ow_tile, p.e.oc_tile, p.oh_tile,
               p.oc_group, p.sub_rows, p.order, kt_conv_tiles_t, kt_conv_tiles_o);
    assert_int_equal(kt_conv_slow_tiles, 0);
    kt_conv_tiles_t = kt_conv_tiles_o = 0xffffffffu;
    kt_conv_ps = 7u;
    float *got = kt_from_blocked(out, g.n, cw, ohw, cb);
    assert_allclose(got, ref, (int64_t)g.n * cw * ohw, 1e-4, 1e-4);
    float *bufs[] = {x, we, be, wd, bd, zb, wide, ref, xb, wep, wdp, out, got};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(ws);
}

/* Biases on both convs; Relu or Clip (ReLU6) on either, never a residual
 * (the template has none). */
static int random_epi(kt_rng *r)
{
    static const int epi[] = {KILN_EPI_BIAS, KILN_EPI_BIAS | KILN_EPI_RELU,
                              KILN_EPI_BIAS | KILN_EPI_CLIP, KILN_EPI_RELU | KILN_EPI_CLIP, 0};
    return epi[kt_int(r, 0, 4)];
}

static void random_expdw(kt_rng *r, int cb, int knobs)
{
    static const int ks_[] = {3, 3, 3, 5, 7};
    kiln_conv_params g = {0};
    g.n = kt_int(r, 1, 2);
    g.c_in = g.c_out = g.groups = cb * kt_int(r, 1, 5);
    g.cb_in = g.cb_out = cb;
    kt_random_window(r, &g, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 24, 30);
    kt_conv_extent(&g);
    g.epilogue = random_epi(r);
    g.clip_min = 0.0f;
    g.clip_max = 6.0f;
    int cbi = kt_int(r, 0, 2) ? cb : kt_int(r, 1, cb);
    check_expdw(g, kt_int(r, 1, 40), cbi, random_epi(r), r, knobs);
}

KT_RANDOM_TESTS(test_expdw_random, random_expdw, 0x6161ull, 0x6262ull, 0x6363ull, 0x6464ull, 3)

/* mobilenet-v2's inverted residuals, spatially reduced, with the analytic
 * knobs the compiler picks */
static void test_expdw_mobilenet(void **state)
{
    (void)state;
    kt_rng r = {11};
    static const int shapes[][4] = {{16, 96, 28, 2}, {24, 144, 28, 1}, {24, 144, 28, 2},
                                    {32, 192, 14, 1}, {64, 384, 14, 1}, {160, 960, 7, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int cb = 8; cb <= 16; cb += 8) {
            int cw = shapes[i][1], s = shapes[i][3];
            kiln_conv_params g = {.n = 1, .c_in = cw, .c_out = cw, .groups = cw,
                                  .h = shapes[i][2], .w = shapes[i][2], .kh = 3, .kw = 3, .sh = s,
                                  .sw = s, .dh = 1, .dw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1,
                                  .pad_r = 1, .cb_in = cb, .cb_out = cb,
                                  .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP, .clip_min = 0,
                                  .clip_max = 6};
            kt_conv_extent(&g);
            check_expdw(g, shapes[i][0], cb, KILN_EPI_BIAS | KILN_EPI_CLIP, &r, 0);
        }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_expdw_random),
        cmocka_unit_test(test_expdw_mobilenet),
    };
    return KT_RUN_TESTS(tests);
}
