/* tests/compiler/test_tasks.c: tasks that build alone (kiln.h, "Tasks";
 * src/driver/tasks.c, src/lower/workload.c).
 *
 *  - round trip: every task of every zoo network; its workload key parses
 *    and builds back into a task whose key is identical;
 *  - keys do not depend on the configuration (a random knob sample lowers
 *    to the same keys), integer weights the code reads are in the key (two
 *    Gathers with different constant indices are two tasks, and compile
 *    right), malformed and edited keys are refused with the offset or the
 *    difference;
 *  - build alone: one task of EVERY template in templates.def (from the zoo
 *    where a network uses the template, else from a small graph built here),
 *    built with a configuration drawn at random from its space, checked
 *    against the reference executor and timed (a positive, finite time); a
 *    template with no case here fails the test, naming it;
 *  - bad configurations are errors that build nothing; a key for an ISA the
 *    machine lacks is refused, not run.
 * The graphs are built with weights: the conv templates choose their
 * layouts by them, so KILN_ZOO_NO_WEIGHTS would give other keys. */
#include <cJSON.h>

#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "compiler_test.h"
#include "lower/workload.h"
#include "target/template.h"
#include "util/rng.h"

/* ---- helpers ------------------------------------------------------------------- */

static kiln_graph *zoo(const char *name)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    if (kiln_zoo_build(name, 0, 0, &g, &err) != KILN_OK)
        fail_msg("%s: %s", name, err.msg);
    return g;
}

static kiln_tasks *tasks_of(const kiln_graph *g)
{
    kiln_tasks *ts = NULL;
    kiln_error err = {0};
    if (kiln_tasks_extract(g, NULL, &ts, &err) != KILN_OK)
        fail_msg("extract: %s", err.msg);
    return ts;
}

static kiln_task_info info_of(const kiln_tasks *ts, int i)
{
    kiln_task_info ti;
    kiln_error err = {0};
    assert_int_equal(kiln_tasks_info(ts, i, &ti, &err), KILN_OK);
    return ti;
}

/* A configuration drawn at random from w's space, as JSON. */
static void random_config(const kiln_workload *w, kiln_rng *r, char *buf, size_t size)
{
    kiln_task_info ti;
    kiln_error err = {0};
    assert_int_equal(kiln_workload_info(w, &ti, &err), KILN_OK);
    size_t n = (size_t)snprintf(buf, size, "{");
    for (int k = 0; k < ti.n_knobs; k++) {
        kiln_knob_info ki;
        assert_int_equal(kiln_workload_knob(w, k, &ki, &err), KILN_OK);
        assert_true(ki.n_choices > 0);
        int v = ki.choices[kiln_rng_next(r) % (uint64_t)ki.n_choices];
        n += (size_t)snprintf(buf + n, size - n, "%s\"%s\": %d", k ? ", " : "", ki.name, v);
    }
    snprintf(buf + n, size - n, "}");
}

/* ---- round trip ----------------------------------------------------------------- */

/* Every task of every zoo network: key -> task -> the identical key. */
static void test_zoo_round_trip(void **state)
{
    (void)state;
    int total = 0;
    for (int z = 0; z < kiln_zoo_count(); z++) {
        const char *name = kiln_zoo_get(z)->name;
        kiln_graph *g = zoo(name);
        kiln_tasks *ts = tasks_of(g);
        assert_true(kiln_tasks_count(ts) > 0);
        int steps = 0;
        for (int i = 0; i < kiln_tasks_count(ts); i++) {
            kiln_task_info ti = info_of(ts, i);
            steps += ti.steps;
            kiln_workload *w = NULL;
            kiln_error err = {0};
            if (kiln_workload_create(ti.workload, 1, &w, &err) != KILN_OK)
                fail_msg("%s task %d (%s): %s\nkey: %s", name, i + 1, ti.template_name, err.msg,
                         ti.workload);
            kiln_task_info wi;
            assert_int_equal(kiln_workload_info(w, &wi, &err), KILN_OK);
            assert_string_equal(wi.workload, ti.workload);
            assert_string_equal(wi.template_name, ti.template_name);
            assert_string_equal(wi.default_config, ti.default_config);
            assert_int_equal(wi.n_knobs, ti.n_knobs);
            assert_true(wi.flops == ti.flops);
            kiln_workload_destroy(w);
            total++;
        }
        assert_int_equal(steps, kiln_tasks_num_steps(ts));
        kiln_tasks_destroy(ts);
        kiln_graph_destroy(g);
    }
    print_message("%d zoo tasks round-tripped\n", total);
}

/* The keys of a model lowered with random knob values are its default keys:
 * the key never depends on the configuration (dense packs B by its knob nb,
 * the key records B's own layout). */
