/* tests/kernels/test_conv_kernels.c: the blocked convolution template
 * (codegen/c/kernels/kiln_kernels_conv.h) and the layout transforms against
 * the reference Conv (ref/conv.c) on random shapes: odd channel counts, block
 * widths 16 (AVX-512), 8 (AVX2) and others (portable), input blocks 3/4/8/16,
 * 1x1..7x7 and 1x7/7x1 windows, strides, dilations, asymmetric pads, batch 2,
 * groups, every epilogue combination, random knobs as well as the analytic
 * defaults, and several splits of the task range. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "codegen/c/kernels/kiln_kernels_layout.h"
#include "conv_test_util.h"

KT_TEMPLATE_RUN(conv, kiln_conv_params, kiln_conv_run)

/* Runs p (extent, blocks, epilogue and knobs set) over a random split of its
 * tasks and checks the output against the reference. */
static void run_conv(kiln_conv_params p, kt_rng *r)
{
    kt_conv_data d = kt_conv_data_make(&p, r);
    float *wp = kt_nan_buf(kiln_conv_packed_weight_floats(&p));
    kiln_conv_pack_weights(&p, d.w, wp);
    size_t wsb = kiln_conv_workspace_bytes(&p);
    void *ws = wsb ? malloc(wsb) : NULL;
    conv_case c = {p, d.xb, wp, d.bb, d.rb, d.ob, ws};
    kiln_conv_tile_sets(&p, kiln_conv_isa(p.cb_out), &kt_conv_tiles_t, &kt_conv_tiles_o);
    kt_conv_ps = kiln_conv_ps_set(&p, kiln_conv_isa(p.cb_out));
    kt_split(r, kt_int(r, 0, 3), kiln_conv_tasks(&p), conv_range, &c);
    assert_int_equal(kt_conv_slow_tiles, 0);
    if (getenv("KT_VERBOSE"))
        printf("conv n%d c%d->%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d g%d cb %d/%d epi %d "
               "knobs T%d O%d ic%d ord%d oh%d ocg%d tasks %lld\n",
               p.n, p.c_in, p.c_out, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t,
               p.pad_l, p.pad_b, p.pad_r, p.groups, p.cb_in, p.cb_out, p.epilogue, p.ow_tile,
               p.oc_tile, p.ic_tile, p.loop_order, p.oh_tile, p.oc_group,
               (long long)kiln_conv_tasks(&p));
    kt_conv_data_check(&d, &p, 1e-5 * (p.c_in / p.groups) * p.kh * p.kw + 1e-4);
    free(ws);
    free(wp);
    kt_conv_data_free(&d);
}

/* Checks one configuration: p's geometry, blocks and epilogue are set; if
 * `knobs` is 0 the analytic defaults are used, else random knobs. */
static void check_conv(kiln_conv_params p, kt_rng *r, int knobs)
{
    kt_conv_extent(&p);
    assert_true(kiln_conv_supported(&p));
    kiln_conv_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 17);
        p.oc_tile = kt_int(r, 0, 5);
        p.ic_tile = kt_int(r, 0, (p.c_in + p.cb_in - 1) / p.cb_in + 1);
        p.loop_order = kt_int(r, 0, 1);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
        p.oc_group = kt_int(r, 0, (p.c_out + p.cb_out - 1) / p.cb_out + 1);
        p.task_order = kt_int(r, 0, 2); /* 2: out of range, as 0 */
        p.colseg = kt_int(r, 0, 1); /* column segments are right for any window */
    }
    run_conv(p, r);
}

static kiln_conv_params random_geometry(kt_rng *r, int cb_out)
{
    static const int ks_[] = {1, 1, 3, 3, 3, 5, 7};
    static const int cbis[] = {16, 16, 8, 4, 3, 1};
    kiln_conv_params p = {0};
    p.n = kt_int(r, 1, 2);
    p.groups = 1;
    p.c_in = kt_int(r, 1, 40);
    p.c_out = kt_int(r, 1, 70);
    p.cb_out = cb_out;
    p.cb_in = cbis[kt_int(r, 0, 5)];
    kt_random_window(r, &p, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 19, 33);
    p.epilogue = kt_int(r, 0, 15);
    p.clip_min = -0.5f;
    p.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.75f;
    return p;
}

