/* tests/ops/nn_run.h: one-node graphs with typed inputs and several outputs
 * for the nn kernel tests (test_nn_*.c, test_pool_more.c).
 *
 * nr_build makes graph inputs of the given dtypes and shapes (rank -1: an
 * absent optional input) feeding one node of `op` with `n_out` outputs; the
 * test sets attributes; nr_run infers shapes (asserting success) and calls
 * the op's reference kernel on the caller's buffers, with every output
 * pre-filled with 0xA5 bytes so that unwritten cells show up. nr_kernel_status
 * runs the kernel and returns its status instead (for data-dependent errors). */
#ifndef KILN_TESTS_NN_RUN_H
#define KILN_TESTS_NN_RUN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

#define NR_MAX 8

typedef struct nr_in {
    kiln_dtype dtype;
    kiln_shape shape; /* rank -1: absent */
    const void *data;
} nr_in;

typedef struct nr {
    kiln_graph *g;
    int node, n_in, n_out;
    nr_in in[NR_MAX];
    kiln_tensor out[3];
} nr;

/* A float32 input. */
static inline nr_in nr_f32(kiln_shape s, const float *data)
{
    return (nr_in){.dtype = KILN_DTYPE_FLOAT32, .shape = s, .data = data};
}

/* A malloc'ed buffer of n random floats in [-1, 1). */
static inline float *nn_random_buf(int64_t n, uint64_t seed)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    kt_fill_random(p, n, seed, -1.0f, 1.0f);
    return p;
}

static inline nr_in nr_absent(void)
{
    return (nr_in){.dtype = KILN_DTYPE_FLOAT32, .shape = {.rank = -1}, .data = NULL};
}

static inline nr nr_build(kiln_op op, int n_in, const nr_in *ins, int n_out)
{
    nr t;
    memset(&t, 0, sizeof t);
    t.n_in = n_in;
    t.n_out = n_out;
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[NR_MAX];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        t.in[i] = ins[i];
        ids[i] = ins[i].shape.rank < 0
                     ? -1
                     : kiln_graph_add_input(t.g, name, ins[i].dtype, &ins[i].shape);
    }
    t.node = kiln_graph_add_node(t.g, op, "node", ids, n_in, n_out);
    assert_true(t.node >= 0);
    for (int k = 0; k < n_out; k++)
        assert_int_equal(kiln_graph_add_output(t.g, kiln_graph_node_output(t.g, t.node, k)),
                         KILN_OK);
    return t;
}

/* Infers and runs the kernel; returns its status (outputs in t->out). */
static inline kiln_status nr_kernel_status(nr *t, kiln_error *err)
{
    kiln_status s = kiln_graph_infer_shapes(t->g, err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err->msg);
    const kiln_node *n = kiln_graph_node(t->g, t->node);
    kiln_tensor tin[NR_MAX];
    const kiln_tensor *pin[NR_MAX];
    for (int i = 0; i < t->n_in; i++) {
        if (t->in[i].shape.rank < 0) {
            pin[i] = NULL;
            continue;
        }
        tin[i] = (kiln_tensor){.dtype = t->in[i].dtype, .shape = t->in[i].shape,
                               .data = (void *)t->in[i].data};
        pin[i] = &tin[i];
    }
    kiln_tensor *pout[3];
    for (int k = 0; k < t->n_out; k++) {
        const kiln_value *ov = kiln_graph_value(t->g, n->outputs[k]);
        assert_int_equal(kiln_tensor_alloc(&t->out[k], ov->dtype, &ov->shape, NULL), KILN_OK);
        int64_t nb = kiln_tensor_nbytes(&t->out[k]);
        if (nb > 0)
            memset(t->out[k].data, 0xA5, (size_t)nb);
        pout[k] = &t->out[k];
    }
    return kiln_op_get(n->op)->ref(n, pin, pout, err);
}

static inline void nr_run(nr *t)
{
    kiln_error err = {0};
    kiln_status s = nr_kernel_status(t, &err);
    if (s != KILN_OK)
        fail_msg("kernel failed: %s", err.msg);
}

/* Asserts output k's shape. */
static inline void nr_expect_shape(const nr *t, int k, kiln_shape want)
{
    if (!kiln_shape_equal(&t->out[k].shape, &want)) {
        char a[128], b[128];
        fail_msg("output %d shape %s, expected %s", k,
                 kiln_shape_str(&t->out[k].shape, a, sizeof a), kiln_shape_str(&want, b, sizeof b));
    }
}

static inline void nr_free(nr *t)
{
    for (int k = 0; k < t->n_out; k++)
        kiln_tensor_release(&t->out[k]);
    kiln_graph_destroy(t->g);
    t->g = NULL;
}

#endif
