/* tests/ops/test_conv.c: the reference Conv against hand-computed outputs and
 * against an im2col + matrix product written here (N-d, in double), over
 * 1-D/2-D/3-D inputs, 1x1/3x3/5x5/7x7 kernels, strides, dilations,
 * asymmetric pads, auto_pad, groups (incl. depthwise), batch > 1, odd
 * channel counts and bias. */
#include "nn_helpers.h"

/* One Conv configuration. pb/pe are the explicit pads the reference uses;
 * `auto_pad` (if not NULL) is set instead of the pads attribute; out[] is the
 * expected (hand-computed) output extent. */
typedef struct conv_case {
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], stride[3], dil[3], pb[3], pe[3], out[3];
    const char *auto_pad;
    bool bias;
    bool kernel_shape_attr;
} conv_case;

/* Y = W (M/g x C/g*K) * im2col(X) (C/g*K x OUT) + B, per image and group. */
static void conv_reference(const conv_case *cc, const float *x, const float *w, const float *b,
                           float *y)
{
    int nsp = cc->nsp;
    int64_t cg = cc->c / cc->group, mg = cc->m / cc->group;
    int64_t kprod = nn_prod(cc->k, nsp), oprod = nn_prod(cc->out, nsp);
    int64_t iprod = nn_prod(cc->in, nsp);
    int64_t rows = cg * kprod;
    double *col = malloc(sizeof(double) * (size_t)(rows * oprod));
    assert_non_null(col);
    for (int64_t nb = 0; nb < cc->n; nb++) {
        for (int64_t gi = 0; gi < cc->group; gi++) {
            for (int64_t r = 0; r < rows; r++) {
                int64_t cl = r / kprod, kk[3], oo[3];
                nn_unravel(r % kprod, cc->k, nsp, kk);
                for (int64_t q = 0; q < oprod; q++) {
                    nn_unravel(q, cc->out, nsp, oo);
                    int64_t lin = 0;
                    bool inside = true;
                    for (int d = 0; d < nsp; d++) {
                        int64_t pos = oo[d] * cc->stride[d] - cc->pb[d] + kk[d] * cc->dil[d];
                        inside = inside && pos >= 0 && pos < cc->in[d];
                        lin = lin * cc->in[d] + pos;
                    }
                    col[r * oprod + q] =
                        inside ? x[(nb * cc->c + gi * cg + cl) * iprod + lin] : 0.0;
                }
            }
            for (int64_t mm = 0; mm < mg; mm++) {
                int64_t m = gi * mg + mm;
                for (int64_t q = 0; q < oprod; q++) {
                    double acc = b ? b[m] : 0.0;
                    for (int64_t r = 0; r < rows; r++)
                        acc += (double)w[m * rows + r] * col[r * oprod + q];
                    y[(nb * cc->m + m) * oprod + q] = (float)acc;
                }
            }
        }
    }
    free(col);
}

static void run_case(const conv_case *cc, uint64_t seed)
{
    int nsp = cc->nsp;
    kiln_shape sh[3];
    sh[0].rank = sh[1].rank = nsp + 2;
    sh[0].dims[0] = cc->n;
    sh[0].dims[1] = cc->c;
    sh[1].dims[0] = cc->m;
    sh[1].dims[1] = cc->c / cc->group;
    kiln_shape expect = {.rank = nsp + 2, .dims = {cc->n, cc->m}};
    for (int d = 0; d < nsp; d++) {
        sh[0].dims[2 + d] = cc->in[d];
        sh[1].dims[2 + d] = cc->k[d];
        expect.dims[2 + d] = cc->out[d];
    }
    sh[2] = ks(1, (int)cc->m);
    nn_graph t = nn_build(KILN_OP_CONV, cc->bias ? 3 : 2, sh);
    int64_t strides[3], dil[3], pads[6], kshape[3];
    for (int d = 0; d < nsp; d++) {
        strides[d] = cc->stride[d];
        dil[d] = cc->dil[d];
        pads[d] = cc->pb[d];
        pads[nsp + d] = cc->pe[d];
        kshape[d] = cc->k[d];
    }
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "strides", strides, nsp), KILN_OK);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "dilations", dil, nsp), KILN_OK);
    assert_int_equal(kiln_node_set_int(t.g, t.node, "group", cc->group), KILN_OK);
    if (cc->auto_pad)
        assert_int_equal(kiln_node_set_string(t.g, t.node, "auto_pad", cc->auto_pad), KILN_OK);
    else
        assert_int_equal(kiln_node_set_ints(t.g, t.node, "pads", pads, 2 * nsp), KILN_OK);
    if (cc->kernel_shape_attr)
        assert_int_equal(kiln_node_set_ints(t.g, t.node, "kernel_shape", kshape, nsp), KILN_OK);
    int64_t nx = kiln_shape_numel(&sh[0]), nw = kiln_shape_numel(&sh[1]);
    float *x = nn_random(nx, seed, -1.0f, 1.0f);
    float *w = nn_random(nw, seed + 1, -1.0f, 1.0f);
    float *b = nn_random(cc->m, seed + 2, -1.0f, 1.0f);
    float *data[3] = {x, w, b};
    int64_t count;
    float *y = nn_run(&t, data, &expect, &count);
    float *ref = malloc(sizeof(float) * (size_t)count);
    assert_non_null(ref);
    conv_reference(cc, x, w, cc->bias ? b : NULL, ref);
    assert_allclose(y, ref, count, 1e-4, 1e-4);
    free(ref);
    free(y);
    free(x);
    free(w);
    free(b);
    nn_free(&t);
}