static void test_keys_independent_of_config(void **state)
{
    (void)state;
    static const char *const nets[] = {"mlp", "mobilenet-v2"};
    for (int n = 0; n < 2; n++) {
        kiln_graph *g = zoo(nets[n]);
        kiln_error err = {0};
        kiln_build *a = NULL, *b = NULL;
        assert_int_equal(kiln_build_create(g, NULL, &a, &err), KILN_OK);
        assert_int_equal(kiln_build_create(g, NULL, &b, &err), KILN_OK);
        kiln_build_set_knob_seed(b, 12345);
        assert_int_equal(kiln_build_configure(a, &err), KILN_OK);
        assert_int_equal(kiln_build_configure(b, &err), KILN_OK);
        assert_int_equal(a->low->n_tasks, b->low->n_tasks);
        int differ = 0;
        for (int i = 0; i < a->low->n_tasks; i++) {
            assert_string_equal(a->low->tasks[i].workload, b->low->tasks[i].workload);
            differ += strcmp(a->low->tasks[i].config, b->low->tasks[i].config) != 0;
        }
        assert_true(differ > 0); /* the sample did move knobs */
        kiln_build_destroy(a);
        kiln_build_destroy(b);
        kiln_graph_destroy(g);
    }
}

/* x[2] -> Gather(index 0), Gather(index 1): the same shapes, different
 * constant indices baked into the code. The key records integer weights,
 * so they are two tasks, and the model computes both right. */
static void test_integer_weights_in_key(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(2, 4, 6), s0 = {.rank = 0};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    for (int64_t i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "i%d", (int)i);
        int iv = kiln_graph_add_const(g, name, KILN_DTYPE_INT64, &s0, &i);
        int n = kiln_graph_add_node(g, KILN_OP_GATHER, NULL, (int[]){x, iv}, 2, 1);
        assert_int_equal(kiln_node_set_int(g, n, "axis", 0), KILN_OK);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, n, 0)), KILN_OK);
    }
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    kiln_tasks *ts = tasks_of(g);
    assert_int_equal(kiln_tasks_count(ts), 2);
    kiln_task_info t0 = info_of(ts, 0), t1 = info_of(ts, 1);
    assert_string_equal(t0.template_name, "gather");
    assert_non_null(strstr(t0.workload, "int64[]:row-major:w=[0]"));
    assert_non_null(strstr(t1.workload, "int64[]:row-major:w=[1]"));
    kiln_tasks_destroy(ts);
    char *dir = kt_tempdir();
    ct_check_graph(g, dir, "gathers", 0, 5, 0, 0);
    kt_rmdir(dir);
    free(dir);
    kiln_graph_destroy(g);
}

static void expect_refused(const char *key, kiln_status want, const char *msg)
{
    kiln_workload *w = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_workload_create(key, 1, &w, &err), want);
    assert_null(w);
    if (!strstr(err.msg, msg))
        fail_msg("key '%.60s': message '%s' lacks '%s'", key, err.msg, msg);
}

static void test_bad_keys(void **state)
{
    (void)state;
    const char *good = "elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                       "Relu(a0){}->a1";
    kiln_workload *w = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_workload_create(good, 1, &w, &err), KILN_OK);
    kiln_workload_destroy(w);
    expect_refused("", KILN_ERR_PARSE, "offset 0");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major", KILN_ERR_PARSE, "expected '|'");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Frobnicate(a0){}->a1",
                   KILN_ERR_PARSE, "unknown op");
    expect_refused("elemwise|x86_64-avx2|floot32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1",
                   KILN_ERR_PARSE, "unknown dtype");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:NCHWxc,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1",
                   KILN_ERR_PARSE, "unknown layout");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(t3){}->a1",
                   KILN_ERR_PARSE, "earlier node");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1>",
                   KILN_ERR_PARSE, "op name");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1 trailing",
                   KILN_ERR_PARSE, "after the last node");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0,a0,a0){}->a1",
                   KILN_ERR_PARSE, "number of inputs");
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){alpha='unterminated}->a1",
                   KILN_ERR_PARSE, "");
    /* parses, but is not what its nodes compute or what kiln makes of them */
    expect_refused("elemwise|x86_64-avx2|float32[2, 3]:row-major,float32[2, 4]:row-major|"
                   "Relu(a0){}->a1",
                   KILN_ERR_INVALID_ARGUMENT, "computes");
    expect_refused("dense|x86_64-avx2|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1",
                   KILN_ERR_INVALID_ARGUMENT, "does not build back");
    expect_refused("elemwise|x86_64-sse9|float32[2, 3]:row-major,float32[2, 3]:row-major|"
                   "Relu(a0){}->a1",
                   KILN_ERR_INVALID_ARGUMENT, "unknown target");
}

/* ---- build alone ----------------------------------------------------------------- */

typedef struct tpl_seen {
    char name[64];
    bool measured;
} tpl_seen;

static tpl_seen seen[64];
static int n_seen;

