/* report/report.c: building a profile report.
 *
 * Runs. The instrumented runs whose wall time is within the noise of the
 * median run are "kept": a run is left out when it is slower than the
 * median by more than KILN_REPORT_SLOW_MADS median absolute deviations (at
 * least KILN_REPORT_SLOW_FLOOR of the median): a run the OS or another
 * process interrupted. At least half the runs are always kept (the median
 * run and every faster one).
 *
 * Steps: a step's time is the mean of its durations (the time between the
 * stamps around it) over the kept runs; min, max, median and the mean over
 * every run are kept too. Total is the mean wall time of the kept runs: the
 * same runs and the same statistic as the steps', so Sum (the steps' times
 * added) is Total less the measured time between kernels, exactly, however
 * skewed the kernels' times are. (Medians are not additive: over the 2,000
 * short kernels of a detection network's VM, the sum of per-kernel medians
 * fell 2-4% short of the median run.) The run whose wall time is closest to
 * the median is the "representative" run: its stamps place the events of
 * the Chrome trace.
 *
 * Rows: aggregate the steps (none / by workload hash / by op), sort, cut to
 * --top. A row's time is the sum of its steps' times; its FLOPs are known
 * only when every one of its steps' are.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "report/report.h"
#include "util/error.h"

char *kiln_report_strdup(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void free_rows(kiln_report *r)
{
    for (int i = 0; r->rows && i < r->n_rows; i++) {
        free(r->rows[i].name);
        free(r->rows[i].op);
        free(r->rows[i].shapes);
        free(r->rows[i].layouts);
    }
    free(r->rows);
    r->rows = NULL;
    r->n_rows = r->rows_total = 0;
}

void kiln_report_free(kiln_report *r)
{
    if (!r)
        return;
    free_rows(r);
    for (int i = 0; r->steps && i < r->n_steps; i++) {
        free(r->steps[i].name);
        free(r->steps[i].op);
        free(r->steps[i].shapes);
        free(r->steps[i].layouts);
    }
    free(r->steps);
    kiln_report_config *c = &r->cfg;
    free(c->model);
    free(c->executor);
    free(c->target);
    free(c->build_id);
    free(c->binding);
    free(c->records);
    free(c->kiln_version);
    free(c->peak_source);
    for (int i = 0; c->fallbacks && i < c->n_fallbacks; i++)
        free(c->fallbacks[i]);
    free(c->fallbacks);
    memset(r, 0, sizeof *r);
}

kiln_status kiln_report_alloc_steps(kiln_report *r, int n, kiln_error *err)
{
    if (n < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "report: %d steps", n);
    r->steps = calloc((size_t)(n > 0 ? n : 1), sizeof *r->steps);
    if (!r->steps)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    r->n_steps = n;
    return KILN_OK;
}

kiln_status kiln_report_set_step(kiln_report *r, int i, const char *name, const char *op,
                                 const char *shapes, const char *layouts, int has_hash,
                                 uint64_t hash, double flops, kiln_error *err)
{
    if (i < 0 || i >= r->n_steps)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "report: step %d out of range", i);
    kiln_report_step *s = &r->steps[i];
    s->name = kiln_report_strdup(name);
    s->op = kiln_report_strdup(op);
    s->shapes = kiln_report_strdup(shapes);
    s->layouts = kiln_report_strdup(layouts);
    s->has_hash = has_hash;
    s->hash = hash;
    s->flops = flops > 0 && isfinite(flops) ? flops : 0;
    if (!s->name || !s->op || !s->shapes || !s->layouts)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    return KILN_OK;
}

kiln_status kiln_report_set_metadata(kiln_report *r, const char *metadata_json, kiln_error *err)
{
    if (!metadata_json || !*metadata_json)
        return KILN_OK;
    cJSON *j = cJSON_Parse(metadata_json);
    if (!j)
        return KILN_OK; /* not JSON: nothing to report, not an error */
    kiln_status st = KILN_OK;
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(j, "records");
    if (cJSON_IsString(rec)) {
        free(r->cfg.records);
        if (!(r->cfg.records = kiln_report_strdup(rec->valuestring)))
            st = KILN_ERR_OUT_OF_MEMORY;
    }
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(j, "tuned_tasks");
    if (cJSON_IsNumber(tt) && tt->valuedouble >= 0 && tt->valuedouble < 1e9)
        r->cfg.tuned_tasks = (int)tt->valuedouble;
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(j, "fallbacks");
    if (st == KILN_OK && cJSON_IsArray(fb)) {
        int n = cJSON_GetArraySize(fb);
        char **list = calloc((size_t)(n > 0 ? n : 1), sizeof *list);
        int k = 0;
        if (!list)
            st = KILN_ERR_OUT_OF_MEMORY;
        for (const cJSON *e = fb->child; st == KILN_OK && e; e = e->next) {
            char *s = cJSON_IsString(e) ? kiln_report_strdup(e->valuestring) : cJSON_PrintUnformatted(e);
            if (!s) {
                st = KILN_ERR_OUT_OF_MEMORY;
                break;
            }
            list[k++] = s;
        }
        if (st == KILN_OK) {
            r->cfg.fallbacks = list;
            r->cfg.n_fallbacks = k;
        } else if (list) {
            for (int i = 0; i < k; i++)
                free(list[i]);
            free(list);
        }
    }
    cJSON_Delete(j);
    if (st != KILN_OK)
        return kiln_errorf(err, st, "report: out of memory");
    return KILN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

