/* tests/compiler/test_fallback.c: every valid graph compiles. Nodes no kernel
 * template takes run their reference kernels inside the compiled model, as
 * steps among the compiled ones (docs/COMPILER.md, "Fallback"):
 *  - a graph mixing templated ops (elementwise, softmax, Cast, Where) with
 *    ops that have no template today (TopK's two outputs float32 + int64,
 *    ArgMax float32 -> int64, CumSum on int64, IsNaN to bool, ConvTranspose
 *    with its bias absent) compiles, runs through the runtime and matches
 *    the reference executor (the fallbacks' outputs bit for bit); the
 *    metadata lists the fallbacks and their steps say "ref:<Op>"; a run
 *    allocates nothing. Templates keep arriving: only TopK must stay a
 *    fallback, the others are checked either way;
 *  - an LSTM whose optional inputs B and sequence_lens are absent between
 *    present ones (W, R, initial_h) keeps them absent;
 *  - the kernels that need temporaries (the LSTM's state, a Resize's taps,
 *    float16 arithmetic's float32 copies) take them from scratch sized at
 *    load: their runs allocate nothing either;
 *  - a run-time error in a fallback kernel (an index out of range) is a
 *    status naming the step and op. */
#include <cJSON.h>

#include "alloc_count.h"
#include "compiler_test.h"


static char *dir;

static int node1(kiln_graph *g, kiln_op op, const char *name, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, name, in, n_in, 1);
    assert_true(id >= 0);
    return id;
}

static int out0(kiln_graph *g, int node)
{
    return kiln_graph_node_output(g, node, 0);
}

static int cast(kiln_graph *g, const char *name, int x, kiln_dtype to)
{
    int n = node1(g, KILN_OP_CAST, name, &x, 1);
    assert_int_equal(kiln_node_set_int(g, n, "to", to), KILN_OK);
    return out0(g, n);
}

static int fconst(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    kt_fill_random(data, kiln_shape_numel(&s), seed, -1.0f, 1.0f);
    return v;
}

/* Fills input tensor t of value v: floats uniform in [-1, 1), int64 in
 * [0, range). */
static void fill(kiln_tensor *t, const kiln_value *v, uint64_t seed, int64_t range)
{
    kiln_error err = {0};
    assert_int_equal(kiln_tensor_alloc(t, v->dtype, &v->shape, &err), KILN_OK);
    int64_t n = kiln_shape_numel(&v->shape);
    if (v->dtype == KILN_DTYPE_FLOAT32)
        kt_fill_random(t->data, n, seed, -1.0f, 1.0f);
    else
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)t->data)[i] = (int64_t)((seed * 7 + (uint64_t)i * 5) % (uint64_t)range);
}

typedef struct run {
    kiln_module *m;
    kiln_ref_executor *ex;
} run;

/* Compiles g into dir/<tag>.so and loads it next to the reference executor,
 * both on the same inputs (int64 inputs in [0, range)). */
static run open_both(const kiln_graph *g, const char *tag, int64_t range)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.so", dir, tag);
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    if (kiln_compile(g, &opts, path, &err) != KILN_OK)
        fail_msg("%s: compile: %s", tag, err.msg);
    run r = {0};
    kiln_module_options mo = {.num_threads = 2, .bind_threads = 0};
    if (kiln_module_load(path, &mo, &r.m, &err) != KILN_OK)
        fail_msg("%s: load: %s", tag, err.msg);
    if (kiln_ref_executor_create(g, &r.ex, &err) != KILN_OK)
        fail_msg("%s: ref executor: %s", tag, err.msg);
    for (int i = 0; i < g->n_inputs; i++) {
        kiln_tensor t;
        fill(&t, g->values[g->inputs[i]], 11 + (uint64_t)i, range);
        assert_int_equal(kiln_module_set_input(r.m, i, &t, &err), KILN_OK);
        assert_int_equal(kiln_ref_executor_set_input(r.ex, i, &t, &err), KILN_OK);
        kiln_tensor_release(&t);
    }
    return r;
}

/* Whether the step of node `name` is a fallback ("ref:<Op>"). */
static bool is_fallback(kiln_module *m, const char *name)
{
    for (int i = 0; i < kiln_module_num_steps(m); i++) {
        kiln_step_info si;
        assert_int_equal(kiln_module_step_info(m, i, &si), KILN_OK);
        if (!strcmp(si.name, name))
            return strncmp(si.op, "ref:", 4) == 0;
    }
    fail_msg("no step named '%s'", name);
    return false;
}

