/* tests/kernels/test_conv_prologue_kernels.c: the blocked convolution with
 * an input prologue (kiln_conv_run_pro, kiln_kernels_conv.h: x ->
 * clamp(x * scale[c] + shift[c], lo, hi) per input channel, each part
 * optional, applied as each task stages its input) against the reference
 * Conv (ref/conv.c) run on the activated input. Random shapes: channels not
 * multiples of the block (blocks 16, 8, 4, 3, 1 in, 16/8/4/odd out), 1x1 to
 * 7x7 windows, strides 1-3, dilations, asymmetric pads (the padding must
 * stay zero after the prologue: clamps with lo > 0 and nonzero shifts catch
 * the prologue of a zero), batch 2, groups, every header epilogue, analytic
 * and random knobs, random splits of the task range, a NaN-filled
 * workspace; then densenet-121's pre-activation 1x1 shapes with the
 * defaults; and kiln_conv_scale_weights, the run-time per-channel scale
 * (squeeze-and-excitation) folded into packed weights. */
#include <float.h>

#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "conv_test_util.h"

typedef struct pro_case {
    kiln_conv_params p;
    const float *in, *scale, *shift, *w, *bias, *res;
    float *out;
    void *ws;
} pro_case;

static void pro_range(void *ctx, int64_t b, int64_t e)
{
    pro_case *c = ctx;
    kiln_conv_run_pro(&c->p, c->in, c->scale, c->shift, c->w, c->bias, c->res, c->out, b, e, c->ws);
}

/* Runs p (extent, blocks, epilogue, prologue and knobs set) over a random
 * split of its tasks and checks the output against the reference conv of
 * the activated input. */
