/* tests/unit/test_infer_elemwise2.c: shape inference of the elementwise ops
 * added with the full family (unary math, to-bool, Not, Mod, PRelu, BitShift,
 * variadic Min/Max/Sum/Mean, comparisons, logic, Where, Cast): output dtype
 * and shape on one-node graphs, and every error case with the words its
 * message must carry. */
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct in_spec {
    kiln_dtype dt;
    kiln_shape sh;
} in_spec;

typedef struct result {
    kiln_status s;
    kiln_dtype dt;
    kiln_shape sh;
    kiln_error err;
} result;

/* Infers one node of `op` on inputs `ins`; `setup` (may be NULL) sets
 * attributes. */
static result infer(kiln_op op, int n_in, const in_spec *ins,
                    void (*setup)(kiln_graph *, int))
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[8] = "x0";
        name[1] = (char)('0' + i);
        ids[i] = kiln_graph_add_input(g, name, ins[i].dt, &ins[i].sh);
        assert_true(ids[i] >= 0);
    }
    int node = kiln_graph_add_node(g, op, "node", ids, n_in, 1);
    assert_true(node >= 0);
    if (setup)
        setup(g, node);
    result r = {0};
    r.s = kiln_graph_infer_shapes(g, &r.err);
    if (r.s == KILN_OK) {
        const kiln_value *o = kiln_graph_value(g, kiln_graph_node_output(g, node, 0));
        r.dt = o->dtype;
        r.sh = o->shape;
    }
    kiln_graph_destroy(g);
    return r;
}

static void expect_ok(result r, kiln_dtype dt, kiln_shape sh)
{
    char a[96], b[96];
    if (r.s != KILN_OK)
        fail_msg("inference failed: %s", r.err.msg);
    if (r.dt != dt)
        fail_msg("dtype %s, expected %s", kiln_dtype_name(r.dt), kiln_dtype_name(dt));
    if (!kiln_shape_equal(&r.sh, &sh))
        fail_msg("shape %s, expected %s", kiln_shape_str(&r.sh, a, sizeof a),
                 kiln_shape_str(&sh, b, sizeof b));
}

static void expect_err(result r, kiln_status s, const char *words)
{
    if (r.s != s)
        fail_msg("status %s (%s), expected %s", kiln_status_str(r.s), r.err.msg,
                 kiln_status_str(s));
    if (!strstr(r.err.msg, words) || !strstr(r.err.msg, "node"))
        fail_msg("message '%s' lacks '%s' or the node name", r.err.msg, words);
}

#define F32 KILN_DTYPE_FLOAT32
#define F64 KILN_DTYPE_FLOAT64
#define F16 KILN_DTYPE_FLOAT16
#define I32 KILN_DTYPE_INT32
#define U8 KILN_DTYPE_UINT8
#define BOOL KILN_DTYPE_BOOL