/* Runs both and compares every output: bit for bit, except outputs[k] with
 * tol[k] > 0 (a templated float kernel), within that relative tolerance. */
static void run_compare(run *r, const double *tol)
{
    kiln_error err = {0};
    if (kiln_module_run(r->m, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
    if (kiln_ref_executor_run(r->ex, &err) != KILN_OK)
        fail_msg("ref run: %s", err.msg);
    for (int i = 0; i < kiln_module_num_outputs(r->m); i++) {
        const kiln_tensor *a = kiln_module_output(r->m, i), *b = kiln_ref_executor_output(r->ex, i);
        assert_int_equal(a->dtype, b->dtype);
        assert_true(kiln_shape_equal(&a->shape, &b->shape));
        if (tol[i] <= 0) {
            if (memcmp(a->data, b->data, (size_t)kiln_tensor_nbytes(b)) != 0)
                fail_msg("output %d (%s) differs from the reference executor", i,
                         kiln_dtype_name(b->dtype));
            continue;
        }
        assert_int_equal(b->dtype, KILN_DTYPE_FLOAT32);
        ct_result c = ct_compare(a->data, b->data, kiln_shape_numel(&b->shape), tol[i], 1e-6);
        if (c.bad)
            fail_msg("output %d: %lld elements differ, first at %lld: %g vs %g", i,
                     (long long)c.bad, (long long)c.first_bad, (double)c.got, (double)c.want);
    }
}

/* Three more runs of the module allocate nothing and give the same outputs
 * (the fallbacks' kernels take their scratch from a buffer sized at load:
 * ref/scratch.h). */
static void runs_allocate_nothing(run *r, const double *tol)
{
#ifdef KT_COUNT_ALLOCS
    kiln_error err = {0};
    kt_alloc_count_start();
    kiln_status st = KILN_OK;
    for (int k = 0; k < 3 && st == KILN_OK; k++)
        st = kiln_module_run(r->m, &err);
    long n_allocs = kt_alloc_count_stop();
    if (st != KILN_OK)
        fail_msg("run: %s", err.msg);
    if (n_allocs)
        fail_msg("three runs allocated %ld times", n_allocs);
#endif
    run_compare(r, tol);
}

static void close_both(run *r)
{
    kiln_module_destroy(r->m);
    kiln_ref_executor_destroy(r->ex);
}

/* Nodes of the mixed graph with no template today. Templates keep
 * arriving, so only TopK (two outputs of two dtypes; no template is planned
 * for it) must stay a fallback; the others are checked either way (a
 * fallback's outputs bit for bit, a template's within tolerance), and the
 * test says which ran as fallbacks. */
static const char *const maybe_fall_back[][2] = {
    {"TopK", "topk"}, {"ArgMax", "argmax"}, {"CumSum", "cumsum"},
    {"IsNaN", "isnan"}, {"ConvTranspose", "convt"},
};

/* x float32 [2,3,8], ids int64 [2,3,1]. Templated or not, every node's
 * output must equal the reference executor's; the ones in must_fall_back
 * give a float32 -> int64 op, an int64 op, two outputs of two dtypes, a
 * bool result and an absent optional input. Around them: templated
 * elementwise ops and a softmax, and ops that have a template today or may
 * get one (Cast to and from float16, an int64 Add, Where). */
static kiln_graph *mixed_graph(void)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {2, 3, 8}});
    int ids = kiln_graph_add_input(g, "ids", KILN_DTYPE_INT64, &(kiln_shape){3, {2, 3, 1}});
    float ten = 10.0f;
    int c10 = kiln_graph_add_const(g, "ten", KILN_DTYPE_FLOAT32, &(kiln_shape){0, {0}}, &ten);
    int m = out0(g, node1(g, KILN_OP_MUL, "scale", (int[]){x, c10}, 2)); /* templated */
    int am = node1(g, KILN_OP_ARGMAX, "argmax", &m, 1);
    kiln_node_set_int(g, am, "axis", 2);
    int cs = node1(g, KILN_OP_CUMSUM, "cumsum", &ids, 1);
    kiln_node_set_int(g, cs, "axis", 1);
    int s = out0(g, node1(g, KILN_OP_ADD, "add_i64", (int[]){out0(g, am), out0(g, cs)}, 2));
    int tk = kiln_graph_add_node(g, KILN_OP_TOPK, "topk", &m, 1, 2);
    assert_true(tk >= 0);
    kiln_node_set_int(g, tk, "k", 3);
    kiln_node_set_int(g, tk, "axis", -1);
    int v = kiln_graph_node_output(g, tk, 0), idx = kiln_graph_node_output(g, tk, 1);
    int h = cast(g, "to_f16", v, KILN_DTYPE_FLOAT16);
    int hf = cast(g, "from_f16", h, KILN_DTYPE_FLOAT32);
    int sm = out0(g, node1(g, KILN_OP_SOFTMAX, "softmax", &hf, 1)); /* templated */
    int nan = out0(g, node1(g, KILN_OP_ISNAN, "isnan", &m, 1));
    int wh = out0(g, node1(g, KILN_OP_WHERE, "where", (int[]){nan, x, m}, 3));
    int re = out0(g, node1(g, KILN_OP_RELU, "relu", &wh, 1)); /* templated */
    int w = fconst(g, "ct_w", (kiln_shape){3, {3, 2, 3}}, 5);
    int ct = out0(g, node1(g, KILN_OP_CONVTRANSPOSE, "convt", (int[]){re, w, -1}, 3));
    int outs[] = {idx, sm, s, h, ct, nan}; /* exact but for sm, and ct unless a fallback */
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        assert_int_equal(kiln_graph_add_output(g, outs[i]), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("infer: %s", err.msg);
    return g;
}

