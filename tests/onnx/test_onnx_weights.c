/* tests/onnx/test_onnx_weights.c: how the importer handles a model's bytes
 * and weights:
 * - model files are mapped, not read (kiln_file_map);
 * - an initializer is copied once into its graph constant, and a model that
 *   stays the caller's (kiln_onnx_load_proto, the VM's) lends its large
 *   raw_data in place;
 * - the graph inputs are checked before any initializer is decoded, so a
 *   model with a symbolic input dim (which the VM then opens) fails before
 *   its weights are copied (onnx_check_inputs_early). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/onnx_build.h"
#include "import/onnx/onnx.h"
#include "kiln/kiln.h"
#include "util/file.h"
#include "vm/vm.h"

enum { K = 128, N = 256 }; /* W: 128 KiB, above the lending threshold */

/* y = MatMul(x, W) + b, x [rows, K] (rows symbolic when rows < 0), W [K, N]
 * and b [N] initializers; list_w: W is also a graph input, with a symbolic
 * first dim (old exporters list the weights as inputs). w_bytes: W's
 * raw_data length (a wrong one makes a malformed initializer). Returns the
 * packed model (malloc'ed) and its size. */
static uint8_t *build(int64_t rows, bool list_w, size_t w_bytes, float *w, float *b,
                      size_t *size)
{
    static vi_store sx, sy, sw;
    int64_t xd[2] = {rows, K}, yd[2] = {rows, N}, wd[2] = {-1, N};
    static int64_t wdims[2] = {K, N}, bdims[1] = {N};
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi(&sx, "x", KILN_DTYPE_FLOAT32, 2, xd),
                                    kt_onnx_vi(&sw, "W", KILN_DTYPE_FLOAT32, 2, wd)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&sy, "y", KILN_DTYPE_FLOAT32, 2, yd)};
    static Onnx__NodeProto mm, add;
    static char *mm_in[2] = {"x", "W"}, *mm_out[1] = {"xw"}, *add_in[2] = {"xw", "b"},
                *add_out[1] = {"y"};
    kt_onnx_node(&mm, "MatMul", mm_in, 2, mm_out, 1);
    kt_onnx_node(&add, "Add", add_in, 2, add_out, 1);
    Onnx__NodeProto *nodes[2] = {&mm, &add};
    static Onnx__TensorProto tw, tb;
    kt_onnx_init_f32(&tw, "W", 2, wdims, w, K * N);
    tw.raw_data.len = w_bytes;
    kt_onnx_init_f32(&tb, "b", 1, bdims, b, N);
    Onnx__TensorProto *inits[2] = {&tw, &tb};
    Onnx__GraphProto g;
    kt_onnx_graph(&g, "weights", nodes, 2, ins, list_w ? 2 : 1, outs, 1);
    g.n_initializer = 2;
    g.initializer = inits;
    return kt_onnx_pack(&g, 17, size);
}

static float g_w[K * N], g_b[N];

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < K * N; i++)
        g_w[i] = (float)((i * 7) % 13) - 6.0f;
    for (int i = 0; i < N; i++)
        g_b[i] = 0.5f * (float)i;
    return 0;
}

static const kiln_value *const_named(const kiln_graph *g, const char *name)
{
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->kind == KILN_VALUE_CONST && !strcmp(g->values[i]->name, name))
            return g->values[i];
    return NULL;
}

static const Onnx__TensorProto *init_named(const Onnx__ModelProto *m, const char *name)
{
    for (size_t i = 0; i < m->graph->n_initializer; i++)
        if (!strcmp(m->graph->initializer[i]->name, name))
            return m->graph->initializer[i];
    return NULL;
}

/* A symbolic input fails before the initializers: even a malformed one is
 * not reached; bound to a shape, the same bytes import, or report the
 * initializer. */
static void test_inputs_first(void **state)
{
    (void)state;
    size_t size;
    uint8_t *bad = build(-1, false, 100, g_w, g_b, &size);
    kiln_graph *g = NULL;
    kiln_error err = {0};
    kiln_status s = kiln_onnx_load_buffer_ex(bad, size, NULL, NULL, &g, &err);
    assert_int_not_equal(s, KILN_OK);
    assert_non_null(strstr(err.msg, "symbolic dimension"));
    assert_true(kiln_vm_needed(s, err.msg));
    assert_int_equal(onnx_check_inputs_early(bad, size, &(kiln_onnx_options){0}, &err), s);

    kiln_shape bound = {.rank = 2, .dims = {3, K}};
    kiln_onnx_binding bind = {.name = "x", .shape = &bound};
    kiln_onnx_options o = {.bindings = &bind, .n_bindings = 1};
    assert_int_equal(onnx_check_inputs_early(bad, size, &o, &err), KILN_OK);
    s = kiln_onnx_load_buffer_ex(bad, size, NULL, &o, &g, &err);
    assert_int_equal(s, KILN_ERR_PARSE);
    assert_non_null(strstr(err.msg, "initializer 'W'"));
    free(bad);

    uint8_t *good = build(-1, false, sizeof g_w, g_w, g_b, &size);
    assert_int_equal(kiln_onnx_load_buffer_ex(good, size, NULL, &o, &g, &err), KILN_OK);
    kiln_shape sh;
    assert_int_equal(kiln_graph_output_info(g, 0, NULL, NULL, &sh), KILN_OK);
    assert_true(sh.rank == 2 && sh.dims[0] == 3 && sh.dims[1] == N);
    kiln_graph_destroy(g);
    /* a binding naming no input is reported first, as before */
    kiln_onnx_binding nope = {.name = "nope", .shape = &bound};
    kiln_onnx_options on = {.bindings = &nope, .n_bindings = 1};
    assert_int_equal(kiln_onnx_load_buffer_ex(good, size, NULL, &on, &g, &err),
                     KILN_ERR_NOT_FOUND);
    free(good);
}