static tpl_seen *seen_of(const char *tpl)
{
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].name, tpl))
            return &seen[i];
    assert_true(n_seen < 64);
    snprintf(seen[n_seen].name, sizeof seen[n_seen].name, "%s", tpl);
    return &seen[n_seen++];
}

/* Builds key alone with a random configuration from its space, checks it
 * against the reference, times it. */
static void measure_key(const char *key, const char *from, uint64_t seed)
{
    kiln_workload *w = NULL;
    kiln_error err = {0};
    if (kiln_workload_create(key, seed, &w, &err) != KILN_OK)
        fail_msg("%s: %s\nkey: %s", from, err.msg, key);
    kiln_task_info ti;
    assert_int_equal(kiln_workload_info(w, &ti, &err), KILN_OK);
    kiln_rng r;
    kiln_rng_seed(&r, seed * 31 + 7);
    char cfg[512];
    random_config(w, &r, cfg, sizeof cfg);
    kiln_measure_options o = {.config = cfg, .num_threads = 2, .jobs = 2};
    /* half the tasks timed as the tuner times them: weights out of every
     * cache (a network larger than the LLC) or in the LLC only */
    o.cold_weights = (int)(seed & 1) * (1 + (int)((seed >> 1) & 1));
    o.bench.repeat = 3;
    o.bench.min_repeat_ms = 1;
    kiln_measure_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    if (kiln_workload_measure(w, &o, res, &err) != KILN_OK)
        fail_msg("%s: %s with %s: %s\nkey: %s", from, ti.template_name, cfg, err.msg, key);
    assert_true(res->time.median > 0 && isfinite(res->time.median));
    assert_true(res->time.min > 0 && isfinite(res->time.max));
    assert_int_equal(res->time.repeat, 3);
    assert_true(isfinite(res->gflops) && res->gflops >= 0);
    assert_true(res->step >= 0 && res->step < res->num_steps);
    assert_non_null(strstr(res->config, "\"source\": \"explicit\""));
    assert_non_null(strstr(res->measured, "alone"));
    assert_true(!strstr(res->measured, "evicted") == !o.cold_weights);
    assert_true(!strstr(res->measured, "last-level cache") == (o.cold_weights != 2));
    print_message("%-18s %9.2f us  %7.2f GFLOPS  max|d| %.2g  (%s) %s\n", ti.template_name,
                  res->time.median * 1e6, res->gflops, res->max_abs_diff, from, cfg);
    seen_of(ti.template_name)->measured = true;
    free(res);
    kiln_workload_destroy(w);
}

/* The smallest task (by flops) of each template any zoo network uses. */
static void test_zoo_templates_alone(void **state)
{
    (void)state;
    char *keys[64] = {0};
    double flops[64];
    char from[64][64];
    int n = 0;
    for (int z = 0; z < kiln_zoo_count(); z++) {
        const char *name = kiln_zoo_get(z)->name;
        kiln_graph *g = zoo(name);
        kiln_tasks *ts = tasks_of(g);
        for (int i = 0; i < kiln_tasks_count(ts); i++) {
            kiln_task_info ti = info_of(ts, i);
            int j = 0;
            while (j < n && strncmp(keys[j], ti.workload, strcspn(keys[j], "|") + 1) != 0)
                j++;
            if (j == n) {
                assert_true(n < 64);
                n++;
                keys[j] = NULL;
            } else if (flops[j] <= ti.flops) {
                continue;
            }
            free(keys[j]);
            keys[j] = strdup(ti.workload);
            flops[j] = ti.flops;
            snprintf(from[j], sizeof from[j], "%s task %d", name, i + 1);
        }
        kiln_tasks_destroy(ts);
        kiln_graph_destroy(g);
    }
    for (int j = 0; j < n; j++) {
        measure_key(keys[j], from[j], 100 + (uint64_t)j);
        free(keys[j]);
    }
}

/* ---- small graphs for the templates no zoo network uses ----------------------- */

static int in_f32(kiln_graph *g, const char *name, kiln_shape s)
{
    return kiln_graph_add_input(g, name, KILN_DTYPE_FLOAT32, &s);
}

static int weight(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    assert_true(v >= 0);
    kt_fill_random(data, kiln_shape_numel(&s), seed, -0.5f, 0.5f);
    return v;
}

static int op(kiln_graph *g, kiln_op o, const int *in, int n_in)
{
    int n = kiln_graph_add_node(g, o, NULL, in, n_in, 1);
    assert_true(n >= 0);
    return n;
}

static int out0(kiln_graph *g, int node)
{
    return kiln_graph_node_output(g, node, 0);
}

static void set_ints(kiln_graph *g, int node, const char *name, int n, const int64_t *v)
{
    assert_int_equal(kiln_node_set_ints(g, node, name, v, n), KILN_OK);
}

