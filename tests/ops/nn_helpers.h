/* tests/ops/nn_helpers.h: one-node graphs for the nn op-family kernel tests
 * (test_conv.c, test_pool.c, test_gemm_matmul.c, test_norm.c).
 *
 * nn_build makes a graph whose inputs are float32 graph inputs of the given
 * shapes (rank -1: an absent optional input), with one node of `op`; the test
 * sets attributes, then nn_run infers shapes (asserting success), calls the
 * op's reference kernel directly on the caller's buffers and returns the
 * output in a malloc'ed buffer pre-filled with a sentinel (so unwritten cells
 * show up); nn_check does that and compares the output with the expected
 * one where the test knows all of it. */
#ifndef KILN_TESTS_NN_HELPERS_H
#define KILN_TESTS_NN_HELPERS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

#define NN_SENTINEL 1.2345e30f

typedef struct nn_graph {
    kiln_graph *g;
    int node;
    int n_in;
} nn_graph;

static inline nn_graph nn_build(kiln_op op, int n_in, const kiln_shape *shapes)
{
    nn_graph t = {.n_in = n_in};
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = shapes[i].rank < 0 ? -1
                                    : kiln_graph_add_input(t.g, name, KILN_DTYPE_FLOAT32, &shapes[i]);
    }
    t.node = kiln_graph_add_node(t.g, op, "node", ids, n_in, 1);
    assert_true(t.node >= 0);
    assert_int_equal(kiln_graph_add_output(t.g, kiln_graph_node_output(t.g, t.node, 0)), KILN_OK);
    return t;
}

/* Infers, checks the output shape against `expect` (if not NULL), runs the
 * kernel with data[i] for input i (NULL for absent ones); returns the output
 * (free it) and its element count in *numel. */
static inline float *nn_run(nn_graph *t, float *const *data, const kiln_shape *expect,
                            int64_t *numel)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
    const kiln_node *n = kiln_graph_node(t->g, t->node);
    const kiln_value *ov = kiln_graph_value(t->g, n->outputs[0]);
    if (expect && !kiln_shape_equal(&ov->shape, expect)) {
        char a[128], b[128];
        fail_msg("output shape %s, expected %s", kiln_shape_str(&ov->shape, a, sizeof a),
                 kiln_shape_str(expect, b, sizeof b));
    }
    kiln_tensor tin[8];
    const kiln_tensor *pin[8];
    for (int i = 0; i < n->n_inputs; i++) {
        const kiln_value *v = kiln_graph_value(t->g, n->inputs[i]);
        if (!v) {
            pin[i] = NULL;
            continue;
        }
        tin[i] = (kiln_tensor){.dtype = KILN_DTYPE_FLOAT32, .shape = v->shape, .data = data[i]};
        pin[i] = &tin[i];
    }
    int64_t count = kiln_shape_numel(&ov->shape);
    float *y = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    assert_non_null(y);
    for (int64_t i = 0; i < count; i++)
        y[i] = NN_SENTINEL;
    kiln_tensor tout = {.dtype = KILN_DTYPE_FLOAT32, .shape = ov->shape, .data = y};
    kiln_tensor *pout[1] = {&tout};
    s = kiln_op_get(n->op)->ref(n, pin, pout, &err);
    if (s != KILN_OK)
        fail_msg("kernel failed: %s", err.msg);
    *numel = count;
    return y;
}

static inline void nn_free(nn_graph *t)
{
    kiln_graph_destroy(t->g);
    t->g = NULL;
}

/* nn_run with the output shape `expect`, then asserts that the output is
 * want[0..n) within rtol relative plus atol absolute; frees the output and
 * the graph. */
static inline void nn_check(nn_graph *t, float *const *data, kiln_shape expect, const float *want,
                            int64_t n, double rtol, double atol)
{
    int64_t count;
    float *y = nn_run(t, data, &expect, &count);
    assert_int_equal(count, n);
    assert_allclose(y, want, n, rtol, atol);
    free(y);
    nn_free(t);
}

/* The product of v[0..n). */
static inline int64_t nn_prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

/* Splits a row-major linear index over extents dims[0..n) into idx. */
static inline void nn_unravel(int64_t lin, const int64_t *dims, int n, int64_t *idx)
{
    for (int i = n - 1; i >= 0; i--) {
        idx[i] = lin % dims[i];
        lin /= dims[i];
    }
}

/* A malloc'ed buffer of n random floats in [lo, hi). */
static inline float *nn_random(int64_t n, uint64_t seed, float lo, float hi)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    kt_fill_random(p, n, seed, lo, hi);
    return p;
}

#endif