/* A weight listed as a graph input with a symbolic dim is a constant: the
 * early check does not call it symbolic, and a static model imports. */
static void test_listed_weights(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = build(4, true, sizeof g_w, g_w, g_b, &size);
    kiln_error err = {0};
    assert_int_equal(onnx_check_inputs_early(buf, size, &(kiln_onnx_options){0}, &err), KILN_OK);
    kiln_graph *g = NULL;
    if (kiln_onnx_load_buffer_ex(buf, size, NULL, NULL, &g, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(kiln_graph_num_inputs(g), 1);
    kiln_graph_destroy(g);
    free(buf);
    /* garbage is left to the decode, which names the problem */
    uint8_t junk[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(onnx_check_inputs_early(junk, sizeof junk, &(kiln_onnx_options){0}, &err),
                     KILN_OK);
    assert_int_equal(kiln_onnx_load_buffer_ex(junk, sizeof junk, NULL, NULL, &g, &err),
                     KILN_ERR_PARSE);
}

/* The weights are copied once into the graph, or, from a model that stays
 * the caller's, lent: the constant's data is the model's raw_data. A small
 * one (the bias) is copied either way. */
static void test_lent_weights(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = build(2, false, sizeof g_w, g_w, g_b, &size);
    kiln_error err = {0};
    Onnx__ModelProto *m = NULL;
    assert_int_equal(onnx_decode_model(buf, size, &m, &err), KILN_OK);
    const Onnx__TensorProto *tw = init_named(m, "W"), *tb = init_named(m, "b");
    assert_true(tw && tb && (uintptr_t)tw->raw_data.data % 64 == 0);

    kiln_graph *g = NULL;
    if (kiln_onnx_load_proto(m, NULL, NULL, &g, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    const kiln_value *w = const_named(g, "W"), *b = const_named(g, "b");
    assert_true(w && b);
    assert_ptr_equal(w->data, tw->raw_data.data);
    assert_ptr_not_equal(b->data, tb->raw_data.data);
    assert_memory_equal(b->data, g_b, sizeof g_b);
    /* the model is untouched: a second import lends the same bytes */
    kiln_graph *g2 = NULL;
    assert_int_equal(kiln_onnx_load_proto(m, NULL, NULL, &g2, &err), KILN_OK);
    assert_ptr_equal(const_named(g2, "W")->data, tw->raw_data.data);
    assert_memory_equal(tw->raw_data.data, g_w, sizeof g_w);
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g);
    onnx_free_model(m);

    /* from bytes: the graph owns a copy */
    assert_int_equal(kiln_onnx_load_buffer_ex(buf, size, NULL, NULL, &g, &err), KILN_OK);
    w = const_named(g, "W");
    assert_non_null(w);
    assert_true(w->data < (void *)buf || w->data >= (void *)(buf + size));
    assert_memory_equal(w->data, g_w, sizeof g_w);
    kiln_graph_destroy(g);
    free(buf);
}

/* Model files are mapped; what cannot be mapped is read; the errors are
 * kiln_file_read's. */
static void test_file_map(void **state)
{
    (void)state;
    char *dir = kt_tempdir();
    assert_non_null(dir);
    char path[512], empty[512];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    snprintf(empty, sizeof empty, "%s/empty.bin", dir);
    kiln_error err = {0};
    assert_int_equal(kiln_file_write(path, g_w, sizeof g_w, &err), KILN_OK);
    assert_int_equal(kiln_file_write(empty, "", 0, &err), KILN_OK);

    kiln_file_bytes fb;
    assert_int_equal(kiln_file_map(path, SIZE_MAX, &fb, &err), KILN_OK);
    assert_true(fb.mapped);
    assert_int_equal(fb.size, sizeof g_w);
    assert_memory_equal(fb.data, g_w, sizeof g_w);
    kiln_file_release(&fb);
    assert_null(fb.data);

    assert_int_equal(kiln_file_map(empty, SIZE_MAX, &fb, &err), KILN_OK);
    assert_false(fb.mapped);
    assert_int_equal(fb.size, 0);
    kiln_file_release(&fb);

    assert_int_equal(kiln_file_map(path, 1000, &fb, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "1000-byte limit"));
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.onnx", dir);
    assert_int_equal(kiln_file_map(missing, SIZE_MAX, &fb, &err), KILN_ERR_IO);
    assert_non_null(strstr(err.msg, "none.onnx"));
    assert_null(fb.data);
    kt_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs_first),
        cmocka_unit_test(test_listed_weights),
        cmocka_unit_test(test_lent_weights),
        cmocka_unit_test(test_file_map),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
