/* tests/ops/test_pool.c: the reference MaxPool/AveragePool against
 * hand-computed outputs and against a brute force over an explicitly padded
 * copy of the input (N-d, written here), over 1-D/2-D/3-D, strides,
 * dilations, asymmetric pads, auto_pad, ceil_mode (incl. the dropped last
 * window) and count_include_pad both ways; GlobalAveragePool by hand. */
#include "nn_helpers.h"

typedef struct pool_case {
    int nsp;
    int64_t n, c;
    int64_t in[3], k[3], stride[3], dil[3], pb[3], pe[3], out[3];
    const char *auto_pad; /* set instead of pads when not NULL */
    int ceil_mode, count_include_pad;
} pool_case;

/* Copies each plane into a padded array (extents pb + in + pe) with a mask of
 * real cells, then for each output takes the max / mean over the window taps
 * that fall inside the padded array. */
static void pool_reference(const pool_case *pc, bool is_max, const float *x, float *y)
{
    int nsp = pc->nsp;
    int64_t pdims[3];
    for (int d = 0; d < nsp; d++)
        pdims[d] = pc->pb[d] + pc->in[d] + pc->pe[d];
    int64_t pprod = nn_prod(pdims, nsp), iprod = nn_prod(pc->in, nsp);
    int64_t oprod = nn_prod(pc->out, nsp), kprod = nn_prod(pc->k, nsp);
    float *pad = malloc(sizeof(float) * (size_t)pprod);
    bool *real = malloc(sizeof(bool) * (size_t)pprod);
    assert_non_null(pad);
    assert_non_null(real);
    for (int64_t plane = 0; plane < pc->n * pc->c; plane++) {
        for (int64_t i = 0; i < pprod; i++) {
            pad[i] = 0.0f;
            real[i] = false;
        }
        for (int64_t i = 0; i < iprod; i++) {
            int64_t idx[3], lin = 0;
            nn_unravel(i, pc->in, nsp, idx);
            for (int d = 0; d < nsp; d++)
                lin = lin * pdims[d] + idx[d] + pc->pb[d];
            pad[lin] = x[plane * iprod + i];
            real[lin] = true;
        }
        for (int64_t q = 0; q < oprod; q++) {
            int64_t oo[3];
            nn_unravel(q, pc->out, nsp, oo);
            double best = -INFINITY, sum = 0.0;
            int64_t n_real = 0, n_padded = 0;
            for (int64_t t = 0; t < kprod; t++) {
                int64_t kk[3], lin = 0;
                nn_unravel(t, pc->k, nsp, kk);
                bool inside = true;
                for (int d = 0; d < nsp; d++) {
                    int64_t p = oo[d] * pc->stride[d] + kk[d] * pc->dil[d]; /* padded coords */
                    inside = inside && p < pdims[d];
                    lin = lin * pdims[d] + p;
                }
                if (!inside)
                    continue;
                n_padded++;
                if (!real[lin])
                    continue;
                n_real++;
                sum += pad[lin];
                if (pad[lin] > best)
                    best = pad[lin];
            }
            int64_t div = pc->count_include_pad ? n_padded : n_real;
            y[plane * oprod + q] = (float)(is_max ? best : sum / (double)div);
        }
    }
    free(pad);
    free(real);
}

