/* tests/profile/test_profile.c: the per-operator profiler.
 *
 * - runtime/profile.c: instrumented runs of a hand-written model give
 *   ordered stamps and the same output as kiln_module_run; bad arguments are
 *   errors;
 * - report.c: medians, Sum, Total, aggregation, sorting and --top from
 *   synthetic stamps;
 * - every format, on a report whose names hold commas, quotes and markup:
 *   the JSON parses (cJSON) and has every schema field with its type and
 *   reads back; the Chrome trace has traceEvents with name, ph "X", ts, dur,
 *   pid, tid; the CSV has one column count on every line (RFC 4180
 *   quoting); the HTML is well-formed (tag balance) with exactly one
 *   <rect class="bar"> per row shown;
 * - the JSON reader refuses malformed, truncated and mistyped files with a
 *   message, never a crash;
 * - --compare: matching by hash and name, fused rows against their parts,
 *   rows in only one side, the settings that differ;
 * - the reference executor's per-node stepping equals its run;
 * - the CLI end to end on a hand-written model and on `--executor ref`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "kiln/runtime.h"
#include "report/report.h"
#include "../runtime/rt_models.h"
#include "runtime/profile.h"
#include "test_support.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Runs `fn(f, r)` into a memory buffer; returns the malloc'ed text. */
static char *capture(kiln_status (*fn)(FILE *, const kiln_report *, kiln_error *),
                     const kiln_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    kiln_error err = {0};
    kiln_status st = fn(f, r, &err);
    fclose(f);
    if (st != KILN_OK)
        fail_msg("writer failed: %s", err.msg);
    return buf;
}

/* A synthetic report: 4 steps, two sharing a workload, names that need
 * escaping in every format. Times: step s takes (s + 1) * 100 us in run r,
 * plus r us; 0.5 us between steps. */
static void synthetic(kiln_report *r, int runs)
{
    kiln_error err = {0};
    memset(r, 0, sizeof *r);
    assert_int_equal(kiln_report_alloc_steps(r, 4, &err), KILN_OK);
    assert_int_equal(kiln_report_set_step(r, 0, "conv1+bn1+relu", "conv2d_nchwc",
                                          "[1, 3, 224, 224], [64, 3, 7, 7]", "NCHW/OIHW/NCHW16c",
                                          1, 0xabcdef0123456789ULL, 2e8, &err),
                     KILN_OK);
    assert_int_equal(kiln_report_set_step(r, 1, "odd, \"quoted\" <name> & more", "injective",
                                          "[1, 64], [1, 64]", "", 1, 0x42, 0, &err),
                     KILN_OK);
    assert_int_equal(kiln_report_set_step(r, 2, "conv2+bn2", "conv2d_nchwc", "[1, 64, 56, 56]",
                                          "NCHW16c/OIHW16i16o/NCHW16c", 1, 0xabcdef0123456789ULL,
                                          1e8, &err),
                     KILN_OK);
    assert_int_equal(kiln_report_set_step(r, 3, "fc", "dense", "[1, 2048], [1000, 2048]",
                                          "row-major/KN16n/row-major", 1, 7, 4e6, &err),
                     KILN_OK);
    int64_t per = KILN_PROFILE_STAMPS(4);
    int64_t *st = calloc((size_t)(per * runs), sizeof *st);
    for (int i = 0; i < runs; i++) {
        int64_t t = 1000000 + i * 10000000LL, *p = st + i * per;
        *p++ = t;
        for (int s = 0; s < 4; s++) {
            t += 500;
            *p++ = t;
            t += (s + 1) * 100000 + i * 1000;
            *p++ = t;
        }
        *p++ = t + 500;
    }
    r->clock_ns = 20;
    assert_int_equal(kiln_report_from_stamps(r, st, runs, &err), KILN_OK);
    free(st);
    r->cfg.model = kiln_report_strdup("synthetic <model>");
    r->cfg.executor = kiln_report_strdup("graph");
    r->cfg.target = kiln_report_strdup("x86_64-avx512");
    r->cfg.build_id = kiln_report_strdup("0123abcd");
    r->cfg.binding = kiln_report_strdup("off");
    r->cfg.kiln_version = kiln_report_strdup(KILN_VERSION);
    r->cfg.peak_source = kiln_report_strdup("given");
    r->cfg.threads = 2;
    r->cfg.warmup = 1;
    r->cfg.peak_gflops = 400;
    assert_int_equal(kiln_report_set_metadata(
                         r, "{\"records\": \"r.json\", \"tuned_tasks\": 3, \"fallbacks\": "
                            "[\"dense 1x2048\", {\"op\": \"x\"}]}",
                         &err),
                     KILN_OK);
    r->has_bench = 1;
    r->bench_mean_us = 1010;
    r->bench_median_us = 1005;
    r->bench_min_us = 1000;
    r->bench_max_us = 1030;
    r->bench_number = 10;
    r->bench_repeat = 5;
}

