/* tests/ops/test_nn_rnn.c: the reference RNN, GRU and LSTM against scalar
 * recurrences written out here from the ONNX equations (hidden size 1 and 2,
 * forward, reverse, bidirectional, sequence_lens with zero-filled Y after the
 * end, initial states, LSTM peepholes, GRU linear_before_reset both ways, a
 * non-default activation with clip), layout 1 against layout 0 on the
 * transposed input, and the data-dependent error of a bad sequence length. */
#include "nn_run.h"

static double sigm(double v)
{
    return 1.0 / (1.0 + exp(-v));
}

/* X (seq 3, batch 2, input 1). */
static const float X3[6] = {1.0f, -0.5f, -2.0f, 0.25f, 0.5f, 1.5f};

static void test_rnn_scalar(void **state)
{
    (void)state;
    static const float w[1] = {0.5f}, r[1] = {-0.75f}, b[2] = {0.1f, 0.2f}, h0[2] = {0.3f, -0.4f};
    static const int32_t lens[2] = {3, 2};
    nr_in ins[6] = {nr_f32(ks(3, 3, 2, 1), X3), nr_f32(ks(3, 1, 1, 1), w),
                    nr_f32(ks(3, 1, 1, 1), r),  nr_f32(ks(2, 1, 2), b),
                    {KILN_DTYPE_INT32, ks(1, 2), lens}, nr_f32(ks(3, 1, 2, 1), h0)};
    for (int rev = 0; rev < 2; rev++) {
        nr t = nr_build(KILN_OP_RNN, 6, ins, 2);
        kiln_node_set_int(t.g, t.node, "hidden_size", 1);
        if (rev)
            kiln_node_set_string(t.g, t.node, "direction", "reverse");
        nr_run(&t);
        nr_expect_shape(&t, 0, ks(4, 3, 1, 2, 1));
        float wy[6] = {0}, wh[2];
        for (int bt = 0; bt < 2; bt++) {
            double h = h0[bt];
            int L = lens[bt];
            for (int s = 0; s < L; s++) {
                int tt = rev ? L - 1 - s : s;
                h = tanh(0.5 * X3[tt * 2 + bt] + 0.1 + -0.75 * h + 0.2);
                wy[tt * 2 + bt] = (float)h;
            }
            wh[bt] = (float)h;
        }
        assert_allclose(t.out[0].data, wy, 6, 1e-5, 1e-6);
        assert_allclose(t.out[1].data, wh, 2, 1e-5, 1e-6);
        nr_free(&t);
    }
}

static void test_rnn_bidirectional_relu_clip(void **state)
{
    (void)state;
    /* hidden 1, directions with different weights and activations */
    static const float w[2] = {0.5f, -1.0f}, r[2] = {0.25f, 0.5f};
    nr_in ins[3] = {nr_f32(ks(3, 3, 2, 1), X3), nr_f32(ks(3, 2, 1, 1), w),
                    nr_f32(ks(3, 2, 1, 1), r)};
    nr t = nr_build(KILN_OP_RNN, 3, ins, 2);
    kiln_node_set_int(t.g, t.node, "hidden_size", 1);
    kiln_node_set_string(t.g, t.node, "direction", "bidirectional");
    kiln_node_set_string(t.g, t.node, "activations", "Relu,Tanh");
    kiln_node_set_float(t.g, t.node, "clip", 0.6f);
    nr_run(&t);
    nr_expect_shape(&t, 0, ks(4, 3, 2, 2, 1));
    nr_expect_shape(&t, 1, ks(3, 2, 2, 1));
    float wy[12], wh[4];
    for (int d = 0; d < 2; d++)
        for (int bt = 0; bt < 2; bt++) {
            double h = 0;
            for (int s = 0; s < 3; s++) {
                int tt = d ? 2 - s : s;
                double a = w[d] * X3[tt * 2 + bt] + r[d] * h;
                a = a > 0.6 ? 0.6 : a < -0.6 ? -0.6 : a;
                h = d ? tanh(a) : (a > 0 ? a : 0);
                wy[(tt * 2 + d) * 2 + bt] = (float)h;
            }
            wh[d * 2 + bt] = (float)h;
        }
    assert_allclose(t.out[0].data, wy, 12, 1e-5, 1e-6);
    assert_allclose(t.out[1].data, wh, 4, 1e-5, 1e-6);
    nr_free(&t);
}

