/* driver/configs.c: where a task's knob values come from (driver.h).
 *
 * In order of precedence: an explicit configuration (kiln_build_set_config:
 * building one task with a given config, as tuning does), the best tuning
 * record for the task's workload key (opts.records), the template's analytic
 * default (lowering put it there). A configuration is a JSON object
 * {"knob": value, ...}; every knob it names must exist in the task's space
 * and the value must be one of its choices, else nothing is changed.
 *
 * Records file: JSON lines (docs/COMPILER.md, "Tuning records"), one
 * measurement each, e.g.
 *   {"version": 1, "workload": "<key>", "template": "dense",
 *    "knobs": {"m_tile": 12, "n_tile": 2, "m_group": 197, "n_group": 18}, "status": "ok",
 *    "samples_us": [10.1, 10.3, 9.9]}
 * Blank lines and lines starting with '#' are skipped. For each workload key
 * the record with status "ok" and the lowest median sample wins; a record
 * whose template differs from the task's, or whose knobs are not in the
 * task's space, is not applied (the task keeps its default). A line that is
 * not such an object is an error naming the file and line, except a last
 * line with no newline (a write cut short by a kill): it is skipped with a
 * warning.
 *
 * Records of the tuner (version 2, docs/TUNING.md) carry a CPU fingerprint
 * id and a template hash. Of those only the validated results (status
 * "tuned") are applied, never the raw measurements (status "ok": the best
 * of many noisy samples is biased low); one whose template hash differs
 * from this kiln's is stale and ignored. Per task the record comes from the
 * first tier that has one: tuned on this CPU (matching fingerprint), tuned
 * on another CPU, then version-1 "ok" records; within a tier the lowest
 * median wins. With opts.verbose the tasks tuned and the tasks that fell
 * back to their defaults are printed.
 *
 * Shipped records (docs/TUNING.md, "Shipped records"): when opts.records is
 * a directory (kiln compile passes the repository's records/ by default),
 * every *.jsonl file in it, in name order; of those only "tuned" lines of
 * this CPU's fingerprint id and this kiln's template hash apply (tier 3),
 * the others are ignored (counted, and said under opts.verbose), and a line
 * that is not a record is skipped with a warning. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/driver.h"
#include "tune/tune.h"
#include "util/error.h"
#include "util/sb.h"

/* Parses config_json and checks every knob before changing any. */
static kiln_status check_knobs(const kiln_task *t, const cJSON *cfg, kiln_error *err)
{
    if (!cJSON_IsObject(cfg))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "a configuration is a JSON object");
    const cJSON *it;
    cJSON_ArrayForEach(it, cfg)
    {
        if (!strcmp(it->string, "source"))
            continue;
        const kiln_knob *k = NULL;
        for (int i = 0; i < t->n_knobs && !k; i++)
            if (!strcmp(t->knobs[i].name, it->string))
                k = &t->knobs[i];
        if (!k)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "template %s has no knob '%s'", t->tpl->name, it->string);
        if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int)it->valuedouble)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "knob '%s': not an integer",
                               it->string);
        bool ok = false;
        for (int c = 0; c < k->n_choices && !ok; c++)
            ok = k->choices[c] == (int)it->valuedouble;
        if (!ok)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "knob '%s' = %d is not in the space of template %s", it->string,
                               (int)it->valuedouble, t->tpl->name);
    }
    return KILN_OK;
}

static void set_knobs(kiln_task *t, const cJSON *cfg, const char *source)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cfg)
    {
        if (strcmp(it->string, "source") != 0)
            kiln_task_set_knob(t, it->string, (int)it->valuedouble);
    }
    t->source = source;
}

kiln_status kiln_driver_set_knobs(kiln_task *t, const char *config_json, const char *source,
                                  kiln_error *err)
{
    cJSON *cfg = cJSON_Parse(config_json ? config_json : "");
    if (!cfg)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "configuration is not JSON: %.80s",
                           config_json ? config_json : "(null)");
    kiln_status s = check_knobs(t, cfg, err);
    if (s == KILN_OK)
        set_knobs(t, cfg, source);
    cJSON_Delete(cfg);
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of a record's samples; -1 when it has none. */
static double record_cost(const cJSON *rec)
{
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(rec, "samples_us");
    int n = cJSON_GetArraySize(samples);
    if (!cJSON_IsArray(samples) || n <= 0 || n > 100000)
        return -1;
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v)
        return -1;
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, samples)
    {
        if (cJSON_IsNumber(it) && it->valuedouble >= 0)
            v[k++] = it->valuedouble;
    }
    double m = -1;
    if (k > 0) {
        qsort(v, (size_t)k, sizeof *v, cmp_double);
        m = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    }
    free(v);
    return m;
}

typedef struct best {
    cJSON *rec; /* owned */
    double cost;
    int tier;
} best;