/* ---- runtime ---------------------------------------------------------------- */

static void test_module_profile(void **state)
{
    (void)state;
    kiln_module *m = NULL;
    kiln_error err = {0};
    kiln_module_options o = {.num_threads = 2, .bind_threads = 0};
    if (kiln_module_load(rt_model("two_step"), &o, &m, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i;
    kiln_tensor t = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(1, 1000), .data = x};
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    int n = kiln_module_num_steps(m);
    assert_int_equal(n, 2);
    int runs = 3;
    int64_t *st = calloc((size_t)(KILN_PROFILE_STAMPS(n) * runs), sizeof *st);
    assert_int_equal(kiln_module_profile(m, runs, st, &err), KILN_OK);
    for (int64_t i = 1; i < KILN_PROFILE_STAMPS(n) * runs; i++)
        assert_true(st[i] >= st[i - 1]);
    /* an instrumented run computes what kiln_module_run does (out reuses
     * x's storage, so each starts from a fresh input) */
    const kiln_tensor *out = kiln_module_output(m, 0);
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    assert_int_equal(kiln_module_profile(m, 1, st, &err), KILN_OK);
    float got[1000];
    memcpy(got, out->data, sizeof got);
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    assert_memory_equal(got, out->data, sizeof got);
    assert_true(kiln_module_profile(NULL, 1, st, &err) == KILN_ERR_INVALID_ARGUMENT);
    assert_true(kiln_module_profile(m, 0, st, &err) == KILN_ERR_INVALID_ARGUMENT);
    assert_true(kiln_module_profile(m, 1, NULL, &err) == KILN_ERR_INVALID_ARGUMENT);
    assert_true(kiln_profile_clock_ns() > 0);
    assert_int_equal(kiln_module_num_bound(m), 0);
    free(st);
    kiln_module_destroy(m);
}

/* ---- building the report ---------------------------------------------------- */

/* One run slowed by the machine is left out of the times: Total and the
 * steps' times are means over the other runs and add up exactly; the mean
 * over every run is kept apart. */
static void test_report_slow_run(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    memset(&r, 0, sizeof r);
    assert_int_equal(kiln_report_alloc_steps(&r, 2, &err), KILN_OK);
    for (int s = 0; s < 2; s++)
        assert_int_equal(kiln_report_set_step(&r, s, s ? "b" : "a", "injective", "[1]", "", 1,
                                              (uint64_t)s, 0, &err),
                         KILN_OK);
    enum { RUNS = 5 };
    int64_t per = KILN_PROFILE_STAMPS(2), st[5 * KILN_PROFILE_STAMPS(2)];
    /* steps take 100 and 200 us; in run 3 step 1 takes 2000 us; 1 us between */
    for (int i = 0; i < RUNS; i++) {
        int64_t t = i * 100000000LL, *p = st + i * per;
        *p++ = t;
        for (int s = 0; s < 2; s++) {
            *p++ = t += 1000;
            *p++ = t += (s == 1 && i == 3) ? 2000000 : (s + 1) * 100000;
        }
        *p++ = t + 1000;
    }
    assert_int_equal(kiln_report_from_stamps(&r, st, RUNS, &err), KILN_OK);
    assert_int_equal(r.runs_kept, 4);                             /* run 3 left out */
    assert_true(fabs(r.total_us - 303) < 1e-9);                   /* mean of the kept runs */
    assert_true(fabs(r.total_median_us - 303) < 1e-9);
    assert_true(fabs(r.total_mean_us - (303 + 1800.0 / 5)) < 1e-9); /* one slow run */
    assert_true(fabs(r.total_max_us - 2103) < 1e-9);
    assert_true(fabs(r.steps[1].time_us - 200) < 1e-9);
    assert_true(fabs(r.steps[1].max_us - 2000) < 1e-9);
    assert_true(fabs(r.sum_us - 300) < 1e-9);
    assert_true(fabs(r.sum_mean_us - (300 + 1800.0 / 5)) < 1e-9);
    assert_true(fabs(r.between_us - 3) < 1e-9);
    kiln_report_free(&r);
}

static void test_report_stats(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 5);
    /* run i: step s = (s + 1) * 100 + i us; median over i = 0..4 is i = 2 */
    for (int s = 0; s < 4; s++) {
        assert_true(fabs(r.steps[s].median_us - ((s + 1) * 100 + 2)) < 1e-9);
        assert_true(fabs(r.steps[s].min_us - ((s + 1) * 100)) < 1e-9);
        assert_true(fabs(r.steps[s].max_us - ((s + 1) * 100 + 4)) < 1e-9);
    }
    for (int s = 0; s < 4; s++) /* every run kept: the mean over all */
        assert_true(fabs(r.steps[s].time_us - ((s + 1) * 100 + 2)) < 1e-9);
    assert_int_equal(r.runs_kept, 5);
    assert_true(fabs(r.sum_us - (1000 + 8)) < 1e-9);
    assert_true(fabs(r.sum_mean_us - (1000 + 8)) < 1e-9);
    /* run i: 4 x 0.5 + 1000 + 4 i + 0.5; mean and median 1010.5 */
    assert_true(fabs(r.total_us - 1010.5) < 1e-9);
    assert_true(fabs(r.total_mean_us - 1010.5) < 1e-9);
    assert_true(fabs(r.between_us - 2.5) < 1e-9);
    assert_int_equal(r.sum_count, 4);
    assert_int_equal(r.cfg.runs, 5);
    assert_true(fabs(r.overhead_us - 20 * 10 / 1e3) < 1e-9);
    assert_string_equal(r.cfg.records, "r.json");
    assert_int_equal(r.cfg.tuned_tasks, 3);
    assert_int_equal(r.cfg.n_fallbacks, 2);
    assert_string_equal(r.cfg.fallbacks[0], "dense 1x2048");

    assert_int_equal(kiln_report_rows(&r, "none", "time", 0, &err), KILN_OK);
    assert_int_equal(r.n_rows, 4);
    assert_string_equal(r.rows[0].name, "fc");
    assert_string_equal(r.rows[3].name, "conv1+bn1+relu");
    assert_true(fabs(r.rows[3].gflops - 2e8 / (102 * 1e3)) < 1e-9);
    assert_true(fabs(r.rows[3].peak_fraction - r.rows[3].gflops / 400) < 1e-12);
    assert_true(r.rows[2].gflops == 0); /* no FLOPs known */

    assert_int_equal(kiln_report_rows(&r, "hash", "order", 0, &err), KILN_OK);
    assert_int_equal(r.n_rows, 3);
    assert_string_equal(r.rows[0].name, "conv1+bn1+relu");
    assert_int_equal(r.rows[0].count, 2);
    assert_true(fabs(r.rows[0].duration_us - (102 + 302)) < 1e-9);
    assert_true(fabs(r.rows[0].flops - 3e8) < 1);

    assert_int_equal(kiln_report_rows(&r, "op", "name", 2, &err), KILN_OK);
    assert_int_equal(r.n_rows, 2);
    assert_int_equal(r.rows_total, 3);
    assert_string_equal(r.rows[0].name, "conv2d_nchwc");
    assert_string_equal(r.rows[1].name, "dense");

    assert_int_equal(kiln_report_rows(&r, "bogus", "time", 0, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_report_rows(&r, "none", "bogus", 0, &err), KILN_ERR_INVALID_ARGUMENT);
    char buf[48];
    assert_string_equal(kiln_report_fmt_us(1234567.891, buf, sizeof buf), "1,234,567.89");
    assert_string_equal(kiln_report_fmt_us(-1234.5, buf, sizeof buf), "-1,234.50");
    assert_string_equal(kiln_report_fmt_us(12.0, buf, sizeof buf), "12.00");
    kiln_report_free(&r);
    kiln_report_free(&r); /* a freed report is zeroed: freeing again is fine */
}

/* ---- formats ------------------------------------------------------------------ */

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        fail_msg("JSON field '%s' missing", k);
    return v;
}

