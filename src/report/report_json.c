/* report/report_json.c: the JSON report (schema: docs/PROFILE.md) and its
 * reader, both through cJSON. The reader checks every field's presence and
 * type and names the first bad one ("b.json: steps[3].duration_us: expected
 * a number"); a report it accepts is complete enough to compare. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "report/report.h"
#include "util/error.h"
#include "util/file.h"

#define MAX_JSON_BYTES ((size_t)256 << 20)

/* ---- writing ---------------------------------------------------------------- */

static cJSON *num_or_null(double v)
{
    return v > 0 && isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *hash_or_null(int has, uint64_t h)
{
    if (!has)
        return cJSON_CreateNull();
    char buf[24];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    return cJSON_CreateString(buf);
}

static cJSON *str(const char *s)
{
    return cJSON_CreateString(s ? s : "");
}

/* cJSON_Add*ToObject return NULL on failure; one flag collects them */
#define add kiln_report_json_add

static cJSON *config_json(const kiln_report_config *c, int *ok)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        *ok = 0;
        return NULL;
    }
    add(o, "model", str(c->model), ok);
    add(o, "executor", str(c->executor), ok);
    add(o, "threads", cJSON_CreateNumber(c->threads), ok);
    add(o, "binding", str(c->binding ? c->binding : "off"), ok);
    add(o, "target", str(c->target), ok);
    add(o, "build_id", str(c->build_id), ok);
    add(o, "records", c->records && *c->records ? str(c->records) : cJSON_CreateNull(), ok);
    add(o, "tuned_tasks", cJSON_CreateNumber(c->tuned_tasks), ok);
    cJSON *fb = cJSON_CreateArray();
    for (int i = 0; fb && i < c->n_fallbacks; i++)
        if (!cJSON_AddItemToArray(fb, str(c->fallbacks[i])))
            *ok = 0;
    add(o, "fallbacks", fb, ok);
    add(o, "runs", cJSON_CreateNumber(c->runs), ok);
    add(o, "warmup", cJSON_CreateNumber(c->warmup), ok);
    add(o, "peak_gflops", num_or_null(c->peak_gflops), ok);
    add(o, "peak_gflops_1", num_or_null(c->peak_gflops_1), ok);
    add(o, "peak_source", str(c->peak_source), ok);
    add(o, "kiln_version", str(c->kiln_version), ok);
    return o;
}

