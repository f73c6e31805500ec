/* tests/kernels/test_dwconv_kernels.c: the depthwise convolution template
 * (codegen/c/kernels/kiln_kernels_dwconv.h) against the reference Conv
 * (ref/conv.c, group == channels) on random shapes: channel counts not
 * divisible by the block, blocks 16 (AVX-512), 8 (AVX2) and others
 * (portable), 3x3/5x5/7x7/1x1 and asymmetric windows, strides, dilations,
 * asymmetric pads (including pads that leave border pixels with no tap),
 * batch 2, every epilogue combination, random knobs and task splits. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_dwconv.h"

typedef struct dw_case {
    kiln_dwconv_params p;
    const float *in, *w, *bias, *res;
    float *out;
} dw_case;

static void dw_range(void *ctx, int64_t b, int64_t e)
{
    dw_case *c = ctx;
    kiln_dwconv_run(&c->p, c->in, c->w, c->bias, c->res, c->out, b, e, NULL);
}

static float *ref_dw(const kiln_dwconv_params *p, const float *x, const float *w, const float *b)
{
    kiln_shape sh[3] = {ks(4, p->n, p->c, p->h, p->w), ks(4, p->c, 1, p->kh, p->kw), ks(1, p->c)};
    nn_graph t = nn_build(KILN_OP_CONV, 3, sh);
    int64_t strides[2] = {p->sh, p->sw}, dil[2] = {p->dh, p->dw};
    int64_t pads[4] = {p->pad_t, p->pad_l, p->pad_b, p->pad_r};
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "strides", strides, 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "dilations", dil, 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "pads", pads, 4), KILN_OK);
    assert_int_equal(kiln_node_set_int(t.g, t.node, "group", p->c), KILN_OK);
    kiln_shape expect = ks(4, p->n, p->c, p->oh, p->ow);
    float *data[3] = {(float *)x, (float *)w, (float *)b};
    int64_t count;
    float *y = nn_run(&t, data, &expect, &count);
    nn_free(&t);
    return y;
}

static void check_dw(kiln_dwconv_params p, kt_rng *r, int knobs)
{
    int ekh = (p.kh - 1) * p.dh + 1, ekw = (p.kw - 1) * p.dw + 1;
    p.oh = (p.h + p.pad_t + p.pad_b - ekh) / p.sh + 1;
    p.ow = (p.w + p.pad_l + p.pad_r - ekw) / p.sw + 1;
    assert_true(p.oh >= 1 && p.ow >= 1);
    assert_true(kiln_dwconv_supported(&p));
    kiln_dwconv_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.ow_tile = kt_int(r, 0, 18);
        p.oh_tile = kt_int(r, 0, p.oh + 1);
    }
    int64_t hw = (int64_t)p.h * p.w, ohw = (int64_t)p.oh * p.ow;
    int cbn = (p.c + p.cb - 1) / p.cb;
    float *x = kt_rand_buf(r, (int64_t)p.n * p.c * hw);
    float *w = kt_rand_buf(r, (int64_t)p.c * p.kh * p.kw);
    float *b = kt_rand_buf(r, p.c);
    float *res = kt_rand_buf(r, (int64_t)p.n * p.c * ohw);
    float *zb = calloc((size_t)p.c, sizeof(float));
    float *ref = ref_dw(&p, x, w, (p.epilogue & KILN_EPI_BIAS) ? b : zb);
    kt_epilogue(ref, res, (int64_t)p.n * p.c * ohw, p.epilogue, p.clip_min, p.clip_max);
    float *xb = kt_to_blocked(x, p.n, p.c, hw, p.cb, 0.0f);
    float *rb = kt_to_blocked(res, p.n, p.c, ohw, p.cb, 0.0f);
    float *bb = kt_alloc((int64_t)cbn * p.cb);
    for (int i = 0; i < cbn * p.cb; i++)
        bb[i] = i < p.c ? b[i] : 0.0f;
    float *wp = kt_nan_buf(kiln_dwconv_packed_weight_floats(&p));
    kiln_dwconv_pack_weights(&p, w, wp);
    float *ob = kt_nan_buf((int64_t)p.n * cbn * p.cb * ohw);
    assert_int_equal(kiln_dwconv_workspace_bytes(&p), 0);
    dw_case c = {p, xb, wp, bb, rb, ob};
    kt_split(r, kt_int(r, 0, 3), kiln_dwconv_tasks(&p), dw_range, &c);
    float *got = kt_from_blocked(ob, p.n, p.c, ohw, p.cb);
    if (getenv("KT_VERBOSE"))
        printf("dw n%d c%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d cb %d epi %d T%d ohb%d\n",
               p.n, p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t, p.pad_l, p.pad_b,
               p.pad_r, p.cb, p.epilogue, p.ow_tile, p.oh_tile);
    assert_allclose(got, ref, (int64_t)p.n * p.c * ohw, 1e-4, 1e-4);
    free(got);
    free(ob);
    free(wp);
    free(bb);
    free(rb);
    free(xb);
    free(ref);
    free(zb);
    free(res);
    free(b);
    free(w);
    free(x);
}

static void run_random(int cb, uint64_t seed, int cases)
{
    static const int ks_[] = {1, 3, 3, 3, 5, 7};
    kt_rng r = {seed};
    for (int i = 0; i < cases; i++) {
        kiln_dwconv_params p = {0};
        p.n = kt_int(&r, 1, 2);
        p.c = kt_int(&r, 1, 50);
        p.cb = cb;
        p.kh = ks_[kt_int(&r, 0, 5)];
        p.kw = kt_int(&r, 0, 4) == 0 ? ks_[kt_int(&r, 0, 5)] : p.kh;
        p.sh = kt_int(&r, 1, 2);
        p.sw = kt_int(&r, 0, 2) ? p.sh : kt_int(&r, 1, 3);
        p.dh = kt_int(&r, 0, 3) ? 1 : 2;
        p.dw = kt_int(&r, 0, 3) ? 1 : kt_int(&r, 1, 2);
        p.pad_t = kt_int(&r, 0, p.kh);
        p.pad_b = kt_int(&r, 0, p.kh);
        p.pad_l = kt_int(&r, 0, p.kw);
        p.pad_r = kt_int(&r, 0, p.kw);
        int ekh = (p.kh - 1) * p.dh + 1, ekw = (p.kw - 1) * p.dw + 1;
        p.h = kt_int(&r, 1, 20);
        p.w = kt_int(&r, 1, 40);
        if (p.h + p.pad_t + p.pad_b < ekh)
            p.h = ekh;
        if (p.w + p.pad_l + p.pad_r < ekw)
            p.w = ekw;
        p.epilogue = kt_int(&r, 0, 15);
        p.clip_min = 0.0f;
        p.clip_max = kt_int(&r, 0, 1) ? 6.0f : 0.5f;
        check_dw(p, &r, i % 3 != 0);
    }
}

static void test_dwconv_random_avx512(void **state)
{
    (void)state;
    run_random(16, 0x5151ull, 150);
}

static void test_dwconv_random_avx2(void **state)
{
    (void)state;
    run_random(8, 0x5252ull, 100);
}

static void test_dwconv_random_portable(void **state)
{
    (void)state;
    run_random(4, 0x5353ull, 40);
    run_random(3, 0x5454ull, 30);
}

/* mobilenet-v2's depthwise layers, spatially reduced */
static void test_dwconv_mobilenet(void **state)
{
    (void)state;
    kt_rng r = {8};
    static const int shapes[][3] = {{32, 28, 1}, {96, 28, 2}, {144, 14, 1}, {144, 14, 2},
                                    {384, 14, 1}, {576, 14, 2}, {960, 7, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int cb = 8; cb <= 16; cb += 8) {
            kiln_dwconv_params p = {.n = 1, .c = shapes[i][0], .h = shapes[i][1],
                                    .w = shapes[i][1], .kh = 3, .kw = 3, .sh = shapes[i][2],
                                    .sw = shapes[i][2], .dh = 1, .dw = 1, .pad_t = 1, .pad_l = 1,
                                    .pad_b = 1, .pad_r = 1, .cb = cb,
                                    .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP, .clip_min = 0,
                                    .clip_max = 6};
            check_dw(p, &r, 0);
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
        cmocka_unit_test(test_dwconv_random_avx512),
        cmocka_unit_test(test_dwconv_random_avx2),
        cmocka_unit_test(test_dwconv_random_portable),
        cmocka_unit_test(test_dwconv_mobilenet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