static void random_conv(kt_rng *r, int cb_out, int knobs)
{
    check_conv(random_geometry(r, cb_out), r, knobs);
}

KT_RANDOM_TESTS(test_conv_random, random_conv, 0x1234567ull, 0xabcdefull, 0x777ull, 0x778ull, 5)

/* Shapes from real networks (reduced spatially where that keeps the case). */
static void test_conv_network_shapes(void **state)
{
    (void)state;
    kt_rng r = {99};
    /* c_in, c_out, h, k, stride, pad, cb_in */
    static const int shapes[][7] = {
        {3, 64, 32, 7, 2, 3, 3},      /* resnet stem, NCHW input as 3c blocks */
        {64, 64, 14, 3, 1, 1, 16},    /* basic block */
        {64, 256, 14, 1, 1, 0, 16},   /* bottleneck expand */
        {256, 128, 14, 1, 2, 0, 16},  /* downsample 1x1 s2 */
        {128, 128, 15, 3, 2, 1, 16},  /* 3x3 s2 */
        {512, 512, 7, 3, 1, 1, 16},   /* layer4 3x3 */
        {1024, 2048, 7, 1, 2, 0, 16}, /* layer4 downsample */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (int cbo = 8; cbo <= 16; cbo += 8) {
            kiln_conv_params p = {.n = 1, .c_in = shapes[i][0], .c_out = shapes[i][1],
                                  .h = shapes[i][2], .w = shapes[i][2], .kh = shapes[i][3],
                                  .kw = shapes[i][3], .sh = shapes[i][4], .sw = shapes[i][4],
                                  .dh = 1, .dw = 1, .pad_t = shapes[i][5], .pad_l = shapes[i][5],
                                  .pad_b = shapes[i][5], .pad_r = shapes[i][5], .groups = 1,
                                  .cb_in = shapes[i][6] == 16 ? cbo : shapes[i][6], .cb_out = cbo,
                                  .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU | KILN_EPI_RESIDUAL};
            check_conv(p, &r, 0);
        }
    }
    /* inception-v3's 1x7 / 7x1 */
    kiln_conv_params a = {.n = 1, .c_in = 128, .c_out = 192, .h = 17, .w = 17, .kh = 1, .kw = 7,
                          .sh = 1, .sw = 1, .dh = 1, .dw = 1, .pad_l = 3, .pad_r = 3, .groups = 1,
                          .cb_in = 16, .cb_out = 16, .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU};
    check_conv(a, &r, 0);
    a.kh = 7;
    a.kw = 1;
    a.pad_l = a.pad_r = 0;
    a.pad_t = a.pad_b = 3;
    check_conv(a, &r, 0);
}

/* Column segments (see "column segments"): atrous convs whose rate nears
 * the map's width, where the defaults take them (DeepLabV3's ASPP at rates
 * 12 and 6, a 5x5 at rate 4, asymmetric pads, stride 2, filter columns no
 * output reads, a 7-wide filter on 3 columns), against the reference with
 * the defaults and random knobs; the defaults keep whole rows where few
 * taps read padding. */