kiln_status kiln_report_write_json(FILE *f, const kiln_report *r, kiln_error *err)
{
    int ok = 1;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    add(root, "format", str("kiln-profile"), &ok);
    add(root, "version", cJSON_CreateNumber(KILN_REPORT_VERSION), &ok);
    add(root, "configuration", config_json(&r->cfg, &ok), &ok);
    add(root, "aggregate", str(r->aggregate[0] ? r->aggregate : "none"), &ok);
    add(root, "sort", str(r->sort[0] ? r->sort : "time"), &ok);
    add(root, "rows_total", cJSON_CreateNumber(r->rows_total), &ok);
    cJSON *rows = cJSON_CreateArray();
    for (int i = 0; rows && i < r->n_rows; i++) {
        const kiln_report_row *w = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(rows, o)) {
            cJSON_Delete(o);
            ok = 0;
            break;
        }
        add(o, "name", str(w->name), &ok);
        add(o, "op", str(w->op), &ok);
        add(o, "duration_us", cJSON_CreateNumber(w->duration_us), &ok);
        add(o, "percent", cJSON_CreateNumber(w->percent), &ok);
        add(o, "device", str("cpu"), &ok);
        add(o, "count", cJSON_CreateNumber(w->count), &ok);
        add(o, "shapes", str(w->shapes), &ok);
        add(o, "layouts", str(w->layouts), &ok);
        add(o, "hash", hash_or_null(w->has_hash, w->hash), &ok);
        add(o, "flops", num_or_null(w->flops), &ok);
        add(o, "gflops", num_or_null(w->gflops), &ok);
        add(o, "peak_fraction", num_or_null(w->peak_fraction), &ok);
    }
    add(root, "rows", rows, &ok);
    cJSON *sum = cJSON_CreateObject();
    if (sum) {
        add(sum, "duration_us", cJSON_CreateNumber(r->sum_us), &ok);
        add(sum, "percent",
            cJSON_CreateNumber(r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0), &ok);
        add(sum, "count", cJSON_CreateNumber(r->sum_count), &ok);
    }
    add(root, "sum", sum, &ok);
    cJSON *tot = cJSON_CreateObject();
    if (tot) {
        add(tot, "duration_us", cJSON_CreateNumber(r->total_us), &ok);
        add(tot, "runs_kept", cJSON_CreateNumber(r->runs_kept), &ok);
        add(tot, "median_us", cJSON_CreateNumber(r->total_median_us), &ok);
        add(tot, "mean_us", cJSON_CreateNumber(r->total_mean_us), &ok);
        add(tot, "min_us", cJSON_CreateNumber(r->total_min_us), &ok);
        add(tot, "max_us", cJSON_CreateNumber(r->total_max_us), &ok);
        add(tot, "device", str("cpu"), &ok);
        add(tot, "count", cJSON_CreateNumber(1), &ok);
    }
    add(root, "total", tot, &ok);
    cJSON *ag = cJSON_CreateObject();
    if (ag) {
        add(ag, "sum_percent_of_total",
            cJSON_CreateNumber(r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0), &ok);
        add(ag, "between_kernels_us", cJSON_CreateNumber(r->between_us), &ok);
        add(ag, "clock_read_ns", cJSON_CreateNumber(r->clock_ns), &ok);
        add(ag, "overhead_us", cJSON_CreateNumber(r->overhead_us), &ok);
        if (r->has_bench) {
            cJSON *b = cJSON_CreateObject();
            if (b) {
                add(b, "mean_us", cJSON_CreateNumber(r->bench_mean_us), &ok);
                add(b, "median_us", cJSON_CreateNumber(r->bench_median_us), &ok);
                add(b, "min_us", cJSON_CreateNumber(r->bench_min_us), &ok);
                add(b, "max_us", cJSON_CreateNumber(r->bench_max_us), &ok);
                add(b, "number", cJSON_CreateNumber(r->bench_number), &ok);
                add(b, "repeat", cJSON_CreateNumber(r->bench_repeat), &ok);
                add(b, "total_gap_percent",
                    cJSON_CreateNumber(r->bench_mean_us > 0
                                           ? 100.0 * (r->total_us - r->bench_mean_us) /
                                                 r->bench_mean_us
                                           : 0),
                    &ok);
            }
            add(ag, "bench", b, &ok);
        } else {
            add(ag, "bench", cJSON_CreateNull(), &ok);
        }
    }
    add(root, "agreement", ag, &ok);
    cJSON *steps = cJSON_CreateArray();
    for (int i = 0; steps && i < r->n_steps; i++) {
        const kiln_report_step *s = &r->steps[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(steps, o)) {
            cJSON_Delete(o);
            ok = 0;
            break;
        }
        add(o, "index", cJSON_CreateNumber(i), &ok);
        add(o, "name", str(s->name), &ok);
        add(o, "op", str(s->op), &ok);
        add(o, "shapes", str(s->shapes), &ok);
        add(o, "layouts", str(s->layouts), &ok);
        add(o, "hash", hash_or_null(s->has_hash, s->hash), &ok);
        add(o, "flops", num_or_null(s->flops), &ok);
        add(o, "duration_us", cJSON_CreateNumber(s->time_us), &ok);
        add(o, "median_us", cJSON_CreateNumber(s->median_us), &ok);
        add(o, "mean_us", cJSON_CreateNumber(s->mean_us), &ok);
        add(o, "min_us", cJSON_CreateNumber(s->min_us), &ok);
        add(o, "max_us", cJSON_CreateNumber(s->max_us), &ok);
        add(o, "start_us", cJSON_CreateNumber(s->start_us), &ok);
        add(o, "trace_us", cJSON_CreateNumber(s->trace_us), &ok);
    }
    add(root, "steps", steps, &ok);
    return kiln_report_json_emit(f, root, ok, 1, err);
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct rd {
    const char *what; /* file name for messages */
    kiln_error *err;
    kiln_status st;
} rd;

static const cJSON *item(rd *x, const cJSON *obj, const char *path, const char *key)
{
    if (x->st != KILN_OK)
        return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s%s%s: missing", x->what, path,
                            *path ? "." : "", key);
    return v;
}