static void want_str(const cJSON *o, const char *k)
{
    if (!cJSON_IsString(field(o, k)))
        fail_msg("'%s' is not a string", k);
}
static void want_num(const cJSON *o, const char *k)
{
    if (!cJSON_IsNumber(field(o, k)))
        fail_msg("'%s' is not a number", k);
}
static void want_num_or_null(const cJSON *o, const char *k)
{
    const cJSON *v = field(o, k);
    if (!cJSON_IsNumber(v) && !cJSON_IsNull(v))
        fail_msg("'%s' is not a number or null", k);
}
static void want_str_or_null(const cJSON *o, const char *k)
{
    const cJSON *v = field(o, k);
    if (!cJSON_IsString(v) && !cJSON_IsNull(v))
        fail_msg("'%s' is not a string or null", k);
}

/* docs/PROFILE.md's schema, field by field */
static void check_schema(const cJSON *j, const kiln_report *r)
{
    assert_true(cJSON_IsObject(j));
    assert_string_equal(field(j, "format")->valuestring, "kiln-profile");
    assert_int_equal(field(j, "version")->valueint, KILN_REPORT_VERSION);
    const cJSON *c = field(j, "configuration");
    assert_true(cJSON_IsObject(c));
    static const char *const cs[] = {"model", "executor", "binding", "target", "build_id",
                                     "peak_source", "kiln_version"};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        want_str(c, cs[i]);
    static const char *const cn[] = {"threads", "tuned_tasks", "runs", "warmup"};
    for (size_t i = 0; i < sizeof cn / sizeof cn[0]; i++)
        want_num(c, cn[i]);
    want_str_or_null(c, "records");
    want_num_or_null(c, "peak_gflops");
    want_num_or_null(c, "peak_gflops_1");
    const cJSON *fb = field(c, "fallbacks");
    assert_true(cJSON_IsArray(fb));
    for (const cJSON *e = fb->child; e; e = e->next)
        assert_true(cJSON_IsString(e));
    want_str(j, "aggregate");
    want_str(j, "sort");
    want_num(j, "rows_total");
    const cJSON *rows = field(j, "rows");
    assert_true(cJSON_IsArray(rows));
    assert_int_equal(cJSON_GetArraySize(rows), r->n_rows);
    for (const cJSON *e = rows->child; e; e = e->next) {
        static const char *const rs[] = {"name", "op", "device", "shapes", "layouts"};
        for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++)
            want_str(e, rs[i]);
        want_num(e, "duration_us");
        want_num(e, "percent");
        want_num(e, "count");
        want_str_or_null(e, "hash");
        want_num_or_null(e, "flops");
        want_num_or_null(e, "gflops");
        want_num_or_null(e, "peak_fraction");
        assert_string_equal(field(e, "device")->valuestring, "cpu");
    }
    const cJSON *sum = field(j, "sum");
    want_num(sum, "duration_us");
    want_num(sum, "percent");
    want_num(sum, "count");
    const cJSON *tot = field(j, "total");
    want_num(tot, "duration_us");
    want_num(tot, "runs_kept");
    want_num(tot, "median_us");
    want_num(tot, "mean_us");
    want_num(tot, "min_us");
    want_num(tot, "max_us");
    want_str(tot, "device");
    want_num(tot, "count");
    const cJSON *ag = field(j, "agreement");
    want_num(ag, "sum_percent_of_total");
    want_num(ag, "between_kernels_us");
    want_num(ag, "clock_read_ns");
    want_num(ag, "overhead_us");
    const cJSON *b = field(ag, "bench");
    if (!cJSON_IsNull(b)) {
        static const char *const bn[] = {"mean_us", "median_us", "min_us", "max_us", "number",
                                         "repeat", "total_gap_percent"};
        for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++)
            want_num(b, bn[i]);
    }
    const cJSON *steps = field(j, "steps");
    assert_true(cJSON_IsArray(steps));
    assert_int_equal(cJSON_GetArraySize(steps), r->n_steps);
    for (const cJSON *e = steps->child; e; e = e->next) {
        static const char *const ss[] = {"name", "op", "shapes", "layouts"};
        for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++)
            want_str(e, ss[i]);
        static const char *const sn[] = {"index",  "duration_us", "median_us", "mean_us",
                                         "min_us", "max_us",      "start_us",  "trace_us"};
        for (size_t i = 0; i < sizeof sn / sizeof sn[0]; i++)
            want_num(e, sn[i]);
        want_str_or_null(e, "hash");
        want_num_or_null(e, "flops");
    }
}