static void test_unary(void **state)
{
    (void)state;
    static const kiln_op float_ops[] = {KILN_OP_EXP,   KILN_OP_LOG,  KILN_OP_ACOSH,
                                        KILN_OP_SELU,  KILN_OP_MISH, KILN_OP_ROUND,
                                        KILN_OP_GELU,  KILN_OP_SIGMOID};
    for (size_t i = 0; i < sizeof float_ops / sizeof float_ops[0]; i++) {
        in_spec x = {F64, ks(2, 3, 4)};
        expect_ok(infer(float_ops[i], 1, &x, NULL), F64, ks(2, 3, 4));
        x.dt = F16;
        expect_ok(infer(float_ops[i], 1, &x, NULL), F16, ks(2, 3, 4));
        x.dt = I32;
        expect_err(infer(float_ops[i], 1, &x, NULL), KILN_ERR_TYPE_MISMATCH, "int32");
    }
    /* Relu and Clip also take integers; not bool */
    in_spec xi = {KILN_DTYPE_INT8, ks(1, 5)};
    expect_ok(infer(KILN_OP_RELU, 1, &xi, NULL), KILN_DTYPE_INT8, ks(1, 5));
    expect_ok(infer(KILN_OP_CLIP, 1, &xi, NULL), KILN_DTYPE_INT8, ks(1, 5));
    in_spec xb = {BOOL, ks(1, 5)};
    expect_err(infer(KILN_OP_CLIP, 1, &xb, NULL), KILN_ERR_TYPE_MISMATCH, "bool");
    /* Abs/Neg/Sign: any numeric type */
    in_spec xu = {KILN_DTYPE_UINT64, (kiln_shape){.rank = 0}};
    expect_ok(infer(KILN_OP_ABS, 1, &xu, NULL), KILN_DTYPE_UINT64, (kiln_shape){.rank = 0});
    expect_ok(infer(KILN_OP_SIGN, 1, &xi, NULL), KILN_DTYPE_INT8, ks(1, 5));
    expect_err(infer(KILN_OP_NEG, 1, &xb, NULL), KILN_ERR_TYPE_MISMATCH, "numeric");
    /* to bool */
    in_spec xf = {F32, ks(2, 2, 2)};
    expect_ok(infer(KILN_OP_ISNAN, 1, &xf, NULL), BOOL, ks(2, 2, 2));
    expect_ok(infer(KILN_OP_ISINF, 1, &xf, NULL), BOOL, ks(2, 2, 2));
    expect_err(infer(KILN_OP_ISINF, 1, &xi, NULL), KILN_ERR_TYPE_MISMATCH, "float32");
    expect_ok(infer(KILN_OP_NOT, 1, &xb, NULL), BOOL, ks(1, 5));
    expect_err(infer(KILN_OP_NOT, 1, &xf, NULL), KILN_ERR_TYPE_MISMATCH, "bool");
}

static void set_gelu_bad(kiln_graph *g, int node)
{
    kiln_node_set_string(g, node, "approximate", "fast");
}
static void set_alpha_int(kiln_graph *g, int node)
{
    kiln_node_set_int(g, node, "alpha", 1);
}
static void set_celu_zero(kiln_graph *g, int node)
{
    kiln_node_set_float(g, node, "alpha", 0.0f);
}
static void set_detect_float(kiln_graph *g, int node)
{
    kiln_node_set_float(g, node, "detect_negative", 1.0f);
}
static void set_lambd_string(kiln_graph *g, int node)
{
    kiln_node_set_string(g, node, "lambd", "0.5");
}

static void test_unary_attrs(void **state)
{
    (void)state;
    in_spec x = {F32, ks(1, 3)};
    expect_err(infer(KILN_OP_GELU, 1, &x, set_gelu_bad), KILN_ERR_INVALID_ARGUMENT,
               "approximate");
    expect_err(infer(KILN_OP_ELU, 1, &x, set_alpha_int), KILN_ERR_TYPE_MISMATCH, "alpha");
    expect_err(infer(KILN_OP_CELU, 1, &x, set_celu_zero), KILN_ERR_INVALID_ARGUMENT, "alpha");
    expect_err(infer(KILN_OP_ISINF, 1, &x, set_detect_float), KILN_ERR_TYPE_MISMATCH,
               "detect_negative");
    expect_err(infer(KILN_OP_SHRINK, 1, &x, set_lambd_string), KILN_ERR_TYPE_MISMATCH, "lambd");
}

static void set_fmod_2(kiln_graph *g, int node)
{
    kiln_node_set_int(g, node, "fmod", 2);
}
static void set_left(kiln_graph *g, int node)
{
    kiln_node_set_string(g, node, "direction", "LEFT");
}
static void set_sideways(kiln_graph *g, int node)
{
    kiln_node_set_string(g, node, "direction", "SIDEWAYS");
}