static void run_case(const pool_case *pc, bool is_max, uint64_t seed)
{
    int nsp = pc->nsp;
    kiln_shape xs = {.rank = nsp + 2, .dims = {pc->n, pc->c}};
    kiln_shape expect = xs;
    int64_t kshape[3], strides[3], dil[3], pads[6];
    for (int d = 0; d < nsp; d++) {
        xs.dims[2 + d] = pc->in[d];
        expect.dims[2 + d] = pc->out[d];
        kshape[d] = pc->k[d];
        strides[d] = pc->stride[d];
        dil[d] = pc->dil[d];
        pads[d] = pc->pb[d];
        pads[nsp + d] = pc->pe[d];
    }
    nn_graph t = nn_build(is_max ? KILN_OP_MAXPOOL : KILN_OP_AVERAGEPOOL, 1, &xs);
    kiln_node_set_ints(t.g, t.node, "kernel_shape", kshape, nsp);
    kiln_node_set_ints(t.g, t.node, "strides", strides, nsp);
    kiln_node_set_ints(t.g, t.node, "dilations", dil, nsp);
    if (pc->auto_pad)
        kiln_node_set_string(t.g, t.node, "auto_pad", pc->auto_pad);
    else
        kiln_node_set_ints(t.g, t.node, "pads", pads, 2 * nsp);
    kiln_node_set_int(t.g, t.node, "ceil_mode", pc->ceil_mode);
    if (!is_max)
        kiln_node_set_int(t.g, t.node, "count_include_pad", pc->count_include_pad);
    float *x = nn_random(kiln_shape_numel(&xs), seed, -2.0f, 1.0f); /* negatives: padding must not win */
    float *data[1] = {x};
    int64_t count;
    float *y = nn_run(&t, data, &expect, &count);
    float *ref = malloc(sizeof(float) * (size_t)count);
    assert_non_null(ref);
    pool_reference(pc, is_max, x, ref);
    assert_allclose(y, ref, count, 1e-5, 1e-6);
    free(ref);
    free(y);
    free(x);
    nn_free(&t);
}

static void run_both(const pool_case *pc, uint64_t seed)
{
    run_case(pc, true, seed);
    pool_case a = *pc;
    a.count_include_pad = 0;
    run_case(&a, false, seed + 1);
    a.count_include_pad = 1;
    run_case(&a, false, seed + 2);
}

/* 4x4 = 1..16, k 2, s 2 */
static void test_maxpool_hand(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 1, 1, 4, 4);
    nn_graph t = nn_build(KILN_OP_MAXPOOL, 1, &xs);
    int64_t k[2] = {2, 2}, s[2] = {2, 2};
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k, 2);
    kiln_node_set_ints(t.g, t.node, "strides", s, 2);
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    float *data[1] = {x};
    const float want[4] = {6, 8, 14, 16};
    nn_check(&t, data, ks(4, 1, 1, 2, 2), want, 4, 0, 0);
}

/* all-negative input with pads: padding (zeros) must never win the max */
static void test_maxpool_hand_negative_padded(void **state)
{
    (void)state;
    kiln_shape xs = ks(3, 1, 1, 3);
    nn_graph t = nn_build(KILN_OP_MAXPOOL, 1, &xs);
    int64_t k[1] = {3}, p[2] = {1, 1};
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k, 1);
    kiln_node_set_ints(t.g, t.node, "pads", p, 2);
    float x[3] = {-5, -3, -4};
    float *data[1] = {x};
    const float want[3] = {-3, -3, -3};
    nn_check(&t, data, ks(3, 1, 1, 3), want, 3, 0, 0);
}

/* 3x3 = 1..9, k 2, s 1, pads 1 (out 4x4): the corner window holds one real
 * cell; count_include_pad 0 divides by 1, 1 divides by 4. */
static void test_averagepool_hand(void **state)
{
    (void)state;
    for (int cip = 0; cip < 2; cip++) {
        kiln_shape xs = ks(4, 1, 1, 3, 3);
        nn_graph t = nn_build(KILN_OP_AVERAGEPOOL, 1, &xs);
        int64_t k[2] = {2, 2}, p[4] = {1, 1, 1, 1};
        kiln_node_set_ints(t.g, t.node, "kernel_shape", k, 2);
        kiln_node_set_ints(t.g, t.node, "pads", p, 4);
        kiln_node_set_int(t.g, t.node, "count_include_pad", cip);
        float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        float *data[1] = {x};
        const float want0[16] = {1,   1.5f, 2.5f, 3, 2.5f, 3, 4, 4.5f,
                                 5.5f, 6,   7,    7.5f, 7, 7.5f, 8.5f, 9};
        const float want1[16] = {0.25f, 0.75f, 1.25f, 0.75f, 1.25f, 3, 4, 2.25f,
                                 2.75f, 6,     7,     3.75f, 1.75f, 3.75f, 4.25f, 2.25f};
        nn_check(&t, data, ks(4, 1, 1, 4, 4), cip ? want1 : want0, 16, 1e-6, 1e-6);
    }
}

