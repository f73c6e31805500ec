/* tune/records.c: tuning records written and read back by the tuner
 * (docs/TUNING.md, "Records").
 *
 * One JSON object per line, appended, never rewritten. A batch's lines are
 * formatted first and written with one write, then flushed and fsync'ed: a
 * kill -9 loses at most the batch in flight, and at worst leaves its last
 * line cut short, which the next run reports by line number and skips.
 *
 * Resume reads every line of the file for the run's workloads, keeping only
 * lines with this machine's fingerprint id and the task's template hash:
 * each trial's configuration (any status) is not measured again, the last
 * accepted candidate is where the search goes on from, and a "tuned" line
 * means the task is done. */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tune/tune.h"
#include "util/error.h"
#include "util/sb.h"

struct kiln_records {
    char *path;
    FILE *f;
    int n;
    const char *const *keys;
    const char *const *templates;
    const int *n_knobs;
    const char *const *const *names;
    char (*tpl_hash)[17];
    kiln_rec_task *tasks;
    int skipped;
    /* every "tuned" line of this fingerprint and a current template hash,
     * of any workload, and those appended by this run: warm starts */
    struct tuned_rec {
        char *tpl, *workload, *knobs; /* knobs: the JSON object's text */
    } *tuned;
    int n_tuned, cap_tuned;
};

static bool is_dir(const char *p)
{
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *kiln_shipped_records_dir(void)
{
    const char *e = getenv("KILN_RECORDS_DIR");
    if (e)
        return *e && strcmp(e, "none") != 0 ? e : NULL;
#ifdef KILN_SOURCE_RECORDS_DIR
    if (is_dir(KILN_SOURCE_RECORDS_DIR))
        return KILN_SOURCE_RECORDS_DIR;
#endif
#ifdef KILN_INSTALLED_RECORDS_DIR
    if (is_dir(KILN_INSTALLED_RECORDS_DIR))
        return KILN_INSTALLED_RECORDS_DIR;
#endif
    return NULL;
}

const char *kiln_trial_status_name(kiln_trial_status s)
{
    switch (s) {
    case KILN_TRIAL_OK:
        return "ok";
    case KILN_TRIAL_ERROR:
        return "error";
    case KILN_TRIAL_MISMATCH:
        return "mismatch";
    case KILN_TRIAL_CRASH:
        return "crash";
    case KILN_TRIAL_TIMEOUT:
        return "timeout";
    }
    return "error";
}

void kiln_records_close(kiln_records *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    for (int i = 0; i < r->n && r->tasks; i++)
        free(r->tasks[i].measured);
    for (int k = 0; k < r->n_tuned; k++) {
        free(r->tuned[k].tpl);
        free(r->tuned[k].workload);
        free(r->tuned[k].knobs);
    }
    free(r->tuned);
    free(r->tasks);
    free(r->tpl_hash);
    free(r->path);
    free(r);
}

const kiln_rec_task *kiln_records_task(const kiln_records *r, int i)
{
    return r && i >= 0 && i < r->n ? &r->tasks[i] : NULL;
}

int kiln_records_skipped_lines(const kiln_records *r)
{
    return r ? r->skipped : 0;
}

/* knobs object -> cfg in task i's knob order; false when a knob is missing
 * or not an integer. */
static bool read_cfg(const kiln_records *r, int i, const cJSON *kn, kiln_tune_cfg *cfg)
{
    cfg->n = r->n_knobs[i];
    for (int k = 0; k < cfg->n; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kn, r->names[i][k]);
        if (!cJSON_IsNumber(v))
            return false;
        cfg->v[k] = (int)v->valuedouble;
    }
    return true;
}

static bool add_measured(kiln_rec_task *t, const kiln_tune_cfg *c)
{
    if (t->n_measured == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        kiln_tune_cfg *m = realloc(t->measured, sizeof *m * (size_t)cap);
        if (!m)
            return false;
        t->measured = m;
        t->cap = cap;
    }
    t->measured[t->n_measured++] = *c;
    return true;
}