kiln_status kiln_report_from_stamps(kiln_report *r, const int64_t *stamps, int runs,
                                    kiln_error *err)
{
    if (!stamps || runs < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "report: no runs");
    const int n = r->n_steps;
    const int64_t k = 2 * (int64_t)n + 2;
    double *v = malloc(sizeof *v * (size_t)runs), *copy = malloc(sizeof *copy * (size_t)runs);
    unsigned char *kept = malloc((size_t)runs);
    if (!v || !copy || !kept) {
        free(v);
        free(copy);
        free(kept);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    }
    /* the wall time of each run, and which runs are kept (see the top) */
    double mean = 0;
    for (int i = 0; i < runs; i++) {
        v[i] = (double)(stamps[i * k + k - 1] - stamps[i * k]) / 1e3;
        mean += v[i];
    }
    r->total_mean_us = mean / runs;
    memcpy(copy, v, sizeof *v * (size_t)runs);
    const double med = median_of(copy, runs);
    r->total_median_us = med;
    r->total_min_us = copy[0];
    r->total_max_us = copy[runs - 1];
    for (int i = 0; i < runs; i++)
        copy[i] = fabs(v[i] - med);
    double slack = KILN_REPORT_SLOW_MADS * median_of(copy, runs);
    if (slack < KILN_REPORT_SLOW_FLOOR * med)
        slack = KILN_REPORT_SLOW_FLOOR * med;
    int rep = 0, n_kept = 0;
    double total = 0;
    for (int i = 0; i < runs; i++) {
        kept[i] = v[i] <= med + slack;
        n_kept += kept[i];
        total += kept[i] ? v[i] : 0;
        if (fabs(v[i] - med) < fabs(v[rep] - med))
            rep = i;
    }
    r->runs_kept = n_kept;
    r->total_us = total / n_kept; /* the median run is always kept: n_kept >= 1 */
    r->sum_us = r->sum_mean_us = 0;
    for (int s = 0; s < n; s++) {
        double m = 0, mk = 0;
        for (int i = 0; i < runs; i++) {
            v[i] = (double)(stamps[i * k + 2 + 2 * s] - stamps[i * k + 1 + 2 * s]) / 1e3;
            m += v[i];
            mk += kept[i] ? v[i] : 0;
        }
        kiln_report_step *st = &r->steps[s];
        st->time_us = mk / n_kept;
        st->mean_us = m / runs;
        r->sum_mean_us += st->mean_us;
        r->sum_us += st->time_us;
        st->start_us = (double)(stamps[rep * k + 1 + 2 * s] - stamps[rep * k]) / 1e3;
        st->trace_us = v[rep];
        st->median_us = median_of(v, runs);
        st->min_us = v[0];
        st->max_us = v[runs - 1];
    }
    /* time between kernels, measured inside each kept run */
    double between = 0;
    for (int i = 0; i < runs; i++) {
        int64_t in = 0;
        for (int s = 0; s < n; s++)
            in += stamps[i * k + 2 + 2 * s] - stamps[i * k + 1 + 2 * s];
        between += kept[i] ? (double)(stamps[i * k + k - 1] - stamps[i * k] - in) / 1e3 : 0;
    }
    r->between_us = between / n_kept;
    r->sum_count = n;
    r->cfg.runs = runs;
    r->overhead_us = r->clock_ns * (double)k / 1e3;
    free(v);
    free(copy);
    free(kept);
    return KILN_OK;
}

/* ---- rows ------------------------------------------------------------------ */

static int same_group(const kiln_report_step *a, const kiln_report_step *b, int by_op)
{
    if (strcmp(a->op, b->op) != 0)
        return 0;
    if (by_op)
        return 1;
    if (a->has_hash != b->has_hash)
        return 0;
    return a->has_hash ? a->hash == b->hash : strcmp(a->name, b->name) == 0;
}

/* sort: 't'ime (descending), 'n'ame, else execution order; ties by order */
static int cmp_rows(const kiln_report_row *a, const kiln_report_row *b, char sort)
{
    int c = 0;
    if (sort == 't')
        c = (a->duration_us < b->duration_us) - (a->duration_us > b->duration_us);
    else if (sort == 'n')
        c = strcmp(a->name, b->name);
    if (c == 0)
        c = (a->order > b->order) - (a->order < b->order);
    return c;
}

