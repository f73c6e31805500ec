/* tests/cli/test_bench_cli.c: `kiln bench` (and `kiln run` / `kiln check` on a
 * compiled .so): the JSON object's keys and consistency, the number/repeat
 * semantics seen from the CLI, the human-readable ProfileResult and table,
 * --threads, usage errors, and clear errors for a corrupt .so. The models are
 * the hand-written ones of tests/runtime/models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rt_models.h"
#include "test_support.h"

/* The number after "\"key\": " in a flat JSON object. */
static double json_num(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p)
        fail_msg("no key \"%s\" in %s", key, json);
    return strtod(p + strlen(pat), NULL);
}

/* The numbers of the "results" array; returns their count. */
static int json_results(const char *json, double *v, int max)
{
    const char *p = strstr(json, "\"results\": [");
    if (!p)
        fail_msg("no results array in %s", json);
    p += strlen("\"results\": [");
    int n = 0;
    while (*p && *p != ']' && n < max) {
        char *end;
        v[n++] = strtod(p, &end);
        if (end == p)
            fail_msg("bad results array in %s", json);
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return n;
}

static void test_bench_json(void **state)
{
    (void)state;
    char *out = expect_cli_output(
        0, kt_fmt("bench %s --json --number 2 --repeat 5 --threads 2", rt_model("spin")),
        "\"mean\":", "\"median\":", "\"min\":", "\"max\":", "\"std\":", "\"results\":",
        "\"number\":", "\"repeat\":", "\"threads\":");
    /* only the JSON object on stdout: one line, braces */
    assert_true(out[0] == '{');
    assert_non_null(strstr(out, "}\n"));
    assert_int_equal((int)json_num(out, "number"), 2);
    assert_int_equal((int)json_num(out, "repeat"), 5);
    assert_int_equal((int)json_num(out, "threads"), 2);
    double r[16];
    assert_int_equal(json_results(out, r, 16), 5);
    double mn = json_num(out, "min"), mx = json_num(out, "max"), med = json_num(out, "median"),
           mean = json_num(out, "mean");
    assert_true(mn > 0 && mn <= med && med <= mx && mn <= mean && mean <= mx);
    for (int i = 0; i < 5; i++)
        assert_true(r[i] >= mn && r[i] <= mx && r[i] >= 200e-6); /* the model spins 200 us */
    free(out);

    /* min-repeat-ms grows number */
    out = expect_cli_output(0, kt_fmt("bench %s --json --repeat 2 --min-repeat-ms 4",
                                      rt_model("spin")),
                            "\"number\":");
    assert_true(json_num(out, "number") >= 2);
    free(out);
}

static void test_bench_text(void **state)
{
    (void)state;
    expect_cli(0,
               kt_fmt("bench %s --repeat 3 --threads 1 --cooldown-ms 1 --flush-cache",
                      rt_model("add_relu")),
               "settings: threads 1, number 1, repeat 3", "flush-cache yes",
               "ProfileResult(mean=", ", median=", ", std=", "results=(",
               "Execution time summary:", "mean (ms)");
    expect_cli(0, "help bench", "--min-repeat-ms");
}

static void test_bench_errors(void **state)
{
    (void)state;
    const char *spin = rt_model("spin");
    expect_cli(2, "bench", "no MODEL given");
    expect_cli(2, kt_fmt("bench %s --number 0", spin), "--number");
    expect_cli(2, kt_fmt("bench %s --repeat 10001", spin), "--repeat");
    expect_cli(2, kt_fmt("bench %s --min-repeat-ms -1", spin), "--min-repeat-ms");
    expect_cli(2, kt_fmt("bench %s --threads abc", spin), "--threads");
    expect_cli(2, kt_fmt("bench %s --bogus", spin), "unknown option '--bogus'");
    expect_cli(2, kt_fmt("bench %s", rt_model("corrupt_1")), "ABI version 42");
    expect_cli(2, kt_fmt("bench %s", rt_model("corrupt_6")), "not a model compiled by kiln");
    expect_cli(2, kt_fmt("bench %s --executor ref", spin), "--executor ref");
    expect_cli(2, kt_fmt("run %s --executor tpu", spin), "unknown executor 'tpu'");
    expect_cli(2, "bench /nonexistent/model.so", "/nonexistent/model.so");
}

static void test_run_so(void **state)
{
    (void)state;
    const char *two_step = rt_model("two_step");
    expect_cli(0, kt_fmt("run %s --threads 3", two_step), "executor: graph (", "3 threads)",
               "output:  out float32 [1000]", "top-5 of out:");
    /* threads do not change the result */
    char *a = expect_cli_output(0, kt_fmt("run %s --threads 1", two_step), "checksum");
    setenv("KILN_NUM_THREADS", "2", 1);
    char *b = expect_cli_output(0, kt_fmt("run %s", two_step), "checksum", "2 threads)");
    unsetenv("KILN_NUM_THREADS");
    const char *ca = strstr(a, "checksum"), *cb = strstr(b, "checksum");
    assert_non_null(ca);
    assert_non_null(cb);
    assert_int_equal(strcspn(ca, "\n"), strcspn(cb, "\n"));
    assert_memory_equal(ca, cb, strcspn(ca, "\n"));
    free(a);
    free(b);
}

static void write_npy(const char *path, const float *v, int rank, int64_t d0, int64_t d1)
{
    kiln_tensor t = {KILN_DTYPE_FLOAT32, {rank, {d0, d1}}, (void *)v};
    kiln_error err = {0};
    if (kiln_tensor_write_npy(path, &t, &err) != KILN_OK)
        fail_msg("%s", err.msg);
}

static void test_check_so(void **state)
{
    (void)state;
    char *dir = kt_tempdir();
    char x[1024], y[1024], e[1024], bad[1024];
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    snprintf(e, sizeof e, "%s/e.npy", dir);
    snprintf(bad, sizeof bad, "%s/bad.npy", dir);
    float xv[6] = {1, -2, 3, -4, 5, -6}, yv[6] = {0.5f, 1, -4, 2, 0, 7}, ev[6];
    for (int i = 0; i < 6; i++)
        ev[i] = xv[i] + yv[i] > 0 ? xv[i] + yv[i] : 0;
    write_npy(x, xv, 2, 2, 3);
    write_npy(y, yv, 2, 2, 3);
    write_npy(e, ev, 2, 2, 3);
    ev[4] += 1;
    write_npy(bad, ev, 2, 2, 3);
    const char *add_relu = rt_model("add_relu");
    expect_cli(0, kt_fmt("check %s --inputs %s %s --outputs %s --threads 2", add_relu, x, y, e),
               "executor: graph (", "OK: 1 output matches");
    expect_cli(1, kt_fmt("check %s --inputs %s %s --outputs %s", add_relu, x, y, bad),
               "first bad element: index 4 [1, 1]");
    /* an input the model does not accept */
    write_npy(bad, xv, 1, 6, 0);
    expect_cli(2, kt_fmt("check %s --inputs %s %s --outputs %s", add_relu, x, bad, e),
               "input 1 'y': shape [6], but the model expects [2, 3]");
    kt_rmdir(dir);
    free(dir);
}

int main(void)
{
    unsetenv("KILN_NUM_THREADS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_bench_text),
        cmocka_unit_test(test_bench_errors),
        cmocka_unit_test(test_run_so),
        cmocka_unit_test(test_check_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