static void run_pro(kiln_conv_params p, kt_rng *r)
{
    int64_t hw = (int64_t)p.h * p.w, ohw = (int64_t)p.oh * p.ow;
    int64_t out = (int64_t)p.n * p.c_out * ohw;
    int cib = (p.c_in + p.cb_in - 1) / p.cb_in, cob = (p.c_out + p.cb_out - 1) / p.cb_out;
    float *x = kt_rand_buf(r, (int64_t)p.n * p.c_in * hw);
    float *w = kt_rand_buf(r, (int64_t)p.c_out * (p.c_in / p.groups) * p.kh * p.kw);
    float *b = kt_rand_buf(r, p.c_out), *res = kt_rand_buf(r, out);
    /* scale and shift, zero in the padding channels of the last block */
    float *sc = calloc((size_t)cib * (size_t)p.cb_in, sizeof(float));
    float *sh = calloc((size_t)cib * (size_t)p.cb_in, sizeof(float));
    assert_non_null(sc);
    assert_non_null(sh);
    for (int c = 0; c < p.c_in; c++) {
        sc[c] = 2.0f * kt_float(r) - 0.5f;
        sh[c] = kt_float(r) - 0.25f;
    }
    /* the activated input, NCHW, for the reference */
    float *xa = kt_alloc((int64_t)p.n * p.c_in * hw);
    for (int n = 0; n < p.n; n++)
        for (int c = 0; c < p.c_in; c++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t k = ((int64_t)n * p.c_in + c) * hw + i;
                float v = x[k];
                if (p.pro & KILN_CONV_PRO_SCALE)
                    v *= sc[c];
                if (p.pro & KILN_CONV_PRO_SHIFT)
                    v += sh[c];
                if (p.pro & KILN_CONV_PRO_CLAMP)
                    v = v < p.pro_lo ? p.pro_lo : v > p.pro_hi ? p.pro_hi : v;
                xa[k] = v;
            }
    float *zb = calloc((size_t)p.c_out, sizeof(float));
    assert_non_null(zb);
    float *ref = kt_ref_conv(&p, xa, w, (p.epilogue & KILN_EPI_BIAS) ? b : zb);
    kt_epilogue(ref, res, out, p.epilogue, p.clip_min, p.clip_max);
    float *xb = kt_to_blocked(x, p.n, p.c_in, hw, p.cb_in, 0.0f);
    float *rb = kt_to_blocked(res, p.n, p.c_out, ohw, p.cb_out, 0.0f);
    float *bb = kt_to_blocked(b, 1, p.c_out, 1, p.cb_out, 0.0f);
    float *ob = kt_nan_buf((int64_t)p.n * cob * p.cb_out * ohw);
    float *wp = kt_nan_buf(kiln_conv_packed_weight_floats(&p));
    kiln_conv_pack_weights(&p, w, wp);
    size_t wsb = kiln_conv_workspace_bytes(&p);
    assert_true(wsb > 0); /* a prologue always stages */
    float *ws = kt_nan_buf((int64_t)(wsb / sizeof(float)) + 1);
    pro_case c = {p, xb, (p.pro & KILN_CONV_PRO_SCALE) ? sc : NULL,
                  (p.pro & KILN_CONV_PRO_SHIFT) ? sh : NULL, wp, bb, rb, ob, ws};
    kiln_conv_tile_sets(&p, kiln_conv_isa(p.cb_out), &kt_conv_tiles_t, &kt_conv_tiles_o);
    kt_conv_ps = kiln_conv_ps_set(&p, kiln_conv_isa(p.cb_out));
    kt_split(r, kt_int(r, 0, 3), kiln_conv_tasks(&p), pro_range, &c);
    assert_int_equal(kt_conv_slow_tiles, 0);
    if (getenv("KT_VERBOSE"))
        printf("conv+pro n%d c%d->%d %dx%d k%dx%d s%d,%d d%d,%d pad %d,%d,%d,%d g%d cb %d/%d "
               "epi %d pro %d [%g, %g] knobs T%d O%d ic%d ord%d oh%d ocg%d tasks %lld\n",
               p.n, p.c_in, p.c_out, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_t,
               p.pad_l, p.pad_b, p.pad_r, p.groups, p.cb_in, p.cb_out, p.epilogue, p.pro,
               (double)p.pro_lo, (double)p.pro_hi, p.ow_tile, p.oc_tile, p.ic_tile, p.loop_order,
               p.oh_tile, p.oc_group, (long long)kiln_conv_tasks(&p));
    float *got = kt_from_blocked(ob, p.n, p.c_out, ohw, p.cb_out);
    assert_allclose(got, ref, out, 1e-4, 2e-5 * (p.c_in / p.groups) * p.kh * p.kw + 1e-4);
    float *bufs[] = {x, w, b, res, sc, sh, xa, zb, ref, xb, rb, bb, ob, wp, ws, got};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

/* A random prologue: scale, shift, clamp each in or out (at least one),
 * the clamp a Relu, a ReLU6, or one with lo > 0 (a zero does not stay
 * zero through it: the padding test). */
static void random_prologue(kiln_conv_params *p, kt_rng *r)
{
    p->pro = kt_int(r, 1, 7);
    int k = kt_int(r, 0, 2);
    p->pro_lo = k == 2 ? 0.125f : 0.0f;
    p->pro_hi = k == 0 ? FLT_MAX : k == 1 ? 6.0f : 0.75f;
}

/* Checks one configuration: p's geometry, blocks, epilogue and prologue are
 * set; knobs 0: the analytic defaults, else random ones. */
static void check_pro(kiln_conv_params p, kt_rng *r, int knobs)
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
    }
    run_pro(p, r);
}

