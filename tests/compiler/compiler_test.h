/* tests/compiler/compiler_test.h: helpers of the compiler tests: compile a
 * graph, run it with the runtime (kiln_module_*) and the reference executor
 * on the same seeded random inputs, and compare every output. */
#ifndef KILN_TESTS_COMPILER_TEST_H
#define KILN_TESTS_COMPILER_TEST_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "test_support.h"

#include "ir/graph.h"
#include "kiln/runtime.h"
#include "driver/driver.h"
#include "lower/lower.h"
#include "pass/pass.h"
#include "target/target.h"

/* Worst mismatch of one comparison, for messages. */
typedef struct ct_result {
    int64_t bad;       /* elements outside tolerance */
    double max_abs;    /* largest |a - b| */
    int64_t first_bad; /* index of the first bad element, -1 if none */
    float got, want;
} ct_result;

static inline ct_result ct_compare(const float *a, const float *b, int64_t n, double rtol,
                                   double atol)
{
    ct_result r = {0, 0.0, -1, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        bool ok = d <= atol + rtol * fabs((double)b[i]) || (isnan(a[i]) && isnan(b[i]));
        if (d > r.max_abs)
            r.max_abs = d;
        if (!ok) {
            if (r.first_bad < 0) {
                r.first_bad = i;
                r.got = a[i];
                r.want = b[i];
            }
            r.bad++;
        }
    }
    return r;
}

/* A float32 constant of shape s named `name`, uniform in [lo, hi) from seed. */
/* The layout transforms in g (Identity nodes that change the layout). */
/* n bools from seed, three in four true. */
static inline void ct_fill_bool(void *data, int64_t n, uint64_t seed)
{
    uint8_t *b = data;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        b[i] = ((x * 0x2545F4914F6CDD1Dull) >> 62) != 0;
    }
}

static inline int ct_count_transforms(const kiln_graph *g)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (n->op == KILN_OP_IDENTITY &&
            !kiln_layout_equal(g->values[n->inputs[0]]->layout, g->values[n->outputs[0]]->layout))
            c++;
    }
    return c;
}

static inline int ct_param(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed, float lo,
                           float hi)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    assert_true(v >= 0);
    kt_fill_random(data, kiln_shape_numel(&s), seed, lo, hi);
    return v;
}

/* A 2-D Conv of x with weight w and bias b (-1: none), a k x k kernel,
 * stride s, pads {top, left, bottom, right} and `groups`: its output. */
static inline int ct_conv(kiln_graph *g, int x, int w, int b, int k, int s, const int *pads,
                          int groups)
{
    int in[3] = {x, w, b};
    int id = kiln_graph_add_node(g, KILN_OP_CONV, NULL, in, b >= 0 ? 3 : 2, 1);
    assert_true(id >= 0);
    int64_t st[2] = {s, s}, pd[4] = {pads[0], pads[1], pads[2], pads[3]}, ksz[2] = {k, k};
    assert_int_equal(kiln_node_set_ints(g, id, "strides", st, 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "pads", pd, 4), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "kernel_shape", ksz, 2), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, id, "group", groups), KILN_OK);
    return kiln_graph_node_output(g, id, 0);
}

/* Runs the pass pipeline and lowering of g for the host target, as a
 * compile does (default knobs): *ctx and *l for the caller to inspect and
 * destroy (kiln_lowered_destroy, kiln_pass_ctx_destroy). Fails the test,
 * naming the case, on an error. */
static inline void ct_lower(const kiln_graph *g, int case_no, kiln_pass_ctx **ctx,
                            kiln_lowered **l)
{
    kiln_error err = {0};
    kiln_target tg;
    *ctx = NULL;
    *l = NULL;
    if (kiln_target_resolve(NULL, &tg, &err) != KILN_OK ||
        kiln_pass_ctx_create(g, &tg, ctx, &err) != KILN_OK ||
        kiln_pass_run_all(*ctx, &err) != KILN_OK || kiln_lower(*ctx, 0, l, &err) != KILN_OK)
        fail_msg("case %d: lowering: %s", case_no, err.msg);
}