static void test_binary(void **state)
{
    (void)state;
    in_spec u[2] = {{U8, ks(2, 4, 1)}, {U8, ks(1, 3)}};
    expect_ok(infer(KILN_OP_ADD, 2, u, NULL), U8, ks(2, 4, 3));
    expect_ok(infer(KILN_OP_MOD, 2, u, NULL), U8, ks(2, 4, 3));
    expect_err(infer(KILN_OP_MOD, 2, u, set_fmod_2), KILN_ERR_INVALID_ARGUMENT, "fmod");
    expect_ok(infer(KILN_OP_BITSHIFT, 2, u, set_left), U8, ks(2, 4, 3));
    expect_err(infer(KILN_OP_BITSHIFT, 2, u, NULL), KILN_ERR_INVALID_ARGUMENT, "direction");
    expect_err(infer(KILN_OP_BITSHIFT, 2, u, set_sideways), KILN_ERR_INVALID_ARGUMENT,
               "SIDEWAYS");
    in_spec s[2] = {{I32, ks(1, 3)}, {I32, ks(1, 3)}};
    expect_err(infer(KILN_OP_BITSHIFT, 2, s, set_left), KILN_ERR_TYPE_MISMATCH, "unsigned");
    /* Pow: base type kept, any numeric exponent */
    in_spec p[2] = {{I32, ks(1, 3)}, {F16, (kiln_shape){.rank = 0}}};
    expect_ok(infer(KILN_OP_POW, 2, p, NULL), I32, ks(1, 3));
    /* PRelu: slope broadcasts to X */
    in_spec pr[2] = {{F32, ks(4, 2, 3, 4, 5)}, {F32, ks(3, 3, 1, 1)}};
    expect_ok(infer(KILN_OP_PRELU, 2, pr, NULL), F32, ks(4, 2, 3, 4, 5));
    in_spec pr_bad[2] = {{F32, ks(2, 3, 1)}, {F32, ks(2, 3, 4)}};
    expect_err(infer(KILN_OP_PRELU, 2, pr_bad, NULL), KILN_ERR_SHAPE_MISMATCH, "slope");
    /* one dtype on both sides */
    in_spec mixed[2] = {{F64, ks(1, 3)}, {F32, ks(1, 3)}};
    expect_err(infer(KILN_OP_MOD, 2, mixed, NULL), KILN_ERR_TYPE_MISMATCH, "float64");
}

static void test_variadic(void **state)
{
    (void)state;
    in_spec three[3] = {{F32, ks(3, 2, 1, 4)}, {F32, ks(2, 3, 1)}, {F32, (kiln_shape){.rank = 0}}};
    expect_ok(infer(KILN_OP_MAX, 3, three, NULL), F32, ks(3, 2, 3, 4));
    expect_ok(infer(KILN_OP_MEAN, 3, three, NULL), F32, ks(3, 2, 3, 4));
    expect_ok(infer(KILN_OP_SUM, 1, three, NULL), F32, ks(3, 2, 1, 4));
    in_spec bad[3] = {{F32, ks(1, 4)}, {F32, ks(1, 4)}, {F32, ks(1, 3)}};
    expect_err(infer(KILN_OP_MIN, 3, bad, NULL), KILN_ERR_SHAPE_MISMATCH, "[3]");
    in_spec mixed[2] = {{F32, ks(1, 4)}, {F16, ks(1, 4)}};
    expect_err(infer(KILN_OP_SUM, 2, mixed, NULL), KILN_ERR_TYPE_MISMATCH, "input 1");
    in_spec ints[2] = {{I32, ks(1, 4)}, {I32, ks(1, 4)}};
    expect_ok(infer(KILN_OP_MIN, 2, ints, NULL), I32, ks(1, 4));
    expect_err(infer(KILN_OP_MEAN, 2, ints, NULL), KILN_ERR_TYPE_MISMATCH, "int32");
}