/* X = 1..9 (3x3), W = [[1, 0], [0, -1]], B = 0.5: y = x[i][j] - x[i+1][j+1] + 0.5 */
static void test_conv_hand_2x2(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 1, 1, 3, 3), ks(4, 1, 1, 2, 2), ks(1, 1)};
    nn_graph t = nn_build(KILN_OP_CONV, 3, sh);
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 0, 0, -1}, b[1] = {0.5f};
    float *data[3] = {x, w, b};
    const float want[4] = {-3.5f, -3.5f, -3.5f, -3.5f};
    nn_check(&t, data, ks(4, 1, 1, 2, 2), want, 4, 0, 1e-6);
}

/* X = 1..9 (3x3), W = ones(2x2), pads 1, stride 2: windows at (-1,-1), (-1,1),
 * (1,-1), (1,1) see {1}, {2,3}, {4,7}, {5,6,8,9}. */
static void test_conv_hand_pad_stride(void **state)
{
    (void)state;
    kiln_shape sh[2] = {ks(4, 1, 1, 3, 3), ks(4, 1, 1, 2, 2)};
    nn_graph t = nn_build(KILN_OP_CONV, 2, sh);
    int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
    kiln_node_set_ints(t.g, t.node, "pads", pads, 4);
    kiln_node_set_ints(t.g, t.node, "strides", strides, 2);
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1};
    float *data[2] = {x, w};
    const float want[4] = {1, 5, 11, 28};
    nn_check(&t, data, ks(4, 1, 1, 2, 2), want, 4, 0, 1e-6);
}

/* 1-D: X = [1, 2, 3, 4, 5], W = [1, 10], dilation 2, pads (1, 0):
 * taps at i-1 and i+1 of the padded input: y = [0 + 20, 1 + 30, 2 + 40, 3 + 50]. */
static void test_conv_hand_1d_dilated(void **state)
{
    (void)state;
    kiln_shape sh[2] = {ks(3, 1, 1, 5), ks(3, 1, 1, 2)};
    nn_graph t = nn_build(KILN_OP_CONV, 2, sh);
    int64_t pads[2] = {1, 0}, dil[1] = {2};
    kiln_node_set_ints(t.g, t.node, "pads", pads, 2);
    kiln_node_set_ints(t.g, t.node, "dilations", dil, 1);
    float x[5] = {1, 2, 3, 4, 5}, w[2] = {1, 10};
    float *data[2] = {x, w};
    const float want[4] = {20, 31, 42, 53};
    nn_check(&t, data, ks(3, 1, 1, 4), want, 4, 0, 1e-6);
}

static void test_conv_3x3_pad1_batch(void **state)
{
    (void)state;
    conv_case cc = {.nsp = 2, .n = 2, .c = 3, .m = 5, .group = 1, .in = {7, 6}, .k = {3, 3},
                    .stride = {1, 1}, .dil = {1, 1}, .pb = {1, 1}, .pe = {1, 1}, .out = {7, 6},
                    .bias = true, .kernel_shape_attr = true};
    run_case(&cc, 10);
}