static void test_gru_scalar(void **state)
{
    (void)state;
    /* gates z, r, h; B = Wb (z r h) then Rb (z r h) */
    static const float w[3] = {0.5f, -0.3f, 0.8f}, r[3] = {0.2f, 0.4f, -0.6f};
    static const float b[6] = {0.1f, -0.1f, 0.05f, 0.2f, 0.3f, -0.25f};
    static const float h0[2] = {0.5f, -0.2f};
    nr_in ins[6] = {nr_f32(ks(3, 3, 2, 1), X3), nr_f32(ks(3, 1, 3, 1), w),
                    nr_f32(ks(3, 1, 3, 1), r),  nr_f32(ks(2, 1, 6), b),
                    nr_absent(),                nr_f32(ks(3, 1, 2, 1), h0)};
    for (int lbr = 0; lbr < 2; lbr++) {
        nr t = nr_build(KILN_OP_GRU, 6, ins, 2);
        kiln_node_set_int(t.g, t.node, "hidden_size", 1);
        kiln_node_set_int(t.g, t.node, "linear_before_reset", lbr);
        nr_run(&t);
        float wy[6], wh[2];
        for (int bt = 0; bt < 2; bt++) {
            double h = h0[bt];
            for (int tt = 0; tt < 3; tt++) {
                double xv = X3[tt * 2 + bt];
                double z = sigm(w[0] * xv + b[0] + r[0] * h + b[3]);
                double rg = sigm(w[1] * xv + b[1] + r[1] * h + b[4]);
                double n = lbr ? tanh(w[2] * xv + b[2] + rg * (r[2] * h + b[5]))
                               : tanh(w[2] * xv + b[2] + r[2] * (rg * h) + b[5]);
                h = (1 - z) * n + z * h;
                wy[tt * 2 + bt] = (float)h;
            }
            wh[bt] = (float)h;
        }
        assert_allclose(t.out[0].data, wy, 6, 1e-5, 1e-6);
        assert_allclose(t.out[1].data, wh, 2, 1e-5, 1e-6);
        nr_free(&t);
    }
}

static void test_lstm_scalar(void **state)
{
    (void)state;
    /* gates i, o, f, c; P = (Pi, Po, Pf) */
    static const float w[4] = {0.5f, -0.3f, 0.8f, 0.6f}, r[4] = {0.2f, 0.4f, -0.6f, 0.3f};
    static const float b[8] = {0.1f, -0.1f, 0.05f, 0.2f, 0.3f, -0.25f, 0.15f, 0.0f};
    static const float h0[2] = {0.5f, -0.2f}, c0[2] = {-0.3f, 0.7f}, p[3] = {0.1f, -0.2f, 0.3f};
    nr_in ins[8] = {nr_f32(ks(3, 3, 2, 1), X3), nr_f32(ks(3, 1, 4, 1), w),
                    nr_f32(ks(3, 1, 4, 1), r),  nr_f32(ks(2, 1, 8), b),
                    nr_absent(),                nr_f32(ks(3, 1, 2, 1), h0),
                    nr_f32(ks(3, 1, 2, 1), c0), nr_f32(ks(2, 1, 3), p)};
    for (int forget = 0; forget < 2; forget++) {
        nr t = nr_build(KILN_OP_LSTM, 8, ins, 3);
        kiln_node_set_int(t.g, t.node, "hidden_size", 1);
        kiln_node_set_int(t.g, t.node, "input_forget", forget);
        nr_run(&t);
        float wy[6], wh[2], wc[2];
        for (int bt = 0; bt < 2; bt++) {
            double h = h0[bt], c = c0[bt];
            for (int tt = 0; tt < 3; tt++) {
                double xv = X3[tt * 2 + bt];
                double i = sigm(w[0] * xv + r[0] * h + p[0] * c + b[0] + b[4]);
                double f = forget ? 1 - i : sigm(w[2] * xv + r[2] * h + p[2] * c + b[2] + b[6]);
                double g = tanh(w[3] * xv + r[3] * h + b[3] + b[7]);
                c = f * c + i * g;
                double o = sigm(w[1] * xv + r[1] * h + p[1] * c + b[1] + b[5]);
                h = o * tanh(c);
                wy[tt * 2 + bt] = (float)h;
            }
            wh[bt] = (float)h;
            wc[bt] = (float)c;
        }
        assert_allclose(t.out[0].data, wy, 6, 1e-5, 1e-6);
        assert_allclose(t.out[1].data, wh, 2, 1e-5, 1e-6);
        assert_allclose(t.out[2].data, wc, 2, 1e-5, 1e-6);
        nr_free(&t);
    }
}

