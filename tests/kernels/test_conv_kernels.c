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

typedef struct conv_case {
    kiln_conv_params p;
    const float *in, *w, *bias, *res;
    float *out;
    void *ws;
} conv_case;

static void conv_range(void *ctx, int64_t b, int64_t e)
{
    conv_case *c = ctx;
    kiln_conv_run(&c->p, c->in, c->w, c->bias, c->res, c->out, b, e, c->ws);
}

/* Runs the reference conv (with bias) on NCHW data; returns the output. */
static float *ref_conv(const kiln_conv_params *p, const float *x, const float *w, const float *b)
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

/* Checks one configuration: p's geometry, blocks and epilogue are set; if
 * `knobs` is 0 the analytic defaults are used, else random knobs. */
static void check_conv(kiln_conv_params p, kt_rng *r, int knobs)
{
    int ekh = (p.kh - 1) * p.dh + 1, ekw = (p.kw - 1) * p.dw + 1;
    p.oh = (p.h + p.pad_t + p.pad_b - ekh) / p.sh + 1;
    p.ow = (p.w + p.pad_l + p.pad_r - ekw) / p.sw + 1;
    assert_true(p.oh >= 1 && p.ow >= 1);
    assert_true(kiln_conv_supported(&p));
    kiln_conv_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 17);
        p.oc_tile = kt_int(r, 0, 5);
        p.ic_tile = kt_int(r, 0, (p.c_in + p.cb_in - 1) / p.cb_in + 1);
        p.loop_order = kt_int(r, 0, 1);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
        p.oc_group = kt_int(r, 0, (p.c_out + p.cb_out - 1) / p.cb_out + 1);
    }
    int64_t hw = (int64_t)p.h * p.w, ohw = (int64_t)p.oh * p.ow;
    int cob = (p.c_out + p.cb_out - 1) / p.cb_out;
    float *x = kt_rand_buf(r, (int64_t)p.n * p.c_in * hw);
    float *w = kt_rand_buf(r, (int64_t)p.c_out * (p.c_in / p.groups) * p.kh * p.kw);
    float *b = kt_rand_buf(r, p.c_out);
    float *res = kt_rand_buf(r, (int64_t)p.n * p.c_out * ohw);
    float *ref = ref_conv(&p, x, w, b);
    if (!(p.epilogue & KILN_EPI_BIAS)) { /* the reference always has a bias: rerun with 0 */
        free(ref);
        float *zb = calloc((size_t)p.c_out, sizeof(float));
        ref = ref_conv(&p, x, w, zb);
        free(zb);
    }
    kt_epilogue(ref, res, (int64_t)p.n * p.c_out * ohw, p.epilogue, p.clip_min, p.clip_max);

    float *xb = kt_to_blocked(x, p.n, p.c_in, hw, p.cb_in, 0.0f);
    float *rb = kt_to_blocked(res, p.n, p.c_out, ohw, p.cb_out, 0.0f);
    float *bb = kt_alloc((int64_t)cob * p.cb_out);
    for (int i = 0; i < cob * p.cb_out; i++)
        bb[i] = i < p.c_out ? b[i] : 0.0f;
    float *wp = kt_nan_buf(kiln_conv_packed_weight_floats(&p));
    kiln_conv_pack_weights(&p, w, wp);
    float *ob = kt_nan_buf((int64_t)p.n * cob * p.cb_out * ohw);
    size_t wsb = kiln_conv_workspace_bytes(&p);
    void *ws = wsb ? malloc(wsb) : NULL;
    conv_case c = {p, xb, wp, bb, rb, ob, ws};
    kt_split(r, kt_int(r, 0, 3), kiln_conv_tasks(&p), conv_range, &c);
    float *got = kt_from_blocked(ob, p.n, p.c_out, ohw, p.cb_out);
    double tol = 1e-5 * (p.c_in / p.groups) * p.kh * p.kw + 1e-4;
    if (getenv("KT_VERBOSE"))
        printf("conv n%d c%d->%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d g%d cb %d/%d epi %d "
               "knobs T%d O%d ic%d ord%d oh%d ocg%d tasks %lld\n",
               p.n, p.c_in, p.c_out, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t,
               p.pad_l, p.pad_b, p.pad_r, p.groups, p.cb_in, p.cb_out, p.epilogue, p.ow_tile,
               p.oc_tile, p.ic_tile, p.loop_order, p.oh_tile, p.oc_group,
               (long long)kiln_conv_tasks(&p));
    assert_allclose(got, ref, (int64_t)p.n * p.c_out * ohw, 1e-4, tol);
    free(got);
    free(ws);
    free(ob);
    free(wp);
    free(bb);
    free(rb);
    free(xb);
    free(ref);
    free(res);
    free(b);
    free(w);
    free(x);
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
    p.kh = ks_[kt_int(r, 0, 6)];
    p.kw = kt_int(r, 0, 4) == 0 ? ks_[kt_int(r, 0, 6)] : p.kh; /* sometimes 1x7 / 7x1 style */
    p.sh = kt_int(r, 1, 2);
    p.sw = kt_int(r, 0, 2) ? p.sh : kt_int(r, 1, 3);
    p.dh = kt_int(r, 0, 3) ? 1 : 2;
    p.dw = kt_int(r, 0, 3) ? 1 : kt_int(r, 1, 2);
    p.pad_t = kt_int(r, 0, p.kh);
    p.pad_b = kt_int(r, 0, p.kh);
    p.pad_l = kt_int(r, 0, p.kw);
    p.pad_r = kt_int(r, 0, p.kw);
    int ekh = (p.kh - 1) * p.dh + 1, ekw = (p.kw - 1) * p.dw + 1;
    p.h = kt_int(r, 1, 19);
    p.w = kt_int(r, 1, 33);
    if (p.h + p.pad_t + p.pad_b < ekh)
        p.h = ekh;
    if (p.w + p.pad_l + p.pad_r < ekw)
        p.w = ekw;
    p.epilogue = kt_int(r, 0, 15);
    p.clip_min = -0.5f;
    p.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.75f;
    return p;
}

static void run_random(int cb_out, uint64_t seed, int cases)
{
    kt_rng r = {seed};
    for (int i = 0; i < cases; i++) {
        kiln_conv_params p = random_geometry(&r, cb_out);
        check_conv(p, &r, i % 3 != 0);
    }
}

static void test_conv_random_avx512(void **state)
{
    (void)state;
    run_random(16, 0x1234567ull, 150);
}

static void test_conv_random_avx2(void **state)
{
    (void)state;
    run_random(8, 0xabcdefull, 100);
}

static void test_conv_random_portable(void **state)
{
    (void)state;
    run_random(4, 0x777ull, 40);
    run_random(5, 0x778ull, 30);
}

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
    if (!kt_cpu_ok()) {
        printf("skipped: the kernel tests need AVX-512 on this build\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_random_avx512),   cmocka_unit_test(test_conv_random_avx2),
        cmocka_unit_test(test_conv_random_portable), cmocka_unit_test(test_conv_network_shapes),
        cmocka_unit_test(test_conv_groups),          cmocka_unit_test(test_layout_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