static void test_mixed(void **state)
{
    (void)state;
    kiln_graph *g = mixed_graph();
    run r = open_both(g, "mixed", 8);
    double tol[] = {0, 1e-5, 0, 0, is_fallback(r.m, "convt") ? 0 : 1e-5, 0};
    run_compare(&r, tol);

    /* the steps: fallbacks say "ref:<Op>", the others their template */
    if (!is_fallback(r.m, "topk"))
        fail_msg("TopK has a template now: give this test another untemplated op with two "
                 "outputs of two dtypes");
    char which[256] = "";
    for (size_t k = 0; k < sizeof maybe_fall_back / sizeof maybe_fall_back[0]; k++)
        if (is_fallback(r.m, maybe_fall_back[k][1])) {
            kiln_step_info si;
            for (int i = 0; i < kiln_module_num_steps(r.m); i++)
                if (kiln_module_step_info(r.m, i, &si) == KILN_OK &&
                    !strcmp(si.name, maybe_fall_back[k][1]))
                    assert_string_equal(si.op + 4, maybe_fall_back[k][0]);
            snprintf(which + strlen(which), sizeof which - strlen(which), " %s",
                     maybe_fall_back[k][0]);
        }
    print_message("fallback steps among the candidates:%s\n", which);
    int n = kiln_module_num_steps(r.m), n_ref = 0, n_kernel = 0;
    for (int i = 0; i < n; i++) {
        kiln_step_info si;
        assert_int_equal(kiln_module_step_info(r.m, i, &si), KILN_OK);
        if (strncmp(si.op, "ref:", 4) == 0)
            n_ref++;
        else
            n_kernel++;
    }
    assert_true(n_kernel >= 3); /* scale, softmax, relu */

    /* the metadata lists exactly the fallback steps, "Op 'node'", in order */
    cJSON *meta = cJSON_Parse(kiln_module_metadata_json(r.m));
    assert_non_null(meta);
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(meta, "fallbacks");
    assert_true(cJSON_IsArray(fb));
    assert_int_equal(cJSON_GetArraySize(fb), n_ref);
    for (int i = 0, k = 0; i < n; i++) {
        kiln_step_info si;
        kiln_module_step_info(r.m, i, &si);
        if (strncmp(si.op, "ref:", 4) != 0)
            continue;
        char want[256];
        snprintf(want, sizeof want, "%s '%s'", si.op + 4, si.name);
        assert_string_equal(cJSON_GetArrayItem(fb, k++)->valuestring, want);
    }
    cJSON_Delete(meta);

    /* steady state: a run (kernels and fallbacks alike) allocates nothing */
    runs_allocate_nothing(&r, tol);
    close_both(&r);
    kiln_graph_destroy(g);
}

/* LSTM(X, W, R, -, -, initial_h) on its reference kernel: the absent B and
 * sequence_lens stay absent (the runtime hands the kernel NULL for them). */