static void test_format_json(void **state)
{
    (void)state;
    kiln_report r, back = {0};
    kiln_error err = {0};
    synthetic(&r, 3);
    assert_int_equal(kiln_report_rows(&r, "none", "time", 3, &err), KILN_OK);
    char *text = capture(kiln_report_write_json, &r);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    check_schema(j, &r);
    assert_string_equal(field(field(j, "rows")->child, "name")->valuestring, "fc");
    cJSON_Delete(j);
    /* reads back: every step, Sum, Total and the configuration */
    if (kiln_report_parse_json(text, "t.json", &back, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(back.n_steps, 4);
    assert_string_equal(back.steps[1].name, r.steps[1].name);
    assert_true(back.steps[0].hash == 0xabcdef0123456789ULL && back.steps[0].has_hash);
    assert_true(fabs(back.total_us - r.total_us) < 1e-6);
    assert_true(fabs(back.sum_us - r.sum_us) < 1e-6);
    assert_int_equal(back.cfg.threads, 2);
    assert_int_equal(back.cfg.n_fallbacks, 2);
    assert_true(back.has_bench && back.bench_number == 10);
    kiln_report_free(&back);
    /* no bench: "bench": null, still valid */
    r.has_bench = 0;
    free(text);
    text = capture(kiln_report_write_json, &r);
    j = cJSON_Parse(text);
    check_schema(j, &r);
    assert_true(cJSON_IsNull(field(field(j, "agreement"), "bench")));
    cJSON_Delete(j);
    free(text);
    kiln_report_free(&r);
}

static void test_format_chrome(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 3);
    assert_int_equal(kiln_report_rows(&r, "op", "time", 0, &err), KILN_OK);
    char *text = capture(kiln_report_write_chrome, &r);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    const cJSON *ev = field(j, "traceEvents");
    assert_true(cJSON_IsArray(ev));
    assert_int_equal(cJSON_GetArraySize(ev), r.n_steps); /* one per kernel */
    double prev_end = -1;
    for (const cJSON *e = ev->child; e; e = e->next) {
        want_str(e, "name");
        assert_string_equal(field(e, "ph")->valuestring, "X");
        want_num(e, "ts");
        want_num(e, "dur");
        want_num(e, "pid");
        want_num(e, "tid");
        double ts = field(e, "ts")->valuedouble, dur = field(e, "dur")->valuedouble;
        assert_true(ts >= prev_end && dur >= 0); /* in order, not overlapping */
        prev_end = ts + dur;
    }
    cJSON_Delete(j);
    free(text);
    kiln_report_free(&r);
}

/* Number of fields of each CSV record (RFC 4180); -1 on a malformed quote. */
static int csv_columns(const char *text, int *counts, int max_lines)
{
    int lines = 0, fields = 1, quoted = 0;
    for (const char *p = text; *p; p++) {
        if (quoted) {
            if (*p == '"') {
                if (p[1] == '"')
                    p++;
                else
                    quoted = 0;
            }
            continue;
        }
        if (*p == '"') {
            if (p > text && p[-1] != ',' && p[-1] != '\n')
                return -1;
            quoted = 1;
        } else if (*p == ',') {
            fields++;
        } else if (*p == '\n') {
            if (lines < max_lines)
                counts[lines] = fields;
            lines++;
            fields = 1;
        }
    }
    return quoted ? -1 : lines;
}

static void test_format_csv(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 3);
    assert_int_equal(kiln_report_rows(&r, "none", "time", 0, &err), KILN_OK);
    char *text = capture(kiln_report_write_csv, &r);
    int counts[64] = {0};
    int lines = csv_columns(text, counts, 64);
    assert_int_equal(lines, 1 + r.n_rows + 2); /* header, rows, Sum, Total */
    for (int i = 1; i < lines; i++)
        assert_int_equal(counts[i], counts[0]);
    assert_int_equal(counts[0], 12);
    assert_non_null(strstr(text, "\"odd, \"\"quoted\"\" <name> & more\""));
    assert_non_null(strstr(text, "\r\nSum,"));
    free(text);
    kiln_report_free(&r);
}