/* The first task of template `tpl` in g (after adding `result` as the
 * output), measured alone. */
static void measure_graph(kiln_graph *g, const char *tpl, const char *what)
{
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("%s: %s", what, err.msg);
    kiln_tasks *ts = tasks_of(g);
    int found = -1;
    for (int i = 0; i < kiln_tasks_count(ts) && found < 0; i++)
        if (!strcmp(info_of(ts, i).template_name, tpl))
            found = i;
    if (found < 0) {
        for (int i = 0; i < kiln_tasks_count(ts); i++)
            print_message("  %s: task %d is %s\n", what, i, info_of(ts, i).template_name);
        fail_msg("%s: no task of template %s", what, tpl);
    }
    measure_key(info_of(ts, found).workload, what, 900 + (uint64_t)n_seen);
    kiln_tasks_destroy(ts);
    kiln_graph_destroy(g);
}

static kiln_graph *new_graph(void)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    return g;
}

static void output(kiln_graph *g, int v)
{
    assert_int_equal(kiln_graph_add_output(g, v), KILN_OK);
}

static void case_conv2d_direct(void)
{
    /* depthwise over 5 channels: no block divides 5 */
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(4, 1, 5, 11, 9));
    int w = weight(g, "w", ks(4, 5, 1, 3, 3), 1);
    int c = op(g, KILN_OP_CONV, (int[]){x, w}, 2);
    assert_int_equal(kiln_node_set_int(g, c, "group", 5), KILN_OK);
    set_ints(g, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    output(g, out0(g, op(g, KILN_OP_RELU, (int[]){out0(g, c)}, 1)));
    measure_graph(g, "conv2d_direct", "conv2d_direct graph");
}

/* An RGB output conv (32 -> 3, 3x3) with bias and Tanh: a reduction over
 * the input's channel lanes, NCHW out. */
static void case_conv2d_fewout_nchwc(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(4, 1, 32, 9, 13));
    int w = weight(g, "w", ks(4, 3, 32, 3, 3), 1);
    int b = weight(g, "b", ks(1, 3), 2);
    int c = op(g, KILN_OP_CONV, (int[]){x, w, b}, 3);
    set_ints(g, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    output(g, out0(g, op(g, KILN_OP_TANH, (int[]){out0(g, c)}, 1)));
    measure_graph(g, "conv2d_fewout_nchwc", "conv2d_fewout_nchwc graph");
}

/* A grouped 3x3 conv of 128 channels in groups of gw, stride s. */
static void gconv_graph(int gw, int s, const char *tpl)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(4, 1, 128, 9, 10));
    int w = weight(g, "w", ks(4, 128, gw, 3, 3), 1);
    int c = op(g, KILN_OP_CONV, (int[]){x, w}, 2);
    assert_int_equal(kiln_node_set_int(g, c, "group", 128 / gw), KILN_OK);
    set_ints(g, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    set_ints(g, c, "strides", 2, (int64_t[]){s, s});
    output(g, out0(g, op(g, KILN_OP_RELU, (int[]){out0(g, c)}, 1)));
    char what[64];
    snprintf(what, sizeof what, "%s graph", tpl);
    measure_graph(g, tpl, what);
}

/* resnext's 32 groups of 4 channels: gw depthwise convs on input planes */
static void case_gconv2d_planes_nchwc(void) { gconv_graph(4, 1, "gconv2d_planes_nchwc"); }

/* groups of half a block at stride 2 (8 with AVX-512, 4 with AVX2), where
 * the planes do not pay: blocks of whole groups, block-diagonal */
static void case_gconv2d_nchwc(void)
{
    kiln_target tg;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    gconv_graph(tg.vec / 2, 2, "gconv2d_nchwc");
}

static void case_reduce(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(3, 4, 7, 10));
    int r = op(g, KILN_OP_REDUCEMEAN, &x, 1);
    set_ints(g, r, "axes", 2, (int64_t[]){0, 2});
    assert_int_equal(kiln_node_set_int(g, r, "keepdims", 0), KILN_OK);
    output(g, out0(g, r));
    measure_graph(g, "reduce", "reduce graph");
}

static void case_copy(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 3, 1));
    int e = op(g, KILN_OP_EXPAND, &x, 1);
    set_ints(g, e, "shape", 3, (int64_t[]){2, 3, 5});
    output(g, out0(g, e));
    measure_graph(g, "copy", "Expand graph");
}

static void case_gather_rows(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 10, 16));
    kiln_shape is = ks(1, 4);
    int64_t idx[4] = {3, 0, 9, -1};
    int iv = kiln_graph_add_const(g, "idx", KILN_DTYPE_INT64, &is, idx);
    int ga = op(g, KILN_OP_GATHER, (int[]){x, iv}, 2);
    assert_int_equal(kiln_node_set_int(g, ga, "axis", 0), KILN_OK);
    output(g, out0(g, ga));
    measure_graph(g, "gather_rows", "Gather rows graph");
}

