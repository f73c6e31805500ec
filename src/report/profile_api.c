/* report/profile_api.c: the public profiler call (include/kiln/profile.h)
 * and the measurement it shares with `kiln profile` (report/profile_run.h).
 *
 * kiln_profile_module does for a loaded module what `kiln profile` does for a
 * compiled MODEL: describe the steps from the module, measure the FMA peak on
 * 1 and N threads, then kiln_profile_measure (warm-up, then R rounds of a
 * share of the instrumented runs and one kiln_module_bench measurement, so
 * that both see the same machine state). The handle owns the report
 * (src/report); formatting writes through open_memstream into a malloc'ed
 * string. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"
#include "kiln/profile.h"
#include "report/profile_run.h"
#include "report/report.h"
#include "runtime/profile.h"
#include "util/error.h"

#define SLOW_RUN_MS 200.0  /* above this, shrink the unset counts */
#define BUDGET_MS 20000.0  /* ... to about this much time in all */
#define FAST_RUNS_MS 400.0 /* unless runs is set: at least this much instrumented time */
#define MAX_AUTO_RUNS 500

struct kiln_profile {
    kiln_report r;
};

void kiln_free(void *p)
{
    free(p);
}

void kiln_profile_destroy(kiln_profile *p)
{
    if (!p)
        return;
    kiln_report_free(&p->r);
    free(p);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static kiln_status describe(kiln_module *m, const char *model, kiln_report *r, kiln_error *err)
{
    kiln_report_config *c = &r->cfg;
    kiln_status st;
    int n = kiln_module_num_steps(m), bound = kiln_module_num_bound(m);
    char bind[64] = "off";
    if (bound > 0)
        snprintf(bind, sizeof bind, "on (%d worker%s pinned)", bound, bound == 1 ? "" : "s");
    c->model = kiln_report_strdup(model && *model ? model : kiln_module_name(m));
    c->executor = kiln_report_strdup("graph");
    c->kiln_version = kiln_report_strdup(KILN_VERSION);
    c->binding = kiln_report_strdup(bind);
    c->target = kiln_report_strdup(kiln_module_target(m));
    c->build_id = kiln_report_strdup(kiln_module_build_id(m));
    c->threads = kiln_module_num_threads(m);
    if (!c->model || !c->executor || !c->kiln_version || !c->binding || !c->target ||
        !c->build_id)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
    if ((st = kiln_report_set_metadata(r, kiln_module_metadata_json(m), err)) != KILN_OK)
        return st;
    if ((st = kiln_report_alloc_steps(r, n, err)) != KILN_OK)
        return st;
    for (int i = 0; i < n; i++) {
        kiln_step_info si;
        if (kiln_module_step_info(m, i, &si) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "profile: step %d: no info", i);
        if ((st = kiln_report_set_step(r, i, si.name, si.op, si.shapes, si.layouts, 1,
                                       si.workload_hash, si.flops, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status kiln_profile_measure(const kiln_profile_target *t, kiln_profile_plan *o,
                                 kiln_report *r, kiln_error *err)
{
    kiln_status st = KILN_OK;
    double t0 = now_ms();
    for (int i = 0; i < o->warmup; i++)
        if ((st = t->run(t->ctx, err)) != KILN_OK)
            return st;
    double per_run = o->warmup > 0 ? (now_ms() - t0) / o->warmup : 0;
    if (o->warmup == 0) { /* one run to size the budget */
        t0 = now_ms();
        if ((st = t->run(t->ctx, err)) != KILN_OK)
            return st;
        per_run = now_ms() - t0;
    }
    if (!o->set_runs && per_run > 0 && per_run * o->runs < FAST_RUNS_MS) {
        double want = FAST_RUNS_MS / per_run;
        o->runs = want > MAX_AUTO_RUNS ? MAX_AUTO_RUNS : (int)want;
    }
    if (per_run > SLOW_RUN_MS) {
        int fit = (int)(BUDGET_MS / per_run);
        if (!o->set_runs)
            o->runs = fit / 2 > 3 ? (fit / 2 < o->runs ? fit / 2 : o->runs) : 3;
        if (!o->set_number)
            o->number = 1;
        if (!o->set_repeat)
            o->repeat = fit / 2 > 3 ? (fit / 2 < o->repeat ? fit / 2 : o->repeat) : 3;
    }
    int n = r->n_steps, runs = o->runs;
    int rounds = o->no_bench ? 1 : o->repeat;
    int64_t per = KILN_PROFILE_STAMPS(n);
    int64_t *stamps = malloc(sizeof *stamps * (size_t)(per * runs));
    double *bres = calloc((size_t)rounds, sizeof *bres);
    kiln_bench_result *b = calloc(1, sizeof *b);
    if (!stamps || !bres || !b) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
        goto done;
    }
    kiln_bench_options bo = {.number = o->number, .repeat = 1};
    for (int k = 0; k < rounds; k++) {
        int from = (int)((int64_t)runs * k / rounds), to = (int)((int64_t)runs * (k + 1) / rounds);
        if (to > from && (st = t->profile(t->ctx, to - from, stamps + per * from, err)) != KILN_OK)
            goto done;
        if (o->no_bench)
            continue;
        if ((st = t->bench(t->ctx, &bo, b, err)) != KILN_OK)
            goto done;
        bres[k] = b->results[0];
    }
    if ((st = kiln_report_from_stamps(r, stamps, runs, err)) != KILN_OK)
        goto done;
    r->cfg.warmup = o->warmup;
    if (!o->no_bench) {
        double sum = 0;
        for (int k = 0; k < rounds; k++)
            sum += bres[k];
        qsort(bres, (size_t)rounds, sizeof *bres, cmp_d);
        r->has_bench = 1;
        r->bench_mean_us = sum / rounds * 1e6;
        r->bench_median_us =
            (rounds % 2 ? bres[rounds / 2] : (bres[rounds / 2 - 1] + bres[rounds / 2]) / 2) * 1e6;
        r->bench_min_us = bres[0] * 1e6;
        r->bench_max_us = bres[rounds - 1] * 1e6;
        r->bench_number = o->number;
        r->bench_repeat = rounds;
    }
done:
    free(stamps);
    free(bres);
    free(b);
    return st;
}

static kiln_status mod_run(void *ctx, kiln_error *err)
{
    return kiln_module_run(ctx, err);
}

static kiln_status mod_profile(void *ctx, int runs, int64_t *stamps, kiln_error *err)
{
    return kiln_module_profile(ctx, runs, stamps, err);
}

static kiln_status mod_bench(void *ctx, const kiln_bench_options *opts, kiln_bench_result *out,
                             kiln_error *err)
{
    return kiln_module_bench(ctx, opts, out, err);
}

static kiln_status mod_describe(void *ctx, const char *model, kiln_report *r, kiln_error *err)
{
    return describe(ctx, model, r, err);
}

kiln_status kiln_profile_target_run(const kiln_profile_target *t, kiln_profile_describe_fn desc,
                                    const kiln_profile_options *opts, const char *what,
                                    kiln_profile **out, kiln_error *err)
{
    kiln_profile_options o = {0};
    if (opts)
        o = *opts;
    if (!t->ctx || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s: the model and out must not be NULL",
                           what);
    if (o.runs < 0 || o.runs > 100000 || o.warmup > 100000 || o.bench_number < 0 ||
        o.bench_number > (1 << 20) || o.bench_repeat < 0 || o.bench_repeat > 1000 ||
        o.peak_gflops < 0 || o.peak_gflops > 1e9 || o.peak_gflops != o.peak_gflops)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%s: runs must be in 0..100000, warmup at most 100000, bench_number "
                           "in 0..%d, bench_repeat in 0..1000, peak_gflops in 0..1e9",
                           what, 1 << 20);
    kiln_profile_plan c = {
        .runs = o.runs ? o.runs : KILN_PROFILE_DEFAULT_RUNS,
        .warmup = o.warmup == 0 ? KILN_PROFILE_DEFAULT_WARMUP : (o.warmup < 0 ? 0 : o.warmup),
        .number = o.bench_number ? o.bench_number : KILN_PROFILE_DEFAULT_BENCH_NUMBER,
        .repeat = o.bench_repeat ? o.bench_repeat : KILN_PROFILE_DEFAULT_BENCH_REPEAT,
        .no_bench = o.no_bench != 0,
        .set_runs = o.runs > 0,
        .set_number = o.bench_number > 0,
        .set_repeat = o.bench_repeat > 0};
    kiln_profile *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
    kiln_status st = desc(t->ctx, o.model, &p->r, err);
    if (st != KILN_OK)
        goto fail;
    kiln_report_config *cfg = &p->r.cfg;
    char how[256] = "";
    if (o.peak_gflops > 0) {
        cfg->peak_gflops = o.peak_gflops;
        cfg->peak_source = kiln_report_strdup("given by the caller");
    } else {
        kiln_peak_measure_pair(cfg->threads, &cfg->peak_gflops, &cfg->peak_gflops_1, how,
                               sizeof how);
        cfg->peak_source = kiln_report_strdup(how);
    }
    if (!cfg->peak_source) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
        goto fail;
    }
    p->r.clock_ns = kiln_profile_clock_ns();
    if ((st = kiln_profile_measure(t, &c, &p->r, err)) != KILN_OK ||
        (st = kiln_report_rows(&p->r, "none", "time", 0, err)) != KILN_OK)
        goto fail;
    *out = p;
    return KILN_OK;
fail:
    kiln_profile_destroy(p);
    return st;
}

kiln_status kiln_profile_module(kiln_module *m, const kiln_profile_options *opts,
                                kiln_profile **out, kiln_error *err)
{
    kiln_profile_target t = {.ctx = m, .run = mod_run, .profile = mod_profile, .bench = mod_bench};
    return kiln_profile_target_run(&t, mod_describe, opts, "kiln_profile_module", out, err);
}

kiln_status kiln_profile_parse_json(const char *text, const char *what, kiln_profile **out,
                                    kiln_error *err)
{
    if (!text || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_profile_parse_json: text and out must not be NULL");
    kiln_profile *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
    kiln_status st = kiln_report_parse_json(text, what, &p->r, err);
    if (st == KILN_OK)
        st = kiln_report_rows(&p->r, "none", "time", 0, err);
    if (st != KILN_OK) {
        kiln_profile_destroy(p);
        return st;
    }
    *out = p;
    return KILN_OK;
}

/* Runs write(f) into a memory stream and hands out the text. */
typedef kiln_status (*write_fn)(FILE *f, void *ctx, kiln_error *err);

static kiln_status to_string(write_fn write, void *ctx, char **out, kiln_error *err)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: cannot open a memory stream");
    kiln_status st = write(f, ctx, err);
    if (fclose(f) != 0 && st == KILN_OK)
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: memory stream write failed");
    if (st != KILN_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return KILN_OK;
}

typedef struct fmt_ctx {
    kiln_profile *a, *b;
    const char *format, *a_label, *b_label;
    int top;
} fmt_ctx;

static kiln_status write_format(FILE *f, void *ctx, kiln_error *err)
{
    fmt_ctx *c = ctx;
    return kiln_report_write(f, &c->a->r, c->format, err);
}

static kiln_status write_compare(FILE *f, void *ctx, kiln_error *err)
{
    fmt_ctx *c = ctx;
    return kiln_report_compare(f, &c->a->r, c->a_label, &c->b->r, c->b_label, c->format, c->top,
                               err);
}

kiln_status kiln_profile_format(kiln_profile *p, const char *format, const char *aggregate,
                                const char *sort, int top, char **out, kiln_error *err)
{
    if (!p || !format || !out || top < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_profile_format: profile, format and out must not be NULL and "
                           "top must be >= 0");
    kiln_status st = kiln_report_rows(&p->r, aggregate, sort, top, err);
    if (st != KILN_OK)
        return st;
    fmt_ctx c = {.a = p, .format = format};
    return to_string(write_format, &c, out, err);
}

kiln_status kiln_profile_compare(kiln_profile *a, const char *a_label, kiln_profile *b,
                                 const char *b_label, const char *format, const char *aggregate,
                                 int top, char **out, kiln_error *err)
{
    if (!a || !b || !out || top < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_profile_compare: profiles and out must not be NULL and top "
                           "must be >= 0");
    if (!format)
        format = "table";
    if (strcmp(format, "table") != 0 && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "profile compare: unknown format '%s' (available: table, csv, json)",
                           format);
    kiln_status st;
    if ((st = kiln_report_rows(&a->r, aggregate, "time", 0, err)) != KILN_OK ||
        (st = kiln_report_rows(&b->r, aggregate, "time", 0, err)) != KILN_OK)
        return st;
    fmt_ctx c = {.a = a, .b = b, .format = format, .a_label = a_label ? a_label : "A",
                 .b_label = b_label ? b_label : "B", .top = top};
    return to_string(write_compare, &c, out, err);
}