static void random_case(kt_rng *r, int cb_out, int knobs)
{
    static const int ks_[] = {1, 1, 1, 3, 3, 5, 7};
    static const int cbis[] = {16, 16, 8, 4, 3, 1};
    kiln_conv_params p = {0};
    p.n = kt_int(r, 1, 2);
    p.groups = 1;
    p.c_in = kt_int(r, 1, 40);
    p.c_out = kt_int(r, 1, 50);
    p.cb_out = cb_out;
    p.cb_in = cbis[kt_int(r, 0, 5)];
    kt_random_window(r, &p, ks_, (int)(sizeof ks_ / sizeof ks_[0]), 15, 25);
    if (kt_int(r, 0, 2) == 0) { /* unpadded: the stage is the prologue's alone */
        p.pad_t = p.pad_l = p.pad_b = p.pad_r = 0;
        int ekh = (p.kh - 1) * p.dh + 1, ekw = (p.kw - 1) * p.dw + 1;
        p.h = p.h < ekh ? ekh : p.h;
        p.w = p.w < ekw ? ekw : p.w;
    }
    kt_conv_extent(&p);
    if (kt_int(r, 0, 4) == 0) { /* groups of whole blocks */
        p.groups = kt_int(r, 2, 3);
        p.c_in = p.groups * p.cb_in * kt_int(r, 1, 2);
        p.c_out = p.groups * p.cb_out * kt_int(r, 1, 2);
    }
    p.epilogue = kt_int(r, 0, 15);
    p.clip_min = -0.5f;
    p.clip_max = kt_int(r, 0, 1) ? 6.0f : 0.75f;
    random_prologue(&p, r);
    check_pro(p, r, knobs);
}

KT_RANDOM_TESTS(test_pro_random, random_case, 0x5eedull, 0x5eeeull, 0x5eefull, 0x5ef0ull, 7)

/* densenet-121's pre-activation convs: BN (scale, shift) and Relu before
 * each dense layer's 1x1 conv to 128 channels and each transition's 1x1;
 * a 3x3 padded one and a stride-2 1x1 beside them. Defaults, 2 threads,
 * this machine's cache sizes. */