static void case_gather(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(3, 4, 5, 6));
    kiln_shape s0 = {.rank = 0};
    int64_t idx = -2;
    int iv = kiln_graph_add_const(g, "idx", KILN_DTYPE_INT64, &s0, &idx);
    int ga = op(g, KILN_OP_GATHER, (int[]){x, iv}, 2);
    assert_int_equal(kiln_node_set_int(g, ga, "axis", 1), KILN_OK);
    output(g, out0(g, ga));
    measure_graph(g, "gather", "Gather scalar graph");
}

static void case_compare(void)
{
    kiln_graph *g = new_graph();
    int a = in_f32(g, "a", ks(3, 2, 5, 8));
    int b = weight(g, "b", ks(1, 8), 4);
    output(g, out0(g, op(g, KILN_OP_LESS, (int[]){a, b}, 2)));
    measure_graph(g, "compare", "Less graph");
}

static void case_pad(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(3, 2, 5, 7));
    int e = out0(g, op(g, KILN_OP_EXP, &x, 1));
    int p = op(g, KILN_OP_PAD, &e, 1);
    set_ints(g, p, "pads", 6, (int64_t[]){0, 2, 1, 0, 3, 2});
    assert_int_equal(kiln_node_set_string(g, p, "mode", "reflect"), KILN_OK);
    output(g, out0(g, p));
    measure_graph(g, "pad", "Pad graph");
}

static void case_cast(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 6, 9));
    int c = op(g, KILN_OP_CAST, &x, 1);
    assert_int_equal(kiln_node_set_int(g, c, "to", 6 /* ONNX int32 */), KILN_OK);
    output(g, out0(g, c));
    measure_graph(g, "cast", "Cast graph");
}

static void case_where(void)
{
    kiln_graph *g = new_graph();
    kiln_shape cs = ks(3, 2, 1, 8);
    int c = kiln_graph_add_input(g, "c", KILN_DTYPE_BOOL, &cs);
    int x = in_f32(g, "x", ks(3, 2, 5, 8));
    int y = weight(g, "y", ks(0), 3);
    output(g, out0(g, op(g, KILN_OP_WHERE, (int[]){c, x, y}, 3)));
    measure_graph(g, "where", "Where graph");
    /* a constant mask larger than a key records (a folded causal mask): it is
     * run-time data, so the parsed task still builds back into its key */
    g = new_graph();
    static uint8_t causal[16 * 16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            causal[i * 16 + j] = j <= i;
    kiln_shape ms = ks(2, 16, 16);
    int m = kiln_graph_add_const(g, "causal", KILN_DTYPE_BOOL, &ms, causal);
    x = in_f32(g, "x", ks(3, 2, 16, 16));
    y = weight(g, "y", ks(0), 3);
    output(g, out0(g, op(g, KILN_OP_WHERE, (int[]){m, x, y}, 3)));
    measure_graph(g, "where", "Where graph with a 256-element constant mask");
}

static void case_einsum(void)
{
    kiln_graph *g = new_graph();
    int a = in_f32(g, "a", ks(3, 3, 5, 7));
    int b = in_f32(g, "b", ks(3, 3, 7, 6));
    int e = op(g, KILN_OP_EINSUM, (int[]){a, b}, 2);
    assert_int_equal(kiln_node_set_string(g, e, "equation", "bij,bjk->bik"), KILN_OK);
    output(g, out0(g, e));
    measure_graph(g, "einsum", "Einsum graph");
}

/* TopK: no template (the reference-kernel fallback), two outputs */
static void case_ref(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 3, 11));
    int t = kiln_graph_add_node(g, KILN_OP_TOPK, "topk", &x, 1, 2);
    assert_true(t >= 0);
    assert_int_equal(kiln_node_set_int(g, t, "k", 4), KILN_OK);
    output(g, kiln_graph_node_output(g, t, 0));
    output(g, kiln_graph_node_output(g, t, 1));
    measure_graph(g, "ref", "TopK graph (reference fallback)");
}

static void case_argreduce(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(3, 2, 9, 5));
    int a = op(g, KILN_OP_ARGMAX, &x, 1);
    assert_int_equal(kiln_node_set_int(g, a, "axis", 1), KILN_OK);
    output(g, out0(g, a));
    measure_graph(g, "argreduce", "ArgMax graph");
}

/* Integer Add of a cast activation: the arith template */
static void case_arith(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 4, 7));
    int c = op(g, KILN_OP_CAST, &x, 1);
    assert_int_equal(kiln_node_set_int(g, c, "to", 6 /* ONNX int32 */), KILN_OK);
    int ci = out0(g, c);
    output(g, out0(g, op(g, KILN_OP_ADD, (int[]){ci, ci}, 2)));
    measure_graph(g, "arith", "int32 Add graph");
}

