/* tune/layouts.c: the tuner's layout stage (docs/TUNING.md, "Graph-level
 * layout choice"): alter-layout's DP (pass/layout_dp.c) run on measured
 * task times instead of its analytic costs, validated end to end.
 *
 *  1. A build of the model with the analytic choice lists the convs that
 *     are offered block choices (the decisions) and names each choice by
 *     kiln_layout_node_key.
 *  2. One build per choice index r (kiln_layout_hints.force = r: every
 *     decision takes its choice r) finds the task each decision's choice
 *     runs as: its workload key. K builds for K choices, passes and
 *     lowering only.
 *  3. Per decision, in model order, its choices' tasks are timed alone with
 *     their default knobs, interleaved round-robin in one batch (the
 *     measurement rule of the task stage: a forked worker each, weights
 *     evicted as the network would find them, medians). Choices timed for
 *     an earlier conv of the same key, or in the records (a resumed run),
 *     are not timed again. Each time is appended as a block line, status
 *     "measured".
 *  4. The DP runs on those times (a conv whose every choice has a time is
 *     costed by them; layout transforms keep their analytic cost). When its
 *     choice is the analytic one, nothing changes and the times are written
 *     again as "tuned"; otherwise the two builds are timed end to end
 *     (kiln_tune_time_builds) and the times become "tuned" only when the
 *     measured choice is not slower; else the analytic choice stays.
 * `kiln compile --records` applies "tuned" block lines (driver/
 * layout_records.c). */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver/driver.h"
#include "pass/layout_dp.h"
#include "tune/tune.h"
#include "util/error.h"

#define REPEAT 3
#define MIN_REPEAT_MS 1.0

typedef struct choice {
    char key[KILN_LAYOUT_KEY_MAX];
    char *workload, *tpl, *config; /* its task (NULL: not found) */
    bool timed;
    kiln_trial t;                  /* its samples (timed here) */
    double us;                     /* median */
} choice;

typedef struct stage {
    const kiln_tune_options *o;
    FILE *log, *rec;
    const kiln_graph *g;
    choice *c;
    int n, cap;
    int cold;
    double t0;
} stage;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int find(const stage *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->c[i].key, key))
            return i;
    return -1;
}

static int add(stage *s, const char *key)
{
    int i = find(s, key);
    if (i >= 0)
        return i;
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 32;
        choice *m = realloc(s->c, sizeof *m * (size_t)nc);
        if (!m)
            return -1;
        s->c = m;
        s->cap = nc;
    }
    choice *c = &s->c[s->n];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    return s->n++;
}

