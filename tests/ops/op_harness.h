/* tests/ops/op_harness.h: one-node graphs run by the reference executor, for
 * the kernel tests that go through the whole path (shape inference, executor,
 * kernel) with inputs of any dtype (test_elemwise.c, test_movement.c,
 * test_transform.c).
 *
 * h_init; h_input for each input in order (the data is borrowed until the
 * run); h_node (or h_node_outputs) on all of them; attributes on h->node
 * (set_ints, set_int, set_str); h_run returns the status (message in h->err)
 * where a test expects a failure, h_run_ok must succeed; h_out(h, k) is
 * output k, owned by the executor; h_free. */
#ifndef KILN_TESTS_OP_HARNESS_H
#define KILN_TESTS_OP_HARNESS_H

#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct harness {
    kiln_graph *g;
    int n_in;
    const void *data[8];
    int node, n_out;
    kiln_ref_executor *ex;
    kiln_error err;
} harness;

static inline void h_init(harness *h)
{
    memset(h, 0, sizeof *h);
    assert_int_equal(kiln_graph_create(&h->g), KILN_OK);
}

static inline void h_input(harness *h, kiln_dtype dt, kiln_shape s, const void *data)
{
    char name[8] = "in0";
    name[2] = (char)('0' + h->n_in);
    assert_int_equal(kiln_graph_add_input(h->g, name, dt, &s), h->n_in);
    h->data[h->n_in++] = data;
}

/* Adds the node of `op` on all the inputs, its n_out outputs being the
 * graph's; returns the node's id. */
static inline int h_node_outputs(harness *h, kiln_op op, int n_out)
{
    int ids[8];
    for (int i = 0; i < h->n_in; i++)
        ids[i] = i;
    h->node = kiln_graph_add_node(h->g, op, "node", ids, h->n_in, n_out);
    h->n_out = n_out;
    assert_true(h->node >= 0);
    for (int k = 0; k < n_out; k++)
        assert_int_equal(kiln_graph_add_output(h->g, kiln_graph_node_output(h->g, h->node, k)),
                         KILN_OK);
    return h->node;
}

static inline int h_node(harness *h, kiln_op op)
{
    return h_node_outputs(h, op, 1);
}

/* Infers shapes, builds the executor, sets the inputs and runs. */
static inline kiln_status h_run(harness *h)
{
    kiln_status s = kiln_graph_infer_shapes(h->g, &h->err);
    if (s != KILN_OK)
        return s;
    s = kiln_ref_executor_create(h->g, &h->ex, &h->err);
    if (s != KILN_OK)
        return s;
    for (int i = 0; i < h->n_in; i++) {
        kiln_tensor t;
        const char *name;
        assert_int_equal(kiln_graph_input_info(h->g, i, &name, &t.dtype, &t.shape), KILN_OK);
        t.data = (void *)h->data[i];
        s = kiln_ref_executor_set_input(h->ex, i, &t, &h->err);
        if (s != KILN_OK)
            return s;
    }
    return kiln_ref_executor_run(h->ex, &h->err);
}

static inline const kiln_tensor *h_out(harness *h, int k)
{
    const kiln_tensor *t = kiln_ref_executor_output(h->ex, k);
    assert_non_null(t);
    return t;
}

/* h_run that must succeed; returns output 0. */
static inline const kiln_tensor *h_run_ok(harness *h)
{
    kiln_status s = h_run(h);
    if (s != KILN_OK)
        fail_msg("run failed: %s", h->err.msg);
    return h_out(h, 0);
}

static inline void h_free(harness *h)
{
    kiln_ref_executor_destroy(h->ex);
    kiln_graph_destroy(h->g);
}

/* ---- attributes of h->node ------------------------------------------------- */

#define INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

static inline void set_ints(harness *h, const char *name, const int64_t *v, int n)
{
    assert_int_equal(kiln_node_set_ints(h->g, h->node, name, v, n), KILN_OK);
}

static inline void set_int(harness *h, const char *name, int64_t v)
{
    assert_int_equal(kiln_node_set_int(h->g, h->node, name, v), KILN_OK);
}

static inline void set_str(harness *h, const char *name, const char *v)
{
    assert_int_equal(kiln_node_set_string(h->g, h->node, name, v), KILN_OK);
}

/* ---- checks on outputs ------------------------------------------------------- */

static inline void assert_shape(const kiln_shape *got, kiln_shape want)
{
    char a[96], b[96];
    if (!kiln_shape_equal(got, &want))
        fail_msg("shape %s, expected %s", kiln_shape_str(got, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
}

/* t is float32 with n elements, each within rtol of want (rtol 0: equal). */
static inline void assert_f32_rtol(const kiln_tensor *t, const float *want, int64_t n,
                                   double rtol)
{
    assert_int_equal(t->dtype, KILN_DTYPE_FLOAT32);
    assert_int_equal(kiln_shape_numel(&t->shape), n);
    assert_allclose((const float *)t->data, want, n, rtol, 0);
}

/* t has the integer dtype dt (int64 or int32) and n elements equal to want's
 * (of that type). */
static inline void assert_ints(const kiln_tensor *t, kiln_dtype dt, const void *want, int64_t n)
{
    assert_int_equal(t->dtype, dt);
    assert_int_equal(kiln_shape_numel(&t->shape), n);
    for (int64_t i = 0; i < n; i++) {
        int64_t g = dt == KILN_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                           : ((const int32_t *)t->data)[i];
        int64_t w = dt == KILN_DTYPE_INT64 ? ((const int64_t *)want)[i]
                                           : ((const int32_t *)want)[i];
        if (g != w)
            fail_msg("element %lld: got %lld, expected %lld", (long long)i, (long long)g,
                     (long long)w);
    }
}

static inline void assert_i64(const kiln_tensor *t, const int64_t *want, int64_t n)
{
    assert_ints(t, KILN_DTYPE_INT64, want, n);
}

static inline void assert_i32(const kiln_tensor *t, const int32_t *want, int64_t n)
{
    assert_ints(t, KILN_DTYPE_INT32, want, n);
}

#endif