static void case_cumsum(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(2, 5, 9));
    int c = op(g, KILN_OP_CUMSUM, &x, 1);
    assert_int_equal(kiln_node_set_int(g, c, "axis", 1), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, c, "reverse", 1), KILN_OK);
    output(g, out0(g, c));
    measure_graph(g, "cumsum", "CumSum graph");
}

/* A MatMul of two activations with a broadcast batch (the zoo's attention
 * MatMuls become Attention nodes). */
static void case_matmul(void)
{
    kiln_graph *g = new_graph();
    int a = in_f32(g, "a", ks(4, 2, 3, 5, 8));
    int b = in_f32(g, "b", ks(4, 1, 3, 8, 6));
    output(g, out0(g, op(g, KILN_OP_MATMUL, (int[]){a, b}, 2)));
    measure_graph(g, "matmul", "MatMul graph");
}

/* Softmax over a middle axis (the zoo's softmaxes are inside Attention). */
static void case_softmax(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(3, 4, 7, 5));
    int sm = op(g, KILN_OP_SOFTMAX, &x, 1);
    assert_int_equal(kiln_node_set_int(g, sm, "axis", 1), KILN_OK);
    output(g, out0(g, sm));
    measure_graph(g, "softmax", "Softmax graph");
}

/* Bilinear 2x upsampling of the last two dims (segmentation heads). */
static void case_resize(void)
{
    kiln_graph *g = new_graph();
    int x = in_f32(g, "x", ks(4, 1, 3, 6, 7));
    int rs = op(g, KILN_OP_RESIZE, &x, 1);
    assert_int_equal(kiln_node_set_string(g, rs, "mode", "linear"), KILN_OK);
    assert_int_equal(kiln_node_set_string(g, rs, "coordinate_transformation_mode", "half_pixel"),
                     KILN_OK);
    const float scales[4] = {1, 1, 2, 2};
    assert_int_equal(kiln_node_set_floats(g, rs, "scales", scales, 4), KILN_OK);
    output(g, out0(g, rs));
    measure_graph(g, "resize", "Resize graph");
}

/* A small graph per template no zoo network uses (run when the target has
 * the template). */
static const struct {
    const char *tpl;
    void (*fn)(void);
} cases[] = {
    {"conv2d_direct", case_conv2d_direct},
    {"conv2d_fewout_nchwc", case_conv2d_fewout_nchwc},
    {"gconv2d_planes_nchwc", case_gconv2d_planes_nchwc},
    {"gconv2d_nchwc", case_gconv2d_nchwc},
    {"reduce", case_reduce},
    {"copy", case_copy},
    {"gather", case_gather},
    {"gather_rows", case_gather_rows},
    {"compare", case_compare},
    {"pad", case_pad},
    {"cast", case_cast},
    {"where", case_where},
    {"einsum", case_einsum},
    {"argreduce", case_argreduce},
    {"arith", case_arith},
    {"cumsum", case_cumsum},
    {"matmul", case_matmul},
    {"softmax", case_softmax},
    {"resize", case_resize},
    {"ref", case_ref},
};

/* The templates no zoo network uses, then: every template of the target's
 * set (templates.def, and the fallback) was measured. */
static void test_other_templates_alone(void **state)
{
    (void)state;
    kiln_target tg;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    const kiln_template_set *set = kiln_target_templates(&tg);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        if (kiln_target_template_named(&tg, cases[c].tpl))
            cases[c].fn();
    char missing[1024] = "";
    for (int i = 0; i <= set->n_tpl; i++) {
        const char *name = i < set->n_tpl ? set->tpl[i]->name : set->fallback->name;
        bool ok = false;
        for (int j = 0; j < n_seen && !ok; j++)
            ok = !strcmp(seen[j].name, name) && seen[j].measured;
        if (!ok)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", name);
    }
    if (missing[0])
        fail_msg("templates with no build-alone case (add a graph to tests/compiler/"
                 "test_tasks.c):%s",
                 missing);
}

/* ---- configurations --------------------------------------------------------------- */