static void test_compare_logic_where(void **state)
{
    (void)state;
    in_spec c[2] = {{F64, ks(2, 3, 1)}, {F64, ks(1, 5)}};
    expect_ok(infer(KILN_OP_GREATEROREQUAL, 2, c, NULL), BOOL, ks(2, 3, 5));
    expect_ok(infer(KILN_OP_EQUAL, 2, c, NULL), BOOL, ks(2, 3, 5));
    in_spec cm[2] = {{F64, ks(1, 5)}, {I32, ks(1, 5)}};
    expect_err(infer(KILN_OP_LESS, 2, cm, NULL), KILN_ERR_TYPE_MISMATCH, "int32");
    in_spec l[2] = {{BOOL, ks(1, 5)}, {BOOL, (kiln_shape){.rank = 0}}};
    expect_ok(infer(KILN_OP_XOR, 2, l, NULL), BOOL, ks(1, 5));
    in_spec lb[2] = {{BOOL, ks(1, 5)}, {U8, ks(1, 5)}};
    expect_err(infer(KILN_OP_AND, 2, lb, NULL), KILN_ERR_TYPE_MISMATCH, "uint8");

    in_spec w[3] = {{BOOL, ks(3, 2, 1, 1)}, {I32, ks(1, 4)}, {I32, ks(2, 3, 1)}};
    expect_ok(infer(KILN_OP_WHERE, 3, w, NULL), I32, ks(3, 2, 3, 4));
    in_spec wc[3] = {{U8, ks(1, 4)}, {I32, ks(1, 4)}, {I32, ks(1, 4)}};
    expect_err(infer(KILN_OP_WHERE, 3, wc, NULL), KILN_ERR_TYPE_MISMATCH, "condition");
    in_spec wt[3] = {{BOOL, ks(1, 4)}, {I32, ks(1, 4)}, {F32, ks(1, 4)}};
    expect_err(infer(KILN_OP_WHERE, 3, wt, NULL), KILN_ERR_TYPE_MISMATCH, "one type");
    in_spec ws[3] = {{BOOL, ks(1, 2)}, {I32, ks(1, 4)}, {I32, ks(1, 4)}};
    expect_err(infer(KILN_OP_WHERE, 3, ws, NULL), KILN_ERR_SHAPE_MISMATCH, "[2]");
}

static void set_to_f16(kiln_graph *g, int node)
{
    kiln_node_set_int(g, node, "to", KILN_DTYPE_FLOAT16);
}
static void set_to_zero(kiln_graph *g, int node)
{
    kiln_node_set_int(g, node, "to", 0);
}
static void set_to_big(kiln_graph *g, int node)
{
    kiln_node_set_int(g, node, "to", KILN_DTYPE_COUNT);
}
static void set_to_string(kiln_graph *g, int node)
{
    kiln_node_set_string(g, node, "to", "float");
}

static void test_cast(void **state)
{
    (void)state;
    in_spec x = {KILN_DTYPE_INT64, ks(2, 2, 3)};
    expect_ok(infer(KILN_OP_CAST, 1, &x, set_to_f16), F16, ks(2, 2, 3));
    expect_err(infer(KILN_OP_CAST, 1, &x, NULL), KILN_ERR_INVALID_ARGUMENT, "missing");
    expect_err(infer(KILN_OP_CAST, 1, &x, set_to_zero), KILN_ERR_INVALID_ARGUMENT, "'to'");
    expect_err(infer(KILN_OP_CAST, 1, &x, set_to_big), KILN_ERR_INVALID_ARGUMENT, "'to'");
    expect_err(infer(KILN_OP_CAST, 1, &x, set_to_string), KILN_ERR_TYPE_MISMATCH, "to");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),    cmocka_unit_test(test_unary_attrs),
        cmocka_unit_test(test_binary),   cmocka_unit_test(test_variadic),
        cmocka_unit_test(test_compare_logic_where), cmocka_unit_test(test_cast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