static void test_conv_colseg(void **state)
{
    (void)state;
    kt_rng r = {4242};
    /* c_in, c_out, h, w, k, dil, pad_l, pad_r, stride, cb */
    static const int shapes[][10] = {
        {96, 40, 16, 16, 3, 12, 12, 12, 1, 16}, {64, 24, 9, 11, 3, 6, 6, 6, 1, 16},
        {24, 17, 12, 13, 5, 4, 8, 5, 1, 8},     {40, 33, 10, 14, 3, 8, 8, 8, 2, 16},
        {16, 16, 7, 3, 7, 1, 3, 3, 1, 16},      {35, 20, 8, 6, 3, 5, 5, 0, 1, 8},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *sh = shapes[i];
        kiln_conv_params p = {.n = 1, .c_in = sh[0], .c_out = sh[1], .h = sh[2], .w = sh[3],
                              .kh = sh[4], .kw = sh[4], .sh = sh[8], .sw = sh[8], .dh = sh[5],
                              .dw = sh[5], .pad_t = sh[6], .pad_l = sh[6], .pad_b = sh[7],
                              .pad_r = sh[7], .groups = 1, .cb_in = sh[9], .cb_out = sh[9],
                              .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU | KILN_EPI_RESIDUAL};
        kiln_conv_params d = p;
        kt_conv_extent(&d);
        kiln_conv_default_params(&d, 48 << 10, 2 << 20, 2);
        assert_int_equal(d.colseg, 1);
        assert_int_equal(kiln_conv_workspace_bytes(&d), 0); /* read in place: no band copy */
        check_conv(p, &r, 0);
        for (int k = 0; k < 4; k++) {
            kiln_conv_params q = p;
            q.epilogue = kt_int(&r, 0, 15);
            check_conv(q, &r, 1);
        }
    }
    /* few taps in the padding: whole rows */
    kiln_conv_params p = {.n = 1, .c_in = 64, .c_out = 64, .h = 14, .w = 14, .kh = 3, .kw = 3,
                          .sh = 1, .sw = 1, .dh = 2, .dw = 2, .pad_t = 2, .pad_l = 2, .pad_b = 2,
                          .pad_r = 2, .groups = 1, .cb_in = 16, .cb_out = 16};
    kt_conv_extent(&p);
    kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
    assert_int_equal(p.colseg, 0);
    /* the segments of rate 12 on 16 columns: [0,4) reads columns 1-2, [4,12) 1, [12,16) 0-1 */
    kiln_conv_params a = {.w = 16, .ow = 16, .kw = 3, .sw = 1, .dw = 12, .pad_l = 12};
    kiln_conv_seg s[KILN_CONV_MAXSEG];
    assert_int_equal(kiln_conv_col_segs(&a, s), 3);
    assert_true(s[0].ow0 == 0 && s[0].ow1 == 4 && s[0].lo == 1 && s[0].hi == 3);
    assert_true(s[1].ow0 == 4 && s[1].ow1 == 12 && s[1].lo == 1 && s[1].hi == 2);
    assert_true(s[2].ow0 == 12 && s[2].ow1 == 16 && s[2].lo == 0 && s[2].hi == 2);
}

/* Oc tiles outermost with several ic passes per oc tile: the partial sums
 * go through the output between passes and every tile call prefetches a
 * share of the next pass's weights (the next ic pass, or at the last pass
 * the next oc tile's first, past the last oc tile none). Channels that the
 * blocks do not divide, stride 1 and 2, 1x1 and 3x3, every header epilogue,
 * ic passes that do and do not divide the input blocks, oc tiles of 1-4
 * blocks with a partial last one; then the analytic defaults of small
 * images with many channels (oc tiles outermost, ic passes of an L1 half,
 * tasks split over output channels) on the machine's cache sizes. */
