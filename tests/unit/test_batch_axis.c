/* tests/unit/test_batch_axis.c: kiln_graph_batch_separable (ir/batch_axis.h)
 * on small graphs whose shapes kiln_graph_infer_shapes infers: graphs that
 * compute each item along axis 0 on its own are accepted (a CNN classifier,
 * squeeze-excite, attention, reshapes, a class token concatenated, an
 * embedding lookup, free broadcast operands, a batch of one), and those that
 * mix items or lose the batch axis are refused, with the node (or value) and
 * the reason in `why`. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ir/batch_axis.h"
#include "ir/graph.h"
#include "test_support.h"

#define C 4 /* the batch extent of most cases */

typedef struct bg {
    kiln_graph *g;
    int node;        /* the last node added */
    bool batched[8]; /* per graph input, in order */
} bg;

static bg bg_new(void)
{
    bg b = {0};
    assert_int_equal(kiln_graph_create(&b.g), KILN_OK);
    return b;
}

/* A graph input, flagged batched or not. */
static int in(bg *b, const char *name, kiln_dtype dt, kiln_shape s, bool batched)
{
    assert_true(b->g->n_inputs < 8);
    b->batched[b->g->n_inputs] = batched;
    int v = kiln_graph_add_input(b->g, name, dt, &s);
    assert_true(v >= 0);
    return v;
}

/* The batched float input "x". */
static int x_in(bg *b, kiln_shape s)
{
    return in(b, "x", KILN_DTYPE_FLOAT32, s, true);
}

/* A float constant; data may be NULL (built without weights). */
static int cst(bg *b, const char *name, kiln_shape s, const float *data)
{
    int v = kiln_graph_add_const(b->g, name, KILN_DTYPE_FLOAT32, &s, data);
    assert_true(v >= 0);
    return v;
}

/* A float constant whose rows along axis 0 are all the same (an Expand of a
 * class token folded to the batch) or, with `differ`, all different. */
static int rows_cst(bg *b, const char *name, kiln_shape s, bool differ)
{
    float *data;
    int v = kiln_graph_add_const_uninit(b->g, name, KILN_DTYPE_FLOAT32, &s, true, (void **)&data);
    assert_true(v >= 0);
    int64_t n = kiln_shape_numel(&s), row = n / s.dims[0];
    for (int64_t i = 0; i < n; i++)
        data[i] = (float)(i % row) + (differ ? (float)(i / row) * 100.0f : 0.0f);
    return v;
}

/* Adds a one-output node; returns its output value. */
static int op_n(bg *b, kiln_op op, const char *name, const int *ins, int n_in)
{
    b->node = kiln_graph_add_node(b->g, op, name, ins, n_in, 1);
    assert_true(b->node >= 0);
    return kiln_graph_node_output(b->g, b->node, 0);
}

#define OP(b, op, name, ...)                                                                       \
    op_n((b), (op), (name), (const int[]){__VA_ARGS__},                                            \
         (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))
/* Attributes of the last node added. */
#define SET_INTS(b, attr, ...)                                                                     \
    do {                                                                                           \
        const int64_t v_[] = {__VA_ARGS__};                                                        \
        assert_int_equal(                                                                          \
            kiln_node_set_ints((b)->g, (b)->node, attr, v_, (int)(sizeof v_ / sizeof v_[0])),      \
            KILN_OK);                                                                              \
    } while (0)
#define SET_INT(b, attr, v) assert_int_equal(kiln_node_set_int((b)->g, (b)->node, attr, v), KILN_OK)

static void out(bg *b, int v)
{
    assert_int_equal(kiln_graph_add_output(b->g, v), KILN_OK);
}

/* Infers the shapes of b's graph, runs the analysis for batch extent c and
 * destroys the graph: fails at the caller's line unless the verdict is
 * `want` and, when refused, `why` holds both `who` and `words` (when
 * accepted, `why` must be cleared). */