/* Nodes of `op` in g whose data input has rank `rank` (-1: any rank). */
static inline int ct_count_op(const kiln_graph *g, kiln_op op, int rank)
{
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        k += n->op == op && (rank < 0 || (n->n_inputs > 0 && n->inputs[0] >= 0 &&
                                          g->values[n->inputs[0]]->shape.rank == rank));
    }
    return k;
}

/* Infers g's shapes (failing the test, naming the case, on an error), runs
 * the pipeline and lowering (ct_lower) and returns how many nodes of `op`
 * (data input of rank `rank`, -1: any) are left: whether a lowering pass
 * took them. */
static inline int ct_ops_left(kiln_graph *g, int case_no, kiln_op op, int rank)
{
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    kiln_pass_ctx *ctx;
    kiln_lowered *l;
    ct_lower(g, case_no, &ctx, &l);
    int left = ct_count_op(ctx->g, op, rank);
    kiln_lowered_destroy(l);
    kiln_pass_ctx_destroy(ctx);
    return left;
}

/* The template name of the last task of g's lowering (ct_lower) that
 * `pick` chooses, "?" if none: which template a case's node ran on. */
static inline void ct_template_of(const kiln_graph *g, int case_no,
                                  bool (*pick)(const kiln_pass_ctx *ctx, const kiln_task *t),
                                  char *name, size_t n)
{
    kiln_pass_ctx *ctx;
    kiln_lowered *l;
    ct_lower(g, case_no, &ctx, &l);
    snprintf(name, n, "?");
    for (int i = 0; i < l->n_tasks; i++)
        if (l->tasks[i].tpl && pick(ctx, &l->tasks[i]))
            snprintf(name, n, "%s", l->tasks[i].tpl->name);
    kiln_lowered_destroy(l);
    kiln_pass_ctx_destroy(ctx);
}

/* Loads the .so at path (compiled from g), runs it and the reference
 * executor on inputs uniform in [-1, 1) from `seed`, and asserts every
 * float output matches within rtol/atol (tag names the case). */
static inline void ct_check_module(const kiln_graph *g, kiln_module *m, const char *tag,
                                   uint64_t seed, double rtol, double atol);
static inline void ct_check_so(const kiln_graph *g, const char *path, const char *tag,
                               uint64_t seed, double rtol, double atol)
{
    kiln_error err = {0};
    kiln_module *m = NULL;
    if (kiln_module_load(path, NULL, &m, &err) != KILN_OK)
        fail_msg("%s: load failed: %s", tag, err.msg);
    ct_check_module(g, m, tag, seed, rtol, atol);
}

