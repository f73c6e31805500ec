/* tests/compiler/test_lower_rnn.c: LSTM and GRU compiled end to end against
 * the reference executor (rtol 1e-4, atol 1e-5) on every output (Y, Y_h,
 * Y_c). The lower-rnn pass (src/pass/lower_rnn.c) unrolls them into Gemms
 * and elementwise ops; each case also asserts whether the pass took the
 * node or left it to the reference kernel. Cases: forward, reverse and
 * bidirectional; with and without bias and initial states; batch 1-3; one
 * step; GRU with and without linear_before_reset; and what stays on the
 * reference kernel (sequence_lens, clip, non-default activations, layout 1,
 * run-time weights). */
#include "compiler_test.h"

static char *dir;
static int case_no;

typedef struct rcase {
    kiln_op op;
    int seq, batch, input, hidden;
    const char *direction;
    bool bias, init, lbr;
    int refused; /* 0 lowered; 1 sequence_lens, 2 clip, 3 activations, 4 layout 1, 5 run-time W */
} rcase;

static void check_case(const rcase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int G = c->op == KILN_OP_LSTM ? 4 : 3;
    int D = strcmp(c->direction, "bidirectional") == 0 ? 2 : 1;
    uint64_t seed = 40 + (uint64_t)case_no * 8;
    kiln_shape xs = c->refused == 4 ? ks(3, c->batch, c->seq, c->input)
                                    : ks(3, c->seq, c->batch, c->input);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    kiln_shape ws = ks(3, D, G * c->hidden, c->input);
    int w = c->refused == 5 ? kiln_graph_add_input(g, "w", KILN_DTYPE_FLOAT32, &ws)
                            : ct_param(g, "w", ws, seed, -0.5f, 0.5f);
    int r = ct_param(g, "r", ks(3, D, G * c->hidden, c->hidden), seed + 1, -0.5f, 0.5f);
    int in[8] = {x, w, r, -1, -1, -1, -1, -1};
    int n_in = 3;
    if (c->bias)
        in[3] = ct_param(g, "b", ks(2, D, 2 * G * c->hidden), seed + 2, -0.5f, 0.5f), n_in = 4;
    if (c->refused == 1) {
        kiln_shape ls = ks(1, c->batch);
        in[4] = kiln_graph_add_const(g, "lens", KILN_DTYPE_INT32, &ls,
                                     (int32_t[]){c->seq, c->seq, c->seq});
        n_in = 5;
    }
    if (c->init) {
        kiln_shape hs = c->refused == 4 ? ks(3, c->batch, D, c->hidden)
                                        : ks(3, D, c->batch, c->hidden);
        in[5] = kiln_graph_add_input(g, "h0", KILN_DTYPE_FLOAT32, &hs);
        n_in = 6;
        if (c->op == KILN_OP_LSTM)
            in[6] = kiln_graph_add_input(g, "c0", KILN_DTYPE_FLOAT32, &hs), n_in = 7;
    }
    int n_out = c->op == KILN_OP_LSTM ? 3 : 2;
    int id = kiln_graph_add_node(g, c->op, "rnn", in, n_in, n_out);
    assert_true(id >= 0);
    assert_int_equal(kiln_node_set_int(g, id, "hidden_size", c->hidden), KILN_OK);
    assert_int_equal(kiln_node_set_string(g, id, "direction", c->direction), KILN_OK);
    if (c->lbr)
        assert_int_equal(kiln_node_set_int(g, id, "linear_before_reset", 1), KILN_OK);
    if (c->refused == 2)
        assert_int_equal(kiln_node_set_float(g, id, "clip", 0.5f), KILN_OK);
    if (c->refused == 3)
        assert_int_equal(kiln_node_set_string(g, id, "activations",
                                              c->op == KILN_OP_LSTM ? "Sigmoid,Relu,Tanh"
                                                                    : "Sigmoid,Relu"),
                         KILN_OK);
    if (c->refused == 4)
        assert_int_equal(kiln_node_set_int(g, id, "layout", 1), KILN_OK);
    for (int k = 0; k < n_out; k++)
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, id, k)), KILN_OK);
    int left = ct_ops_left(g, case_no, c->op, -1);
    if (!c->refused && left)
        fail_msg("case %d: the %s was not lowered", case_no, kiln_op_name(c->op));
    if (c->refused && !left)
        fail_msg("case %d: a %s the pass must leave (reason %d) was lowered", case_no,
                 kiln_op_name(c->op), c->refused);
    char tag[32];
    snprintf(tag, sizeof tag, "rnn%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-4, 1e-5);
    case_no++;
    kiln_graph_destroy(g);
}

/* Most cases share one geometry (5 steps, batch 2, input 6, hidden 8), so
 * their kernels are compiled once; one case per op has other extents. */
static void test_lstm(void **state)
{
    (void)state;
    static const rcase cases[] = {
        /* op          seq b  in  hid direction        bias  init  lbr  refused */
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, false, false, 0},
        {KILN_OP_LSTM, 5, 2, 6, 8, "reverse", true, true, false, 0},
        {KILN_OP_LSTM, 5, 2, 6, 8, "bidirectional", true, true, false, 0},
        {KILN_OP_LSTM, 5, 2, 6, 8, "bidirectional", false, false, false, 0},
        {KILN_OP_LSTM, 1, 2, 6, 8, "forward", true, true, false, 0},
        {KILN_OP_LSTM, 7, 3, 12, 16, "forward", true, true, false, 0},
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, false, false, 1},
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, false, false, 2},
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, false, false, 3},
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, true, false, 4},
        {KILN_OP_LSTM, 5, 2, 6, 8, "forward", true, false, false, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

static void test_gru(void **state)
{
    (void)state;
    static const rcase cases[] = {
        /* op         seq b  in  hid direction        bias  init  lbr  refused */
        {KILN_OP_GRU, 5, 2, 6, 8, "forward", true, false, true, 0},
        {KILN_OP_GRU, 5, 2, 6, 8, "forward", true, true, false, 0},
        {KILN_OP_GRU, 5, 2, 6, 8, "bidirectional", true, true, true, 0},
        {KILN_OP_GRU, 5, 2, 6, 8, "reverse", true, false, false, 0},
        {KILN_OP_GRU, 5, 2, 6, 8, "bidirectional", false, true, false, 0},
        {KILN_OP_GRU, 1, 2, 6, 8, "forward", true, true, true, 0},
        {KILN_OP_GRU, 7, 1, 12, 16, "forward", true, false, true, 0},
        {KILN_OP_GRU, 5, 2, 6, 8, "forward", true, false, true, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_gru),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