/* 1-D ceil_mode: x = 1..5, k 2, s 2: out 3, the last window [4, 5] holds only
 * x[4] = 5 (count_include_pad=1 clips the window to the padded extent, so it
 * divides by 1 as well). */
static void test_pool_hand_ceil(void **state)
{
    (void)state;
    for (int op = 0; op < 2; op++) {
        kiln_shape xs = ks(3, 1, 1, 5);
        nn_graph t = nn_build(op ? KILN_OP_AVERAGEPOOL : KILN_OP_MAXPOOL, 1, &xs);
        int64_t k[1] = {2}, s[1] = {2};
        kiln_node_set_ints(t.g, t.node, "kernel_shape", k, 1);
        kiln_node_set_ints(t.g, t.node, "strides", s, 1);
        kiln_node_set_int(t.g, t.node, "ceil_mode", 1);
        if (op)
            kiln_node_set_int(t.g, t.node, "count_include_pad", 1);
        float x[5] = {1, 2, 3, 4, 5};
        float *data[1] = {x};
        const float want_max[3] = {2, 4, 5}, want_avg[3] = {1.5f, 3.5f, 5};
        nn_check(&t, data, ks(3, 1, 1, 3), op ? want_avg : want_max, 3, 0, 1e-6);
    }
}

static void test_pool_3x3_s2_pad1_batch(void **state)
{
    (void)state;
    /* (9 + 2 - 3) / 2 + 1 = 5, (8 + 2 - 3) / 2 + 1 = 4 */
    pool_case pc = {.nsp = 2, .n = 2, .c = 3, .in = {9, 8}, .k = {3, 3}, .stride = {2, 2},
                    .dil = {1, 1}, .pb = {1, 1}, .pe = {1, 1}, .out = {5, 4}};
    run_both(&pc, 100);
}

static void test_pool_asym_pads_dilation(void **state)
{
    (void)state;
    /* H: k 3 dil 2 (extent 5): (10 + 0 + 2 - 5) / 1 + 1 = 8;
     * W: k 2 dil 1: (7 + 1 + 0 - 2) / 2 + 1 = 4 */
    pool_case pc = {.nsp = 2, .n = 1, .c = 2, .in = {10, 7}, .k = {3, 2}, .stride = {1, 2},
                    .dil = {2, 1}, .pb = {0, 1}, .pe = {2, 0}, .out = {8, 4}};
    run_both(&pc, 110);
}

static void test_pool_ceil_mode(void **state)
{
    (void)state;
    /* H: in 5, k 2, s 2: ceil(3/2) + 1 = 3 (last window starts at 4 < 5);
     * W: in 5, pads 1+1, k 2, s 3: ceil(5/3) + 1 = 3, but (3-1)*3 = 6 >= 5 + 1
     * so the last window is dropped: 2 */
    pool_case pc = {.nsp = 2, .n = 1, .c = 3, .in = {5, 5}, .k = {2, 2}, .stride = {2, 3},
                    .dil = {1, 1}, .pb = {0, 1}, .pe = {0, 1}, .out = {3, 2}, .ceil_mode = 1};
    run_both(&pc, 120);
    /* ceil with pads where the last window overhangs the padded extent:
     * in 6, pads 1+1, k 3, s 2: ceil(5/2) + 1 = 4; 3*2 = 6 < 6 + 1 keeps it */
    pool_case pc2 = {.nsp = 1, .n = 2, .c = 1, .in = {6}, .k = {3}, .stride = {2}, .dil = {1},
                     .pb = {1}, .pe = {1}, .out = {4}, .ceil_mode = 1};
    run_both(&pc2, 121);
}

