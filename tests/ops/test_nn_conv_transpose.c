/* tests/ops/test_nn_conv_transpose.c: the reference ConvTranspose against
 * hand-computed 1-D outputs (stride, pads, output_padding, dilation,
 * output_shape, SAME_UPPER) and against a brute force written here in the
 * "gather" form (each output cell sums the input cells i and taps k with
 * i*stride + k*dilation - pad_begin = o, found by divisibility; with
 * output_shape, pad_begin = total - total/2 and a negative total is 0) on random
 * 1-D/2-D/3-D cases with groups, bias, asymmetric pads and output_shape. */
#include "nn_run.h"

static void set_ints(nr *t, const char *name, const int64_t *v, int n)
{
    assert_int_equal(kiln_node_set_ints(t->g, t->node, name, v, n), KILN_OK);
}

/* X = [1, 2, 3], W = [1, 1, 1] (1 channel in and out); attributes by name. */
static void run_1d(const char *attr1, const int64_t *v1, const char *attr2, const int64_t *v2,
                   const char *auto_pad, const float *want, int64_t want_n)
{
    static const float x[3] = {1, 2, 3}, w[3] = {1, 1, 1};
    nr_in ins[2] = {nr_f32(ks(3, 1, 1, 3), x), nr_f32(ks(3, 1, 1, 3), w)};
    nr t = nr_build(KILN_OP_CONVTRANSPOSE, 2, ins, 1);
    bool two = attr1 && strcmp(attr1, "pads") == 0;
    if (attr1)
        set_ints(&t, attr1, v1, two ? 2 : 1);
    if (attr2)
        set_ints(&t, attr2, v2, strcmp(attr2, "pads") == 0 ? 2 : 1);
    if (auto_pad)
        kiln_node_set_string(t.g, t.node, "auto_pad", auto_pad);
    nr_run(&t);
    nr_expect_shape(&t, 0, ks(3, 1, 1, want_n));
    assert_allclose(t.out[0].data, want, want_n, 0, 0);
    nr_free(&t);
}

static void test_hand_1d(void **state)
{
    (void)state;
    static const int64_t s2 = 2, p11[2] = {1, 1}, one = 1, d2 = 2, os9 = 9;
    /* stride 1: the full correlation */
    static const float full[5] = {1, 3, 6, 5, 3};
    run_1d(NULL, NULL, NULL, NULL, NULL, full, 5);
    /* stride 2: x0 -> 0..2, x1 -> 2..4, x2 -> 4..6 */
    static const float st2[7] = {1, 1, 3, 2, 5, 3, 3};
    run_1d("strides", &s2, NULL, NULL, NULL, st2, 7);
    /* pads crop one cell at each end */
    static const float padded[5] = {1, 3, 2, 5, 3};
    run_1d("strides", &s2, "pads", p11, NULL, padded, 5);
    /* output_padding adds a cell at the end that nothing reaches */
    static const float opad[8] = {1, 1, 3, 2, 5, 3, 3, 0};
    run_1d("strides", &s2, "output_padding", &one, NULL, opad, 8);
    /* output_shape 9 > full 7: total padding -2, all of it at the end */
    static const float oshape[9] = {1, 1, 3, 2, 5, 3, 3, 0, 0};
    run_1d("strides", &s2, "output_shape", &os9, NULL, oshape, 9);
    /* dilation 2: taps at 0, 2, 4 */
    static const float dil[7] = {1, 2, 4, 2, 4, 2, 3};
    run_1d("dilations", &d2, NULL, NULL, NULL, dil, 7);
    /* SAME_UPPER, stride 2: out = 6, total padding 1 goes to the end */
    static const float same_upper[6] = {1, 1, 3, 2, 5, 3};
    run_1d("strides", &s2, NULL, NULL, "SAME_UPPER", same_upper, 6);
    /* SAME_LOWER: the odd cell of padding goes to the beginning */
    static const float same_lower[6] = {1, 3, 2, 5, 3, 3};
    run_1d("strides", &s2, NULL, NULL, "SAME_LOWER", same_lower, 6);
}

typedef struct ct_case {
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], opad[3];
    bool bias, use_output_shape;
    int64_t oshape[3];
} ct_case;

/* Gather-form brute force. pb: the begin pad actually applied (derived by
 * the caller from output_shape when used). */
static void brute(const ct_case *cc, const float *x, const float *w, const float *b,
                  const int64_t *out, const int64_t *pb, float *y)
{
    int nsp = cc->nsp;
    int64_t cg = cc->c / cc->group, mg = cc->m / cc->group;
    int64_t in_sz = 1, out_sz = 1, k_sz = 1;
    for (int d = 0; d < nsp; d++) {
        in_sz *= cc->in[d];
        out_sz *= out[d];
        k_sz *= cc->k[d];
    }
    for (int64_t nb = 0; nb < cc->n; nb++)
        for (int64_t m = 0; m < cc->m; m++)
            for (int64_t q = 0; q < out_sz; q++) {
                int64_t o[3], rem = q;
                for (int d = nsp - 1; d >= 0; d--) {
                    o[d] = rem % out[d];
                    rem /= out[d];
                }
                double acc = b ? b[m] : 0.0;
                int64_t grp = m / mg, mm = m % mg;
                for (int64_t cc2 = 0; cc2 < cg; cc2++) {
                    int64_t c = grp * cg + cc2;
                    for (int64_t kq = 0; kq < k_sz; kq++) {
                        int64_t kk[3], r2 = kq, ioff = 0;
                        bool ok = true;
                        for (int d = nsp - 1; d >= 0; d--) {
                            kk[d] = r2 % cc->k[d];
                            r2 /= cc->k[d];
                        }
                        for (int d = 0; d < nsp && ok; d++) {
                            int64_t num = o[d] + pb[d] - kk[d] * cc->d[d];
                            ok = num >= 0 && num % cc->s[d] == 0 && num / cc->s[d] < cc->in[d];
                            ioff = ioff * cc->in[d] + (ok ? num / cc->s[d] : 0);
                        }
                        if (!ok)
                            continue;
                        acc += (double)x[(nb * cc->c + c) * in_sz + ioff] *
                               (double)w[(c * mg + mm) * k_sz + kq];
                    }
                }
                y[(nb * cc->m + m) * out_sz + q] = (float)acc;
            }
}

