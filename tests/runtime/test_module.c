/* tests/runtime/test_module.c: loading and running compiled models with the
 * runtime-only API: outputs of hand-written models (add+relu, a two-step model
 * with weights and workspace) for several thread counts, input dtype/shape
 * checks, descriptor strings and steps, KILN_NUM_THREADS / KILN_BIND_THREADS,
 * fallback steps (nodes run by their reference kernels) between kernels,
 * denormals flushed inside compiled steps only,
 * and clear errors (no crash) for corrupt descriptors, a wrong ABI version, a
 * missing symbol, a file that is not a shared object and a missing file. */
#include <dlfcn.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"
#include "rt_models.h"
#include "test_support.h"

#define assert_contains(hay, needle)                                                   \
    do {                                                                               \
        if (!strstr((hay), (needle)))                                                  \
            fail_msg("expected \"%s\" in \"%s\"", (needle), (hay));                    \
    } while (0)

static kiln_module *load(const char *name, int threads)
{
    kiln_module_options o = {.num_threads = threads, .bind_threads = 0};
    kiln_module *m = NULL;
    kiln_error err = {0};
    if (kiln_module_load(rt_model(name), &o, &m, &err) != KILN_OK)
        fail_msg("load %s: %s", name, err.msg);
    return m;
}

/* an exported int of a loaded test model */
static int *model_int(const char *model, const char *sym)
{
    void *h = dlopen(rt_model(model), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    int *p = dlsym(h, sym);
    dlclose(h); /* the module still holds its reference */
    assert_non_null(p);
    return p;
}

static void test_add_relu(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        kiln_module *m = load("add_relu", threads);
        assert_int_equal(kiln_module_num_threads(m), threads);
        assert_int_equal(kiln_module_num_inputs(m), 2);
        assert_int_equal(kiln_module_num_outputs(m), 1);
        const char *name;
        kiln_dtype dt;
        kiln_shape s;
        assert_int_equal(kiln_module_input_info(m, 1, &name, &dt, &s), KILN_OK);
        assert_string_equal(name, "y");
        assert_int_equal(dt, KILN_DTYPE_FLOAT32);
        assert_true(kiln_shape_equal(&s, &(kiln_shape){2, {2, 3}}));
        assert_int_equal(kiln_module_output_info(m, 0, &name, &dt, &s), KILN_OK);
        assert_string_equal(name, "out");
        assert_int_not_equal(kiln_module_input_info(m, 2, &name, &dt, &s), KILN_OK);
        assert_int_not_equal(kiln_module_output_info(m, -1, &name, &dt, &s), KILN_OK);

        float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {0.5f, 1, -4, 2, 0, 7};
        kiln_tensor tx = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, x}, ty = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, y};
        kiln_error err = {0};
        for (int rep = 0; rep < 3; rep++) {
            assert_int_equal(kiln_module_set_input(m, 0, &tx, &err), KILN_OK);
            assert_int_equal(kiln_module_set_input(m, 1, &ty, &err), KILN_OK);
            assert_int_equal(kiln_module_run(m, &err), KILN_OK);
            const kiln_tensor *o = kiln_module_output(m, 0);
            assert_non_null(o);
            assert_int_equal(o->dtype, KILN_DTYPE_FLOAT32);
            assert_true(kiln_shape_equal(&o->shape, &tx.shape));
            assert_int_equal((uintptr_t)o->data % 64, 0);
            for (int i = 0; i < 6; i++) {
                float want = x[i] + y[i] > 0 ? x[i] + y[i] : 0;
                assert_float_equal(((const float *)o->data)[i], want, 0);
            }
            x[0] += 1;
        }
        assert_null(kiln_module_output(m, 1));
        assert_string_equal(kiln_module_name(m), "add_relu");
        assert_string_equal(kiln_module_target(m), "generic");
        assert_string_equal(kiln_module_build_id(m), "test-add-relu");
        assert_int_equal(kiln_module_num_steps(m), 1);
        kiln_step_info si;
        assert_int_equal(kiln_module_step_info(m, 0, &si), KILN_OK);
        assert_string_equal(si.name, "add+relu");
        assert_string_equal(si.op, "injective");
        assert_float_equal(si.flops, 12, 0);
        assert_int_not_equal(kiln_module_step_info(m, 1, &si), KILN_OK);
        assert_int_equal(kiln_module_run_step(m, 0), KILN_OK);
        kiln_module_destroy(m);
    }
    kiln_module_destroy(NULL);
}

/* Compiled steps run with flush-to-zero and denormals-are-zero (runtime/fpenv.h)
 * on every thread, the pool's workers included, and the caller's MXCSR is its
 * own again after kiln_module_run and kiln_module_run_step. */
