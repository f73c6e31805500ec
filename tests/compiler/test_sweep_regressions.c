/* tests/compiler/test_sweep_regressions.c: what the torchvision sweep
 * (scripts/sweep_torchvision.py, docs/SWEEP.md) found, one case per pattern:
 *  - Resize of the last two dims (segmentation heads: FCN, DeepLabV3,
 *    LR-ASPP upsample their logits with linear half_pixel) runs on the resize
 *    template, not the reference fallback, in every mode (nearest with each
 *    rounding, linear, cubic with and without exclude_outside) and
 *    coordinate transformation but tf_crop_and_resize, up and down, by
 *    scales and by sizes, on rank 3 and 4, and matches the reference
 *    executor; a Resize of a leading dim and tf_crop_and_resize stay
 *    fallbacks and still match. */
#include "compiler_test.h"

static char *dir;

static bool pick_resize(const kiln_pass_ctx *ctx, const kiln_task *t)
{
    return ctx->g->nodes[t->anchor]->op == KILN_OP_RESIZE;
}

typedef struct resize_case {
    const char *mode, *coord, *nearest;
    int exclude_outside;
    kiln_shape x;
    float scales[4]; /* all 0: sizes */
    int64_t sizes[4];
    const char *want_tpl;
} resize_case;

static void test_resize_template(void **state)
{
    (void)state;
    static const resize_case cases[] = {
        {"linear", "half_pixel", NULL, 0, {4, {1, 3, 7, 9}}, {1, 1, 2, 2}, {0}, "resize"},
        {"linear", "half_pixel", NULL, 0, {4, {1, 2, 4, 4}}, {0}, {1, 2, 32, 32}, "resize"},
        {"linear", "align_corners", NULL, 0, {4, {2, 3, 5, 6}}, {0}, {2, 3, 11, 4}, "resize"},
        {"linear", "pytorch_half_pixel", NULL, 0, {4, {1, 2, 9, 7}}, {1, 1, 0.5f, 0.34f}, {0},
         "resize"},
        {"linear", "asymmetric", NULL, 0, {3, {2, 5, 6}}, {1, 1.6f, 2.5f}, {0}, "resize"},
        {"nearest", "asymmetric", "floor", 0, {4, {1, 3, 5, 5}}, {1, 1, 2, 3}, {0}, "resize"},
        {"nearest", "half_pixel", "round_prefer_floor", 0, {4, {1, 2, 6, 7}}, {0},
         {1, 2, 9, 3}, "resize"},
        {"nearest", "tf_half_pixel_for_nn", "ceil", 0, {4, {1, 2, 6, 7}}, {1, 1, 1.5f, 0.6f},
         {0}, "resize"},
        {"nearest", "align_corners", "round_prefer_ceil", 0, {4, {1, 1, 4, 5}}, {0},
         {1, 1, 7, 8}, "resize"},
        {"cubic", "half_pixel", NULL, 0, {4, {1, 2, 5, 6}}, {1, 1, 2, 1.5f}, {0}, "resize"},
        {"cubic", "align_corners", NULL, 1, {4, {1, 2, 8, 6}}, {0}, {1, 2, 3, 13}, "resize"},
        /* not the template's: a leading dim resized, tf_crop_and_resize */
        {"linear", "half_pixel", NULL, 0, {4, {1, 3, 4, 4}}, {1, 2, 2, 2}, {0}, "ref"},
        {"linear", "tf_crop_and_resize", NULL, 0, {4, {1, 2, 5, 5}}, {1, 1, 2, 2}, {0}, "ref"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const resize_case *rc = &cases[c];
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &rc->x);
        int rs = kiln_graph_add_node(g, KILN_OP_RESIZE, "resize", &x, 1, 1);
        assert_true(rs >= 0);
        assert_int_equal(kiln_node_set_string(g, rs, "mode", rc->mode), KILN_OK);
        assert_int_equal(kiln_node_set_string(g, rs, "coordinate_transformation_mode", rc->coord),
                         KILN_OK);
        if (rc->nearest)
            assert_int_equal(kiln_node_set_string(g, rs, "nearest_mode", rc->nearest), KILN_OK);
        assert_int_equal(kiln_node_set_int(g, rs, "exclude_outside", rc->exclude_outside),
                         KILN_OK);
        if (rc->scales[0] != 0.0f)
            assert_int_equal(kiln_node_set_floats(g, rs, "scales", rc->scales, rc->x.rank),
                             KILN_OK);
        else
            assert_int_equal(kiln_node_set_ints(g, rs, "sizes", rc->sizes, rc->x.rank), KILN_OK);
        if (!strcmp(rc->coord, "tf_crop_and_resize")) {
            float roi[8] = {0, 0, 0.1f, 0.2f, 1, 1, 0.8f, 1.2f};
            assert_int_equal(kiln_node_set_floats(g, rs, "roi", roi, 8), KILN_OK);
            assert_int_equal(kiln_node_set_float(g, rs, "extrapolation_value", 0.5f), KILN_OK);
        }
        int y = kiln_graph_node_output(g, rs, 0);
        int relu = kiln_graph_add_node(g, KILN_OP_RELU, "relu", &y, 1, 1);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, relu, 0)), KILN_OK);
        kiln_error err = {0};
        if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
            fail_msg("case %d: infer: %s", c, err.msg);
        char name[64], tag[32];
        ct_template_of(g, c, pick_resize, name, sizeof name);
        if (strcmp(name, rc->want_tpl))
            fail_msg("case %d (%s %s): Resize ran on '%s', want '%s'", c, rc->mode, rc->coord,
                     name, rc->want_tpl);
        snprintf(tag, sizeof tag, "resize%d", c);
        ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)c, 1e-5, 1e-6);
        kiln_graph_destroy(g);
    }
}

int main(void)
{
    dir = kt_tempdir();
    setenv("XDG_CACHE_HOME", dir, 1); /* a private object cache */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_template),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
