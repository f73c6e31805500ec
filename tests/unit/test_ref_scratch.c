/* tests/unit/test_ref_scratch.c: the reference kernels' scratch
 * (src/ref/scratch.h): pieces come from the lent buffer while they fit,
 * 64-byte aligned and one after the other, then from malloc; a nested loan
 * (a kernel running an executor) gives its caller's loan back as it was;
 * without a loan every piece is malloc'ed; and the sizes the fallback
 * steps reserve cover what the kernels take. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "ir/graph.h"
#include "ref/scratch.h"

static bool inside(const void *p, const void *buf, size_t cap)
{
    return (uintptr_t)p >= (uintptr_t)buf && (uintptr_t)p < (uintptr_t)buf + cap;
}

static void test_loans(void **state)
{
    (void)state;
    void *outer = aligned_alloc(64, 256), *inner = aligned_alloc(64, 128);
    assert_non_null(outer);
    assert_non_null(inner);
    kiln_ref_scratch_loan none = kiln_ref_scratch_lend(outer, 256);
    char *a = kiln_ref_scratch_get(10); /* 64 bytes of the loan */
    assert_ptr_equal(a, outer);
    /* nested: the inner loan, then the outer one as it was */
    kiln_ref_scratch_loan prev = kiln_ref_scratch_lend(inner, 128);
    void *b = kiln_ref_scratch_get(100);
    assert_ptr_equal(b, inner);
    void *c = kiln_ref_scratch_get(100); /* b took all 128: malloc */
    assert_false(inside(c, inner, 128) || inside(c, outer, 256));
    kiln_ref_scratch_put(c);
    kiln_ref_scratch_put(b);
    kiln_ref_scratch_end(prev);
    char *d = kiln_ref_scratch_get(128);
    assert_ptr_equal(d, a + 64);
    void *e = kiln_ref_scratch_get(65); /* 64 left: malloc */
    assert_false(inside(e, outer, 256));
    kiln_ref_scratch_put(e);
    kiln_ref_scratch_put(d);
    kiln_ref_scratch_put(a);
    kiln_ref_scratch_end(none);
    /* no loan: malloc */
    void *f = kiln_ref_scratch_get(32);
    assert_false(inside(f, outer, 256));
    kiln_ref_scratch_put(f);
    free(outer);
    free(inner);
}

/* A graph of one node of op `op` over float32 inputs of the given shapes
 * (outputs inferred); its tensors' views into in/out (data NULL). */
static kiln_graph *one_node(kiln_op op, const kiln_shape *shapes, int n_in, kiln_dtype dt)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[8] = {'x', (char)('0' + i), 0};
        ids[i] = kiln_graph_add_input(g, name, dt, &shapes[i]);
    }
    int n = kiln_graph_add_node(g, op, "n", ids, n_in, 1);
    assert_true(n >= 0);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, n, 0)), KILN_OK);
    return g;
}

static size_t bytes_of(kiln_graph *g)
{
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("infer: %s", err.msg);
    const kiln_node *n = g->nodes[0];
    kiln_tensor tin[8], tout[4];
    const kiln_tensor *in[8];
    kiln_tensor *out[4];
    for (int i = 0; i < n->n_inputs; i++) {
        const kiln_value *v = g->values[n->inputs[i]];
        tin[i] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape};
        in[i] = &tin[i];
    }
    for (int i = 0; i < n->n_outputs; i++) {
        const kiln_value *v = g->values[n->outputs[i]];
        tout[i] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape};
        out[i] = &tout[i];
    }
    return kiln_ref_scratch_bytes(n, in, out);
}

static void test_sizes(void **state)
{
    (void)state;
    /* float16 Mul of [3, 5] and [5]: float32 copies of both and the output,
     * each rounded to 64 bytes */
    kiln_shape s[2] = {{2, {3, 5}}, {1, {5}}};
    kiln_graph *g = one_node(KILN_OP_MUL, s, 2, KILN_DTYPE_FLOAT16);
    assert_int_equal(bytes_of(g), 64 + 64 + 64);
    kiln_graph_destroy(g);
    /* float32 Mul: none */
    g = one_node(KILN_OP_MUL, s, 2, KILN_DTYPE_FLOAT32);
    assert_int_equal(bytes_of(g), 0);
    kiln_graph_destroy(g);
    /* Cast to float16 computes directly: none */
    g = one_node(KILN_OP_CAST, s, 1, KILN_DTYPE_FLOAT32);
    assert_int_equal(kiln_node_set_int(g, 0, "to", KILN_DTYPE_FLOAT16), KILN_OK);
    assert_int_equal(bytes_of(g), 0);
    kiln_graph_destroy(g);
    /* Resize [1, 2, 4, 6] by 2: taps for 1 + 2 + 8 + 12 = 23 coordinates:
     * 4 int64 and 4 doubles each, and an int */
    kiln_shape x = {4, {1, 2, 4, 6}};
    g = one_node(KILN_OP_RESIZE, &x, 1, KILN_DTYPE_FLOAT32);
    float scales[4] = {1, 1, 2, 2};
    assert_int_equal(kiln_node_set_floats(g, 0, "scales", scales, 4), KILN_OK);
    assert_int_equal(kiln_node_set_string(g, 0, "mode", "linear"), KILN_OK);
    assert_int_equal(bytes_of(g), kiln_ref_scratch_round(32 * 23) * 2 + kiln_ref_scratch_round(4 * 23));
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loans),
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