/* insertion sort: rows are few (one per kernel at most) */
static void sort_rows(kiln_report_row *rows, int n, char sort)
{
    for (int i = 1; i < n; i++) {
        kiln_report_row x = rows[i];
        int j = i;
        for (; j > 0 && cmp_rows(&rows[j - 1], &x, sort) > 0; j--)
            rows[j] = rows[j - 1];
        rows[j] = x;
    }
}

kiln_status kiln_report_rows(kiln_report *r, const char *aggregate, const char *sort, int top,
                             kiln_error *err)
{
    if (!aggregate)
        aggregate = "none";
    if (!sort)
        sort = "time";
    int agg_none = strcmp(aggregate, "none") == 0, by_op = strcmp(aggregate, "op") == 0;
    if (!agg_none && !by_op && strcmp(aggregate, "hash") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "unknown aggregation '%s' (available: none, hash, op)", aggregate);
    if (strcmp(sort, "time") != 0 && strcmp(sort, "order") != 0 && strcmp(sort, "name") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "unknown sort '%s' (available: time, order, name)", sort);
    free_rows(r);
    snprintf(r->aggregate, sizeof r->aggregate, "%s", aggregate);
    snprintf(r->sort, sizeof r->sort, "%s", sort);
    const int n = r->n_steps;
    int *group = malloc(sizeof *group * (size_t)(n > 0 ? n : 1));
    r->rows = calloc((size_t)(n > 0 ? n : 1), sizeof *r->rows);
    if (!group || !r->rows) {
        free(group);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    }
    int n_rows = 0;
    for (int s = 0; s < n; s++) {
        const kiln_report_step *st = &r->steps[s];
        int g = -1;
        if (!agg_none)
            for (int t = 0; t < s && g < 0; t++)
                if (same_group(&r->steps[t], st, by_op))
                    g = group[t];
        if (g < 0) {
            g = n_rows++;
            kiln_report_row *row = &r->rows[g];
            row->name = kiln_report_strdup(by_op ? st->op : st->name);
            row->op = kiln_report_strdup(st->op);
            row->shapes = kiln_report_strdup(by_op ? "" : st->shapes);
            row->layouts = kiln_report_strdup(by_op ? "" : st->layouts);
            row->has_hash = by_op ? 0 : st->has_hash;
            row->hash = st->hash;
            row->order = s;
            row->flops = st->flops;
            r->n_rows = n_rows; /* so that free_rows frees what exists */
            if (!row->name || !row->op || !row->shapes || !row->layouts) {
                free(group);
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
            }
        } else if (r->rows[g].flops > 0) {
            r->rows[g].flops = st->flops > 0 ? r->rows[g].flops + st->flops : 0;
        }
        group[s] = g;
        r->rows[g].duration_us += st->time_us;
        r->rows[g].count++;
    }
    free(group);
    for (int i = 0; i < n_rows; i++) {
        kiln_report_row *row = &r->rows[i];
        row->percent = r->total_us > 0 ? 100.0 * row->duration_us / r->total_us : 0;
        row->gflops = row->flops > 0 && row->duration_us > 0 ? row->flops / (row->duration_us * 1e3)
                                                             : 0;
        row->peak_fraction = row->gflops > 0 && r->cfg.peak_gflops > 0
                                 ? row->gflops / r->cfg.peak_gflops
                                 : 0;
    }
    sort_rows(r->rows, n_rows, sort[0]);
    r->n_rows = n_rows;
    r->rows_total = n_rows;
    if (top > 0 && top < n_rows) {
        for (int i = top; i < n_rows; i++) {
            free(r->rows[i].name);
            free(r->rows[i].op);
            free(r->rows[i].shapes);
            free(r->rows[i].layouts);
        }
        r->n_rows = top;
    }
    return KILN_OK;
}

/* ---- shared formatting ---------------------------------------------------- */