static void bad(rd *x, const char *path, const char *key, const char *want)
{
    if (x->st == KILN_OK)
        x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s%s%s: expected %s", x->what, path,
                            *path ? "." : "", key, want);
}

static char *get_str(rd *x, const cJSON *obj, const char *path, const char *key, int nullable)
{
    const cJSON *v = item(x, obj, path, key);
    if (!v)
        return NULL;
    if (nullable && cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsString(v)) {
        bad(x, path, key, nullable ? "a string or null" : "a string");
        return NULL;
    }
    char *s = kiln_report_strdup(v->valuestring);
    if (!s && x->st == KILN_OK)
        x->st = kiln_errorf(x->err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", x->what);
    return s;
}

/* nullable numbers read as 0 */
static double get_num(rd *x, const cJSON *obj, const char *path, const char *key, int nullable)
{
    const cJSON *v = item(x, obj, path, key);
    if (!v)
        return 0;
    if (nullable && cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        bad(x, path, key, nullable ? "a number or null" : "a number");
        return 0;
    }
    return v->valuedouble;
}

static int get_int(rd *x, const cJSON *obj, const char *path, const char *key, int lo, int hi)
{
    double d = get_num(x, obj, path, key, 0);
    if (x->st == KILN_OK && (d != floor(d) || d < lo || d > hi)) {
        char want[64];
        snprintf(want, sizeof want, "an integer in %d..%d", lo, hi);
        bad(x, path, key, want);
        return 0;
    }
    return (int)d;
}

static int get_hash(rd *x, const cJSON *obj, const char *path, uint64_t *h)
{
    const cJSON *v = item(x, obj, path, "hash");
    if (!v || cJSON_IsNull(v))
        return 0;
    char *end = NULL;
    if (cJSON_IsString(v) && v->valuestring[0]) {
        unsigned long long u = strtoull(v->valuestring, &end, 16);
        if (end && *end == '\0' && strlen(v->valuestring) <= 16) {
            *h = u;
            return 1;
        }
    }
    bad(x, path, "hash", "a hexadecimal string of at most 16 digits or null");
    return 0;
}

static const cJSON *get_obj(rd *x, const cJSON *obj, const char *path, const char *key,
                            int nullable)
{
    const cJSON *v = item(x, obj, path, key);
    if (!v || (nullable && cJSON_IsNull(v)))
        return NULL;
    if (!cJSON_IsObject(v)) {
        bad(x, path, key, nullable ? "an object or null" : "an object");
        return NULL;
    }
    return v;
}

static const cJSON *get_arr(rd *x, const cJSON *obj, const char *path, const char *key)
{
    const cJSON *v = item(x, obj, path, key);
    if (v && !cJSON_IsArray(v)) {
        bad(x, path, key, "an array");
        return NULL;
    }
    return v;
}

static void read_config(rd *x, const cJSON *c, kiln_report_config *cfg)
{
    const char *p = "configuration";
    cfg->model = get_str(x, c, p, "model", 0);
    cfg->executor = get_str(x, c, p, "executor", 0);
    cfg->threads = get_int(x, c, p, "threads", 1, 1 << 20);
    cfg->binding = get_str(x, c, p, "binding", 0);
    cfg->target = get_str(x, c, p, "target", 0);
    cfg->build_id = get_str(x, c, p, "build_id", 0);
    cfg->records = get_str(x, c, p, "records", 1);
    cfg->tuned_tasks = get_int(x, c, p, "tuned_tasks", 0, 1 << 30);
    const cJSON *fb = get_arr(x, c, p, "fallbacks");
    if (fb && x->st == KILN_OK) {
        int n = cJSON_GetArraySize(fb);
        cfg->fallbacks = calloc((size_t)(n > 0 ? n : 1), sizeof *cfg->fallbacks);
        if (!cfg->fallbacks) {
            x->st = kiln_errorf(x->err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", x->what);
            return;
        }
        for (const cJSON *e = fb->child; e; e = e->next) {
            if (!cJSON_IsString(e)) {
                bad(x, p, "fallbacks[]", "strings");
                return;
            }
            if (!(cfg->fallbacks[cfg->n_fallbacks] = kiln_report_strdup(e->valuestring))) {
                x->st = kiln_errorf(x->err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", x->what);
                return;
            }
            cfg->n_fallbacks++;
        }
    }
    cfg->runs = get_int(x, c, p, "runs", 1, 1 << 30);
    cfg->warmup = get_int(x, c, p, "warmup", 0, 1 << 30);
    cfg->peak_gflops = get_num(x, c, p, "peak_gflops", 1);
    cfg->peak_gflops_1 = get_num(x, c, p, "peak_gflops_1", 1);
    cfg->peak_source = get_str(x, c, p, "peak_source", 0);
    cfg->kiln_version = get_str(x, c, p, "kiln_version", 0);
}

static void read_steps(rd *x, const cJSON *arr, kiln_report *r)
{
    int n = cJSON_GetArraySize(arr);
    if ((x->st = kiln_report_alloc_steps(r, n, x->err)) != KILN_OK)
        return;
    int i = 0;
    for (const cJSON *e = arr->child; e && x->st == KILN_OK; e = e->next, i++) {
        char path[48];
        snprintf(path, sizeof path, "steps[%d]", i);
        if (!cJSON_IsObject(e)) {
            x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s: expected an object", x->what,
                                path);
            return;
        }
        kiln_report_step *s = &r->steps[i];
        if (get_int(x, e, path, "index", 0, 1 << 30) != i && x->st == KILN_OK) {
            x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s.index: expected %d", x->what,
                                path, i);
            return;
        }
        s->name = get_str(x, e, path, "name", 0);
        s->op = get_str(x, e, path, "op", 0);
        s->shapes = get_str(x, e, path, "shapes", 0);
        s->layouts = get_str(x, e, path, "layouts", 0);
        s->has_hash = get_hash(x, e, path, &s->hash);
        s->flops = get_num(x, e, path, "flops", 1);
        s->time_us = get_num(x, e, path, "duration_us", 0);
        s->median_us = get_num(x, e, path, "median_us", 0);
        s->mean_us = get_num(x, e, path, "mean_us", 0);
        r->sum_mean_us += s->mean_us;
        s->min_us = get_num(x, e, path, "min_us", 0);
        s->max_us = get_num(x, e, path, "max_us", 0);
        s->start_us = get_num(x, e, path, "start_us", 0);
        s->trace_us = get_num(x, e, path, "trace_us", 0);
        if (x->st == KILN_OK && (s->time_us < 0 || s->median_us < 0 || s->min_us < 0 || s->max_us < 0))
            x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s: negative duration", x->what,
                                path);
    }
}