/* ct_check_so on a loaded module (destroyed here). */
static inline void ct_check_module(const kiln_graph *g, kiln_module *m, const char *tag,
                                   uint64_t seed, double rtol, double atol)
{
    kiln_error err = {0};
    kiln_ref_executor *ex = NULL;
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("%s: ref executor: %s", tag, err.msg);
    for (int i = 0; i < g->n_inputs; i++) {
        const kiln_value *v = g->values[g->inputs[i]];
        kiln_tensor t;
        assert_int_equal(kiln_tensor_alloc(&t, v->dtype, &v->shape, &err), KILN_OK);
        if (v->dtype == KILN_DTYPE_FLOAT32)
            kt_fill_random(t.data, kiln_shape_numel(&v->shape), seed + (uint64_t)i, -1.0f, 1.0f);
        else if (v->dtype == KILN_DTYPE_BOOL)
            ct_fill_bool(t.data, kiln_shape_numel(&v->shape), seed + (uint64_t)i);
        assert_int_equal(kiln_module_set_input(m, i, &t, &err), KILN_OK);
        assert_int_equal(kiln_ref_executor_set_input(ex, i, &t, &err), KILN_OK);
        kiln_tensor_release(&t);
    }
    if (kiln_module_run(m, &err) != KILN_OK)
        fail_msg("%s: run failed: %s", tag, err.msg);
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("%s: ref run failed: %s", tag, err.msg);
    for (int i = 0; i < g->n_outputs; i++) {
        const kiln_tensor *a = kiln_module_output(m, i), *b = kiln_ref_executor_output(ex, i);
        assert_non_null(a);
        assert_non_null(b);
        assert_true(kiln_shape_equal(&a->shape, &b->shape));
        if (b->dtype != KILN_DTYPE_FLOAT32) {
            assert_memory_equal(a->data, b->data, (size_t)kiln_tensor_nbytes(b));
            continue;
        }
        ct_result r = ct_compare(a->data, b->data, kiln_shape_numel(&b->shape), rtol, atol);
        if (r.bad)
            fail_msg("%s: output %d: %lld of %lld elements differ (max |d| %g); first at %lld: "
                     "got %g, want %g",
                     tag, i, (long long)r.bad, (long long)kiln_shape_numel(&b->shape), r.max_abs,
                     (long long)r.first_bad, (double)r.got, (double)r.want);
    }
#ifdef KT_COUNT_ALLOCS
    /* a static model's run allocates nothing: the runs after the first, on
     * the module's thread pool, give the same outputs with no malloc */
    for (int rep = 0; rep < 2; rep++) {
        kt_alloc_count_start();
        kiln_status st = kiln_module_run(m, &err);
        long allocs = kt_alloc_count_stop();
        if (st != KILN_OK)
            fail_msg("%s: run %d failed: %s", tag, rep + 2, err.msg);
        if (allocs)
            fail_msg("%s: run %d allocated %ld times", tag, rep + 2, allocs);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const kiln_tensor *a = kiln_module_output(m, i), *b = kiln_ref_executor_output(ex, i);
        if (b->dtype != KILN_DTYPE_FLOAT32)
            continue;
        ct_result r = ct_compare(a->data, b->data, kiln_shape_numel(&b->shape), rtol, atol);
        if (r.bad)
            fail_msg("%s: output %d differs after the third run", tag, i);
    }
#endif
    kiln_module_destroy(m);
    kiln_ref_executor_destroy(ex);
}

/* Compiles g (knob_seed 0: defaults) for `target` (NULL: the host's; the
 * host must run its code) into dir/<tag>.so and checks it (ct_check_so). */
static inline void ct_check_graph_on(const kiln_graph *g, const char *dir, const char *tag,
                                     const char *target, uint64_t knob_seed, uint64_t seed,
                                     double rtol, double atol)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.so", dir, tag);
    kiln_error err = {0};
    kiln_compile_options opts = {0};
    opts.jobs = 2;
    opts.target = target;
    kiln_status s = kiln_compile_ex(g, &opts, knob_seed, path, &err);
    if (s != KILN_OK)
        fail_msg("%s: compile failed: %s", tag, err.msg);
    ct_check_so(g, path, tag, seed, rtol, atol);
}

/* ct_check_graph_on for the host's target. */
static inline void ct_check_graph(const kiln_graph *g, const char *dir, const char *tag,
                                  uint64_t knob_seed, uint64_t seed, double rtol, double atol)
{
    ct_check_graph_on(g, dir, tag, NULL, knob_seed, seed, rtol, atol);
}


/* x [1, M, 256] . W [256, 256] + b in a shapes_bound graph (a VM class):
 * W is 256 KB, a file of its own when weights are shared; *w_id: W's
 * value id (may be NULL). */
static inline kiln_graph *ct_dense_layer(int64_t M, int *w_id)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, M, 256}});
    int w = ct_param(g, "W", (kiln_shape){2, {256, 256}}, 5, -0.1f, 0.1f);
    int b = ct_param(g, "b", (kiln_shape){1, {256}}, 6, -0.5f, 0.5f);
    int mm = kiln_graph_node_output(
        g, kiln_graph_add_node(g, KILN_OP_MATMUL, "mm", (int[]){x, w}, 2, 1), 0);
    int y = kiln_graph_node_output(
        g, kiln_graph_add_node(g, KILN_OP_ADD, "y", (int[]){mm, b}, 2, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    g->shapes_bound = true;
    if (w_id)
        *w_id = w;
    return g;
}

/* The *.w files (shared weights) in dir; path gets one's. */
static inline int ct_weight_files(const char *dir, char *path, size_t cap)
{
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 2 && strcmp(e->d_name + len - 2, ".w") == 0) {
            n++;
            snprintf(path, cap, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return n;
}

#endif