char *kiln_report_fmt_us(double us, char *buf, size_t size)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.2f", fabs(us));
    const char *dot = strchr(tmp, '.');
    int int_len = dot ? (int)(dot - tmp) : (int)strlen(tmp);
    char out[96];
    int o = 0;
    if (us < 0 && us <= -0.005)
        out[o++] = '-';
    for (int i = 0; i < int_len; i++) {
        if (i > 0 && (int_len - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = tmp[i];
    }
    out[o] = '\0';
    snprintf(buf, size, "%s%s", out, dot ? dot : "");
    return buf;
}

/* "812.40 us" below a millisecond, else "20.640 ms" */
static void human_us(double us, char *buf, size_t size)
{
    if (fabs(us) < 1000)
        snprintf(buf, size, "%.2f us", us);
    else
        snprintf(buf, size, "%.3f ms", us / 1e3);
}

void kiln_report_agreement_text(const kiln_report *r, char *buf, size_t size)
{
    size_t len = 0;
#define ADD(...)                                                                    \
    do {                                                                            \
        if (len < size) {                                                           \
            int w_ = snprintf(buf + len, size - len, __VA_ARGS__);                  \
            len += w_ > 0 ? (size_t)w_ : 0;                                         \
        }                                                                           \
    } while (0)
    buf[0] = '\0';
    if (r->total_us <= 0)
        return;
    double sum_pct = 100.0 * r->sum_us / r->total_us;
    char gap[32];
    human_us(r->total_us - r->sum_us, gap, sizeof gap);
    ADD("Sum is %.1f%% of Total (%s apart): the time between kernels (the step loop and the "
        "timer reads, measured in each run). Durations and Total are means over the %d of %d "
        "instrumented runs within the noise of the median run (%d slower left out; runs: "
        "median %.1f us, mean %.1f, min %.1f, max %.1f), so the rows add up to Total.\n",
        sum_pct, gap, r->runs_kept, r->cfg.runs, r->cfg.runs - r->runs_kept, r->total_median_us,
        r->total_mean_us, r->total_min_us, r->total_max_us);
    if (fabs(100.0 - sum_pct) > 3.0)
        ADD("  The gap is above 3%%: the executor spends time between its kernels that no row "
            "shows.\n");
    if (r->cfg.runs - r->runs_kept > r->cfg.runs / 4)
        ADD("  %d of %d runs were slowed and left out: the machine was busy (other processes "
            "on the cores). Rerun on an idle machine, or with more --runs.\n",
            r->cfg.runs - r->runs_kept, r->cfg.runs);
    if (r->clock_ns > 0)
        ADD("Profiler overhead: 2 clock reads per kernel (%d kernels) at %.0f ns each: ~%.1f us "
            "per run (%.3f%% of Total).\n",
            r->n_steps, r->clock_ns, r->overhead_us, 100.0 * r->overhead_us / r->total_us);
    if (r->has_bench && r->bench_mean_us > 0) {
        double gap = 100.0 * (r->total_us - r->bench_mean_us) / r->bench_mean_us;
        char mean[32], lo[32], hi[32];
        human_us(r->bench_mean_us, mean, sizeof mean);
        human_us(r->bench_min_us, lo, sizeof lo);
        human_us(r->bench_max_us, hi, sizeof hi);
        char med[32];
        human_us(r->bench_median_us, med, sizeof med);
        ADD("Total is %.1f%% %s the bench mean (bench: mean %s, median %s over %dx%d runs, min "
            "%s, max %s; same process, module, build, executor and %d thread%s).\n",
            fabs(gap), gap >= 0 ? "above" : "below", mean, med, r->bench_number,
            r->bench_repeat, lo, hi, r->cfg.threads, r->cfg.threads == 1 ? "" : "s");
        if (fabs(gap) > 3.0) {
            double spread = 100.0 * (r->bench_max_us - r->bench_min_us) / r->bench_mean_us;
            ADD("  The gap is above 3%%. Build, executor and threads cannot differ here (one "
                "process, one module), so it is the machine: the bench's own spread is %.1f%% "
                "and the instrumented runs' %.1f%%. Rerun on an idle machine%s.\n",
                spread, 100.0 * (r->total_max_us - r->total_min_us) / r->total_us,
                r->cfg.threads > 1 ? " or with fewer --threads than busy cores" : "");
        }
    } else {
        ADD("No bench comparison (--no-bench).\n");
    }
#undef ADD
}

void kiln_report_json_add(cJSON *obj, const char *key, cJSON *v, int *ok)
{
    if (!v || !cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        *ok = 0;
    }
}

kiln_status kiln_report_json_emit(FILE *f, cJSON *root, int ok, int pretty, kiln_error *err)
{
    char *text = ok && root ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!text)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "report: write error");
    return KILN_OK;
}

kiln_status kiln_report_write(FILE *f, const kiln_report *r, const char *format,
                              kiln_error *err)
{
    if (!format || strcmp(format, "table") == 0)
        return kiln_report_write_table(f, r, err);
    if (strcmp(format, "csv") == 0)
        return kiln_report_write_csv(f, r, err);
    if (strcmp(format, "json") == 0)
        return kiln_report_write_json(f, r, err);
    if (strcmp(format, "chrome") == 0)
        return kiln_report_write_chrome(f, r, err);
    if (strcmp(format, "html") == 0)
        return kiln_report_write_html(f, r, err);
    return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                       "unknown format '%s' (available: table, csv, json, chrome, html)", format);
}
