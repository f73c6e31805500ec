/* tests/runtime/test_bench.c: the time evaluator (TVM time_evaluator
 * semantics) on a model with a known cost (a step that busy-waits a fixed
 * time): the warm-up run, number x repeat runs, number growth until one
 * measurement lasts min_repeat_ms, cooldown, cache flush, consistent
 * statistics, option validation, error propagation and the preproc hook
 * (kiln_module_evict_weights is one). Only lower bounds of times are asserted
 * (a busy-wait never takes less than it waits), and one upper bound 100x
 * above a run (the preproc's sleep left out of the timing). */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/runtime.h"
#include "rt_models.h"
#include "runtime/module_internal.h"
#include "test_support.h"
#include "util/error.h"

static kiln_module *spin_model(int **calls, int **spin_us)
{
    kiln_module *m = NULL;
    kiln_error err = {0};
    kiln_module_options o = {.num_threads = 2, .bind_threads = 0};
    if (kiln_module_load(rt_model("spin"), &o, &m, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    void *h = dlopen(rt_model("spin"), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    *calls = dlsym(h, "rt_model_calls");
    *spin_us = dlsym(h, "rt_model_spin_us");
    dlclose(h);
    assert_non_null(*calls);
    assert_non_null(*spin_us);
    return m;
}

static void check_stats(const kiln_bench_result *r)
{
    assert_true(r->repeat >= 1);
    for (int i = 0; i < r->repeat; i++) {
        assert_true(r->results[i] >= r->min);
        assert_true(r->results[i] <= r->max);
    }
    assert_true(r->min <= r->median && r->median <= r->max);
    assert_true(r->min <= r->mean && r->mean <= r->max);
    assert_true(r->std >= 0 && r->std <= r->max - r->min + 1e-12);
}

static void test_number_repeat(void **state)
{
    (void)state;
    int *calls, *spin_us;
    kiln_module *m = spin_model(&calls, &spin_us);
    *spin_us = 200;
    kiln_bench_options o = {.number = 3, .repeat = 4};
    kiln_bench_result *r = calloc(1, sizeof *r);
    kiln_error err = {0};
    int before = *calls;
    assert_int_equal(kiln_module_bench(m, &o, r, &err), KILN_OK);
    assert_int_equal(*calls - before, 1 + 3 * 4); /* warm-up + number x repeat */
    assert_int_equal(r->number, 3);
    assert_int_equal(r->repeat, 4);
    assert_int_equal(r->threads, 2);
    for (int i = 0; i < 4; i++)
        assert_true(r->results[i] >= 200e-6);
    check_stats(r);

    /* defaults: number 1, repeat 3 */
    before = *calls;
    assert_int_equal(kiln_module_bench(m, NULL, r, &err), KILN_OK);
    assert_int_equal(*calls - before, 1 + 3);
    assert_int_equal(r->number, 1);
    assert_int_equal(r->repeat, 3);
    kiln_bench_options zero = {0};
    assert_int_equal(kiln_module_bench(m, &zero, r, &err), KILN_OK);
    assert_int_equal(r->number, 1);
    assert_int_equal(r->repeat, 3);
    free(r);
    kiln_module_destroy(m);
}

static void test_min_repeat_ms(void **state)
{
    (void)state;
    int *calls, *spin_us;
    kiln_module *m = spin_model(&calls, &spin_us);
    *spin_us = 300;
    kiln_bench_options o = {.number = 1, .repeat = 3, .min_repeat_ms = 5};
    kiln_bench_result *r = calloc(1, sizeof *r);
    kiln_error err = {0};
    int before = *calls;
    assert_int_equal(kiln_module_bench(m, &o, r, &err), KILN_OK);
    /* one run takes >= 0.3 ms, so 5 ms needs number >= 2, and at most
     * 5 / 0.3 + 1 = 17.7 on the first growth; later growth only when a
     * measurement fell short again */
    assert_true(r->number >= 2);
    /* the last measurement used the final number and lasted >= min_repeat_ms */
    assert_true(r->results[2] * r->number >= 5e-3 * (1 - 1e-9));
    assert_true(*calls - before >= 1 + r->number); /* at least the warm-up and the last */
    for (int i = 0; i < 3; i++)
        assert_true(r->results[i] >= 300e-6);
    check_stats(r);
    free(r);
    kiln_module_destroy(m);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_cooldown_flush(void **state)
{
    (void)state;
    int *calls, *spin_us;
    kiln_module *m = spin_model(&calls, &spin_us);
    *spin_us = 10;
    kiln_bench_options o = {.number = 2, .repeat = 3, .cooldown_ms = 25, .flush_cache = 1};
    kiln_bench_result *r = calloc(1, sizeof *r);
    kiln_error err = {0};
    int before = *calls;
    double t0 = now_s();
    assert_int_equal(kiln_module_bench(m, &o, r, &err), KILN_OK);
    assert_true(now_s() - t0 >= 2 * 25e-3); /* cooldown between the 3 measurements */
    assert_int_equal(*calls - before, 1 + 2 * 3);
    check_stats(r);
    free(r);
    kiln_module_destroy(m);
}

typedef struct counter {
    int calls, fail_at;
} counter;

static kiln_status count_fn(void *ctx, kiln_error *err)
{
    counter *c = ctx;
    if (++c->calls == c->fail_at)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "run %d failed", c->calls);
    return KILN_OK;
}

static void test_function_and_errors(void **state)
{
    (void)state;
    kiln_bench_result *r = calloc(1, sizeof *r), *orig = calloc(1, sizeof *orig);
    kiln_error err = {0};
    counter c = {0, 0};
    kiln_bench_options o = {.number = 5, .repeat = 7};
    assert_int_equal(kiln_bench_function(count_fn, &c, 4, &o, r, &err), KILN_OK);
    assert_int_equal(c.calls, 1 + 35);
    assert_int_equal(r->threads, 4);
    check_stats(r);

    /* a failing run stops the benchmark; out untouched */
    memset(r, 0x5a, sizeof *r);
    memcpy(orig, r, sizeof *r);
    c = (counter){0, 4};
    assert_int_equal(kiln_bench_function(count_fn, &c, 1, &o, r, &err), KILN_ERR_INTERNAL);
    assert_string_equal(err.msg, "run 4 failed");
    assert_int_equal(c.calls, 4);
    assert_memory_equal(r, orig, sizeof *r);

    static const kiln_bench_options bad[] = {
        {.number = -1, .repeat = 1},
        {.number = 1, .repeat = KILN_BENCH_MAX_REPEAT + 1},
        {.number = 1, .repeat = -2},
        {.number = 1, .repeat = 1, .min_repeat_ms = -1},
        {.number = 1, .repeat = 1, .min_repeat_ms = NAN},
        {.number = 1, .repeat = 1, .cooldown_ms = -5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = (counter){0, 0};
        assert_int_equal(kiln_bench_function(count_fn, &c, 1, &bad[i], r, &err),
                         KILN_ERR_INVALID_ARGUMENT);
        assert_int_equal(c.calls, 0);
        assert_memory_equal(r, orig, sizeof *r);
    }
    assert_int_equal(kiln_module_bench(NULL, NULL, r, &err), KILN_ERR_INVALID_ARGUMENT);
    free(r);
    free(orig);
}

/* preproc: called before every run (the warm-up's too), outside the timed
 * region, and its failure stops the benchmark. */
typedef struct pre {
    int calls, fail_at;
    const int *runs; /* the spin step's call counter */
    int runs_before, out_of_order;
} pre;

static kiln_status pre_fn(void *ctx, kiln_error *err)
{
    pre *p = ctx;
    if (*p->runs - p->runs_before != p->calls) /* one run between two preprocs */
        p->out_of_order++;
    if (++p->calls == p->fail_at)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "preproc %d failed", p->calls);
    struct timespec d = {0, 20 * 1000 * 1000}; /* 20 ms: far above a run */
    nanosleep(&d, NULL);
    return KILN_OK;
}

static void test_preproc(void **state)
{
    (void)state;
    int *calls, *spin_us;
    kiln_module *m = spin_model(&calls, &spin_us);
    *spin_us = 100;
    pre p = {0, 0, calls, *calls, 0};
    kiln_bench_options o = {.number = 2, .repeat = 3, .preproc = pre_fn, .preproc_ctx = &p};
    kiln_bench_result *r = calloc(1, sizeof *r);
    kiln_error err = {0};
    assert_int_equal(kiln_module_bench(m, &o, r, &err), KILN_OK);
    assert_int_equal(p.calls, 1 + 2 * 3);
    assert_int_equal(*calls - p.runs_before, 1 + 2 * 3);
    assert_int_equal(p.out_of_order, 0);
    check_stats(r);
    assert_true(r->min >= 100e-6);
    assert_true(r->median < 10e-3); /* with the 20 ms preproc timed it would be >= 20 ms */

    /* a failing preproc stops it with its status */
    p = (pre){0, 3, calls, *calls, 0};
    assert_int_equal(kiln_module_bench(m, &o, r, &err), KILN_ERR_INTERNAL);
    assert_string_equal(err.msg, "preproc 3 failed");
    assert_int_equal(*calls - p.runs_before, 2);

    /* the hook itself on a module and on NULL (test_module checks a module's
     * outputs with its weights evicted) */
    assert_int_equal(kiln_module_evict_weights(m, &err), KILN_OK);
    assert_int_equal(kiln_module_evict_weights(NULL, &err), KILN_OK);
    assert_int_equal(kiln_module_evict_weights_to_llc(m, &err), KILN_OK);
    assert_int_equal(kiln_module_evict_weights_to_llc(m, &err), KILN_OK); /* buffer reused */
    assert_int_equal(kiln_module_evict_weights_to_llc(NULL, &err), KILN_OK);
    free(r);
    kiln_module_destroy(m);
}

/* The cache sizes the tuner's cold-weights rule and the evictions use are
 * CPU 0's own, as /sys gives them when it does: an AMD EPYC VM's L3 read
 * 384 MiB through sysconf (the host's CCDs added up) where /sys said its
 * CCD's 32 MiB. */
static void test_cache_bytes(void **state)
{
    (void)state;
    for (int level = 2; level <= 3; level++) {
        long want = 0;
        for (int idx = 0; idx < 16 && !want; idx++) {
            char path[128], buf[64];
            int lv = 0;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
            FILE *f = fopen(path, "r");
            if (!f)
                break;
            bool ok = fscanf(f, "%d", &lv) == 1 && lv == level;
            fclose(f);
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
            if (ok && (f = fopen(path, "r"))) {
                char *end = buf;
                if (fgets(buf, sizeof buf, f))
                    want = strtol(buf, &end, 10);
                want *= *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
                fclose(f);
            }
        }
        long got = kiln_cache_bytes(level);
        assert_true(got >= 0);
        if (want > 0)
            assert_int_equal(got, want);
    }
}

int main(void)
{
    unsetenv("KILN_NUM_THREADS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_number_repeat),
        cmocka_unit_test(test_min_repeat_ms),
        cmocka_unit_test(test_cooldown_flush),
        cmocka_unit_test(test_function_and_errors),
        cmocka_unit_test(test_preproc),
        cmocka_unit_test(test_cache_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