static void test_denormals(void **state)
{
    (void)state;
#if defined(__x86_64__)
    const float tiny = 1e-39f; /* below FLT_MIN: a denormal */
    for (int threads = 1; threads <= 3; threads++) {
        kiln_module *m = load("add_relu", threads);
        float x[6] = {tiny, 3 * tiny, 2, 5 * tiny, 1, 7 * tiny}, y[6] = {0};
        kiln_tensor tx = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, x}, ty = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, y};
        kiln_error err = {0};
        const unsigned before = _mm_getcsr();
        assert_int_equal(before & 0x8040u, 0); /* the test starts with IEEE semantics */
        for (int run_step = 0; run_step < 2; run_step++) {
            assert_int_equal(kiln_module_set_input(m, 0, &tx, &err), KILN_OK);
            assert_int_equal(kiln_module_set_input(m, 1, &ty, &err), KILN_OK);
            if (run_step)
                assert_int_equal(kiln_module_run_step(m, 0), KILN_OK);
            else
                assert_int_equal(kiln_module_run(m, &err), KILN_OK);
            assert_int_equal(_mm_getcsr() & ~0x3Fu, before & ~0x3Fu); /* modes; 0-5 are sticky flags */
            const float *o = kiln_module_output(m, 0)->data;
            for (int i = 0; i < 6; i++)
                assert_float_equal(o[i], x[i] >= 1 ? x[i] : 0.0f, 0);
        }
        volatile float keep = tiny; /* the caller still computes with denormals */
        assert_true(keep * 2 > 0);
        kiln_module_destroy(m);
    }
#endif
}

static void test_input_mismatch(void **state)
{
    (void)state;
    kiln_module *m = load("add_relu", 2);
    float x[8] = {0};
    double xd[6] = {0};
    kiln_error err = {0};
    kiln_tensor bad_shape = {KILN_DTYPE_FLOAT32, {2, {3, 2}}, x};
    assert_int_equal(kiln_module_set_input(m, 0, &bad_shape, &err), KILN_ERR_SHAPE_MISMATCH);
    assert_contains(err.msg, "input 0 'x'");
    assert_contains(err.msg, "[3, 2]");
    assert_contains(err.msg, "[2, 3]");
    kiln_tensor bad_rank = {KILN_DTYPE_FLOAT32, {1, {6}}, x};
    assert_int_equal(kiln_module_set_input(m, 1, &bad_rank, &err), KILN_ERR_SHAPE_MISMATCH);
    kiln_tensor bad_type = {KILN_DTYPE_FLOAT64, {2, {2, 3}}, xd};
    assert_int_equal(kiln_module_set_input(m, 0, &bad_type, &err), KILN_ERR_TYPE_MISMATCH);
    assert_contains(err.msg, "float64");
    assert_contains(err.msg, "float32");
    kiln_tensor ok = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, x};
    assert_int_equal(kiln_module_set_input(m, 2, &ok, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_module_set_input(m, -1, &ok, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_module_set_input(m, 0, NULL, &err), KILN_ERR_INVALID_ARGUMENT);
    kiln_tensor no_data = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, NULL};
    assert_int_equal(kiln_module_set_input(m, 0, &no_data, &err), KILN_ERR_INVALID_ARGUMENT);
    kiln_module_destroy(m);
}

static void test_two_step(void **state)
{
    (void)state;
    int *calls = NULL, *max_thread = NULL, *violations = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        kiln_module *m = load("two_step", threads);
        if (!calls) {
            calls = model_int("two_step", "rt_model_calls");
            max_thread = model_int("two_step", "rt_model_max_thread");
            violations = model_int("two_step", "rt_model_violations");
        }
        float x[1000];
        for (int i = 0; i < 1000; i++)
            x[i] = (float)i - 300.0f;
        kiln_tensor t = {KILN_DTYPE_FLOAT32, {1, {1000}}, x};
        kiln_error err = {0};
        int before = *calls;
        *max_thread = 0;
        for (int rep = 0; rep < 50; rep++) {
            assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
            if (rep % 4 == 1) /* the weights evicted from the caches (as the tuner times tasks) */
                assert_int_equal(kiln_module_evict_weights(m, &err), KILN_OK);
            if (rep % 4 == 3) /* ... or to the last-level cache (a model that fits it) */
                assert_int_equal(kiln_module_evict_weights_to_llc(m, &err), KILN_OK);
            assert_int_equal(kiln_module_run(m, &err), KILN_OK);
            const float *o = kiln_module_output(m, 0)->data;
            for (int i = 0; i < 1000; i++)
                if (o[i] != 2.0f * x[i] + i / 2.0f)
                    fail_msg("%d threads, run %d: out[%d] = %g, want %g", threads, rep, i, o[i],
                             2.0f * x[i] + i / 2.0f);
        }
        assert_int_equal(*calls - before, 50);
        assert_int_equal(*violations, 0);
        assert_true(*max_thread < threads);
        kiln_module_destroy(m);
    }
}

