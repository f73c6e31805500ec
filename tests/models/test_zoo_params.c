/* tests/models/test_zoo_params.c: every zoo network, built without weights,
 * has torchvision's exact parameter count, the expected input and output
 * shapes, validates, and has the reference multiply-accumulate count (within
 * 2%). Also the zoo table itself, names and the no-weights contract. */
#include <stdio.h>
#include <string.h>

#include "import/zoo/builder.h"
#include "ir/graph.h"
#include "test_support.h"

typedef struct expect {
    const char *name;
    int64_t params; /* torchvision's sum of p.numel() */
    kiln_shape input, output;
    double gmacs; /* reference figure */
    const char *some_const; /* a torchvision-named weight that must exist */
    int n_int_inputs;       /* 0: one float32 input; else that many int64 inputs */
} expect;

#define IMG(h) {.rank = 4, .dims = {1, 3, h, h}}
#define LOGITS(n) {.rank = 2, .dims = {1, n}}

static const expect nets[] = {
    {"resnet-18", 11689512, IMG(224), LOGITS(1000), 1.81, "layer1.0.conv1.weight", 0},
    {"resnet-34", 21797672, IMG(224), LOGITS(1000), 3.66, "layer4.2.bn2.running_var", 0},
    {"resnet-50", 25557032, IMG(224), LOGITS(1000), 4.09, "layer2.0.downsample.0.weight", 0},
    {"vgg-16", 138357544, IMG(224), LOGITS(1000), 15.47, "classifier.6.weight", 0},
    {"mobilenet-v2", 3504872, IMG(224), LOGITS(1000), 0.30, "features.17.conv.2.weight", 0},
    {"squeezenet-1.1", 1235496, IMG(224), LOGITS(1000), 0.35, "features.12.expand3x3.bias", 0},
    {"inception-v3", 23834568, IMG(299), LOGITS(1000), 5.71,
     "Mixed_7c.branch3x3dbl_3b.conv.weight", 0},
    {"vit-b-16", 86567656, IMG(224), LOGITS(1000), 17.56,
     "encoder.layers.encoder_layer_11.self_attention.in_proj_weight", 0},
    /* Hugging Face BertModel(add_pooling_layer=False): 108,891,648 + the
     * pooler's 590,592 = bert-base-uncased's 109,482,240 */
    {"bert-base", 108891648, {.rank = 2, .dims = {1, 128}}, {.rank = 3, .dims = {1, 128, 768}},
     11.17, "encoder.layer.11.attention.self.query.weight", 2},
    {"mlp", 109386, {.rank = 2, .dims = {1, 784}}, LOGITS(10), 109184e-9,
     "fc3.bias", 0},
};
#define N_NETS ((int)(sizeof nets / sizeof nets[0]))

static const kiln_value *find_value(const kiln_graph *g, const char *name)
{
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i]->name, name) == 0)
            return g->values[i];
    return NULL;
}