/* Checks that tags nest and close; returns the number of <rect class="bar">. */
static int html_check(const char *html)
{
    static const char *const voids[] = {"meta", "br", "hr", "img", "input", "link", NULL};
    char stack[256][32];
    int depth = 0, bars = 0;
    for (const char *p = html; (p = strchr(p, '<')) != NULL;) {
        if (strncmp(p, "<!DOCTYPE", 9) == 0 || strncmp(p, "<!--", 4) == 0) {
            p = strchr(p, '>');
            assert_non_null(p);
            continue;
        }
        int closing = p[1] == '/';
        const char *n = p + 1 + closing;
        size_t len = strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789");
        assert_true(len > 0 && len < 32);
        const char *end = strchr(n, '>');
        assert_non_null(end);
        /* no stray '<' inside a tag: attribute values are escaped */
        const char *lt = strchr(n, '<');
        assert_true(!lt || lt > end);
        char name[32];
        memcpy(name, n, len);
        name[len] = '\0';
        if (strcmp(name, "rect") == 0 && !closing && strncmp(n + len, " class=\"bar\"", 12) == 0)
            bars++;
        int self = end[-1] == '/';
        int is_void = 0;
        for (int i = 0; voids[i]; i++)
            is_void |= strcmp(voids[i], name) == 0;
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                fail_msg("</%s> does not close <%s>", name, depth ? stack[depth - 1] : "(none)");
            depth--;
        } else if (!self && !is_void) {
            assert_true(depth < 256);
            strcpy(stack[depth++], name);
        }
        p = end + 1;
    }
    assert_int_equal(depth, 0);
    return bars;
}

static void test_format_html(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 3);
    for (int top = 0; top <= 3; top++) {
        assert_int_equal(kiln_report_rows(&r, "none", "time", top, &err), KILN_OK);
        char *html = capture(kiln_report_write_html, &r);
        assert_int_equal(html_check(html), r.n_rows);
        if (top == 0 || top >= 3) /* the row is third by time */
            assert_non_null(strstr(html, "odd, &quot;quoted&quot; &lt;name&gt; &amp; more"));
        assert_null(strstr(html, "<name>"));
        assert_null(strstr(html, "<script"));
        assert_null(strstr(html, "src="));
        assert_null(strstr(html, "href="));
        free(html);
    }
    kiln_report_free(&r);
}

