/* tests/onnx/test_onnx_import.c: the ONNX importer on tiny models written by
 * tests/data/onnx/make_onnx_fixtures.py: values through the reference
 * executor against numpy, constant folding of exporter shape arithmetic,
 * external data, caller bindings, and the messages of every failure path
 * (unsupported op, unknown or wrong-typed attribute, truncated and garbled
 * files, hostile nesting, external data escaping its directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "ir/graph.h"
#include "test_support.h"
#include "util/file.h"

#define DATA KILN_TEST_DATA_DIR "/onnx/"

static kiln_graph *load_ok(const char *model)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    char path[512];
    snprintf(path, sizeof path, DATA "%s/model.onnx", model);
    kiln_status s = kiln_onnx_load(path, &g, &err);
    if (s != KILN_OK)
        fail_msg("%s: %s", path, err.msg);
    assert_non_null(g);
    return g;
}

/* Runs `g` on DATA/<model>/input_K.pb and compares with output_K.pb. */
static void run_and_compare(kiln_graph *g, const char *model, double rtol, double atol)
{
    kiln_error err = {0};
    kiln_ref_executor *ex = NULL;
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("%s: executor: %s", model, err.msg);
    char path[512];
    for (int i = 0; i < kiln_graph_num_inputs(g); i++) {
        kiln_tensor t = {0};
        snprintf(path, sizeof path, DATA "%s/input_%d.pb", model, i);
        if (kiln_tensor_read(path, &t, NULL, &err) != KILN_OK)
            fail_msg("%s", err.msg);
        if (kiln_ref_executor_set_input(ex, i, &t, &err) != KILN_OK)
            fail_msg("%s: %s", model, err.msg);
        kiln_tensor_release(&t);
    }
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("%s: run: %s", model, err.msg);
    for (int i = 0; i < kiln_graph_num_outputs(g); i++) {
        kiln_tensor want = {0};
        snprintf(path, sizeof path, DATA "%s/output_%d.pb", model, i);
        if (kiln_tensor_read(path, &want, NULL, &err) != KILN_OK)
            fail_msg("%s", err.msg);
        const kiln_tensor *got = kiln_ref_executor_output(ex, i);
        assert_non_null(got);
        assert_int_equal(got->dtype, KILN_DTYPE_FLOAT32);
        assert_true(kiln_shape_equal(&got->shape, &want.shape));
        assert_allclose(got->data, want.data, kiln_shape_numel(&want.shape), rtol, atol);
        kiln_tensor_release(&want);
    }
    kiln_ref_executor_destroy(ex);
}

static void check_model(const char *model)
{
    kiln_graph *g = load_ok(model);
    run_and_compare(g, model, 1e-5, 1e-6);
    kiln_graph_destroy(g);
}

static void test_conv_relu(void **state)
{
    (void)state;
    kiln_graph *g = load_ok("conv_relu");
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[0]->op, KILN_OP_CONV);
    assert_int_equal(g->nodes[1]->op, KILN_OP_RELU);
    const int64_t *pads = NULL;
    assert_int_equal(kiln_attr_ints(g->nodes[0], "pads", &pads), 4);
    assert_int_equal(pads[0], 1);
    const char *name = NULL;
    assert_int_equal(kiln_graph_output_info(g, 0, &name, NULL, NULL), KILN_OK);
    assert_string_equal(name, "y");
    assert_int_equal(kiln_graph_num_params(g), 3 * 2 * 3 * 3 + 3);
    run_and_compare(g, "conv_relu", 1e-5, 1e-6);
    kiln_graph_destroy(g);
}

static void test_gemm(void **state)
{
    (void)state;
    check_model("gemm");
}

/* ViT's shape arithmetic folds away: only the data path stays. */
static void test_vit_shape_chain_folds(void **state)
{
    (void)state;
    kiln_graph *g = load_ok("vit_chain");
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_op op = g->nodes[i]->op;
        if (op != KILN_OP_CONCAT && op != KILN_OP_RESHAPE && op != KILN_OP_SLICE)
            fail_msg("node '%s' (%s) survived folding", g->nodes[i]->name, kiln_op_name(op));
    }
    assert_int_equal(g->n_nodes, 5); /* Concat, Reshape, Slice, Unsqueeze+Squeeze as Reshape */
    /* the expanded class token is the only constant left */
    assert_int_equal(kiln_graph_num_params(g), 4);
    const int64_t *shape = NULL;
    const kiln_node *rs = g->nodes[1];
    assert_int_equal(rs->op, KILN_OP_RESHAPE);
    assert_int_equal(kiln_attr_ints(rs, "shape", &shape), 4);
    assert_true(shape[0] == 1 && shape[1] == 7 && shape[2] == 2 && shape[3] == 2);
    const int64_t *ends = NULL;
    assert_int_equal(kiln_attr_ints(g->nodes[2], "ends", &ends), 1);
    assert_int_equal(ends[0], 1); /* (2 + 2) / 3 */
    run_and_compare(g, "vit_chain", 0, 0);
    kiln_graph_destroy(g);
}