static void check_net(const expect *x)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    kiln_status s = kiln_zoo_build(x->name, 7, KILN_ZOO_NO_WEIGHTS, &g, &err);
    if (s != KILN_OK)
        fail_msg("%s: %s", x->name, err.msg);
    s = kiln_graph_validate(g, &err);
    if (s != KILN_OK)
        fail_msg("%s: validate: %s", x->name, err.msg);

    /* input / output */
    assert_int_equal(kiln_graph_num_inputs(g), x->n_int_inputs ? x->n_int_inputs : 1);
    assert_int_equal(kiln_graph_num_outputs(g), 1);
    const char *name;
    kiln_dtype dt;
    kiln_shape shape;
    assert_int_equal(kiln_graph_input_info(g, 0, &name, &dt, &shape), KILN_OK);
    assert_int_equal(dt, x->n_int_inputs ? KILN_DTYPE_INT64 : KILN_DTYPE_FLOAT32);
    assert_true(kiln_shape_equal(&shape, &x->input));
    assert_true(kiln_shape_equal(&shape, &kiln_zoo_find(x->name)->input_shape));
    assert_int_equal(kiln_graph_output_info(g, 0, &name, &dt, &shape), KILN_OK);
    assert_int_equal(dt, KILN_DTYPE_FLOAT32);
    assert_true(kiln_shape_equal(&shape, &x->output));

    /* parameters: exactly torchvision's count (rank-0 float constants are
     * operator scalars, ViT's attention scale and GELU constants, which
     * kiln_graph_num_params does not count) */
    int64_t scalars = 0;
    for (int i = 0; i < g->n_values; i++) {
        const kiln_value *v = g->values[i];
        if (v->kind == KILN_VALUE_CONST && v->shape.rank == 0 && v->dtype == KILN_DTYPE_FLOAT32) {
            scalars++;
            assert_non_null(v->data); /* scalars always carry their value */
        } else if (v->kind == KILN_VALUE_CONST) {
            assert_null(v->data); /* KILN_ZOO_NO_WEIGHTS: shapes only */
        }
    }
    int64_t params = kiln_graph_num_params(g);
    if (params != x->params)
        fail_msg("%s: %lld parameters, torchvision has %lld (%lld scalar constants)", x->name,
                 (long long)params, (long long)x->params, (long long)scalars);

    /* multiply-accumulates */
    double gmacs = (double)kiln_graph_macs(g) / 1e9;
    printf("%-15s params %lld  GMACs %.3f (reference %.2f)\n", x->name, (long long)params, gmacs,
           x->gmacs);
    if (gmacs < x->gmacs * 0.98 || gmacs > x->gmacs * 1.02)
        fail_msg("%s: %.4f GMACs, expected %.2f within 2%%", x->name, gmacs, x->gmacs);

    /* torchvision-style names, unique across nodes */
    assert_non_null(find_value(g, x->some_const));
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = i + 1; j < g->n_nodes; j++)
            if (strcmp(g->nodes[i]->name, g->nodes[j]->name) == 0)
                fail_msg("%s: two nodes named '%s'", x->name, g->nodes[i]->name);
    kiln_graph_destroy(g);
}

#define NET_TEST(fn, idx)                                                                         \
    static void fn(void **state)                                                                  \
    {                                                                                             \
        (void)state;                                                                              \
        check_net(&nets[idx]);                                                                    \
    }
NET_TEST(test_resnet18, 0)
NET_TEST(test_resnet34, 1)
NET_TEST(test_resnet50, 2)
NET_TEST(test_vgg16, 3)
NET_TEST(test_mobilenet_v2, 4)
NET_TEST(test_squeezenet11, 5)
NET_TEST(test_inception_v3, 6)
NET_TEST(test_vit_b16, 7)
NET_TEST(test_bert_base, 8)
NET_TEST(test_mlp, 9)

static void test_zoo_table(void **state)
{
    (void)state;
    assert_int_equal(kiln_zoo_count(), N_NETS);
    for (int i = 0; i < N_NETS; i++) {
        const kiln_zoo_info *info = kiln_zoo_find(nets[i].name);
        assert_non_null(info);
        assert_string_equal(info->name, nets[i].name);
        assert_non_null(info->description);
    }
    assert_null(kiln_zoo_get(-1));
    assert_null(kiln_zoo_get(N_NETS));
    assert_null(kiln_zoo_find("resnet-19"));
    assert_null(kiln_zoo_find(NULL));

    kiln_graph *g = (kiln_graph *)0x1;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("no-such-net", 0, 0, &g, &err), KILN_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no-such-net"));
    assert_ptr_equal(g, (kiln_graph *)0x1); /* untouched on failure */
    assert_int_equal(kiln_zoo_build(NULL, 0, 0, &g, NULL), KILN_ERR_NOT_FOUND);
}