static kiln_status new_build(const stage *s, const kiln_layout_hints *h, kiln_build **out,
                             kiln_error *err)
{
    kiln_compile_options co = {.target = s->o->target, .cache_dir = s->o->cache_dir,
                               .jobs = s->o->jobs};
    kiln_status st = kiln_build_create(s->g, &co, out, err);
    if (st == KILN_OK && h)
        kiln_build_set_layout_hints(*out, h);
    if (st == KILN_OK && (st = kiln_build_passes(*out, err)) != KILN_OK) {
        kiln_build_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* Step 2: the tasks of choice r of every decision offered more than r. */
static kiln_status find_tasks(stage *s, int r, kiln_error *err)
{
    kiln_layout_hints h = {.force = r};
    kiln_build *b = NULL;
    kiln_status st = new_build(s, &h, &b, err);
    if (st == KILN_OK)
        st = kiln_build_lower(b, err);
    int n = 0;
    const kiln_layout_decision *d = st == KILN_OK ? kiln_build_layout_decisions(b, &n, NULL) : NULL;
    for (int k = 0; k < n && st == KILN_OK; k++) {
        if (d[k].picked != r)
            continue;
        int i = find(s, d[k].keys[r]), t = kiln_build_task_of_node(b, d[k].name);
        if (i < 0 || t < 0 || s->c[i].workload)
            continue;
        const kiln_task *tk = &b->low->tasks[t];
        choice *c = &s->c[i];
        c->workload = strdup(tk->workload);
        c->tpl = strdup(tk->tpl->name);
        if (!c->workload || !c->tpl)
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    kiln_build_destroy(b);
    return st;
}

static void line(stage *s, const choice *c, const char *status)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", KILN_RECORDS_VERSION);
    cJSON_AddNumberToObject(o, "time", (double)time(NULL));
    cJSON_AddStringToObject(o, "kind", "block");
    cJSON *fp = cJSON_Parse(kiln_cpu_fingerprint_json());
    cJSON_AddItemToObject(o, "fingerprint", fp ? fp : cJSON_CreateObject());
    cJSON_AddStringToObject(o, "fingerprint_id", kiln_cpu_fingerprint_id());
    char h[17];
    kiln_template_hash(c->tpl, h);
    cJSON_AddStringToObject(o, "template_hash", h);
    cJSON_AddStringToObject(o, "template", c->tpl);
    cJSON_AddStringToObject(o, "workload", c->workload);
    cJSON *kn = cJSON_Parse(c->config);
    cJSON_AddItemToObject(o, "knobs", cJSON_IsObject(kn) ? kn : cJSON_CreateObject());
    if (!cJSON_IsObject(kn))
        cJSON_Delete(kn);
    cJSON_AddStringToObject(o, "block_key", c->key);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddNumberToObject(o, "median_us", c->us);
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < c->t.n_samples; k++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(c->t.samples_us[k]));
    cJSON_AddItemToObject(o, "samples_us", a);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (txt && s->rec) {
        fprintf(s->rec, "%s\n", txt);
        fflush(s->rec);
        fsync(fileno(s->rec));
    }
    free(txt);
}

/* Step 3 for one decision: its choices ix[0..nb) timed in one batch. */
static bool time_decision(stage *s, const int *ix, int nb, kiln_error *err)
{
    kiln_workload *w[KILN_TPL_MAX_BLOCKS] = {0};
    kiln_measurer *m[KILN_TPL_MAX_BLOCKS] = {0};
    bool ok = true;
    for (int j = 0; j < nb && ok; j++) {
        choice *c = &s->c[ix[j]];
        memset(&c->t, 0, sizeof c->t);
        kiln_task_info ti;
        ok = kiln_workload_create(c->workload, KILN_TUNE_WORKLOAD_SEED, &w[j], err) == KILN_OK &&
             kiln_workload_info(w[j], &ti, err) == KILN_OK &&
             (c->config || (c->config = strdup(ti.default_config)) != NULL) &&
             kiln_measurer_create(w[j], s->o->cache_dir, s->o->jobs, s->o->timeout_s,
                                  s->o->num_threads, &m[j], err) == KILN_OK;
        if (ok)
            kiln_measurer_set_cold(m[j], s->cold);
    }
    int rounds = s->o->rounds > 0 ? s->o->rounds : 3;
    for (int round = 0; round < rounds && ok; round++)
        for (int q = 0; q < nb && ok; q++) {
            int j = (q + round) % nb;
            choice *c = &s->c[ix[j]];
            kiln_trial one = {0};
            kiln_measurer_run(m[j], c->config, REPEAT, MIN_REPEAT_MS, KILN_FAULT_NONE, &one);
            if (one.status != KILN_TRIAL_OK) {
                fprintf(s->log, "[Layout] block choice '%s': %s (%s): the conv keeps analytic costs\n",
                        c->key, kiln_trial_status_name(one.status), one.error);
                ok = false;
                break;
            }
            for (int k = 0; k < one.n_samples && c->t.n_samples < KILN_TUNE_MAX_SAMPLES; k++)
                c->t.samples_us[c->t.n_samples++] = one.samples_us[k];
        }
    for (int j = 0; j < nb; j++) {
        kiln_measurer_destroy(m[j]);
        kiln_workload_destroy(w[j]);
        choice *c = &s->c[ix[j]];
        if (ok) {
            c->us = kiln_tune_median(c->t.samples_us, c->t.n_samples);
            c->timed = true;
            line(s, c, "measured");
        }
    }
    return ok;
}

/* The times as hints (sorted); NULL when none. */
static kiln_layout_hints *hints_of(const stage *s, kiln_layout_time **tm)
{
    int n = 0;
    *tm = malloc(sizeof **tm * (size_t)(s->n + 1));
    kiln_layout_hints *h = calloc(1, sizeof *h);
    if (!*tm || !h) {
        free(*tm);
        free(h);
        *tm = NULL;
        return NULL;
    }
    for (int i = 0; i < s->n; i++)
        if (s->c[i].timed)
            (*tm)[n++] = (kiln_layout_time){s->c[i].key, s->c[i].us};
    kiln_layout_times_sort(*tm, n);
    h->force = -1;
    h->n_times = n;
    h->times = *tm;
    return h;
}

static void block_name(const kiln_tpl_block *b, char *buf, size_t size)
{
    int in = kiln_layout_block(b->lay.in), out = kiln_layout_block(b->lay.out);
    if (in == 1)
        snprintf(buf, size, "NCHW > NCHW%dc", out);
    else
        snprintf(buf, size, "NCHW%dc", out);
}

kiln_status kiln_tune_layouts(const char *model, const kiln_graph *g,
                              const kiln_tune_options *o, int cold, double budget_s, FILE *log,
                              kiln_tune_summary *sum, kiln_error *err)
{
    (void)model;
    stage s = {.o = o, .log = log ? log : stderr, .g = g, .cold = cold, .t0 = now_s()};
    kiln_build *b0 = NULL, *b1 = NULL;
    kiln_layout_hints *prev = NULL, *h = NULL;
    kiln_layout_time *tm = NULL;
    kiln_layout_decision *d0 = NULL;
    int n0 = 0;
    kiln_status st = new_build(&s, NULL, &b0, err);
    if (st != KILN_OK)
        return st;
    const kiln_layout_decision *d = kiln_build_layout_decisions(b0, &n0, NULL);
    sum->layout_convs = n0;
    if (n0 == 0) {
        fprintf(s.log, "[Layout] no conv is offered block choices: nothing to time\n");
        kiln_build_destroy(b0);
        return KILN_OK;
    }
    /* step 1: every choice's key; the decisions kept (the build's own go
     * with it) */
    d0 = malloc(sizeof *d0 * (size_t)n0);
    if (!d0) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    memcpy(d0, d, sizeof *d0 * (size_t)n0);
    int max_k = 0;
    for (int k = 0; k < n0; k++) {
        d0[k].name = NULL; /* the build's; not needed beyond it */
        for (int j = 0; j < d0[k].n_blocks; j++)
            if (add(&s, d0[k].keys[j]) < 0) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        if (d0[k].n_blocks > max_k)
            max_k = d0[k].n_blocks;
    }
    /* step 2 */
    for (int r = 0; r < max_k && st == KILN_OK; r++)
        st = find_tasks(&s, r, err);
    if (st != KILN_OK)
        goto done;
    /* resume: times in the records already */
    if ((st = kiln_driver_block_times(o->records, false, &prev, err)) != KILN_OK)
        goto done;
    for (int i = 0; prev && i < s.n; i++) {
        double us = kiln_layout_time_of(prev, s.c[i].key);
        if (us > 0 && s.c[i].workload) {
            s.c[i].us = us;
            s.c[i].timed = true;
            s.c[i].t.n_samples = 1;
            s.c[i].t.samples_us[0] = us;
        }
    }
    if (!(s.rec = fopen(o->records, "a"))) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot append to tuning records '%s': %s", o->records,
                         strerror(errno));
        goto done;
    }
    fprintf(s.log, "[Layout] %d conv%s offered block choices, %d distinct choice%s; timing each "
                   "as its task\n", n0, n0 == 1 ? "" : "s", s.n, s.n == 1 ? "" : "s");
    /* step 3 */
    int todo = 0;
    for (int k = 0; k < n0; k++) {
        int ix[KILN_TPL_MAX_BLOCKS], nb = d0[k].n_blocks, untimed = 0;
        bool found = true;
        for (int j = 0; j < nb; j++) {
            ix[j] = find(&s, d0[k].keys[j]);
            found &= ix[j] >= 0 && s.c[ix[j]].workload != NULL;
            untimed += ix[j] >= 0 && !s.c[ix[j]].timed;
        }
        if (!found || !untimed)
            continue;
        todo++;
        if (budget_s > 0 && now_s() - s.t0 > budget_s) {
            continue; /* counted, not timed */
        }
        double t1 = now_s();
        kiln_error e2 = {0};
        if (!time_decision(&s, ix, nb, &e2)) {
            if (e2.status != KILN_OK)
                fprintf(s.log, "[Layout] %s\n", e2.msg);
            continue;
        }
        char names[KILN_TPL_MAX_BLOCKS * 48] = "";
        size_t len = 0;
        for (int j = 0; j < nb && len < sizeof names; j++) {
            char bn[32];
            block_name(&d0[k].blocks[j], bn, sizeof bn);
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s %.1f us",
                                    j ? ", " : "", bn, s.c[ix[j]].us);
        }
        fprintf(s.log, "[Layout %3d/%3d] %-14s | %s | %5.1f s\n", k + 1, n0, s.c[ix[0]].tpl,
                names, now_s() - t1);
        fflush(s.log);
    }
    /* step 4 */
    if (!(h = hints_of(&s, &tm))) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((st = new_build(&s, h, &b1, err)) != KILN_OK)
        goto done;
    int n1 = 0, measured = 0, changed = 0;
    const kiln_layout_decision *d1 = kiln_build_layout_decisions(b1, &n1, &measured);
    for (int k = 0; k < n1 && k < n0; k++)
        changed += d1[k].picked != d0[k].picked ||
                   kiln_layout_block(d1[k].blocks[d1[k].picked].lay.out) !=
                       kiln_layout_block(d0[k].blocks[d0[k].picked].lay.out);
    changed += n1 != n0;
    sum->layout_measured = measured;
    sum->layout_changed = changed;
    if (changed == 0) {
        sum->layout_accepted = true;
        fprintf(s.log,
                "[Layout] measured times keep the analytic block choice of every conv (%d of %d "
                "convs timed); %.1f s\n",
                measured, n0, now_s() - s.t0);
    } else if (o->skip_e2e) {
        fprintf(s.log,
                "[Layout] measured times change the blocks of %d conv%s; not validated end to "
                "end (--no-e2e): kept the analytic choice\n",
                changed, changed == 1 ? "" : "s");
    } else {
        char *so[2] = {NULL, NULL};
        if ((st = kiln_build_link(b0, NULL, err)) == KILN_OK &&
            (st = kiln_build_link(b1, NULL, err)) == KILN_OK) {
            so[0] = (char *)kiln_build_output(b0);
            so[1] = (char *)kiln_build_output(b1);
        }
        double ms[2] = {0, 0};
        if (st == KILN_OK)
            st = kiln_tune_time_builds(so, o->num_threads, ms, err);
        if (st != KILN_OK)
            goto done;
        sum->layout_speedup = ms[0] / ms[1];
        /* not slower: the medians of 11 interleaved rounds */
        sum->layout_accepted = ms[1] <= ms[0];
        fprintf(s.log,
                "[Layout] measured times change the blocks of %d conv%s: end to end %.3f ms "
                "against %.3f ms analytic (%.3fx): %s; %.1f s\n",
                changed, changed == 1 ? "" : "s", ms[1], ms[0], sum->layout_speedup,
                sum->layout_accepted ? "accepted" : "slower, the analytic choice stays",
                now_s() - s.t0);
    }
    if (sum->layout_accepted)
        for (int i = 0; i < s.n; i++)
            if (s.c[i].timed)
                line(&s, &s.c[i], "tuned");
    if (todo && budget_s > 0 && now_s() - s.t0 > budget_s)
        fprintf(s.log, "[Layout] the stage's time budget (%.0f s) ran out: untimed convs keep "
                       "analytic costs\n", budget_s);
done:
    if (s.rec)
        fclose(s.rec);
    kiln_build_destroy(b0);
    kiln_build_destroy(b1);
    kiln_driver_free_layout_hints(prev);
    free(h);
    free(tm);
    free(d0);
    for (int i = 0; i < s.n; i++) {
        free(s.c[i].workload);
        free(s.c[i].tpl);
        free(s.c[i].config);
    }
    free(s.c);
    return st;
}