static const char *str_item(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void add_tuned(kiln_records *r, const char *tpl, const char *wl, const cJSON *knobs)
{
    if (r->n_tuned == r->cap_tuned) {
        int cap = r->cap_tuned ? 2 * r->cap_tuned : 16;
        struct tuned_rec *m = realloc(r->tuned, sizeof *m * (size_t)cap);
        if (!m)
            return;
        r->tuned = m;
        r->cap_tuned = cap;
    }
    struct tuned_rec *t = &r->tuned[r->n_tuned];
    t->tpl = strdup(tpl);
    t->workload = strdup(wl);
    t->knobs = cJSON_PrintUnformatted(knobs);
    if (t->tpl && t->workload && t->knobs) {
        r->n_tuned++;
        return;
    }
    free(t->tpl);
    free(t->workload);
    free(t->knobs);
}

/* How far apart two workload keys are: both read as text with numbers in
 * it, the text between the numbers must be the same (the same template,
 * ops, attributes and layouts: only sizes differ), and the distance is the
 * sum over the numbers of |ln(1 + a) - ln(1 + b)|. -1: not comparable. */
static double key_distance(const char *a, const char *b)
{
    double d = 0;
    while (*a && *b) {
        bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da != db)
            return -1;
        if (!da) {
            if (*a++ != *b++)
                return -1;
            continue;
        }
        char *ea, *eb;
        double x = strtod(a, &ea), y = strtod(b, &eb);
        d += fabs(log1p(x) - log1p(y));
        a = ea;
        b = eb;
    }
    return *a || *b ? -1 : d;
}

static void read_line(kiln_records *r, const char *p, int lineno, FILE *log)
{
    cJSON *rec = cJSON_Parse(p);
    const cJSON *kind = cJSON_IsObject(rec) ? cJSON_GetObjectItemCaseSensitive(rec, "kind") : NULL;
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "block")) {
        cJSON_Delete(rec); /* the layout stage's (layouts.c) */
        return;
    }
    const char *wl = str_item(rec, "workload");
    const cJSON *kn = cJSON_GetObjectItemCaseSensitive(rec, "knobs");
    if (!cJSON_IsObject(rec) || !wl || !cJSON_IsObject(kn)) {
        r->skipped++;
        fprintf(log,
                "kiln tune: records '%s', line %d: not a record (a JSON object with "
                "\"workload\" and \"knobs\"; cut short by a kill?): skipped\n",
                r->path, lineno);
        cJSON_Delete(rec);
        return;
    }
    const char *fp = str_item(rec, "fingerprint_id"), *th = str_item(rec, "template_hash");
    const char *st = str_item(rec, "status"), *role = str_item(rec, "role");
    const char *tpl = str_item(rec, "template");
    if (st && !strcmp(st, "tuned") && fp && !strcmp(fp, kiln_cpu_fingerprint_id()) && tpl && th) {
        char h[17];
        kiln_template_hash(tpl, h);
        if (!strcmp(h, th))
            add_tuned(r, tpl, wl, kn);
    }
    for (int i = 0; i < r->n; i++) {
        if (strcmp(r->keys[i], wl) != 0)
            continue;
        if (!fp || strcmp(fp, kiln_cpu_fingerprint_id()) || !th || strcmp(th, r->tpl_hash[i]))
            break; /* another machine or another kiln: not resumed from */
        kiln_rec_task *t = &r->tasks[i];
        kiln_tune_cfg cfg;
        if (!read_cfg(r, i, kn, &cfg))
            break;
        if (st && !strcmp(st, "tuned")) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(rec, "speedup");
            t->done = true;
            t->tuned = cfg;
            t->speedup = cJSON_IsNumber(sp) ? sp->valuedouble : 1;
        } else if (role && !strcmp(role, "candidate")) {
            add_measured(t, &cfg);
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "accepted"))) {
                t->have_incumbent = true;
                t->incumbent = cfg;
            }
        }
        break;
    }
    cJSON_Delete(rec);
}