static void run_case(const ct_case *cc, uint64_t seed)
{
    int nsp = cc->nsp;
    kiln_shape xs = {.rank = nsp + 2, .dims = {cc->n, cc->c}};
    kiln_shape ws = {.rank = nsp + 2, .dims = {cc->c, cc->m / cc->group}};
    int64_t out[3], pb[3];
    for (int d = 0; d < nsp; d++) {
        xs.dims[2 + d] = cc->in[d];
        ws.dims[2 + d] = cc->k[d];
        int64_t full = cc->s[d] * (cc->in[d] - 1) + cc->opad[d] + cc->d[d] * (cc->k[d] - 1) + 1;
        if (cc->use_output_shape) {
            int64_t total = full > cc->oshape[d] ? full - cc->oshape[d] : 0;
            out[d] = cc->oshape[d];
            pb[d] = total - total / 2;
        } else {
            out[d] = full - cc->pb[d] - cc->pe[d];
            pb[d] = cc->pb[d];
        }
    }
    int64_t nx = kiln_shape_numel(&xs), nw = kiln_shape_numel(&ws);
    float *x = nn_random_buf(nx, seed), *w = nn_random_buf(nw, seed + 1),
          *b = nn_random_buf(cc->m, seed + 2);
    nr_in ins[3] = {nr_f32(xs, x), nr_f32(ws, w),
                    cc->bias ? nr_f32(ks(1, cc->m), b) : nr_absent()};
    nr t = nr_build(KILN_OP_CONVTRANSPOSE, cc->bias ? 3 : 2, ins, 1);
    int64_t pads[6];
    for (int d = 0; d < nsp; d++) {
        pads[d] = cc->pb[d];
        pads[nsp + d] = cc->pe[d];
    }
    set_ints(&t, "strides", cc->s, nsp);
    set_ints(&t, "dilations", cc->d, nsp);
    set_ints(&t, "output_padding", cc->opad, nsp);
    kiln_node_set_int(t.g, t.node, "group", cc->group);
    if (cc->use_output_shape)
        set_ints(&t, "output_shape", cc->oshape, nsp);
    else
        set_ints(&t, "pads", pads, 2 * nsp);
    nr_run(&t);
    kiln_shape ys = {.rank = nsp + 2, .dims = {cc->n, cc->m}};
    for (int d = 0; d < nsp; d++)
        ys.dims[2 + d] = out[d];
    nr_expect_shape(&t, 0, ys);
    int64_t ny = kiln_shape_numel(&ys);
    float *want = malloc(sizeof(float) * (size_t)ny);
    assert_non_null(want);
    brute(cc, x, w, cc->bias ? b : NULL, out, pb, want);
    assert_allclose(t.out[0].data, want, ny, 1e-5, 1e-5);
    free(want);
    free(x);
    free(w);
    free(b);
    nr_free(&t);
}

static void test_random(void **state)
{
    (void)state;
    static const ct_case cases[] = {
        {.nsp = 1, .n = 2, .c = 3, .m = 4, .group = 1, .in = {5}, .k = {3}, .s = {2}, .d = {1},
         .pb = {1}, .pe = {0}, .opad = {1}, .bias = true},
        {.nsp = 2, .n = 1, .c = 4, .m = 6, .group = 2, .in = {4, 3}, .k = {3, 2}, .s = {2, 3},
         .d = {1, 2}, .pb = {1, 0}, .pe = {2, 1}, .opad = {1, 0}, .bias = true},
        {.nsp = 2, .n = 1, .c = 3, .m = 3, .group = 3, .in = {3, 5}, .k = {2, 3}, .s = {1, 2},
         .d = {2, 1}, .pb = {0, 0}, .pe = {0, 0}, .opad = {0, 1}, .bias = false},
        {.nsp = 3, .n = 1, .c = 2, .m = 2, .group = 1, .in = {2, 3, 2}, .k = {2, 2, 3},
         .s = {2, 1, 2}, .d = {1, 1, 1}, .pb = {0, 1, 1}, .pe = {1, 0, 0}, .opad = {1, 0, 0},
         .bias = true},
        /* output_shape smaller (positive total) and larger (negative total) than full */
        {.nsp = 2, .n = 1, .c = 2, .m = 3, .group = 1, .in = {3, 4}, .k = {3, 3}, .s = {2, 2},
         .d = {1, 1}, .opad = {0, 0}, .bias = true, .use_output_shape = true,
         .oshape = {5, 10}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 100 + 10 * i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_1d),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests_name("ops/nn_conv_transpose", tests, NULL, NULL);
}