static void test_bad_configs(void **state)
{
    (void)state;
    kiln_graph *g = zoo("mlp");
    kiln_tasks *ts = tasks_of(g);
    kiln_task_info ti = info_of(ts, 0);
    assert_string_equal(ti.template_name, "dense");
    kiln_workload *w = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_workload_create(ti.workload, 3, &w, &err), KILN_OK);
    kiln_measure_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    res->step = -77; /* untouched on failure */
    kiln_measure_options o = {.num_threads = 1, .jobs = 2};
    kiln_knob_info k0;
    assert_true(ti.n_knobs > 0);
    assert_int_equal(kiln_workload_knob(w, 0, &k0, &err), KILN_OK);
    char outside[128], fraction[128];
    snprintf(outside, sizeof outside, "{\"%s\": -77}", k0.name);
    snprintf(fraction, sizeof fraction, "{\"%s\": 2.5}", k0.name);
    const struct {
        const char *cfg, *msg;
    } bad[] = {
        {"{\"no_such_knob\": 1}", "no_such_knob"},
        {outside, "not in the space"},
        {fraction, "not an integer"},
        {"{mr", "not JSON"},
        {"[1, 2]", "JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.config = bad[i].cfg;
        assert_int_equal(kiln_workload_measure(w, &o, res, &err), KILN_ERR_INVALID_ARGUMENT);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("config %s: message '%s' lacks '%s'", bad[i].cfg, err.msg, bad[i].msg);
        assert_int_equal(res->step, -77);
    }
    /* the defaults (no config), then the same build again from the cache */
    o.config = NULL;
    assert_int_equal(kiln_workload_measure(w, &o, res, &err), KILN_OK);
    assert_non_null(strstr(res->config, "\"source\": \"default\""));
    assert_true(res->time.median > 0);
    assert_int_equal(res->time.threads, 1);
    o.config = ti.default_config;
    assert_int_equal(kiln_workload_measure(w, &o, res, &err), KILN_OK);
    assert_non_null(strstr(res->config, "\"source\": \"explicit\""));
    free(res);
    kiln_workload_destroy(w);
    kiln_tasks_destroy(ts);
    kiln_graph_destroy(g);
}

/* A key names its target: a generic task is measured on any machine; an
 * AVX-512 one is refused (not run) on a machine without AVX-512. */
static void test_targets(void **state)
{
    (void)state;
    kiln_graph *g = zoo("mlp");
    kiln_target host;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &host, &err), KILN_OK);
    static const char *const targets[] = {"generic", "avx512"};
    for (int i = 0; i < 2; i++) {
        kiln_compile_options co = {.target = targets[i]};
        kiln_tasks *ts = NULL;
        assert_int_equal(kiln_tasks_extract(g, &co, &ts, &err), KILN_OK);
        kiln_task_info ti = info_of(ts, 0);
        assert_non_null(strstr(ti.workload, i == 0 ? "|generic|" : "|x86_64-avx512|"));
        kiln_workload *w = NULL;
        assert_int_equal(kiln_workload_create(ti.workload, 5, &w, &err), KILN_OK);
        kiln_measure_result *res = calloc(1, sizeof *res);
        kiln_measure_options o = {.num_threads = 1, .jobs = 2};
        kiln_status want = i == 1 && host.isa != KILN_TARGET_AVX512 ? KILN_ERR_UNSUPPORTED
                                                                     : KILN_OK;
        assert_int_equal(kiln_workload_measure(w, &o, res, &err), want);
        if (want == KILN_OK)
            assert_true(res->time.median > 0);
        else
            assert_non_null(strstr(err.msg, "x86_64-avx512"));
        free(res);
        kiln_workload_destroy(w);
        kiln_tasks_destroy(ts);
    }
    kiln_graph_destroy(g);
}

/* The register tiles the compiler picks for the direct conv fit the
 * budget of the target's microkernels (kiln_conv_max_t of the block
 * width's ISA), so the generated code never clamps them, and keep at
 * least 8 accumulators: on every target, whatever ISA libkiln itself was
 * built for (it used to model its own, portable: 7-8 pixels x 4 blocks,
 * which AVX2 code clamped to 2 x 4 and AVX-512 code to 7 x 4). */
static void test_conv_tiles_fit(void **state)
{
    (void)state;
    kiln_graph *g = zoo("resnet-50");
    static const char *const targets[] = {"avx2", "avx512"};
    for (int i = 0; i < 2; i++) {
        kiln_compile_options co = {.target = targets[i]};
        kiln_tasks *ts = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_tasks_extract(g, &co, &ts, &err), KILN_OK);
        int checked = 0;
        for (int k = 0; k < kiln_tasks_count(ts); k++) {
            kiln_task_info ti = info_of(ts, k);
            if (strcmp(ti.template_name, "conv2d_nchwc"))
                continue;
            cJSON *c = cJSON_Parse(ti.default_config);
            assert_non_null(c);
            int t = cJSON_GetObjectItem(c, "ow_tile")->valueint;
            int o = cJSON_GetObjectItem(c, "oc_tile")->valueint;
            int cb = cJSON_GetObjectItem(c, "cb_out")->valueint;
            cJSON_Delete(c);
            assert_int_equal(cb, i == 0 ? 8 : 16);
            int mt = kiln_conv_max_t(kiln_conv_model_isa(cb), o);
            if (t > mt || t * o < 8)
                fail_msg("%s: task %d (%s): %d x %d tile, budget %d pixels at %d blocks",
                         targets[i], k + 1, ti.shapes, t, o, mt, o);
            checked++;
        }
        assert_true(checked >= 10);
        kiln_tasks_destroy(ts);
    }
    kiln_graph_destroy(g);
}