static void test_optional_absent(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    const int S = 3, B = 2, I = 4, H = 5;
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {S, B, I}});
    int h0 = kiln_graph_add_input(g, "h0", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, B, H}});
    int w = fconst(g, "W", (kiln_shape){3, {1, 4 * H, I}}, 1);
    int rr = fconst(g, "R", (kiln_shape){3, {1, 4 * H, H}}, 2);
    int n = kiln_graph_add_node(g, KILN_OP_LSTM, "lstm", (int[]){x, w, rr, -1, -1, h0}, 6, 2);
    assert_true(n >= 0);
    kiln_node_set_int(g, n, "hidden_size", H);
    /* a clip (too wide to change a value here) keeps it off lower-rnn's
     * unrolling: the reference kernel runs it */
    kiln_node_set_float(g, n, "clip", 50.0f);
    int y = kiln_graph_node_output(g, n, 0), yh = kiln_graph_node_output(g, n, 1);
    int t = out0(g, node1(g, KILN_OP_TANH, "tanh", &yh, 1)); /* templated */
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, t), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("infer: %s", err.msg);
    run r = open_both(g, "lstm", 1);
    if (!is_fallback(r.m, "lstm"))
        fail_msg("LSTM has a template now: give this test another untemplated op with an "
                 "absent optional input between present ones");
    static const double tol[] = {0, 1e-5};
    run_compare(&r, tol);
    runs_allocate_nothing(&r, tol); /* the LSTM's state */
    close_both(&r);
    kiln_graph_destroy(g);
}

/* The reference kernels that need temporaries, as fallback steps: a Resize
 * of a leading dim (its interpolation taps; the template resizes only the
 * last two dims) and float16 arithmetic (float32 copies of the operands).
 * Their scratch is sized at load, so a run allocates nothing; the outputs
 * equal the reference executor's bit for bit. */
static void test_scratch(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {1, 3, 4, 5}});
    int rs = node1(g, KILN_OP_RESIZE, "resize", &x, 1);
    assert_int_equal(kiln_node_set_string(g, rs, "mode", "linear"), KILN_OK);
    float scales[4] = {2, 1, 1.5f, 2};
    assert_int_equal(kiln_node_set_floats(g, rs, "scales", scales, 4), KILN_OK);
    int h = cast(g, "to_f16", x, KILN_DTYPE_FLOAT16);
    int hh = out0(g, node1(g, KILN_OP_MUL, "mul_f16", (int[]){h, h}, 2));
    int hs = out0(g, node1(g, KILN_OP_SQRT, "sqrt_f16", &hh, 1));
    assert_int_equal(kiln_graph_add_output(g, out0(g, rs)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, hs), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("infer: %s", err.msg);
    run r = open_both(g, "scratch", 1);
    if (!is_fallback(r.m, "resize") || !is_fallback(r.m, "sqrt_f16"))
        fail_msg("Resize of a leading dim or a float16 Sqrt has a template now: give this "
                 "test other untemplated ops with temporaries");
    static const double tol[] = {0, 0};
    run_compare(&r, tol);
    runs_allocate_nothing(&r, tol);
    close_both(&r);
    kiln_graph_destroy(g);
}

/* GatherElements with run-time indices (a fallback step): one out of range
 * fails the run with a message naming the step and op, and the next good run
 * works. */
static void test_run_error(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){1, {5}});
    int ix = kiln_graph_add_input(g, "ix", KILN_DTYPE_INT64, &(kiln_shape){1, {2}});
    int ga = node1(g, KILN_OP_GATHERELEMENTS, "pick", (int[]){x, ix}, 2);
    assert_int_equal(kiln_graph_add_output(g, out0(g, ga)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    run r = open_both(g, "pick", 5);
    static const double tol[] = {0};
    run_compare(&r, tol);
    if (!is_fallback(r.m, "pick")) {
        /* a template of its own decides what an index out of range does */
        print_message("GatherElements has a template now: the run-error case is skipped "
                      "(tests/runtime/test_module's test_ref_steps keeps one)\n");
        close_both(&r);
        kiln_graph_destroy(g);
        return;
    }
    int64_t bad[2] = {1, 7};
    kiln_tensor t = {KILN_DTYPE_INT64, {1, {2}}, bad};
    assert_int_equal(kiln_module_set_input(r.m, 1, &t, &err), KILN_OK);
    assert_int_equal(kiln_module_run(r.m, &err), KILN_ERR_INVALID_ARGUMENT);
    if (!strstr(err.msg, "'pick' (ref:GatherElements): index 7"))
        fail_msg("unexpected message: %s", err.msg);
    bad[1] = 4;
    assert_int_equal(kiln_module_set_input(r.m, 1, &t, &err), KILN_OK);
    assert_int_equal(kiln_module_run(r.m, &err), KILN_OK);
    close_both(&r);
    kiln_graph_destroy(g);
}

int main(void)
{
    dir = kt_tempdir();
    setenv("XDG_CACHE_HOME", dir, 1); /* a private object cache */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_optional_absent),
        cmocka_unit_test(test_scratch),
        cmocka_unit_test(test_run_error),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