/* 3: tuned here, 2: tuned on another CPU, 1: a version-1 measurement, 0:
 * not applied (a version-2 measurement, a stale template hash, an error). */
static int record_tier(const cJSON *rec, const char *tpl)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "status");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(rec, "version");
    if (st && !cJSON_IsString(st))
        return 0;
    if (st && !strcmp(st->valuestring, "tuned")) {
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(rec, "template_hash");
        char h[17];
        kiln_template_hash(tpl, h);
        if (cJSON_IsString(th) && strcmp(th->valuestring, h) != 0)
            return 0;
        const cJSON *fp = cJSON_GetObjectItemCaseSensitive(rec, "fingerprint_id");
        return cJSON_IsString(fp) && !strcmp(fp->valuestring, kiln_cpu_fingerprint_id()) ? 3 : 2;
    }
    if (cJSON_IsNumber(ver) && ver->valuedouble >= KILN_RECORDS_VERSION)
        return 0;
    return !st || !strcmp(st->valuestring, "ok") ? 1 : 0;
}

/* Which tasks took records and which kept defaults: with opts.verbose, and
 * for shipped records whenever one applied. */
static void report_applied(const kiln_build *b, const best *bt, bool shipped, int ignored)
{
    const kiln_lowered *low = b->low;
    int n_tunable = 0, n_other = 0, n_def = 0;
    kiln_sb fell = {0};
    for (int i = 0; i < low->n_tasks; i++) {
        const kiln_task *t = &low->tasks[i];
        bool any = false;
        for (int k = 0; k < t->n_knobs; k++)
            any |= t->knobs[k].n_choices > 1;
        if (!any)
            continue;
        n_tunable++;
        if (bt[i].rec && bt[i].tier == 2)
            n_other++;
        if (!bt[i].rec && !b->explicit_cfg[i]) {
            kiln_sb_printf(&fell, "%s%d (%s)", n_def ? ", " : "", i + 1, t->tpl->name);
            n_def++;
        }
    }
    char *f = kiln_sb_take(&fell);
    if (shipped && !b->opts.verbose && b->n_tuned == 0) {
        free(f);
        return;
    }
    if (shipped && b->n_tuned == 0)
        fprintf(stderr,
                "kiln compile: shipped records %s: no task records for this CPU (fingerprint "
                "%s) and this kiln's templates: %d tunable steps keep their defaults\n",
                b->records, kiln_cpu_fingerprint_id(), n_tunable);
    else
        fprintf(stderr, "kiln compile: %srecords %s: %d of %d tunable steps tuned",
                shipped ? "shipped " : "", b->records, b->n_tuned, n_tunable);
    if (n_other)
        fprintf(stderr, " (%d from records of another CPU)", n_other);
    if (!shipped || b->n_tuned)
        fprintf(stderr, "%s\n", shipped ? " (this CPU's, `--records none` turns them off)" : "");
    if (n_def && (!shipped || b->n_tuned))
        fprintf(stderr, "kiln compile: fell back to defaults (no record): step %s\n", f ? f : "");
    if (shipped && ignored && b->opts.verbose)
        fprintf(stderr,
                "kiln compile: shipped records %s: %d record%s of tasks of this model ignored "
                "(another CPU fingerprint or template hash)\n",
                b->records, ignored, ignored == 1 ? "" : "s");
    free(f);
}

/* Reads one records file into bt. Shipped records (`shipped`: a file of the
 * records directory) apply only when tuned on this CPU class with this
 * kiln's templates; other lines of the model's tasks are counted in
 * *ignored, and a line that is not a record is a warning, not an error. */