static void test_pool_auto_pad(void **state)
{
    (void)state;
    /* in 7, k 3, s 2: out 4, total (4-1)*2 + 3 - 7 = 2 -> (1, 1);
     * in 6, k 2, s 1: out 6, total 1 -> upper (0, 1), lower (1, 0) */
    pool_case up = {.nsp = 2, .n = 1, .c = 2, .in = {7, 6}, .k = {3, 2}, .stride = {2, 1},
                    .dil = {1, 1}, .pb = {1, 0}, .pe = {1, 1}, .out = {4, 6},
                    .auto_pad = "SAME_UPPER"};
    run_both(&up, 130);
    pool_case lo = up;
    lo.auto_pad = "SAME_LOWER";
    lo.pb[1] = 1;
    lo.pe[1] = 0;
    run_both(&lo, 131);
    pool_case valid = {.nsp = 2, .n = 1, .c = 1, .in = {7, 6}, .k = {3, 2}, .stride = {2, 2},
                       .dil = {1, 1}, .out = {3, 3}, .auto_pad = "VALID"};
    run_both(&valid, 132);
}

static void test_pool_1d_3d(void **state)
{
    (void)state;
    pool_case p1 = {.nsp = 1, .n = 2, .c = 3, .in = {11}, .k = {4}, .stride = {3}, .dil = {1},
                    .pb = {2}, .pe = {1}, .out = {4}};
    run_both(&p1, 140);
    /* D: (4 + 1 + 0 - 2) / 1 + 1 = 4; H: (5 + 1 + 1 - 3) / 2 + 1 = 3; W: (6 - 2) / 2 + 1 = 3 */
    pool_case p3 = {.nsp = 3, .n = 1, .c = 2, .in = {4, 5, 6}, .k = {2, 3, 2},
                    .stride = {1, 2, 2}, .dil = {1, 1, 1}, .pb = {1, 1, 0}, .pe = {0, 1, 0},
                    .out = {4, 3, 3}};
    run_both(&p3, 141);
}

static void test_global_averagepool(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 2, 3, 2, 2);
    nn_graph t = nn_build(KILN_OP_GLOBALAVERAGEPOOL, 1, &xs);
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i * i);
    float *data[1] = {x};
    /* plane p holds (4p)^2 .. (4p+3)^2: mean = 16p^2 + 12p + 3.5 */
    float want[6];
    for (int p = 0; p < 6; p++)
        want[p] = (float)(16 * p * p + 12 * p) + 3.5f;
    nn_check(&t, data, ks(4, 2, 3, 1, 1), want, 6, 1e-6, 0);

    kiln_shape x3 = ks(3, 1, 2, 3);
    t = nn_build(KILN_OP_GLOBALAVERAGEPOOL, 1, &x3);
    float v[6] = {1, 2, 6, -1, -2, 0};
    float *d3[1] = {v};
    const float w3[2] = {3, -1};
    nn_check(&t, d3, ks(3, 1, 2, 1), w3, 2, 0, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxpool_hand),
        cmocka_unit_test(test_maxpool_hand_negative_padded),
        cmocka_unit_test(test_averagepool_hand),
        cmocka_unit_test(test_pool_hand_ceil),
        cmocka_unit_test(test_pool_3x3_s2_pad1_batch),
        cmocka_unit_test(test_pool_asym_pads_dilation),
        cmocka_unit_test(test_pool_ceil_mode),
        cmocka_unit_test(test_pool_auto_pad),
        cmocka_unit_test(test_pool_1d_3d),
        cmocka_unit_test(test_global_averagepool),
    };
    return cmocka_run_group_tests_name("ops/pool", tests, NULL, NULL);
}
