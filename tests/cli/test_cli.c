/* tests/cli/test_cli.c: the kiln command-line tool: help and version, exit
 * codes (0 ok, 1 mismatch, 2 error) and messages, the zoo table's exact
 * parameter counts, determinism of `kiln run`, and `kiln check` against
 * outputs written by `kiln run` (matching, perturbed, wrong shape/dtype, NaN,
 * malformed and missing files, wrong file counts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static char *tmp;

static int setup(void **state)
{
    (void)state;
    tmp = kt_tempdir();
    return tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kt_rmdir(tmp);
    free(tmp);
    return 0;
}

/* A line starting with `prefix`, copied (without the newline) into buf. */
static const char *line_with(const char *out, const char *prefix, char *buf, size_t size)
{
    const char *p = strstr(out, prefix);
    if (!p)
        fail_msg("no line with \"%s\" in:\n%s", prefix, out);
    if (*p == '\n')
        p++;
    size_t n = strcspn(p, "\n");
    if (n >= size)
        n = size - 1;
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

static void path_in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmp, name);
}

/* ---- help, version, usage errors ------------------------------------------ */

static void test_help_and_version(void **state)
{
    (void)state;
    const char *top[] = {"--help", "-h", "help", ""};
    for (size_t i = 0; i < 4; i++)
        expect_cli(0, top[i], "usage: kiln COMMAND", "zoo", "run", "check", KT_LACKS, "error:");
    const char *cmds[] = {"zoo", "run", "check"};
    for (size_t i = 0; i < 3; i++) {
        const char *want = kt_fmt("usage: kiln %s", cmds[i]);
        expect_cli(0, kt_fmt("%s --help", cmds[i]), want);
        expect_cli(0, kt_fmt("help %s", cmds[i]), want);
    }
    expect_cli(0, "check --help", "default 1e-3", "default 1e-4");
    expect_cli(0, "--version", "kiln " KILN_VERSION);
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_cli(2, "frobnicate", "kiln: error: unknown command 'frobnicate'", "kiln --help");
    expect_cli(2, "--frobnicate", "unknown option '--frobnicate'");
    expect_cli(2, "tune mlp", "missing --records", "kiln tune --help");
    expect_cli(2, "tune mlp --records r.jsonl --workers 2", "not available");
    expect_cli(2, "zoo extra", "kiln zoo --help");
    expect_cli(2, "run", "no MODEL given");
    expect_cli(2, "run mlp --bogus", "unknown option '--bogus'", "kiln run --help");
    expect_cli(2, "run mlp --seed", "--seed needs a value");
    expect_cli(2, "run mlp --seed -3", "--seed");
    expect_cli(2, "run mlp --executor graph --threads 0", "--threads");
    expect_cli(2, "run mlp --executor tpu", "unknown executor 'tpu'");
    expect_cli(2, "run no-such-net", "kiln: error:", "no-such-net");
    expect_cli(2, "check mlp --rtol abc --outputs x.pb", "--rtol");
}

/* ---- zoo ----------------------------------------------------------------- */

static void test_zoo_table(void **state)
{
    (void)state;
    char *out = expect_cli_output(0, "zoo", "NAME", "PARAMS", "GMACS", "[1, 3, 299, 299]");
    static const struct {
        const char *name, *params;
    } nets[] = {
        {"resnet-18", "11,689,512"},     {"resnet-34", "21,797,672"},
        {"resnet-50", "25,557,032"},     {"vgg-16", "138,357,544"},
        {"mobilenet-v2", "3,504,872"},   {"squeezenet-1.1", "1,235,496"},
        {"inception-v3", "23,834,568"},  {"vit-b-16", "86,567,656"},
        {"bert-base", "108,891,648"},    {"mlp", "109,386"},
    };
    char bad[2048] = "";
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        char line[512];
        char prefix[64];
        snprintf(prefix, sizeof prefix, "\n%s ", nets[i].name);
        line_with(out, prefix, line, sizeof line);
        if (!strstr(line, nets[i].params))
            snprintf(bad + strlen(bad), sizeof bad - strlen(bad),
                     "%s: expected %s parameters in: %s\n", nets[i].name, nets[i].params, line);
    }
    free(out);
    if (bad[0])
        fail_msg("%s", bad);
}