static void test_format_table(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 3);
    assert_int_equal(kiln_report_rows(&r, "none", "time", 2, &err), KILN_OK);
    char *t = capture(kiln_report_write_table, &r);
    static const char *const want[] = {"Name", "Duration (us)", "Percent", "Device", "Count",
                                       "Argument Shapes", "Layouts", "Hash", "GFLOP/s",
                                       "% of peak", "\nSum ", "\nTotal ", "Configuration",
                                       "Number of threads: 2", "Binding: off",
                                       "Target ISA: x86_64-avx512", "Executor: graph",
                                       "Build id: 0123abcd", "Tuning records: r.json (3 tuned",
                                       "Fallbacks (2)", "Agreement", "Sum is ", "of Total",
                                       "Profiler overhead", "bench mean", "2 more rows"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(t, want[i]))
            fail_msg("table lacks '%s':\n%s", want[i], t);
    free(t);
    assert_int_equal(kiln_report_write(stdout, &r, "bogus", &err), KILN_ERR_INVALID_ARGUMENT);
    kiln_report_free(&r);
}

/* ---- the JSON reader on bad input ---------------------------------------------- */

static kiln_status parse(const char *text, kiln_error *err)
{
    kiln_report r = {0};
    kiln_status st = kiln_report_parse_json(text, "bad.json", &r, err);
    kiln_report_free(&r);
    return st;
}

static void test_read_json_errors(void **state)
{
    (void)state;
    kiln_report r;
    kiln_error err = {0};
    synthetic(&r, 3);
    assert_int_equal(kiln_report_rows(&r, "none", "time", 0, &err), KILN_OK);
    char *text = capture(kiln_report_write_json, &r);
    kiln_report_free(&r);
    /* every truncation is an error, never a crash */
    size_t n = strlen(text);
    for (size_t cut = 0; cut + 2 < n; cut += 7) {
        char *t = strndup(text, cut);
        assert_int_not_equal(parse(t, &err), KILN_OK);
        assert_true(err.msg[0] != '\0');
        free(t);
    }
    assert_int_equal(parse("[]", &err), KILN_ERR_PARSE);
    assert_int_equal(parse("{\"format\": \"other\"}", &err), KILN_ERR_PARSE);
    /* a field of the wrong type, named in the message */
    cJSON *j = cJSON_Parse(text);
    cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(steps, 2), "duration_us",
                              cJSON_CreateString("fast"));
    char *bad = cJSON_Print(j);
    assert_int_equal(parse(bad, &err), KILN_ERR_PARSE);
    assert_non_null(strstr(err.msg, "steps[2].duration_us"));
    cJSON_free(bad);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(j, "configuration"), "threads");
    bad = cJSON_Print(j);
    assert_int_equal(parse(bad, &err), KILN_ERR_PARSE);
    assert_non_null(strstr(err.msg, "threads"));
    cJSON_free(bad);
    cJSON_Delete(j);
    /* a newer version is refused */
    j = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(j, "version", cJSON_CreateNumber(99));
    bad = cJSON_Print(j);
    assert_int_equal(parse(bad, &err), KILN_ERR_UNSUPPORTED);
    cJSON_free(bad);
    cJSON_Delete(j);
    free(text);
    kiln_report rr = {0};
    assert_int_equal(kiln_report_read_json("/nonexistent/x.json", &rr, &err), KILN_ERR_IO);
}

/* ---- compare --------------------------------------------------------------------- */

static char *compare_text(const kiln_report *a, const kiln_report *b, const char *format)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kiln_error err = {0};
    if (kiln_report_compare(f, a, "A.json", b, "B.json", format, 0, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    fclose(f);
    return buf;
}

static void test_compare(void **state)
{
    (void)state;
    kiln_report a, b = {0};
    kiln_error err = {0};
    synthetic(&a, 3);
    /* B: a "reference executor" profile: conv1, bn1, relu apart, no fc, an extra */
    assert_int_equal(kiln_report_alloc_steps(&b, 6, &err), KILN_OK);
    const char *names[] = {"conv1", "bn1", "relu", "odd, \"quoted\" <name> & more", "conv2+bn2",
                           "extra"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(kiln_report_set_step(&b, i, names[i], "x", "", "", 0, 0, 0, &err),
                         KILN_OK);
        b.steps[i].time_us = 10.0 * (i + 1);
        b.sum_us += b.steps[i].time_us;
    }
    b.total_us = b.sum_us + 1;
    b.cfg.threads = 1;
    b.cfg.executor = kiln_report_strdup("ref");
    assert_int_equal(kiln_report_rows(&a, "none", "time", 0, &err), KILN_OK);
    assert_int_equal(kiln_report_rows(&b, "none", "time", 0, &err), KILN_OK);
    char *t = compare_text(&a, &b, "table");
    /* conv1+bn1+relu in A against 3 rows of B; conv2+bn2 by name */
    assert_non_null(strstr(t, "conv1+bn1+relu (3 rows in B)"));
    assert_non_null(strstr(t, "Only in A (1 row"));
    assert_non_null(strstr(t, "Only in B (1 row"));
    assert_non_null(strstr(t, "threads: 2 (A) vs 1 (B)"));
    assert_non_null(strstr(t, "executor: graph (A) vs ref (B)"));
    assert_non_null(strstr(t, "\nTotal "));
    free(t);
    t = compare_text(&a, &b, "csv");
    int counts[32] = {0};
    int lines = csv_columns(t, counts, 32);
    assert_true(lines >= 5);
    for (int i = 1; i < lines; i++)
        assert_int_equal(counts[i], counts[0]);
    free(t);
    t = compare_text(&a, &b, "json");
    cJSON *j = cJSON_Parse(t);
    assert_non_null(j);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "rows")));
    want_num(j, "total_delta_us");
    cJSON_Delete(j);
    free(t);
    /* the same profile twice: every row matched, ratio 1, no settings differ */
    t = compare_text(&a, &a, "table");
    assert_null(strstr(t, "Only in"));
    assert_non_null(strstr(t, "1.000"));
    assert_non_null(strstr(t, "Settings: the same"));
    free(t);
    kiln_report_free(&a);
    kiln_report_free(&b);
}