static void test_conv_1x1(void **state)
{
    (void)state;
    conv_case cc = {.nsp = 2, .n = 1, .c = 7, .m = 4, .group = 1, .in = {5, 5}, .k = {1, 1},
                    .stride = {1, 1}, .dil = {1, 1}, .out = {5, 5}, .bias = true};
    run_case(&cc, 20);
    conv_case s2 = {.nsp = 2, .n = 2, .c = 3, .m = 3, .group = 1, .in = {6, 7}, .k = {1, 1},
                    .stride = {2, 2}, .dil = {1, 1}, .out = {3, 4}};
    run_case(&s2, 21);
}

/* kernel (3, 1) with row pads only: whole rows map onto whole rows */
static void test_conv_row_taps(void **state)
{
    (void)state;
    conv_case cc = {.nsp = 2, .n = 1, .c = 2, .m = 3, .group = 1, .in = {5, 4}, .k = {3, 1},
                    .stride = {1, 1}, .dil = {1, 1}, .pb = {1, 0}, .pe = {2, 0}, .out = {6, 4},
                    .bias = true};
    run_case(&cc, 25);
}

static void test_conv_5x5_stride2_asym_pads(void **state)
{
    (void)state;
    /* H: (11 + 1 + 2 - 5) / 2 + 1 = 5; W: (9 + 2 + 0 - 5) / 2 + 1 = 4 */
    conv_case cc = {.nsp = 2, .n = 1, .c = 3, .m = 2, .group = 1, .in = {11, 9}, .k = {5, 5},
                    .stride = {2, 2}, .dil = {1, 1}, .pb = {1, 2}, .pe = {2, 0}, .out = {5, 4},
                    .bias = true};
    run_case(&cc, 30);
}

static void test_conv_7x7_stem(void **state)
{
    (void)state;
    /* (15 + 6 - 7) / 2 + 1 = 8 */
    conv_case cc = {.nsp = 2, .n = 1, .c = 3, .m = 4, .group = 1, .in = {15, 15}, .k = {7, 7},
                    .stride = {2, 2}, .dil = {1, 1}, .pb = {3, 3}, .pe = {3, 3}, .out = {8, 8},
                    .bias = false};
    run_case(&cc, 40);
}

static void test_conv_groups(void **state)
{
    (void)state;
    conv_case g2 = {.nsp = 2, .n = 2, .c = 4, .m = 6, .group = 2, .in = {5, 6}, .k = {3, 3},
                    .stride = {1, 1}, .dil = {1, 1}, .pb = {1, 1}, .pe = {1, 1}, .out = {5, 6},
                    .bias = true};
    run_case(&g2, 50);
    /* depthwise, stride 2: (9 + 2 - 3) / 2 + 1 = 5 */
    conv_case dw = {.nsp = 2, .n = 1, .c = 5, .m = 5, .group = 5, .in = {9, 9}, .k = {3, 3},
                    .stride = {2, 2}, .dil = {1, 1}, .pb = {1, 1}, .pe = {1, 1}, .out = {5, 5},
                    .bias = true};
    run_case(&dw, 51);
    /* depthwise with channel multiplier 2 */
    conv_case dw2 = {.nsp = 2, .n = 1, .c = 3, .m = 6, .group = 3, .in = {4, 5}, .k = {3, 3},
                     .stride = {1, 1}, .dil = {1, 1}, .pb = {0, 0}, .pe = {0, 0}, .out = {2, 3}};
    run_case(&dw2, 52);
}

static void test_conv_dilation(void **state)
{
    (void)state;
    /* H: (10 + 2 + 2 - 5) / 1 + 1 = 10 (dil 2, k 3 => extent 5);
     * W: (9 + 1 + 3 - 7) / 2 + 1 = 4 (dil 3, k 3 => extent 7) */
    conv_case cc = {.nsp = 2, .n = 1, .c = 2, .m = 3, .group = 1, .in = {10, 9}, .k = {3, 3},
                    .stride = {1, 2}, .dil = {2, 3}, .pb = {2, 1}, .pe = {2, 3}, .out = {10, 4},
                    .bias = true};
    run_case(&cc, 60);
}