/* The conv template's analytic picks (kiln_task_info.picks): on every conv
 * task of resnet-50, for AVX2 and AVX-512, one to four, each a point of
 * the space (values among the choices, the block knobs the default's)
 * other than the default and each other; on AVX2 some 4x3 default offers
 * the 5x2 or 6x2 tile the weight-load model ranks next. Each pick of the
 * smallest conv task builds and matches the reference executor. */
static void test_conv_picks(void **state)
{
    (void)state;
    kiln_graph *g = zoo("resnet-50");
    static const char *const targets[] = {"avx2", "avx512", NULL};
    for (int i = 0; i < 3; i++) {
        kiln_compile_options co = {.target = targets[i]};
        kiln_tasks *ts = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_tasks_extract(g, &co, &ts, &err), KILN_OK);
        int convs = 0, wide = 0, small = -1;
        double small_flops = 1e300;
        for (int k = 0; k < kiln_tasks_count(ts); k++) {
            kiln_task_info ti = info_of(ts, k);
            if (strcmp(ti.template_name, "conv2d_nchwc"))
                continue;
            convs++;
            if (ti.flops < small_flops) {
                small_flops = ti.flops;
                small = k;
            }
            assert_true(ti.n_picks >= 1 && ti.n_picks <= 4);
            int def[32], t_at = -1, o_at = -1;
            assert_true(ti.n_knobs <= 32);
            for (int c = 0; c < ti.n_knobs; c++) {
                kiln_knob_info ki;
                assert_int_equal(kiln_tasks_knob(ts, k, c, &ki, &err), KILN_OK);
                def[c] = ki.value;
                t_at = strcmp(ki.name, "ow_tile") ? t_at : c;
                o_at = strcmp(ki.name, "oc_tile") ? o_at : c;
                for (int p = 0; p < ti.n_picks; p++) {
                    int v = ti.picks[p * ti.n_knobs + c], in = 0;
                    for (int x = 0; x < ki.n_choices; x++)
                        in |= ki.choices[x] == v;
                    if (!in)
                        fail_msg("task %d pick %d: %s = %d is not a choice", k + 1, p + 1,
                                 ki.name, v);
                    if (!strcmp(ki.kind, "block"))
                        assert_int_equal(v, ki.value);
                }
            }
            for (int p = 0; p < ti.n_picks; p++) {
                const int *a = &ti.picks[p * ti.n_knobs];
                assert_true(memcmp(a, def, sizeof(int) * (size_t)ti.n_knobs) != 0);
                for (int q = 0; q < p; q++)
                    assert_true(memcmp(a, &ti.picks[q * ti.n_knobs],
                                       sizeof(int) * (size_t)ti.n_knobs) != 0);
                if (def[t_at] == 4 && def[o_at] == 3 && a[o_at] == 2 &&
                    (a[t_at] == 5 || a[t_at] == 6))
                    wide++;
            }
        }
        assert_true(convs >= 10);
        if (i == 0)
            assert_true(wide >= 3);
        if (i == 2) { /* the host: build and check each pick of the smallest conv */
            kiln_task_info ti = info_of(ts, small);
            kiln_workload *w = NULL;
            assert_int_equal(kiln_workload_create(ti.workload, 5, &w, &err), KILN_OK);
            kiln_measure_result *res = calloc(1, sizeof *res);
            assert_non_null(res);
            for (int p = 0; p < ti.n_picks; p++) {
                char cfg[512];
                size_t n = (size_t)snprintf(cfg, sizeof cfg, "{");
                for (int c = 0; c < ti.n_knobs; c++) {
                    kiln_knob_info ki;
                    assert_int_equal(kiln_tasks_knob(ts, small, c, &ki, &err), KILN_OK);
                    n += (size_t)snprintf(cfg + n, sizeof cfg - n, "%s\"%s\": %d", c ? ", " : "",
                                          ki.name, ti.picks[p * ti.n_knobs + c]);
                }
                snprintf(cfg + n, sizeof cfg - n, "}");
                kiln_measure_options o = {.num_threads = 2, .jobs = 2, .config = cfg};
                if (kiln_workload_measure(w, &o, res, &err) != KILN_OK)
                    fail_msg("pick %d %s: %s", p + 1, cfg, err.msg);
                assert_true(res->max_abs_diff < 1e-3);
            }
            free(res);
            kiln_workload_destroy(w);
        }
        kiln_tasks_destroy(ts);
    }
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_tiles_fit),
        cmocka_unit_test(test_conv_picks),
        cmocka_unit_test(test_zoo_round_trip),
        cmocka_unit_test(test_keys_independent_of_config),
        cmocka_unit_test(test_integer_weights_in_key),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_zoo_templates_alone),
        cmocka_unit_test(test_other_templates_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