static void expect_sep(bg *b, int64_t c, bool want, const char *who, const char *words,
                       const char *file, int line)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(b->g, &err);
    if (s != KILN_OK) {
        print_error("%s:%d: shape inference failed: %s\n", file, line, err.msg);
        kiln_graph_destroy(b->g);
        _fail(file, line);
    }
    char why[256] = "stale";
    bool got = kiln_graph_batch_separable(b->g, b->batched, c, why, sizeof why);
    kiln_graph_destroy(b->g);
    if (got != want) {
        print_error("%s:%d: %s, expected %s (why: '%s')\n", file, line,
                    got ? "accepted" : "refused", want ? "accepted" : "refused", why);
        _fail(file, line);
    }
    if (want ? why[0] != '\0' : !strstr(why, who) || !strstr(why, words)) {
        print_error("%s:%d: why '%s' %s\n", file, line, why,
                    want ? "is not empty" : "lacks the name or the reason");
        if (!want)
            print_error("expected '%s' and '%s'\n", who, words);
        _fail(file, line);
    }
}

#define ACCEPT(b, c) expect_sep((b), (c), true, NULL, NULL, __FILE__, __LINE__)
#define REFUSE(b, c, who, words) expect_sep((b), (c), false, (who), (words), __FILE__, __LINE__)

/* Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm: a classifier. */
static void test_cnn(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(4, C, 3, 8, 8));
    int y = OP(&b, KILN_OP_CONV, "conv", x, cst(&b, "w", ks(4, 8, 3, 3, 3), NULL));
    y = OP(&b, KILN_OP_RELU, "relu", y);
    y = OP(&b, KILN_OP_GLOBALAVERAGEPOOL, "gap", y);
    y = OP(&b, KILN_OP_FLATTEN, "flat", y);
    SET_INT(&b, "axis", 1);
    y = OP(&b, KILN_OP_GEMM, "fc", y, cst(&b, "fc_w", ks(2, 8, 10), NULL),
           cst(&b, "fc_b", ks(1, 10), NULL));
    SET_INT(&b, "transA", 0);
    out(&b, y);
    ACCEPT(&b, C);
}

/* Squeeze-excite: a per-item mean over H, W scales the conv output. */
static void test_squeeze_excite(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(4, C, 3, 8, 8));
    int y = OP(&b, KILN_OP_CONV, "conv", x, cst(&b, "w", ks(4, 8, 3, 3, 3), NULL));
    int m = OP(&b, KILN_OP_REDUCEMEAN, "squeeze", y);
    SET_INTS(&b, "axes", 2, 3);
    SET_INT(&b, "keepdims", 1);
    m = OP(&b, KILN_OP_SIGMOID, "gate", m);
    out(&b, OP(&b, KILN_OP_MUL, "excite", y, m));
    ACCEPT(&b, C);
}

/* softmax(x @ x^T) on [c, S, D]: a batch of matrices. */
static void test_attention(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(3, C, 5, 8));
    int xt = OP(&b, KILN_OP_TRANSPOSE, "kt", x);
    SET_INTS(&b, "perm", 0, 2, 1);
    int s = OP(&b, KILN_OP_MATMUL, "scores", x, xt);
    s = OP(&b, KILN_OP_SOFTMAX, "probs", s);
    SET_INT(&b, "axis", -1);
    out(&b, s);
    ACCEPT(&b, C);
}

/* x [c, 6] reshaped to `shape` (rank n). */
static bg reshape_graph(const int64_t *shape, int n)
{
    bg b = bg_new();
    int y = OP(&b, KILN_OP_RESHAPE, "reshape", x_in(&b, ks(2, C, 6)));
    assert_int_equal(kiln_node_set_ints(b.g, b.node, "shape", shape, n), KILN_OK);
    out(&b, y);
    return b;
}

static void test_reshape(void **state)
{
    (void)state;
    bg b = reshape_graph((const int64_t[]){C, 2, 3}, 3);
    ACCEPT(&b, C);
    b = reshape_graph((const int64_t[]){-1, 2, 3}, 3); /* -1 resolves to c */
    ACCEPT(&b, C);
    /* two rows per item: the batch merged with the next axis, which a graph
     * output may not keep */
    b = reshape_graph((const int64_t[]){2 * C, 3}, 2);
    REFUSE(&b, C, "", "output 'reshape' does not hold the batch at axis 0");
    b = reshape_graph((const int64_t[]){6, C}, 2);
    REFUSE(&b, C, "Reshape 'reshape'", "splits the items of the batch");
    /* merged, then split back: accepted */
    b = reshape_graph((const int64_t[]){2 * C, 3}, 2);
    int r = OP(&b, KILN_OP_RELU, "relu", b.g->outputs[0]);
    b.g->n_outputs = 0;
    OP(&b, KILN_OP_RESHAPE, "back", r);
    SET_INTS(&b, "shape", C, 6);
    out(&b, kiln_graph_node_output(b.g, b.node, 0));
    ACCEPT(&b, C);
}