/* layout 1 on X transposed to (batch, seq, input) gives Y transposed to
 * (batch, seq, dirs, hidden); hidden 2, input 3, bidirectional LSTM. */
static void test_layout1(void **state)
{
    (void)state;
    const int S = 3, B = 2, I = 3, H = 2;
    float x[18], xt[18], w[2 * 8 * 3], r[2 * 8 * 2], h0[8], h0t[8];
    kt_fill_random(x, 18, 11, -1, 1);
    kt_fill_random(w, 48, 12, -1, 1);
    kt_fill_random(r, 32, 13, -1, 1);
    kt_fill_random(h0, 8, 14, -1, 1);
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < I; i++)
                xt[(b * S + s) * I + i] = x[(s * B + b) * I + i];
    for (int d = 0; d < 2; d++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++)
                h0t[(b * 2 + d) * H + j] = h0[(d * B + b) * H + j];
    nr_in ins0[6] = {nr_f32(ks(3, S, B, I), x), nr_f32(ks(3, 2, 4 * H, I), w),
                     nr_f32(ks(3, 2, 4 * H, H), r), nr_absent(), nr_absent(),
                     nr_f32(ks(3, 2, B, H), h0)};
    nr_in ins1[6] = {nr_f32(ks(3, B, S, I), xt), ins0[1], ins0[2], nr_absent(), nr_absent(),
                     nr_f32(ks(3, B, 2, H), h0t)};
    nr t0 = nr_build(KILN_OP_LSTM, 6, ins0, 2), t1 = nr_build(KILN_OP_LSTM, 6, ins1, 2);
    kiln_node_set_string(t0.g, t0.node, "direction", "bidirectional");
    kiln_node_set_string(t1.g, t1.node, "direction", "bidirectional");
    kiln_node_set_int(t1.g, t1.node, "layout", 1);
    nr_run(&t0);
    nr_run(&t1);
    nr_expect_shape(&t1, 0, ks(4, B, S, 2, H));
    nr_expect_shape(&t1, 1, ks(3, B, 2, H));
    const float *y0 = t0.out[0].data, *y1 = t1.out[0].data, *yh0 = t0.out[1].data,
                *yh1 = t1.out[1].data;
    float want[24], wanth[8];
    for (int s = 0; s < S; s++)
        for (int d = 0; d < 2; d++)
            for (int b = 0; b < B; b++)
                for (int j = 0; j < H; j++)
                    want[((b * S + s) * 2 + d) * H + j] = y0[((s * 2 + d) * B + b) * H + j];
    for (int d = 0; d < 2; d++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++)
                wanth[(b * 2 + d) * H + j] = yh0[(d * B + b) * H + j];
    assert_allclose(y1, want, 24, 1e-6, 1e-7);
    assert_allclose(yh1, wanth, 8, 1e-6, 1e-7);
    nr_free(&t0);
    nr_free(&t1);
}

static void test_bad_sequence_length(void **state)
{
    (void)state;
    static const float w[1] = {0.5f}, r[1] = {0.25f};
    static const int64_t lens[2] = {3, 4};
    nr_in ins[5] = {nr_f32(ks(3, 3, 2, 1), X3), nr_f32(ks(3, 1, 1, 1), w),
                    nr_f32(ks(3, 1, 1, 1), r), nr_absent(), {KILN_DTYPE_INT64, ks(1, 2), lens}};
    nr t = nr_build(KILN_OP_RNN, 5, ins, 1);
    kiln_error err = {0};
    assert_int_equal(nr_kernel_status(&t, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "sequence_lens[1] = 4"));
    nr_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn_scalar),  cmocka_unit_test(test_rnn_bidirectional_relu_clip),
        cmocka_unit_test(test_gru_scalar),  cmocka_unit_test(test_lstm_scalar),
        cmocka_unit_test(test_layout1),     cmocka_unit_test(test_bad_sequence_length),
    };
    return cmocka_run_group_tests_name("ops/nn_rnn", tests, NULL, NULL);
}