static void test_conv_ic_passes(void **state)
{
    (void)state;
    kt_rng r = {2718};
    for (int i = 0; i < 48; i++) {
        int cb = i % 3 == 2 ? 8 : 16, k = i % 2 ? 3 : 1, s = 1 + (i / 2) % 2;
        kiln_conv_params p = {.n = 1 + (i % 5 == 4), .c_in = kt_int(&r, 3, 9) * cb - kt_int(&r, 0, 5),
                              .c_out = kt_int(&r, 2, 9) * cb - kt_int(&r, 0, 3), .h = kt_int(&r, 3, 10),
                              .w = kt_int(&r, 3, 10), .kh = k, .kw = k, .sh = s, .sw = s, .dh = 1,
                              .dw = 1, .pad_t = k / 2, .pad_l = k / 2, .pad_b = k / 2,
                              .pad_r = k / 2, .groups = 1, .cb_in = cb, .cb_out = cb,
                              .epilogue = i % 16, .clip_min = -0.25f, .clip_max = 0.5f};
        kt_conv_extent(&p);
        assert_true(kiln_conv_supported(&p));
        kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
        p.loop_order = 1;
        p.ic_tile = kt_int(&r, 1, 3);
        p.oc_tile = kt_int(&r, 1, 4);
        p.ow_tile = kt_int(&r, 1, 7);
        p.oc_group = kt_int(&r, 0, 5);
        p.oh_tile = kt_int(&r, 0, p.oh);
        run_conv(p, &r);
    }
    /* c_in, c_out, h, k, stride */
    static const int shapes[][5] = {
        {520, 200, 7, 3, 1}, {1000, 264, 7, 1, 1}, {1040, 528, 14, 1, 2}, {300, 300, 15, 3, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int k = shapes[i][3];
        kiln_conv_params p = {.n = 1, .c_in = shapes[i][0], .c_out = shapes[i][1],
                              .h = shapes[i][2], .w = shapes[i][2], .kh = k, .kw = k,
                              .sh = shapes[i][4], .sw = shapes[i][4], .dh = 1, .dw = 1,
                              .pad_t = k / 2, .pad_l = k / 2, .pad_b = k / 2, .pad_r = k / 2,
                              .groups = 1, .cb_in = 16, .cb_out = 16,
                              .epilogue = KILN_EPI_BIAS | KILN_EPI_RESIDUAL | KILN_EPI_RELU};
        kt_conv_extent(&p);
        kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
        assert_int_equal(p.loop_order, 1);
        assert_true(p.ic_tile >= 1 && p.ic_tile < (p.c_in + 15) / 16);
        run_conv(p, &r);
    }
}

/* The loop order the analytic defaults pick by the pixels of a task: the
 * group's weights fit half the L2 in each case, so rows go outermost only
 * where a task has more than KILN_CONV_ORDER0_PIXELS output pixels to spend
 * each weight on (a 7x7 or 8x8 image: oc tiles outermost, the next chunk of
 * weights fetched as the current one computes); every case against the
 * reference. */
static void test_conv_order_by_pixels(void **state)
{
    (void)state;
    kt_rng r = {1618};
    /* c_in, c_out, h, w, kh, kw, stride, pad (h, w), the order expected */
    static const int shapes[][10] = {
        {512, 2048, 7, 7, 1, 1, 1, 0, 0, 1},   /* resnet-50 layer 4 expand */
        {384, 384, 8, 8, 1, 3, 1, 0, 1, 1},    /* inception-v3 1x3 on 8x8 */
        {160, 960, 7, 7, 1, 1, 1, 0, 0, 1},    /* mobilenet-v2's last expand */
        {128, 512, 28, 28, 1, 1, 1, 0, 0, 0},  /* resnet-50 layer 2 expand */
        {64, 64, 56, 56, 3, 3, 1, 1, 1, 0},    /* resnet layer 1 3x3 */
        {96, 96, 35, 35, 3, 3, 2, 0, 0, 0},    /* inception-v3 3x3/2, 85 pixels a task */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *sh = shapes[i];
        kiln_conv_params p = {.n = 1, .c_in = sh[0], .c_out = sh[1], .h = sh[2], .w = sh[3],
                              .kh = sh[4], .kw = sh[5], .sh = sh[6], .sw = sh[6], .dh = 1,
                              .dw = 1, .pad_t = sh[7], .pad_b = sh[7], .pad_l = sh[8],
                              .pad_r = sh[8], .groups = 1, .cb_in = 16, .cb_out = 16,
                              .epilogue = KILN_EPI_BIAS | KILN_EPI_RESIDUAL | KILN_EPI_RELU};
        kt_conv_extent(&p);
        kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
        kiln_conv_plan q = kiln_conv_plan_of(&p);
        assert_true(q.oc_group * q.cib_g * p.kh * p.kw * 16 * 16 * 4 <= (1 << 20));
        int64_t px = (int64_t)q.oh_tile * p.ow;
        assert_int_equal(p.loop_order, sh[9]);
        assert_int_equal(p.loop_order, px > KILN_CONV_ORDER0_PIXELS ? 0 : 1);
        if (p.loop_order == 1)
            assert_true(p.ic_tile >= 1 && p.ic_tile < q.cib_g);
        run_conv(p, &r);
    }
}

static void test_conv_groups(void **state)
{
    (void)state;
    kt_rng r = {4242};
    for (int i = 0; i < 40; i++) {
        static const int cbs[] = {16, 8, 4};
        int cb = cbs[i % 3];
        kiln_conv_params p = random_geometry(&r, cb);
        p.groups = kt_int(&r, 2, 4);
        p.cb_in = kt_int(&r, 0, 1) ? cb : 4;
        p.c_in = p.groups * p.cb_in * kt_int(&r, 1, 2);
        p.c_out = p.groups * p.cb_out * kt_int(&r, 1, 2);
        check_conv(p, &r, i % 2);
    }
    /* channel counts the blocks do not divide are refused */
    kiln_conv_params q = {.n = 1, .c_in = 6, .c_out = 6, .h = 4, .w = 4, .oh = 4, .ow = 4,
                          .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 3,
                          .cb_in = 16, .cb_out = 16};
    assert_false(kiln_conv_supported(&q));
    q.groups = 1;
    assert_true(kiln_conv_supported(&q));
}

/* Weights from the L2 (kiln_conv_default_params): on AVX2 a loop-order-0
 * conv whose oc tile's weights for the whole reduction pass half the L1
 * takes the tile picked with dear weight loads (fewer oc blocks), still in
 * order 0; one whose weights fit keeps the plain pick, and AVX-512 blocks
 * are not affected. Each default runs against the reference. */
static void test_conv_weights_from_l2(void **state)
{
    (void)state;
    kt_rng r = {2024};
    static const int sh[][4] = {/* c_in, c_out, hw, reduction weights past L1/2 */
                                {1024, 256, 14, 1}, {512, 256, 28, 1}, {64, 256, 56, 0}};
    for (int cb = 8; cb <= 16; cb += 8)
        for (int i = 0; i < 3; i++) {
            kiln_conv_params p = {.n = 1, .c_in = sh[i][0], .c_out = sh[i][1], .h = sh[i][2],
                                  .w = sh[i][2], .oh = sh[i][2], .ow = sh[i][2], .kh = 1,
                                  .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1,
                                  .cb_in = cb, .cb_out = cb, .epilogue = KILN_EPI_BIAS};
            kiln_conv_default_params(&p, 32 << 10, 512 << 10, 2);
            int T, O;
            kiln_conv_pick_tile(kiln_conv_model_isa(cb), p.ow, p.c_out / cb, &T, &O);
            if (cb == 8 && sh[i][3]) {
                assert_int_equal(p.loop_order, 0);
                assert_true(p.oc_tile < O);
                assert_true(p.ow_tile > T);
            } else {
                assert_int_equal(p.ow_tile, T);
                assert_int_equal(p.oc_tile, O);
            }
            p.c_in /= 4; /* a smaller copy with these knobs through the kernel */
            p.c_out /= 4;
            run_conv(p, &r);
        }
}

static void test_layout_roundtrip(void **state)
{
    (void)state;
    kt_rng r = {31337};
    for (int i = 0; i < 30; i++) {
        kiln_layout_params p = {.n = kt_int(&r, 1, 3), .c = kt_int(&r, 1, 50),
                                .hw = kt_int(&r, 1, 200), .cb = i % 2 ? 16 : kt_int(&r, 1, 9)};
        int64_t total = (int64_t)p.n * p.c * p.hw;
        float *x = kt_rand_buf(&r, total);
        float *want = kt_to_blocked(x, p.n, p.c, p.hw, p.cb, 0.0f);
        float *blk = kt_nan_buf(kiln_layout_blocked_floats(&p));
        int64_t tasks = kiln_layout_tasks(&p), mid = tasks / 2;
        kiln_layout_to_blocked(&p, x, blk, mid, tasks);
        kiln_layout_to_blocked(&p, x, blk, 0, mid);
        assert_memory_equal(blk, want, sizeof(float) * (size_t)kiln_layout_blocked_floats(&p));
        float *back = kt_nan_buf(total);
        kiln_layout_from_blocked(&p, blk, back, 0, tasks);
        assert_memory_equal(back, x, sizeof(float) * (size_t)total);
        free(back);
        free(blk);
        free(want);
        free(x);
    }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_conv_random),
        cmocka_unit_test(test_conv_network_shapes),
        cmocka_unit_test(test_conv_colseg),
        cmocka_unit_test(test_conv_ic_passes),
        cmocka_unit_test(test_conv_order_by_pixels),
        cmocka_unit_test(test_conv_groups),
        cmocka_unit_test(test_conv_weights_from_l2),
        cmocka_unit_test(test_layout_roundtrip),
    };
    return KT_RUN_TESTS(tests);
}