static void test_conv_auto_pad(void **state)
{
    (void)state;
    /* in 6, k 3, stride 2: out 3, total pad (3-1)*2 + 3 - 6 = 1 */
    conv_case up = {.nsp = 2, .n = 1, .c = 2, .m = 3, .group = 1, .in = {6, 6}, .k = {3, 3},
                    .stride = {2, 2}, .dil = {1, 1}, .pb = {0, 0}, .pe = {1, 1}, .out = {3, 3},
                    .auto_pad = "SAME_UPPER", .bias = true};
    run_case(&up, 70);
    conv_case lo = up;
    lo.auto_pad = "SAME_LOWER";
    lo.pb[0] = lo.pb[1] = 1;
    lo.pe[0] = lo.pe[1] = 0;
    run_case(&lo, 71);
    /* in 7, k 4, stride 1: out 7, total 3 -> upper (1, 2), lower (2, 1) */
    conv_case up4 = {.nsp = 2, .n = 1, .c = 1, .m = 2, .group = 1, .in = {7, 7}, .k = {4, 4},
                     .stride = {1, 1}, .dil = {1, 1}, .pb = {1, 1}, .pe = {2, 2}, .out = {7, 7},
                     .auto_pad = "SAME_UPPER"};
    run_case(&up4, 72);
    conv_case lo4 = up4;
    lo4.auto_pad = "SAME_LOWER";
    lo4.pb[0] = lo4.pb[1] = 2;
    lo4.pe[0] = lo4.pe[1] = 1;
    run_case(&lo4, 73);
    /* VALID: (8 - 3) / 2 + 1 = 3 */
    conv_case valid = {.nsp = 2, .n = 1, .c = 2, .m = 2, .group = 1, .in = {8, 8}, .k = {3, 3},
                       .stride = {2, 2}, .dil = {1, 1}, .out = {3, 3}, .auto_pad = "VALID"};
    run_case(&valid, 74);
}

static void test_conv_1d(void **state)
{
    (void)state;
    /* (10 + 1 + 0 - 5) / 2 + 1 = 4 (k 3, dil 2 => extent 5) */
    conv_case cc = {.nsp = 1, .n = 2, .c = 3, .m = 5, .group = 1, .in = {10}, .k = {3},
                    .stride = {2}, .dil = {2}, .pb = {1}, .pe = {0}, .out = {4}, .bias = true};
    run_case(&cc, 80);
}

static void test_conv_3d(void **state)
{
    (void)state;
    /* D: (4 + 0 + 1 - 2) / 1 + 1 = 4; H: (5 + 1 + 0 - 3) / 2 + 1 = 2; W: (6 + 1 + 1 - 3) + 1 = 6 */
    conv_case cc = {.nsp = 3, .n = 1, .c = 2, .m = 3, .group = 1, .in = {4, 5, 6},
                    .k = {2, 3, 3}, .stride = {1, 2, 1}, .dil = {1, 1, 1}, .pb = {0, 1, 1},
                    .pe = {1, 0, 1}, .out = {4, 2, 6}, .bias = true};
    run_case(&cc, 90);
    conv_case g = {.nsp = 3, .n = 2, .c = 4, .m = 2, .group = 2, .in = {3, 4, 4},
                   .k = {3, 3, 3}, .stride = {2, 2, 2}, .dil = {1, 1, 1}, .pb = {1, 1, 1},
                   .pe = {1, 1, 1}, .out = {2, 2, 2}};
    run_case(&g, 91);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_hand_2x2),
        cmocka_unit_test(test_conv_hand_pad_stride),
        cmocka_unit_test(test_conv_hand_1d_dilated),
        cmocka_unit_test(test_conv_3x3_pad1_batch),
        cmocka_unit_test(test_conv_1x1),
        cmocka_unit_test(test_conv_row_taps),
        cmocka_unit_test(test_conv_5x5_stride2_asym_pads),
        cmocka_unit_test(test_conv_7x7_stem),
        cmocka_unit_test(test_conv_groups),
        cmocka_unit_test(test_conv_dilation),
        cmocka_unit_test(test_conv_auto_pad),
        cmocka_unit_test(test_conv_1d),
        cmocka_unit_test(test_conv_3d),
    };
    return cmocka_run_group_tests_name("ops/conv", tests, NULL, NULL);
}