static void test_old_opsets(void **state)
{
    (void)state;
    kiln_graph *g = load_ok("old_opsets");
    /* Softmax(axis=1) at opset 11 coerces to 2-D: Flatten, Softmax, Reshape */
    assert_int_equal(g->nodes[0]->op, KILN_OP_FLATTEN);
    assert_int_equal(g->nodes[1]->op, KILN_OP_SOFTMAX);
    assert_int_equal(g->nodes[2]->op, KILN_OP_RESHAPE);
    /* Clip's constant inputs became attributes; Dropout vanished */
    assert_int_equal(g->nodes[3]->op, KILN_OP_CLIP);
    assert_true(kiln_attr_float(g->nodes[3], "max", 0) == 0.2f);
    assert_int_equal(g->nodes[4]->op, KILN_OP_PAD);
    assert_true(kiln_attr_float(g->nodes[4], "value", 0) == 0.5f);
    run_and_compare(g, "old_opsets", 1e-5, 1e-6);
    kiln_graph_destroy(g);
}

static void test_slice_v1(void **state)
{
    (void)state;
    check_model("slice_v1");
}

static void test_external_data(void **state)
{
    (void)state;
    check_model("external_data");
    /* from memory, the external file cannot be found */
    void *buf = NULL;
    size_t size = 0;
    assert_int_equal(kiln_file_read(DATA "external_data/model.onnx", 1 << 20, &buf, &size, NULL),
                     KILN_OK);
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_onnx_load_buffer(buf, size, NULL, &g, &err), KILN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "external"));
    assert_null(g);
    assert_int_equal(kiln_onnx_load_buffer(buf, size, DATA "external_data", &g, &err), KILN_OK);
    kiln_graph_destroy(g);
    free(buf);
}

static void expect_error(const char *model, kiln_status want, const char *const *needles)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    char path[512];
    snprintf(path, sizeof path, DATA "%s/model.onnx", model);
    kiln_status s = kiln_onnx_load(path, &g, &err);
    if (s != want)
        fail_msg("%s: status %s, expected %s (%s)", model, kiln_status_str(s),
                 kiln_status_str(want), err.msg);
    assert_null(g);
    for (; *needles; needles++)
        if (!strstr(err.msg, *needles))
            fail_msg("%s: message '%s' lacks '%s'", model, err.msg, *needles);
}

static void test_error_messages(void **state)
{
    (void)state;
    expect_error("unsupported_op", KILN_ERR_UNSUPPORTED,
                 (const char *[]){"unsupported op 'Bernoulli'", "node 'bern_node'",
                                  "opset 13", NULL});
    expect_error("unknown_attr", KILN_ERR_UNSUPPORTED,
                 (const char *[]){"unsupported attribute 'bogus'", "'Relu'", "node 'relu_node'",
                                  "opset 13", NULL});
    expect_error("wrong_attr_type", KILN_ERR_TYPE_MISMATCH,
                 (const char *[]){"node 'conv_node'", "Conv", "attribute 'group' is float",
                                  "expected int", NULL});
    expect_error("dynamic_reshape", KILN_ERR_UNSUPPORTED,
                 (const char *[]){"node 'reshape_node'", "must be a constant", NULL});
    expect_error("symbolic_dim", KILN_ERR_UNSUPPORTED,
                 (const char *[]){"input 'xs'", "symbolic dimension 'N'", NULL});
    expect_error("external_escape", KILN_ERR_PARSE,
                 (const char *[]){"'w'", "leaves the model's directory", NULL});
    expect_error("external_short", KILN_ERR_PARSE,
                 (const char *[]){"'w'", "past the end", NULL});
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_onnx_load(DATA "no_such_model.onnx", &g, &err), KILN_ERR_IO);
}