/* ---- reference executor stepping ------------------------------------------------ */

static kiln_status ref_step(void *ctx, int i, kiln_error *err)
{
    return kiln_ref_executor_run_node(ctx, i, err);
}

static void test_ref_stepping(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_ref_executor *ex = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_model_load("mlp", 0, &g, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
    kiln_tensor in = {0};
    kiln_dtype dt;
    kiln_shape sh;
    assert_int_equal(kiln_graph_input_info(g, 0, NULL, &dt, &sh), KILN_OK);
    assert_int_equal(kiln_tensor_alloc(&in, dt, &sh, &err), KILN_OK);
    kt_fill_random(in.data, kiln_shape_numel(&sh), 1, -1, 1);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &in, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_run(ex, &err), KILN_OK);
    const kiln_tensor *out = kiln_ref_executor_output(ex, 0);
    int64_t n = kiln_shape_numel(&out->shape);
    float *want = malloc(sizeof *want * (size_t)n);
    memcpy(want, out->data, sizeof *want * (size_t)n);
    memset(out->data, 0, sizeof *want * (size_t)n);
    int nodes = kiln_ref_executor_num_nodes(ex);
    assert_true(nodes >= 5);
    int64_t *st = calloc((size_t)KILN_PROFILE_STAMPS(nodes), sizeof *st);
    assert_int_equal(kiln_profile_steps(ref_step, ex, nodes, 1, st, &err), KILN_OK);
    assert_memory_equal(want, out->data, sizeof *want * (size_t)n);
    double flops = 0;
    for (int i = 0; i < nodes; i++) {
        kiln_ref_node_info ni;
        assert_int_equal(kiln_ref_executor_node_info(ex, i, &ni), KILN_OK);
        assert_non_null(ni.name);
        assert_non_null(ni.op);
        flops += ni.flops;
        char buf[256];
        assert_true(strncmp(kiln_ref_executor_node_shapes(ex, i, buf, sizeof buf), "float32[",
                            8) == 0);
    }
    assert_true(flops == 2.0 * (784 * 128 + 128 * 64 + 64 * 10));
    char tiny[8];
    kiln_ref_executor_node_shapes(ex, 0, tiny, sizeof tiny);
    assert_true(strlen(tiny) < sizeof tiny);
    assert_int_equal(kiln_ref_executor_run_node(ex, nodes, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_ref_executor_node_info(ex, -1, NULL), KILN_ERR_INVALID_ARGUMENT);
    free(st);
    free(want);
    kiln_tensor_release(&in);
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);
}

/* ---- the CLI ------------------------------------------------------------------------ */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return b;
}