static kiln_status read_records(kiln_build *b, const char *path, bool shipped, best *bt,
                                int *ignored, kiln_error *err)
{
    kiln_lowered *low = b->low;
    FILE *f = fopen(path, "r");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read tuning records '%s': %s", path,
                           strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    kiln_status s = KILN_OK;
    while (s == KILN_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\r' || *p == 0 || *p == '#')
            continue;
        cJSON *rec = cJSON_Parse(p);
        if (kiln_driver_is_block_record(rec)) { /* a layout time (layout_records.c) */
            cJSON_Delete(rec);
            continue;
        }
        const cJSON *wl = rec ? cJSON_GetObjectItemCaseSensitive(rec, "workload") : NULL;
        const cJSON *kn = rec ? cJSON_GetObjectItemCaseSensitive(rec, "knobs") : NULL;
        bool bad = !cJSON_IsObject(rec) || !cJSON_IsString(wl) || !cJSON_IsObject(kn);
        if (bad && (shipped || line[len - 1] != '\n')) {
            fprintf(stderr,
                    "kiln: warning: tuning records '%s', line %d: %s: skipped\n", path, lineno,
                    shipped ? "not a record" : "cut short (no newline; a tuner killed mid-write?)");
            cJSON_Delete(rec);
            continue;
        }
        if (bad) {
            s = kiln_errorf(err, KILN_ERR_PARSE,
                            "tuning records '%s', line %d: not a record (a JSON object with "
                            "\"workload\" and \"knobs\")",
                            path, lineno);
            cJSON_Delete(rec);
            break;
        }
        double cost = record_cost(rec);
        bool used = false, counted = false;
        if (cost >= 0)
            for (int i = 0; i < low->n_tasks; i++) {
                if (b->explicit_cfg[i] || strcmp(low->tasks[i].workload, wl->valuestring) != 0)
                    continue;
                const cJSON *tp = cJSON_GetObjectItemCaseSensitive(rec, "template");
                if (tp && (!cJSON_IsString(tp) || strcmp(tp->valuestring, low->tasks[i].tpl->name)))
                    continue;
                int tier = record_tier(rec, low->tasks[i].tpl->name);
                if (shipped && (tier != 3 || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
                                                     rec, "template_hash")))) {
                    /* another CPU class or template version: ignored (a
                     * measurement line, not a result, is not counted) */
                    const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "status");
                    if (!counted && cJSON_IsString(st) && !strcmp(st->valuestring, "tuned"))
                        (*ignored)++;
                    counted = true;
                    continue;
                }
                if (tier == 0 || check_knobs(&low->tasks[i], kn, NULL) != KILN_OK ||
                    (bt[i].rec && (bt[i].tier > tier || (bt[i].tier == tier && bt[i].cost <= cost))))
                    continue;
                /* the old best is shared by every task of this workload: freed
                 * once, at the first of them */
                if (bt[i].rec && !used)
                    cJSON_Delete(bt[i].rec);
                bt[i].rec = rec;
                bt[i].cost = cost;
                bt[i].tier = tier;
                used = true;
            }
        if (!used)
            cJSON_Delete(rec);
    }
    free(line);
    fclose(f);
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool kiln_driver_is_block_record(const cJSON *rec)
{
    const cJSON *k = cJSON_IsObject(rec) ? cJSON_GetObjectItemCaseSensitive(rec, "kind") : NULL;
    return cJSON_IsString(k) && !strcmp(k->valuestring, "block");
}

kiln_status kiln_driver_records_files(const char *dir, char ***out, int *n_out, kiln_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read the records directory '%s': %s", dir,
                           strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    kiln_status s = KILN_OK;
    struct dirent *e;
    while (s == KILN_OK && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".jsonl") != 0 || e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **m = realloc(names, sizeof *m * (size_t)cap);
            if (!m) {
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            names = m;
        }
        if (!(names[n] = malloc(strlen(dir) + l + 2)))
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        else
            sprintf(names[n++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    if (s != KILN_OK) {
        for (int k = 0; k < n; k++)
            free(names[k]);
        free(names);
        return s;
    }
    *out = names;
    *n_out = n;
    return KILN_OK;
}

/* The *.jsonl files of the shipped records directory, in name order. */
static kiln_status read_records_dir(kiln_build *b, const char *dir, best *bt, int *ignored,
                                    kiln_error *err)
{
    char **names = NULL;
    int n = 0;
    kiln_status s = kiln_driver_records_files(dir, &names, &n, err);
    for (int k = 0; k < n && s == KILN_OK; k++)
        s = read_records(b, names[k], true, bt, ignored, err);
    for (int k = 0; k < n; k++)
        free(names[k]);
    free(names);
    return s;
}

kiln_status kiln_driver_apply_records(kiln_build *b, kiln_error *err)
{
    kiln_lowered *low = b->low;
    struct stat st;
    bool shipped = stat(b->records, &st) == 0 && S_ISDIR(st.st_mode);
    int ignored = 0;
    best *bt = calloc((size_t)low->n_tasks + 1, sizeof *bt);
    kiln_status s = bt ? KILN_OK : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = shipped ? read_records_dir(b, b->records, bt, &ignored, err)
                    : read_records(b, b->records, false, bt, &ignored, err);
    if (s == KILN_OK)
        for (int i = 0; i < low->n_tasks; i++)
            if (bt[i].rec) {
                set_knobs(&low->tasks[i], cJSON_GetObjectItemCaseSensitive(bt[i].rec, "knobs"),
                          "records");
                b->n_tuned++;
            }
    if (s == KILN_OK && (b->opts.verbose || (shipped && b->n_tuned)))
        report_applied(b, bt, shipped, ignored);
    /* free each record once: tasks sharing a workload share the record */
    if (bt)
        for (int i = 0; i < low->n_tasks; i++) {
            if (!bt[i].rec)
                continue;
            cJSON *r = bt[i].rec;
            for (int j = i; j < low->n_tasks; j++)
                if (bt[j].rec == r)
                    bt[j].rec = NULL;
            cJSON_Delete(r);
        }
    free(bt);
    return s;
}