/* x [c, S, E] through nn.MultiheadAttention's layout: [S, c, E], heads
 * merged with the batch [S, c x H, D], a batch of c x H matrices, back. With
 * `wrong`, the first reshape merges the sequence with the batch's axis, so
 * the product of the heads' queries and keys meets items. */
static bg mha_graph(bool wrong)
{
    enum { S = 5, E = 8, H = 2, D = 4 };
    bg b = bg_new();
    int t = OP(&b, KILN_OP_TRANSPOSE, "t0", x_in(&b, ks(3, C, S, E)));
    SET_INTS(&b, "perm", 1, 0, 2);
    int r = OP(&b, KILN_OP_RESHAPE, "heads", t);
    if (wrong)
        SET_INTS(&b, "shape", S * C, H, D);
    else
        SET_INTS(&b, "shape", S, C * H, D);
    int q = OP(&b, KILN_OP_TRANSPOSE, "t1", r);
    SET_INTS(&b, "perm", 1, 0, 2);
    int kt = OP(&b, KILN_OP_TRANSPOSE, "t2", q);
    SET_INTS(&b, "perm", 0, 2, 1);
    int p = OP(&b, KILN_OP_SOFTMAX, "sm", OP(&b, KILN_OP_MATMUL, "qk", q, kt));
    SET_INT(&b, "axis", -1);
    int o = OP(&b, KILN_OP_TRANSPOSE, "t3", OP(&b, KILN_OP_MATMUL, "pv", p, q));
    SET_INTS(&b, "perm", 1, 0, 2);
    int m = OP(&b, KILN_OP_RESHAPE, "merge", o);
    SET_INTS(&b, "shape", S, C, E);
    out(&b, OP(&b, KILN_OP_TRANSPOSE, "t4", m));
    SET_INTS(&b, "perm", 1, 0, 2);
    return b;
}

static void test_attention_heads(void **state)
{
    (void)state;
    bg b = mha_graph(false);
    ACCEPT(&b, C);
    b = mha_graph(true);
    REFUSE(&b, C, "MatMul 'qk'", "the batch is both A's rows and B's");
}

/* Concat along `axis` of x [c, 2, 5] and a constant `tok` of shape tok_s. */
static bg concat_graph(int64_t axis, kiln_shape tok_s, bool differ)
{
    bg b = bg_new();
    int x = x_in(&b, ks(3, C, 2, 5));
    int y = OP(&b, KILN_OP_CONCAT, "cat", rows_cst(&b, "tok", tok_s, differ), x);
    SET_INT(&b, "axis", axis);
    out(&b, y);
    return b;
}

static void test_concat(void **state)
{
    (void)state;
    bg b = concat_graph(1, ks(3, C, 1, 5), false); /* a class token, expanded and folded */
    ACCEPT(&b, C);
    b = concat_graph(-2, ks(3, C, 1, 5), false);
    ACCEPT(&b, C);
    b = concat_graph(1, ks(3, C, 1, 5), true);
    REFUSE(&b, C, "Concat 'cat'", "input 0 varies along the batch axis");
    b = concat_graph(0, ks(3, 1, 2, 5), false);
    REFUSE(&b, C, "Concat 'cat'", "concatenates along the batch axis");
    /* a constant without data cannot be shown uniform */
    b = bg_new();
    int x = x_in(&b, ks(2, C, 2));
    out(&b, OP(&b, KILN_OP_CONCAT, "cat", x, cst(&b, "k", ks(2, C, 3), NULL)));
    SET_INT(&b, "axis", 1);
    REFUSE(&b, C, "Concat 'cat'", "input 1 varies along the batch axis");
}

/* A free table [10, 8] looked up by batched indices [c, 3] along `axis`. */
static bg gather_graph(int64_t axis)
{
    bg b = bg_new();
    int ids = in(&b, "ids", KILN_DTYPE_INT64, ks(2, C, 3), true);
    out(&b, OP(&b, KILN_OP_GATHER, "embed", cst(&b, "table", ks(2, 10, 8), NULL), ids));
    SET_INT(&b, "axis", axis);
    return b;
}