static void test_cli(void **state)
{
    (void)state;
    char *dir = kt_tempdir(), cmd[4096], *out = NULL;
    const char *model = rt_model("two_step");
    /* table, with the JSON saved for --compare */
    snprintf(cmd, sizeof cmd, "profile %s --threads 2 --runs 5 --save-json %s/a.json", model, dir);
    int rc = kt_run_cli(cmd, &out);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, out);
    assert_non_null(strstr(out, "scale"));
    assert_non_null(strstr(out, "add_w"));
    assert_non_null(strstr(out, "Total is "));
    assert_non_null(strstr(out, "Number of threads: 2"));
    free(out);
    static const char *const fmts[] = {"csv", "json", "chrome", "html"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd,
                 "profile %s --threads 1 --runs 3 --no-bench --peak-gflops 100 --format %s "
                 "--output %s/p.%s --sort order --aggregate hash",
                 model, fmts[i], dir, fmts[i]);
        rc = kt_run_cli(cmd, &out);
        if (rc != 0)
            fail_msg("%s: rc %d: %s", fmts[i], rc, out);
        free(out);
        char path[1024];
        snprintf(path, sizeof path, "%s/p.%s", dir, fmts[i]);
        char *text = read_all(path);
        if (i == 1 || i == 2) {
            cJSON *j = cJSON_Parse(text);
            assert_non_null(j);
            if (i == 1) {
                kiln_report r = {0};
                kiln_error err = {0};
                assert_int_equal(kiln_report_parse_json(text, path, &r, &err), KILN_OK);
                assert_int_equal(r.n_steps, 2);
                assert_true(cJSON_IsNull(field(field(j, "agreement"), "bench")));
                assert_true(field(field(j, "configuration"), "peak_gflops")->valuedouble == 100);
                kiln_report_free(&r);
            } else {
                assert_int_equal(cJSON_GetArraySize(field(j, "traceEvents")), 2);
            }
            cJSON_Delete(j);
        } else if (i == 3) {
            html_check(text);
        }
        free(text);
    }
    snprintf(cmd, sizeof cmd, "profile %s --threads 1 --runs 3 --save-json %s/b.json --format csv",
             model, dir);
    assert_int_equal(kt_run_cli(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "profile --compare %s/a.json %s/b.json", dir, dir);
    rc = kt_run_cli(cmd, &out);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, out);
    assert_non_null(strstr(out, "threads: 2 (A) vs 1 (B)"));
    free(out);
    /* a corrupt report: an error message and exit 2 */
    snprintf(cmd, sizeof cmd, "sh -c 'echo \"{\\\"format\\\": \" > %s/bad.json'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "profile --compare %s/a.json %s/bad.json", dir, dir);
    rc = kt_run_cli(cmd, &out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "bad.json"));
    free(out);
    /* usage errors */
    assert_int_equal(kt_run_cli("profile", NULL), 2);
    assert_int_equal(kt_run_cli("profile mlp --format xml", NULL), 2);
    assert_int_equal(kt_run_cli("profile --compare onlyone.json", NULL), 2);
    assert_int_equal(kt_run_cli("profile --help", NULL), 0);
    /* the reference executor: one row per node */
    rc = kt_run_cli("profile mlp --executor ref --runs 2 --bench-repeat 2 --bench-number 1",
                    &out);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, out);
    assert_non_null(strstr(out, "Executor: ref"));
    assert_non_null(strstr(out, "relu1"));
    free(out);
    /* a model on the VM (NonZero's output shape is data), its input given:
     * the VM's own row and the NonZero run by the VM's kernel */
    const char *nz = "/usr/share/libonnx-testdata/data/node/test_nonzero_example";
    snprintf(cmd, sizeof cmd, "%s/model.onnx", nz);
    if (access(cmd, R_OK) == 0) {
        snprintf(cmd, sizeof cmd,
                 "profile %s/model.onnx --input %s/test_data_set_0/input_0.pb --runs 3 "
                 "--bench-repeat 2 --format json --output %s/vm.json",
                 nz, nz, dir);
        rc = kt_run_cli(cmd, &out);
        if (rc != 0)
            fail_msg("rc %d: %s", rc, out);
        free(out);
        char path[1024];
        snprintf(path, sizeof path, "%s/vm.json", dir);
        char *text = read_all(path);
        kiln_report r = {0};
        kiln_error err = {0};
        assert_int_equal(kiln_report_parse_json(text, path, &r, &err), KILN_OK);
        assert_int_equal(r.n_steps, 2);
        assert_string_equal(r.cfg.executor, "vm");
        int found = 0;
        for (int i = 0; i < r.n_steps; i++)
            found += strcmp(r.steps[i].op, "NonZero") == 0 &&
                     strcmp(r.steps[i].layouts, "vm kernel") == 0 &&
                     strcmp(r.steps[i].shapes, "bool[2, 2]") == 0;
        assert_int_equal(found, 1);
        kiln_report_free(&r);
        free(text);
        /* one --input for a model of one input, not two */
        snprintf(cmd, sizeof cmd, "profile %s/model.onnx --input %s/test_data_set_0/input_0.pb "
                 "--input %s/test_data_set_0/input_0.pb", nz, nz, nz);
        rc = kt_run_cli(cmd, &out);
        assert_int_equal(rc, 2);
        assert_non_null(strstr(out, "has 1 input but 2 --input files were given"));
        free(out);
    }
    kt_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_profile),  cmocka_unit_test(test_report_stats),
        cmocka_unit_test(test_report_slow_run),
        cmocka_unit_test(test_format_json),     cmocka_unit_test(test_format_chrome),
        cmocka_unit_test(test_format_csv),      cmocka_unit_test(test_format_html),
        cmocka_unit_test(test_format_table),    cmocka_unit_test(test_read_json_errors),
        cmocka_unit_test(test_compare),         cmocka_unit_test(test_ref_stepping),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