kiln_status kiln_records_open(const char *path, int n, const char *const *keys,
                              const char *const *templates, const int *n_knobs,
                              const char *const *const *names, FILE *log, kiln_records **out,
                              kiln_error *err)
{
    kiln_records *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path)) ||
        !(r->tasks = calloc((size_t)n + 1, sizeof *r->tasks)) ||
        !(r->tpl_hash = calloc((size_t)n + 1, sizeof *r->tpl_hash))) {
        kiln_records_close(r);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    r->n = n;
    r->keys = keys;
    r->templates = templates;
    r->n_knobs = n_knobs;
    r->names = names;
    for (int i = 0; i < n; i++)
        kiln_template_hash(templates[i], r->tpl_hash[i]);
    FILE *in = fopen(path, "r");
    long good_end = 0;    /* bytes up to the last newline */
    int cut = 0;          /* a last line with no newline: 1 a record, 2 not */
    int cut_line = 0;
    if (in) {
        char *line = NULL;
        size_t cap = 0;
        int lineno = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, in)) >= 0) {
            lineno++;
            if (len > 0 && line[len - 1] != '\n') {
                /* cut short by a kill in the middle of a write? */
                cJSON *j = cJSON_Parse(line);
                cut = cJSON_IsObject(j) ? 1 : 2;
                cut_line = lineno;
                cJSON_Delete(j);
                if (cut == 2)
                    break;
            } else {
                good_end += (long)len;
            }
            char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '\n' || *p == '\r' || *p == 0 || *p == '#')
                continue;
            read_line(r, p, lineno, log ? log : stderr);
        }
        free(line);
        fclose(in);
    } else if (errno != ENOENT) {
        kiln_status s = kiln_errorf(err, KILN_ERR_IO, "cannot read tuning records '%s': %s", path,
                                    strerror(errno));
        kiln_records_close(r);
        return s;
    }
    if (cut == 2) {
        fprintf(log ? log : stderr,
                "kiln tune: records '%s', line %d: cut short (no newline: a kill in the middle of "
                "a write): dropped\n",
                path, cut_line);
        if (truncate(path, good_end) != 0) {
            kiln_status s = kiln_errorf(err, KILN_ERR_IO, "cannot repair tuning records '%s': %s",
                                        path, strerror(errno));
            kiln_records_close(r);
            return s;
        }
    }
    if (!(r->f = fopen(path, "a"))) {
        kiln_status s = kiln_errorf(err, KILN_ERR_IO, "cannot append to tuning records '%s': %s",
                                    path, strerror(errno));
        kiln_records_close(r);
        return s;
    }
    if (cut == 1) { /* a whole record that lacks only its newline */
        fputc('\n', r->f);
        fflush(r->f);
    }
    *out = r;
    return KILN_OK;
}

/* The common fields of a line of task i. */
static cJSON *line_base(const kiln_records *r, int i, const kiln_tune_cfg *cfg, const char *status)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", KILN_RECORDS_VERSION);
    cJSON_AddNumberToObject(o, "time", (double)time(NULL));
    cJSON *fp = cJSON_Parse(kiln_cpu_fingerprint_json());
    cJSON_AddItemToObject(o, "fingerprint", fp ? fp : cJSON_CreateObject());
    cJSON_AddStringToObject(o, "fingerprint_id", kiln_cpu_fingerprint_id());
    cJSON_AddStringToObject(o, "template_hash", r->tpl_hash[i]);
    cJSON_AddStringToObject(o, "workload", r->keys[i]);
    cJSON_AddStringToObject(o, "template", r->templates[i]);
    cJSON *kn = cJSON_CreateObject();
    for (int k = 0; k < cfg->n && k < r->n_knobs[i]; k++)
        cJSON_AddNumberToObject(kn, r->names[i][k], cfg->v[k]);
    cJSON_AddItemToObject(o, "knobs", kn);
    cJSON_AddStringToObject(o, "status", status);
    return o;
}

static void add_samples(cJSON *o, const char *name, const kiln_trial *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < t->n_samples; k++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(t->samples_us[k]));
    cJSON_AddItemToObject(o, name, a);
}

static kiln_status write_lines(kiln_records *r, kiln_sb *sb, kiln_error *err)
{
    char *s = kiln_sb_take(sb);
    if (!s)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    size_t len = strlen(s);
    bool ok = fwrite(s, 1, len, r->f) == len && fflush(r->f) == 0;
    free(s);
    if (ok)
        fsync(fileno(r->f));
    return ok ? KILN_OK
              : kiln_errorf(err, KILN_ERR_IO, "cannot append to tuning records '%s': %s", r->path,
                            strerror(errno));
}

static bool put_line(kiln_sb *sb, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return false;
    kiln_sb_puts(sb, s);
    kiln_sb_puts(sb, "\n");
    free(s);
    return true;
}