static void test_gather(void **state)
{
    (void)state;
    bg b = gather_graph(0); /* an embedding lookup: [c, 3, 8] */
    ACCEPT(&b, C);
    b = gather_graph(1); /* [10, c, 3]: the batch moves to axis 1, and stays there */
    REFUSE(&b, C, "", "output 'embed' does not hold the batch at axis 0");
    /* batched data gathered along the batch axis by free indices */
    b = bg_new();
    int x = x_in(&b, ks(2, C, 3));
    int64_t idx[C] = {3, 2, 1, 0};
    kiln_shape is = ks(1, C);
    int k = kiln_graph_add_const(b.g, "idx", KILN_DTYPE_INT64, &is, idx);
    out(&b, OP(&b, KILN_OP_GATHER, "rev", x, k));
    REFUSE(&b, C, "Gather 'rev'", "gathers along the batch axis");
}

/* x [c, 3] + a constant of shape s (rows that differ when it has c rows). */
static bg add_graph(kiln_shape s)
{
    bg b = bg_new();
    int x = x_in(&b, ks(2, C, 3));
    out(&b, OP(&b, KILN_OP_ADD, "add", x, rows_cst(&b, "k", s, true)));
    return b;
}

static void test_broadcast_free(void **state)
{
    (void)state;
    bg b = add_graph(ks(1, 3));
    ACCEPT(&b, C);
    b = add_graph(ks(2, 1, 3));
    ACCEPT(&b, C);
    b = add_graph(ks(2, C, 3));
    REFUSE(&b, C, "Add 'add'", "input 1 varies along the batch axis");
}

/* A batch of one: a free operand of extent 1 along axis 0 is the same for
 * every item, with or without data. */
static void test_single_item(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(2, 1, 3));
    int y = OP(&b, KILN_OP_ADD, "add", OP(&b, KILN_OP_RELU, "relu", x),
               cst(&b, "k", ks(2, 1, 3), NULL));
    y = OP(&b, KILN_OP_CONCAT, "cat", y, cst(&b, "tok", ks(2, 1, 2), NULL));
    SET_INT(&b, "axis", 1);
    out(&b, y);
    ACCEPT(&b, 1);
}

/* `op` on x [c, 3] with an int attribute (skipped when attr is NULL). */
static bg unary_graph(kiln_op op, const char *name, const char *attr, int64_t v)
{
    bg b = bg_new();
    out(&b, op_n(&b, op, name, (const int[]){x_in(&b, ks(2, C, 3))}, 1));
    if (attr)
        SET_INT(&b, attr, v);
    return b;
}

static void test_reduce(void **state)
{
    (void)state;
    bg b = unary_graph(KILN_OP_REDUCEMEAN, "mean", NULL, 0);
    SET_INTS(&b, "axes", 1);
    ACCEPT(&b, C);
    b = unary_graph(KILN_OP_REDUCEMEAN, "mean", NULL, 0);
    SET_INTS(&b, "axes", 0);
    REFUSE(&b, C, "ReduceMean 'mean'", "reduces the batch axis");
    b = unary_graph(KILN_OP_REDUCESUM, "sum", "keepdims", 1);
    SET_INTS(&b, "axes", 1, -2);
    REFUSE(&b, C, "ReduceSum 'sum'", "reduces the batch axis");
    b = unary_graph(KILN_OP_REDUCEMAX, "max", "keepdims", 1); /* no axes: every axis */
    REFUSE(&b, C, "ReduceMax 'max'", "reduces every axis");
}

static void test_softmax(void **state)
{
    (void)state;
    bg b = unary_graph(KILN_OP_SOFTMAX, "sm", "axis", 1);
    ACCEPT(&b, C);
    b = unary_graph(KILN_OP_SOFTMAX, "sm", NULL, 0); /* axis -1 by default */
    ACCEPT(&b, C);
    b = unary_graph(KILN_OP_SOFTMAX, "sm", "axis", 0);
    REFUSE(&b, C, "Softmax 'sm'", "normalizes the batch axis");
    b = unary_graph(KILN_OP_LOGSOFTMAX, "lsm", "axis", -2);
    REFUSE(&b, C, "LogSoftmax 'lsm'", "normalizes the batch axis");
}