static void test_env_threads(void **state)
{
    (void)state;
    kiln_module *m = NULL;
    kiln_error err = {0};
    setenv("KILN_NUM_THREADS", "3", 1);
    assert_int_equal(kiln_module_load(rt_model("add_relu"), NULL, &m, &err), KILN_OK);
    assert_int_equal(kiln_module_num_threads(m), 3);
    kiln_module_destroy(m);
    /* the option overrides the environment */
    kiln_module_options o = {.num_threads = 2, .bind_threads = -1};
    assert_int_equal(kiln_module_load(rt_model("add_relu"), &o, &m, &err), KILN_OK);
    assert_int_equal(kiln_module_num_threads(m), 2);
    kiln_module_destroy(m);
    /* unset: the physical cores */
    unsetenv("KILN_NUM_THREADS");
    assert_int_equal(kiln_module_load(rt_model("add_relu"), NULL, &m, &err), KILN_OK);
    assert_int_equal(kiln_module_num_threads(m), kiln_runtime_physical_cores());
    assert_true(kiln_runtime_physical_cores() >= 1);
    kiln_module_destroy(m);
    /* malformed values are errors, and *out is untouched */
    m = (kiln_module *)&err;
    setenv("KILN_NUM_THREADS", "two", 1);
    assert_int_equal(kiln_module_load(rt_model("add_relu"), NULL, &m, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_contains(err.msg, "KILN_NUM_THREADS");
    assert_ptr_equal(m, (kiln_module *)&err);
    unsetenv("KILN_NUM_THREADS");
    setenv("KILN_BIND_THREADS", "yes", 1);
    assert_int_equal(kiln_module_load(rt_model("add_relu"), NULL, &m, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_contains(err.msg, "KILN_BIND_THREADS");
    /* binding on: still correct */
    setenv("KILN_BIND_THREADS", "1", 1);
    m = NULL;
    assert_int_equal(kiln_module_load(rt_model("two_step"), &(kiln_module_options){2, -1}, &m,
                                      &err),
                     KILN_OK);
    float x[1000] = {0};
    kiln_tensor t = {KILN_DTYPE_FLOAT32, {1, {1000}}, x};
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    assert_float_equal(((const float *)kiln_module_output(m, 0)->data)[999], 999 / 2.0, 0);
    kiln_module_destroy(m);
    unsetenv("KILN_BIND_THREADS");
    o.num_threads = -1;
    assert_int_equal(kiln_module_load(rt_model("add_relu"), &o, &m, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    o.num_threads = 100000;
    assert_int_equal(kiln_module_load(rt_model("add_relu"), &o, &m, &err),
                     KILN_ERR_INVALID_ARGUMENT);
}

/* Fallback steps (nodes run by their reference kernels) between kernels: the
 * values, the step table, and a run error (an index out of range in the
 * data) naming the step and op. */
static void test_ref_steps(void **state)
{
    (void)state;
    kiln_module *m = load("ref_steps", 2);
    assert_int_equal(kiln_module_num_steps(m), 6);
    kiln_step_info si;
    assert_int_equal(kiln_module_step_info(m, 2, &si), KILN_OK);
    assert_string_equal(si.op, "ref:TopK");
    float x[6] = {-1.2f, 0.4f, 3.1f, -2.0f, 5.0f, 0.7f};
    int64_t ix[2] = {2, 0};
    kiln_tensor tx = {KILN_DTYPE_FLOAT32, {2, {2, 3}}, x};
    kiln_tensor ti = {KILN_DTYPE_INT64, {1, {2}}, ix};
    kiln_error err = {0};
    assert_int_equal(kiln_module_set_input(m, 0, &tx, &err), KILN_OK);
    assert_int_equal(kiln_module_set_input(m, 1, &ti, &err), KILN_OK);
    for (int run = 0; run < 2; run++) {
        if (kiln_module_run(m, &err) != KILN_OK)
            fail_msg("run: %s", err.msg);
        static const int64_t y[6] = {-2, 0, 6, -4, 10, 1}, idx[4] = {2, 1, 1, 2};
        static const float v[4] = {6.2f, 0.8f, 10.0f, 1.4f};
        static const float c[6] = {-1.5f, 0.8f, 3.0f, -1.5f, 3.0f, 1.4f};
        static const float sum[6] = {7.6f, 20.8f, 36.2f, 6.0f, 30.0f, 31.4f}, g[2] = {30, 10};
        assert_memory_equal(kiln_module_output(m, 0)->data, y, sizeof y);
        assert_memory_equal(kiln_module_output(m, 2)->data, idx, sizeof idx);
        for (int i = 0; i < 6; i++) {
            if (i < 4)
                assert_float_equal(((const float *)kiln_module_output(m, 1)->data)[i], v[i], 1e-6);
            assert_float_equal(((const float *)kiln_module_output(m, 3)->data)[i], c[i], 1e-6);
            assert_float_equal(((const float *)kiln_module_output(m, 4)->data)[i], sum[i], 1e-5);
            if (i < 2)
                assert_float_equal(((const float *)kiln_module_output(m, 5)->data)[i], g[i], 0);
        }
    }
    /* the steps one by one equal the run */
    for (int s = 0; s < kiln_module_num_steps(m); s++)
        assert_int_equal(kiln_module_run_step(m, s), KILN_OK);
    ix[0] = 5;
    assert_int_equal(kiln_module_set_input(m, 1, &ti, &err), KILN_OK);
    assert_int_equal(kiln_module_run(m, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_contains(err.msg, "step 5 'gather' (ref:Gather): ");
    assert_contains(err.msg, "index 5");
    assert_int_equal(kiln_module_run_step(m, 5), KILN_ERR_INVALID_ARGUMENT);
    kiln_module_destroy(m);
}

static void expect_load_error(const char *path, kiln_status want, const char *needle)
{
    kiln_module *m = (kiln_module *)&m; /* must stay untouched */
    kiln_error err = {0};
    kiln_status st = kiln_module_load(path, NULL, &m, &err);
    if (st != want)
        fail_msg("%s: status %s (%s), expected %s", path, kiln_status_str(st), err.msg,
                 kiln_status_str(want));
    assert_ptr_equal(m, (kiln_module *)&m);
    assert_int_equal(err.status, want);
    assert_contains(err.msg, needle);
}

static void test_corrupt(void **state)
{
    (void)state;
    static const struct {
        int k;
        kiln_status st;
        const char *needle;
    } cases[] = {
        {1, KILN_ERR_UNSUPPORTED, "ABI version 42"},
        {2, KILN_ERR_PARSE, "tensor 1 'out': 4 bytes at offset 1048576 lie outside the arena"},
        {3, KILN_ERR_PARSE, "step 0 'copy': argument 1 refers to tensor 7"},
        {4, KILN_ERR_PARSE, "tensor 0 'x': invalid dimension 0 = -3"},
        {5, KILN_ERR_PARSE, "returned no model descriptor"},
        {6, KILN_ERR_PARSE, "no symbol 'kiln_model_get'"},
        {7, KILN_ERR_PARSE, "offset 4 is not 64-byte aligned"},
        {8, KILN_ERR_PARSE, "invalid dtype 99"},
        {9, KILN_ERR_PARSE, "output 0 refers to tensor -1"},
        {10, KILN_ERR_PARSE, "4 bytes of storage for 100 elements"},
        {11, KILN_ERR_PARSE, "step 0 'copy' has no kernel"},
        {12, KILN_ERR_PARSE,
         "step 0 'copy': fallback node (Cast): output 0 is float32[1], but its shape inference "
         "gives int64[1]"},
        {13, KILN_ERR_UNSUPPORTED, "step 0 'copy': this runtime has no reference kernel for op "
                                   "'Frobnicate'"},
        {14, KILN_ERR_PARSE, "step 0 'copy': fallback node: bad output list"},
        {15, KILN_ERR_PARSE, "step 0 'copy': fallback node: bad attribute list"},
        {16, KILN_ERR_PARSE, "step 0 'copy': fallback node: bad input list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "corrupt_%d", cases[i].k);
        expect_load_error(rt_model(name), cases[i].st, cases[i].needle);
    }
}

static void test_not_a_model(void **state)
{
    (void)state;
    char *dir = kt_tempdir();
    char path[1024];
    snprintf(path, sizeof path, "%s/garbage.so", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("this is not an ELF file\n", f);
    fclose(f);
    expect_load_error(path, KILN_ERR_PARSE, "cannot load as a shared object");
    expect_load_error(dir, KILN_ERR_IO, "not a regular file");
    snprintf(path, sizeof path, "%s/missing.so", dir);
    expect_load_error(path, KILN_ERR_IO, "No such file");
    /* a bare name is a file in the current directory, not a library search */
    expect_load_error("libc.so.6", KILN_ERR_IO, "libc.so.6");
    kt_rmdir(dir);
    free(dir);
    kiln_module *m = NULL;
    assert_int_equal(kiln_module_load(NULL, NULL, &m, NULL), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_module_run(NULL, NULL), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_module_num_inputs(NULL), 0);
}

int main(void)
{
    unsetenv("KILN_NUM_THREADS");
    unsetenv("KILN_BIND_THREADS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_relu),    cmocka_unit_test(test_denormals),
        cmocka_unit_test(test_input_mismatch),
        cmocka_unit_test(test_two_step),    cmocka_unit_test(test_env_threads),
        cmocka_unit_test(test_corrupt),     cmocka_unit_test(test_not_a_model),
        cmocka_unit_test(test_ref_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