static void test_pro_network_shapes(void **state)
{
    (void)state;
    kt_rng r = {1212};
    /* c_in, c_out, h, k, stride */
    static const int shapes[][5] = {
        {64, 128, 28, 1, 1},  {256, 128, 28, 1, 1}, {256, 128, 28, 1, 1}, {480, 128, 14, 1, 1},
        {1008, 128, 7, 1, 1}, {1024, 512, 7, 1, 1}, {512, 256, 14, 1, 1}, {96, 64, 15, 3, 1},
        {200, 72, 13, 1, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int k = shapes[i][3];
        kiln_conv_params p = {.n = 1, .c_in = shapes[i][0], .c_out = shapes[i][1],
                              .h = shapes[i][2], .w = shapes[i][2], .kh = k, .kw = k,
                              .sh = shapes[i][4], .sw = shapes[i][4], .dh = 1, .dw = 1,
                              .pad_t = k / 2, .pad_l = k / 2, .pad_b = k / 2, .pad_r = k / 2,
                              .groups = 1, .cb_in = 16, .cb_out = 16,
                              .epilogue = i % 2 ? KILN_EPI_BIAS | KILN_EPI_RELU : 0,
                              .pro = KILN_CONV_PRO_SCALE | KILN_CONV_PRO_SHIFT | KILN_CONV_PRO_CLAMP,
                              .pro_lo = 0.0f, .pro_hi = FLT_MAX};
        kt_conv_extent(&p);
        kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
        run_pro(p, &r);
    }
}

/* The workspace holds the staged tile of whichever ISA's microkernels run
 * the conv: libkiln (no ISA flags: a portable budget of 8 pixels) sizes it,
 * generated AVX2 code runs tiles of up to 12 pixels at one oc block and
 * AVX-512 code up to 16. (It was sized with the build's own clamp; the
 * AVX2-only build of this test failed here.) */
static void test_pro_workspace_any_isa(void **state)
{
    (void)state;
    kt_rng r = {4711};
    static const int isas[] = {KILN_ISA_PORTABLE, KILN_ISA_AVX2, KILN_ISA_AVX512};
    for (int i = 0; i < 200; i++) {
        int cb = i % 2 ? 16 : 8;
        kiln_conv_params p = {.n = 1, .c_in = cb * kt_int(&r, 1, 8), .c_out = cb * kt_int(&r, 1, 3),
                              .h = kt_int(&r, 1, 20), .w = kt_int(&r, 1, 40), .kh = 1, .kw = 1,
                              .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1, .cb_in = cb,
                              .cb_out = cb, .pro = KILN_CONV_PRO_SCALE, .pro_hi = FLT_MAX};
        kt_conv_extent(&p);
        kiln_conv_default_params(&p, 48 << 10, 2 << 20, 2);
        p.loop_order = 0;
        p.ow_tile = kt_int(&r, 1, 17);
        p.oc_tile = kt_int(&r, 1, 4);
        size_t wsb = kiln_conv_workspace_bytes(&p);
        for (int k = 0; k < 3; k++) {
            kiln_conv_plan q = kiln_conv_plan_isa(&p, isas[k]);
            assert_true(q.stage_tile);
            size_t need = (size_t)(q.T * q.ict * q.cbi) * sizeof(float) + 64;
            if (need > wsb)
                fail_msg("T%d O%d cb %d isa %d: the staged tile needs %zu bytes, workspace %zu",
                         p.ow_tile, p.oc_tile, cb, isas[k], need, wsb);
        }
    }
}

/* kiln_conv_scale_weights (a squeeze-and-excitation scale folded into the
 * weights, tpl_conv2d_nchwc.c): the packed weights scaled per input channel
 * equal the packing of the weights scaled before packing (one rounding);
 * channels that do not fill blocks (the padding stays zero, the scale past
 * c_in is never read: NaN there), blocks 16/8/4, 1x1 to 5x5. */
static void test_scale_weights(void **state)
{
    (void)state;
    kt_rng r = {777};
    for (int i = 0; i < 60; i++) {
        static const int cbs[] = {16, 8, 4};
        int k = kt_int(&r, 0, 2) * 2 + 1;
        kiln_conv_params p = {.n = 1, .c_in = kt_int(&r, 1, 40), .c_out = kt_int(&r, 1, 40),
                              .h = 9, .w = 9, .kh = k, .kw = k, .sh = 1, .sw = 1, .dh = 1,
                              .dw = 1, .groups = 1, .cb_in = cbs[i % 3], .cb_out = cbs[(i / 3) % 3]};
        kt_conv_extent(&p);
        int64_t nw = (int64_t)p.c_out * p.c_in * k * k, np = kiln_conv_packed_weight_floats(&p);
        float *w = kt_rand_buf(&r, nw), *ws = kt_alloc(nw), *s = kt_nan_buf(p.c_in + 16);
        for (int c = 0; c < p.c_in; c++)
            s[c] = kt_float(&r) * 2.0f;
        for (int64_t j = 0; j < nw; j++)
            ws[j] = w[j] * s[j / (k * k) % p.c_in];
        float *pw = kt_alloc(np), *want = kt_alloc(np), *got = kt_nan_buf(np);
        kiln_conv_pack_weights(&p, w, pw);
        kiln_conv_pack_weights(&p, ws, want);
        kiln_conv_scale_weights(&p, pw, s, got);
        for (int64_t j = 0; j < np; j++)
            if (!(got[j] == want[j])) /* NaN fails too; -0 for 0 is fine */
                fail_msg("case %d (%d>%d k%d cb %d/%d): packed float %lld is %a, want %a", i, p.c_in,
                         p.c_out, k, p.cb_in, p.cb_out, (long long)j, (double)got[j], (double)want[j]);
        free(w), free(ws), free(s), free(pw), free(want), free(got);
    }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_pro_random),
        cmocka_unit_test(test_pro_network_shapes),
        cmocka_unit_test(test_pro_workspace_any_isa),
        cmocka_unit_test(test_scale_weights),
    };
    return KT_RUN_TESTS(tests);
}