/* ---- run ------------------------------------------------------------------- */

static void test_run_deterministic(void **state)
{
    (void)state;
    char a[512], b[512], c[512];
    char *out1 = expect_cli_output(0, "run mlp", "model:   mlp", "input:   input float32 [1, 784]",
                                   "top-5 of", "  5. index ", "time:    load+build ");
    char *out2 = expect_cli_output(0, "run mlp", "checksum of");
    char *out3 = expect_cli_output(0, "run mlp --seed 7", "checksum of");
    line_with(out1, "checksum of", a, sizeof a);
    line_with(out2, "checksum of", b, sizeof b);
    line_with(out3, "checksum of", c, sizeof c);
    if (!strstr(a, "fnv1a64 0x"))
        fail_msg("expected an fnv1a64 checksum in: %s", a);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c); /* --seed changes the weights */
    free(out1);
    free(out2);
    free(out3);
}

/* Writes a random [1, 784] float32 input as .npy and as .pb. */
static void write_mlp_input(const char *npy, const char *pb)
{
    kiln_tensor t;
    kiln_shape s = ks(2, 1, 784);
    assert_int_equal(kiln_tensor_alloc(&t, KILN_DTYPE_FLOAT32, &s, NULL), KILN_OK);
    kt_fill_random(t.data, 784, 99, -1.0f, 1.0f);
    assert_int_equal(kiln_tensor_write_npy(npy, &t, NULL), KILN_OK);
    assert_int_equal(kiln_tensor_write_pb(pb, &t, "input", NULL), KILN_OK);
    kiln_tensor_release(&t);
}