/* Bindings make the dynamic cases loadable. */
static void test_bindings(void **state)
{
    (void)state;
    int64_t target[2] = {2, 2};
    kiln_tensor shape_t = {.dtype = KILN_DTYPE_INT64, .shape = {.rank = 1, .dims = {2}},
                           .data = target};
    kiln_onnx_binding b1 = {.name = "shape", .value = &shape_t};
    kiln_onnx_options opts = {.bindings = &b1, .n_bindings = 1};
    kiln_graph *g = NULL;
    kiln_error err = {0};
    if (kiln_onnx_load_ex(DATA "dynamic_reshape/model.onnx", &opts, &g, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(kiln_graph_num_inputs(g), 1);
    kiln_shape sh;
    assert_int_equal(kiln_graph_output_info(g, 0, NULL, NULL, &sh), KILN_OK);
    assert_true(sh.rank == 2 && sh.dims[0] == 2 && sh.dims[1] == 2);
    kiln_graph_destroy(g);

    kiln_shape bound = ks(2, 3, 4);
    kiln_onnx_binding b2 = {.name = "xs", .shape = &bound};
    opts.bindings = &b2;
    g = NULL;
    if (kiln_onnx_load_ex(DATA "symbolic_dim/model.onnx", &opts, &g, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(kiln_graph_input_info(g, 0, NULL, NULL, &sh), KILN_OK);
    assert_true(kiln_shape_equal(&sh, &bound));
    kiln_graph_destroy(g);

    kiln_onnx_binding b3 = {.name = "nope", .shape = &bound};
    opts.bindings = &b3;
    g = NULL;
    assert_int_equal(kiln_onnx_load_ex(DATA "symbolic_dim/model.onnx", &opts, &g, &err),
                     KILN_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "'nope'"));
}

static void test_truncated_and_garbled(void **state)
{
    (void)state;
    void *buf = NULL;
    size_t size = 0;
    assert_int_equal(kiln_file_read(DATA "conv_relu/model.onnx", 1 << 20, &buf, &size, NULL),
                     KILN_OK);
    kiln_error err = {0};
    kiln_graph *g = NULL;
    assert_int_equal(kiln_onnx_load_buffer(buf, size / 2, NULL, &g, &err), KILN_ERR_PARSE);
    assert_non_null(strstr(err.msg, "not a valid ONNX model"));
    /* every prefix fails cleanly (the opset import is the last field) */
    for (size_t n = 0; n < size; n++) {
        g = NULL;
        assert_int_not_equal(kiln_onnx_load_buffer(buf, n, NULL, &g, &err), KILN_OK);
        assert_null(g);
    }
    /* flipped bytes: any status, no crash (the sanitizer build checks memory) */
    unsigned char *copy = malloc(size);
    assert_non_null(copy);
    for (size_t i = 0; i < size; i++) {
        memcpy(copy, buf, size);
        copy[i] ^= 0xa5;
        g = NULL;
        if (kiln_onnx_load_buffer(copy, size, NULL, &g, &err) == KILN_OK)
            kiln_graph_destroy(g);
    }
    free(copy);
    free(buf);
    const char garbage[] = "this is not a protobuf \xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
    assert_int_equal(kiln_onnx_load_buffer(garbage, sizeof garbage, NULL, &g, &err),
                     KILN_ERR_PARSE);
}

/* Subgraphs nested 10,000 deep would overflow protobuf-c's recursion. */
static void test_deep_nesting(void **state)
{
    (void)state;
    enum { DEPTH = 10000 };
    /* innermost: an empty GraphProto; wrap as Attribute.g (field 6),
     * Node.attribute (field 5), Graph.node (field 1), ..., Model.graph (7) */
    size_t cap = (size_t)DEPTH * 3 * 8 + 64, len = 0;
    unsigned char *buf = malloc(cap), *tmp = malloc(cap);
    assert_true(buf && tmp);
    static const int fields[3] = {6, 5, 1}; /* into Attribute, Node, Graph */
    for (int level = 0; level < DEPTH * 3; level++) {
        int field = fields[level % 3];
        size_t n = 0;
        tmp[n++] = (unsigned char)(field << 3 | 2);
        size_t v = len;
        do {
            tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            v >>= 7;
        } while (v);
        memcpy(tmp + n, buf, len);
        len += n;
        memcpy(buf, tmp, len);
    }
    /* the outermost level is a Graph: wrap it as Model.graph */
    size_t n = 0;
    tmp[n++] = 7 << 3 | 2;
    size_t v = len;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    memcpy(tmp + n, buf, len);
    len += n;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_onnx_load_buffer(tmp, len, NULL, &g, &err), KILN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "nest"));
    free(buf);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_relu),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_vit_shape_chain_folds),
        cmocka_unit_test(test_old_opsets),
        cmocka_unit_test(test_slice_v1),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_bindings),
        cmocka_unit_test(test_truncated_and_garbled),
        cmocka_unit_test(test_deep_nesting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