static void test_transpose(void **state)
{
    (void)state;
    bg b = unary_graph(KILN_OP_TRANSPOSE, "t", NULL, 0);
    SET_INTS(&b, "perm", 1, 0);
    REFUSE(&b, C, "", "output 't' does not hold the batch at axis 0");
    b = unary_graph(KILN_OP_TRANSPOSE, "t", NULL, 0); /* no perm: reversed */
    REFUSE(&b, C, "", "output 't' does not hold the batch at axis 0");
    /* moved and moved back: a Softmax over axis 0 of [3, c] is over the
     * items' features, not across items */
    b = unary_graph(KILN_OP_TRANSPOSE, "t", NULL, 0);
    SET_INTS(&b, "perm", 1, 0);
    int sm = OP(&b, KILN_OP_SOFTMAX, "sm", b.g->outputs[0]);
    SET_INT(&b, "axis", 0);
    b.g->n_outputs = 0;
    out(&b, OP(&b, KILN_OP_TRANSPOSE, "back", sm));
    ACCEPT(&b, C);
}

/* A @ B with a and b value ids built by the caller. */
static void matmul_out(bg *b, int a, int bv)
{
    out(b, OP(b, KILN_OP_MATMUL, "mm", a, bv));
}

static void test_matmul(void **state)
{
    (void)state;
    /* the batch is B's rows, the reduction axis of a rank-2 product */
    bg b = bg_new();
    int x = x_in(&b, ks(2, C, 3));
    matmul_out(&b, cst(&b, "a", ks(2, 5, C), NULL), x);
    REFUSE(&b, C, "MatMul 'mm'", "the batch is the reduction axis");
    /* one free A against a batch of B's matrices */
    b = bg_new();
    x = x_in(&b, ks(3, C, 3, 2));
    matmul_out(&b, cst(&b, "a", ks(2, 5, 3), NULL), x);
    ACCEPT(&b, C);
    /* a batch of A's matrices against one B */
    b = bg_new();
    x = x_in(&b, ks(3, C, 5, 3));
    matmul_out(&b, x, cst(&b, "w", ks(2, 3, 7), NULL));
    ACCEPT(&b, C);
    /* both batched, rank 2: the product contracts over the batch */
    b = bg_new();
    x = x_in(&b, ks(2, C, C));
    matmul_out(&b, x, x);
    REFUSE(&b, C, "MatMul 'mm'", "the batch is the reduction axis");
}

/* The rows of a rank-2 A are the items: x [c, 3] @ W [3, 7] is a linear
 * layer (each output row is one input row times W). */
static void test_matmul_rows(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(2, C, 3));
    matmul_out(&b, x, cst(&b, "w", ks(2, 3, 7), NULL));
    ACCEPT(&b, C);
}

/* Einsum has no rule (even one that computes item by item): refused. */
static void test_no_rule(void **state)
{
    (void)state;
    bg b = bg_new();
    out(&b, OP(&b, KILN_OP_EINSUM, "ein", x_in(&b, ks(2, C, 3))));
    assert_int_equal(kiln_node_set_string(b.g, b.node, "equation", "bi->bi"), KILN_OK);
    REFUSE(&b, C, "Einsum 'ein'", "no rule for this op");
}

/* A graph output computed from a free input only. */
static void test_free_output(void **state)
{
    (void)state;
    bg b = bg_new();
    int x = x_in(&b, ks(2, C, 3));
    int y = in(&b, "y", KILN_DTYPE_FLOAT32, ks(2, C, 3), false);
    out(&b, OP(&b, KILN_OP_RELU, "rx", x));
    out(&b, OP(&b, KILN_OP_RELU, "ry", y));
    REFUSE(&b, C, "output 'ry'", "does not depend on the batch");
}

/* A batched input whose axis 0 is not c; and c < 1. */
static void test_input_extent(void **state)
{
    (void)state;
    bg b = bg_new();
    out(&b, OP(&b, KILN_OP_RELU, "relu", x_in(&b, ks(2, C + 1, 3))));
    REFUSE(&b, C, "input 'x'", "axis 0 is not the batch");
    b = bg_new();
    out(&b, OP(&b, KILN_OP_RELU, "relu", x_in(&b, ks(2, C, 3))));
    REFUSE(&b, 0, "", "no batch");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_squeeze_excite),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_attention_heads),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_broadcast_free),
        cmocka_unit_test(test_single_item),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_rows),
        cmocka_unit_test(test_no_rule),
        cmocka_unit_test(test_free_output),
        cmocka_unit_test(test_input_extent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