static void test_run_then_check(void **state)
{
    (void)state;
    char in_npy[512], in_pb[512], out_pb[512], out_npy[512], bad[512], tmpf[512];
    path_in_tmp(in_npy, sizeof in_npy, "in.npy");
    path_in_tmp(in_pb, sizeof in_pb, "in.pb");
    path_in_tmp(out_pb, sizeof out_pb, "out.pb");
    path_in_tmp(out_npy, sizeof out_npy, "out.npy");
    write_mlp_input(in_npy, in_pb);

    expect_cli(0, kt_fmt("run mlp --input %s --output %s", in_npy, out_pb), in_npy, "wrote:");
    expect_cli(0, kt_fmt("run mlp --input %s --output %s", in_pb, out_npy), "wrote:");
    /* one --output per model output at most (the k-th writes output k) */
    expect_cli(2, kt_fmt("run mlp --input %s --output %s --output %s", in_pb, out_npy, out_npy),
               "has 1 output but 2 --output files");

    /* the same output through both formats */
    kiln_tensor o1, o2;
    char *name = NULL;
    assert_int_equal(kiln_tensor_read(out_pb, &o1, &name, NULL), KILN_OK);
    assert_int_equal(kiln_tensor_read(out_npy, &o2, NULL, NULL), KILN_OK);
    assert_non_null(name);
    assert_true(kiln_shape_equal(&o1.shape, &o2.shape));
    assert_int_equal(o1.dtype, KILN_DTYPE_FLOAT32);
    int64_t n = kiln_shape_numel(&o1.shape);
    assert_memory_equal(o1.data, o2.data, (size_t)n * 4);
    kiln_tensor_release(&o2);

    expect_cli(0, kt_fmt("check mlp --inputs %s --outputs %s", in_npy, out_pb),
               "OK: 1 output matches (rtol 0.001, atol 0.0001)", "max abs error");
    expect_cli(0, kt_fmt("check mlp --inputs %s --outputs %s --rtol 0 --atol 0", in_pb, out_npy),
               "OK: 1 output matches");

    /* perturbed element 3 */
    float *v = o1.data;
    assert_true(n > 3);
    v[3] += 0.5f;
    path_in_tmp(bad, sizeof bad, "bad.npy");
    assert_int_equal(kiln_tensor_write_npy(bad, &o1, NULL), KILN_OK);
    expect_cli(1, kt_fmt("check mlp --inputs %s --outputs %s", in_npy, bad), "MISMATCH",
               "1 of 10 elements", "max abs error 0.5", "max rel error",
               "first bad element: index 3 [0, 3]: got", "expected");
    /* a loose enough tolerance accepts it */
    expect_cli(0, kt_fmt("check mlp --inputs %s --outputs %s --atol 0.6", in_npy, bad),
               "OK: 1 output matches", KT_LACKS, "MISMATCH");
    v[3] -= 0.5f;

    /* NaN where a number is expected, and vice versa */
    float keep = v[0];
    v[0] = NAN;
    assert_int_equal(kiln_tensor_write_npy(bad, &o1, NULL), KILN_OK);
    expect_cli(1, kt_fmt("check mlp --inputs %s --outputs %s --atol 1e9", in_npy, bad),
               "first bad element: index 0 [0, 0]");
    v[0] = keep;

    /* wrong shape, wrong dtype */
    kiln_tensor wide;
    kiln_shape s11 = ks(2, 1, 11);
    assert_int_equal(kiln_tensor_alloc(&wide, KILN_DTYPE_FLOAT32, &s11, NULL), KILN_OK);
    assert_int_equal(kiln_tensor_write_pb(bad, &wide, NULL, NULL), KILN_OK);
    expect_cli(1, kt_fmt("check mlp --inputs %s --outputs %s", in_npy, bad),
               "shape differs: got float32 [1, 10], expected float32 [1, 11]");
    kiln_tensor_release(&wide);
    kiln_tensor dbl;
    assert_int_equal(kiln_tensor_alloc(&dbl, KILN_DTYPE_FLOAT64, &o1.shape, NULL), KILN_OK);
    assert_int_equal(kiln_tensor_write_npy(bad, &dbl, NULL), KILN_OK);
    expect_cli(1, kt_fmt("check mlp --inputs %s --outputs %s", in_npy, bad),
               "dtype differs: got float32 [1, 10], expected float64 [1, 10]");
    kiln_tensor_release(&dbl);

    /* malformed, missing and wrong-count files: errors (2) naming the file */
    path_in_tmp(tmpf, sizeof tmpf, "broken.pb");
    FILE *f = fopen(tmpf, "wb");
    assert_non_null(f);
    fputs("\xff\xff\xff\xff garbage", f);
    fclose(f);
    expect_cli(2, kt_fmt("check mlp --inputs %s --outputs %s", in_npy, tmpf), "kiln: error:",
               tmpf);
    expect_cli(2, kt_fmt("check mlp --inputs %s --outputs %s", tmpf, out_pb), tmpf);
    expect_cli(2, kt_fmt("run mlp --input %s", tmpf), tmpf);
    expect_cli(2, kt_fmt("check mlp --inputs %s/nope.npy --outputs %s", tmp, out_pb),
               "nope.npy");
    expect_cli(2, kt_fmt("check mlp --inputs %s %s --outputs %s", in_npy, in_npy, out_pb),
               "has 1 input but 2 files were given with --inputs");
    expect_cli(2, kt_fmt("check mlp --inputs %s --outputs %s %s", in_npy, out_pb, out_pb),
               "has 1 output but 2 files were given with --outputs");
    expect_cli(2, kt_fmt("check mlp --outputs %s", out_pb), "has 1 input but 0 files were given");
    expect_cli(2, kt_fmt("check mlp --inputs %s", in_npy), "no expected outputs");
    expect_cli(2, kt_fmt("check no-such-net --inputs %s --outputs %s", in_npy, out_pb),
               "no-such-net");
    /* an input of the wrong shape is an error, not a mismatch */
    expect_cli(2, kt_fmt("check mlp --inputs %s --outputs %s", out_pb, out_pb), "kiln: error:");
    expect_cli(2, kt_fmt("run mlp --input %s", out_npy), "kiln: error:");

    free(name);
    kiln_tensor_release(&o1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_zoo_table),
        cmocka_unit_test(test_run_deterministic),
        cmocka_unit_test(test_run_then_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