static void check_rows(rd *x, const cJSON *arr)
{
    int i = 0;
    for (const cJSON *e = arr->child; e && x->st == KILN_OK; e = e->next, i++) {
        char path[48];
        uint64_t h;
        snprintf(path, sizeof path, "rows[%d]", i);
        if (!cJSON_IsObject(e)) {
            x->st = kiln_errorf(x->err, KILN_ERR_PARSE, "%s: %s: expected an object", x->what,
                                path);
            return;
        }
        static const char *const strs[] = {"name", "op", "device", "shapes", "layouts"};
        for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++) {
            const cJSON *v = item(x, e, path, strs[k]);
            if (v && !cJSON_IsString(v))
                bad(x, path, strs[k], "a string");
        }
        get_num(x, e, path, "duration_us", 0);
        get_num(x, e, path, "percent", 0);
        get_int(x, e, path, "count", 1, 1 << 30);
        get_hash(x, e, path, &h);
        get_num(x, e, path, "flops", 1);
        get_num(x, e, path, "gflops", 1);
        get_num(x, e, path, "peak_fraction", 1);
    }
}

kiln_status kiln_report_parse_json(const char *text, const char *what, kiln_report *out,
                                   kiln_error *err)
{
    rd x = {what ? what : "profile", err, KILN_OK};
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text ? (long)(at - text) : -1;
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: not valid JSON (near byte %ld)", x.what, off);
    }
    kiln_report r = {0};
    if (!cJSON_IsObject(root)) {
        x.st = kiln_errorf(err, KILN_ERR_PARSE, "%s: expected a JSON object", x.what);
        goto done;
    }
    char *fmt = get_str(&x, root, "", "format", 0);
    int bad_fmt = fmt && strcmp(fmt, "kiln-profile") != 0;
    free(fmt);
    if (bad_fmt && x.st == KILN_OK) {
        x.st = kiln_errorf(err, KILN_ERR_PARSE, "%s: format: expected \"kiln-profile\"", x.what);
        goto done;
    }
    int version = get_int(&x, root, "", "version", 0, 1 << 20);
    if (x.st == KILN_OK && version != KILN_REPORT_VERSION) {
        x.st = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: profile format version %d; this kiln reads version %d", x.what,
                           version, KILN_REPORT_VERSION);
        goto done;
    }
    const cJSON *c = get_obj(&x, root, "", "configuration", 0);
    if (c)
        read_config(&x, c, &r.cfg);
    char *agg = get_str(&x, root, "", "aggregate", 0), *sort = get_str(&x, root, "", "sort", 0);
    if (agg)
        snprintf(r.aggregate, sizeof r.aggregate, "%s", agg);
    if (sort)
        snprintf(r.sort, sizeof r.sort, "%s", sort);
    free(agg);
    free(sort);
    get_int(&x, root, "", "rows_total", 0, 1 << 30);
    const cJSON *rows = get_arr(&x, root, "", "rows");
    if (rows)
        check_rows(&x, rows);
    const cJSON *sum = get_obj(&x, root, "", "sum", 0);
    if (sum) {
        r.sum_us = get_num(&x, sum, "sum", "duration_us", 0);
        get_num(&x, sum, "sum", "percent", 0);
        r.sum_count = get_int(&x, sum, "sum", "count", 0, 1 << 30);
    }
    const cJSON *tot = get_obj(&x, root, "", "total", 0);
    if (tot) {
        r.total_us = get_num(&x, tot, "total", "duration_us", 0);
        r.runs_kept = get_int(&x, tot, "total", "runs_kept", 1, 1 << 30);
        r.total_median_us = get_num(&x, tot, "total", "median_us", 0);
        r.total_mean_us = get_num(&x, tot, "total", "mean_us", 0);
        r.total_min_us = get_num(&x, tot, "total", "min_us", 0);
        r.total_max_us = get_num(&x, tot, "total", "max_us", 0);
        get_int(&x, tot, "total", "count", 1, 1);
        const cJSON *d = item(&x, tot, "total", "device");
        if (d && !cJSON_IsString(d))
            bad(&x, "total", "device", "a string");
    }
    const cJSON *ag = get_obj(&x, root, "", "agreement", 0);
    if (ag) {
        get_num(&x, ag, "agreement", "sum_percent_of_total", 0);
        r.between_us = get_num(&x, ag, "agreement", "between_kernels_us", 0);
        r.clock_ns = get_num(&x, ag, "agreement", "clock_read_ns", 0);
        r.overhead_us = get_num(&x, ag, "agreement", "overhead_us", 0);
        const cJSON *b = get_obj(&x, ag, "agreement", "bench", 1);
        if (b) {
            const char *p = "agreement.bench";
            r.has_bench = 1;
            r.bench_mean_us = get_num(&x, b, p, "mean_us", 0);
            r.bench_median_us = get_num(&x, b, p, "median_us", 0);
            r.bench_min_us = get_num(&x, b, p, "min_us", 0);
            r.bench_max_us = get_num(&x, b, p, "max_us", 0);
            r.bench_number = get_int(&x, b, p, "number", 1, 1 << 30);
            r.bench_repeat = get_int(&x, b, p, "repeat", 1, 1 << 30);
            get_num(&x, b, p, "total_gap_percent", 0);
        }
    }
    const cJSON *steps = get_arr(&x, root, "", "steps");
    if (steps && x.st == KILN_OK)
        read_steps(&x, steps, &r);
    if (x.st == KILN_OK && r.total_us <= 0)
        x.st = kiln_errorf(err, KILN_ERR_PARSE, "%s: total.duration_us: expected a positive number",
                           x.what);
done:
    cJSON_Delete(root);
    if (x.st != KILN_OK) {
        kiln_report_free(&r);
        return x.st;
    }
    *out = r;
    return KILN_OK;
}

kiln_status kiln_report_read_json(const char *path, kiln_report *r, kiln_error *err)
{
    void *data = NULL;
    size_t size = 0;
    kiln_status st = kiln_file_read(path, MAX_JSON_BYTES, &data, &size, err);
    if (st != KILN_OK)
        return st;
    st = kiln_report_parse_json(data, path, r, err);
    free(data);
    return st;
}