kiln_status kiln_records_append_batch(kiln_records *r, int i, int batch, const kiln_trial *trials,
                                      int n, bool incumbent_repeat, int accepted,
                                      kiln_error *err)
{
    kiln_sb sb = {0};
    for (int k = 0; k < n; k++) {
        const kiln_trial *t = &trials[k];
        cJSON *o = line_base(r, i, &t->cfg, kiln_trial_status_name(t->status));
        bool repeat = k == 0 && incumbent_repeat;
        cJSON_AddStringToObject(o, "role", repeat ? "incumbent" : "candidate");
        if (!repeat && t->source)
            cJSON_AddStringToObject(o, "source", t->source);
        cJSON_AddNumberToObject(o, "batch", batch);
        cJSON_AddBoolToObject(o, "accepted", k == accepted);
        if (t->status == KILN_TRIAL_OK)
            cJSON_AddNumberToObject(o, "median_us", kiln_tune_median(t->samples_us, t->n_samples));
        add_samples(o, "samples_us", t);
        if (t->status == KILN_TRIAL_OK) { /* slow requests' samples, kept raw (often none) */
            cJSON *a = cJSON_CreateArray();
            for (int k = 0; k < t->n_dropped && k < KILN_TUNE_MAX_SAMPLES; k++)
                cJSON_AddItemToArray(a, cJSON_CreateNumber(t->dropped_us[k]));
            cJSON_AddItemToObject(o, "dropped_us", a);
        }
        if (t->status != KILN_TRIAL_OK)
            cJSON_AddStringToObject(o, "error", t->error);
        if (!put_line(&sb, o)) {
            free(kiln_sb_take(&sb));
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    return write_lines(r, &sb, err);
}

kiln_status kiln_records_append_tuned(kiln_records *r, int i, const kiln_trial *chosen,
                                      const kiln_trial *deflt, double speedup, kiln_error *err)
{
    kiln_sb sb = {0};
    cJSON *o = line_base(r, i, &chosen->cfg, "tuned");
    add_tuned(r, r->templates[i], r->keys[i], cJSON_GetObjectItemCaseSensitive(o, "knobs"));
    cJSON_AddBoolToObject(o, "validated", true);
    cJSON_AddNumberToObject(o, "speedup", speedup);
    cJSON_AddNumberToObject(o, "median_us", kiln_tune_median(chosen->samples_us, chosen->n_samples));
    add_samples(o, "samples_us", chosen);
    add_samples(o, "default_samples_us", deflt);
    if (!put_line(&sb, o))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return write_lines(r, &sb, err);
}

bool kiln_records_warm_start(const kiln_records *r, int i, const kiln_tune_space *sp,
                             kiln_tune_cfg *out, double *distance)
{
    if (!r || i < 0 || i >= r->n)
        return false;
    int best = -1;
    double bd = 0;
    for (int k = 0; k < r->n_tuned; k++) {
        const struct tuned_rec *t = &r->tuned[k];
        if (strcmp(t->tpl, r->templates[i]) != 0 || !strcmp(t->workload, r->keys[i]))
            continue;
        double d = key_distance(t->workload, r->keys[i]);
        if (d >= 0 && (best < 0 || d < bd)) {
            best = k;
            bd = d;
        }
    }
    if (best < 0)
        return false;
    cJSON *kn = cJSON_Parse(r->tuned[best].knobs);
    kiln_tune_cfg c = sp->deflt;
    for (int k = 0; k < sp->n && k < r->n_knobs[i]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kn, r->names[i][k]);
        if (sp->fixed[k] || !cJSON_IsNumber(v) || sp->n_choices[k] < 2)
            continue;
        /* the choice nearest to the value on a log scale (0 only for 0) */
        double want = v->valuedouble, bestd = -1;
        for (int q = 0; q < sp->n_choices[k]; q++) {
            double x = sp->choices[k][q];
            double dd = (x <= 0 || want <= 0) ? (x == want ? 0 : 1e9) : fabs(log(x / want));
            if (bestd < 0 || dd < bestd) {
                bestd = dd;
                c.v[k] = sp->choices[k][q];
            }
        }
    }
    cJSON_Delete(kn);
    if (kiln_tune_cfg_equal(&c, &sp->deflt))
        return false;
    *out = c;
    if (distance)
        *distance = bd;
    return true;
}
