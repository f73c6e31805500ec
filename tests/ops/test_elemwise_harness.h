/* tests/ops/test_elemwise_harness.h: one-node graphs for the elementwise
 * kernel tests (test_elemwise_unary.c, test_elemwise_binary.c,
 * test_elemwise_select.c).
 *
 * ew_run builds a graph whose inputs have the given dtypes, shapes and data,
 * adds one node of `op` with the given attributes, infers shapes, runs it on
 * the reference executor and copies the output (whose dtype and byte size it
 * checks) into the caller's buffer. */
#ifndef KILN_TESTS_ELEMWISE_HARNESS_H
#define KILN_TESTS_ELEMWISE_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct ew_in {
    kiln_dtype dt;
    kiln_shape sh;
    const void *data;
} ew_in;

/* An attribute: type 'f' (float), 'i' (int) or 's' (string). */
typedef struct ew_attr {
    const char *name;
    char type;
    double f;
    int64_t i;
    const char *s;
} ew_attr;

#define EW_F(name, v) ((ew_attr){(name), 'f', (v), 0, NULL})
#define EW_I(name, v) ((ew_attr){(name), 'i', 0, (v), NULL})
#define EW_S(name, v) ((ew_attr){(name), 's', 0, 0, (v)})

/* Runs `op`; on success checks the output dtype is `want` and its size is
 * `nbytes`, and copies it into y. Returns the status (message in *err). */
static inline kiln_status ew_run(kiln_op op, int n_in, const ew_in *ins, int n_attrs,
                                 const ew_attr *attrs, kiln_dtype want, void *y, size_t nbytes,
                                 kiln_error *err)
{
    kiln_graph *g = NULL;
    kiln_ref_executor *ex = NULL;
    kiln_error e = {0};
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = kiln_graph_add_input(g, name, ins[i].dt, &ins[i].sh);
        assert_true(ids[i] >= 0);
    }
    int node = kiln_graph_add_node(g, op, "node", ids, n_in, 1);
    assert_true(node >= 0);
    for (int i = 0; i < n_attrs; i++) {
        kiln_status a = attrs[i].type == 'f'   ? kiln_node_set_float(g, node, attrs[i].name,
                                                                     (float)attrs[i].f)
                        : attrs[i].type == 'i' ? kiln_node_set_int(g, node, attrs[i].name,
                                                                   attrs[i].i)
                                               : kiln_node_set_string(g, node, attrs[i].name,
                                                                      attrs[i].s);
        assert_int_equal(a, KILN_OK);
    }
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, node, 0)), KILN_OK);
    kiln_status s = kiln_graph_infer_shapes(g, &e);
    if (s == KILN_OK)
        s = kiln_ref_executor_create(g, &ex, &e);
    for (int i = 0; s == KILN_OK && i < n_in; i++) {
        kiln_tensor t = {ins[i].dt, ins[i].sh, (void *)ins[i].data};
        s = kiln_ref_executor_set_input(ex, i, &t, &e);
    }
    if (s == KILN_OK)
        s = kiln_ref_executor_run(ex, &e);
    if (s == KILN_OK) {
        const kiln_tensor *t = kiln_ref_executor_output(ex, 0);
        assert_non_null(t);
        if (t->dtype != want)
            fail_msg("output dtype %s, expected %s", kiln_dtype_name(t->dtype),
                     kiln_dtype_name(want));
        assert_int_equal(kiln_tensor_nbytes(t), (int64_t)nbytes);
        if (nbytes)
            memcpy(y, t->data, nbytes);
    }
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);
    if (err)
        *err = e;
    return s;
}

/* ew_run that must succeed. */
#define EW_OK(op, n_in, ins, n_attrs, attrs, want, y, nbytes)                                     \
    do {                                                                                          \
        kiln_error e_ = {0};                                                                      \
        kiln_status s_ = ew_run((op), (n_in), (ins), (n_attrs), (attrs), (want), (y), (nbytes),   \
                                &e_);                                                             \
        if (s_ != KILN_OK)                                                                        \
            fail_msg("%s failed: %s", kiln_op_name(op), e_.msg);                                  \
    } while (0)

static inline kiln_shape ew_scalar(void)
{
    return (kiln_shape){.rank = 0};
}

#endif