/* The mlp's layer attributes, as a spot check of what the builder emits. */
static void test_mlp_structure(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_zoo_build("mlp", 1, 0, &g, NULL), KILN_OK);
    assert_int_equal(g->n_nodes, 5);
    static const kiln_op ops[5] = {KILN_OP_GEMM, KILN_OP_RELU, KILN_OP_GEMM, KILN_OP_RELU,
                                   KILN_OP_GEMM};
    for (int i = 0; i < 5; i++)
        assert_int_equal(g->nodes[i]->op, ops[i]);
    assert_int_equal(kiln_attr_int(g->nodes[0], "transB", 0), 1);
    const kiln_value *w = find_value(g, "fc1.weight");
    assert_non_null(w);
    assert_int_equal(w->shape.rank, 2);
    assert_int_equal(w->shape.dims[0], 128); /* [out, in] as torchvision */
    assert_int_equal(w->shape.dims[1], 784);
    assert_non_null(w->data);
    /* He-uniform: |w| <= sqrt(6 / 784) */
    const float *d = w->data;
    float bound = 0.0875f, mx = 0.0f;
    for (int i = 0; i < 128 * 784; i++)
        mx = d[i] > mx ? d[i] : (-d[i] > mx ? -d[i] : mx);
    assert_true(mx <= bound && mx > 0.8f * bound);
    kiln_graph_destroy(g);
}

/* The builder's sticky status: a shape error is reported once, with the layer
 * name, and every later call is a no-op returning -1. */
static void test_builder_sticky_error(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_rng rng;
    kiln_rng_seed(&rng, 1);
    kiln_error err = {0};
    zb b;
    zb_init(&b, g, &rng, true, &err);
    int x = zb_input(&b, "input", ks(4, 1, 3, 8, 8));
    int y = zb_conv(&b, "conv_ok", x, 4, 3, 1, 1, 1, true);
    assert_true(y >= 0);
    assert_int_equal(zb_dim(&b, y, 1), 4);
    assert_int_equal(zb_dim(&b, y, -1), 8);
    int n_values = g->n_values;
    assert_int_equal(zb_conv(&b, "bad_groups", x, 4, 3, 1, 1, 2, false), -1);
    assert_int_equal(b.status, KILN_ERR_INTERNAL);
    assert_int_equal(g->n_values, n_values); /* nothing half-built */
    assert_int_equal(zb_relu(&b, "after", y), -1);
    assert_int_equal(zb_add(&b, "after_add", y, y), -1);
    assert_int_equal(g->n_values, n_values);
    assert_int_equal(zb_finish(&b, y), KILN_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "bad_groups"));
    assert_int_equal(g->n_outputs, 0);
    kiln_graph_destroy(g);

    /* shapes that do not broadcast, and a -1 input */
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    zb_init(&b, g, &rng, false, NULL);
    x = zb_input(&b, "input", ks(2, 1, 5));
    int w = zb_param(&b, "w", ks(2, 1, 4), -1.0f, 1.0f);
    assert_int_equal(zb_add(&b, "mismatch", x, w), -1);
    assert_int_equal(zb_finish(&b, -1), KILN_ERR_INTERNAL);
    kiln_graph_destroy(g);

    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    zb_init(&b, g, &rng, false, &err);
    assert_int_equal(zb_relu(&b, "dangling", -1), -1);
    assert_int_equal(zb_finish(&b, -1), KILN_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "dangling"));
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zoo_table),    cmocka_unit_test(test_mlp_structure),
        cmocka_unit_test(test_builder_sticky_error),
        cmocka_unit_test(test_resnet18),     cmocka_unit_test(test_resnet34),
        cmocka_unit_test(test_resnet50),     cmocka_unit_test(test_vgg16),
        cmocka_unit_test(test_mobilenet_v2), cmocka_unit_test(test_squeezenet11),
        cmocka_unit_test(test_inception_v3), cmocka_unit_test(test_vit_b16),
        cmocka_unit_test(test_bert_base),   cmocka_unit_test(test_mlp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
