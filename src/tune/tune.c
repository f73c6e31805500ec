/* tune/tune.c: a tuning run (docs/TUNING.md).
 *
 * The model's unique tasks (kiln_tasks_extract); those with something to
 * tune are tuned one after another, the largest estimated share of the
 * model's time (steps x flops at a nominal rate) first. A time budget is
 * split by that share: each task gets the remaining budget times its share
 * of the remaining tasks' weight, so time a converged task leaves over goes
 * to the others. --trials caps the new configurations measured per task.
 *
 * A task: the first batch is the analytic default (always measured first)
 * and its nearest neighbours; each later batch is the incumbent and up to
 * `batch` new candidates from the search (search.c). A batch is measured in
 * `rounds` interleaved rounds (the order rotated each round), each
 * configuration `repeat` samples per round, all in the worker process
 * (measure.c); the challenger with the lowest median replaces the incumbent
 * only by the acceptance rule (kiln_tune_beats). Records are appended and
 * flushed per batch. At the end the incumbent is validated against the
 * default in more interleaved rounds, and the "tuned" record names it only
 * when it is faster by the same rule, else the default.
 *
 * Fault injection (tests): KILN_TUNE_FAULT="segv:N" or "hang:N" (several
 * separated by commas) makes the worker segfault or hang on the N-th trial
 * of the run (1-based, counting new configurations measured). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/driver.h"
#include "tune/tune.h"
#include "util/error.h"
#include "util/sb.h"

#define MAX_BATCH 16
#define MAX_PICKS 8       /* analytic picks taken from a template */
#define REPEAT 3          /* samples per configuration per round */
#define MIN_REPEAT_MS 1.0 /* each sample at least this long */
#define NOMINAL_FLOPS 50e9

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct task {
    kiln_task_info info;
    kiln_tune_space sp;
    kiln_tune_cfg picks[MAX_PICKS]; /* the template's next analytic picks, best first */
    int n_picks;
    const char *names[KILN_TUNE_MAX_KNOBS];
    double weight; /* estimated seconds per inference */
    bool selected, tunable;
    /* results */
    double def_us, best_us; /* validated medians; 0: unknown */
    bool tuned, improved, resumed;
} task;

typedef struct run {
    const kiln_tune_options *o;
    FILE *log;
    int n;
    task *t;
    kiln_records *rec;
    int trial;           /* trials of the run so far */
    int faults[8][2];    /* {kind, trial} */
    int n_faults;
    kiln_tune_summary sum;
    double t0;
    int cold;            /* kiln_measurer_set_cold's level */
} run;

static void parse_faults(run *r)
{
    const char *e = getenv("KILN_TUNE_FAULT");
    while (e && *e && r->n_faults < 8) {
        int kind = !strncmp(e, "segv:", 5)  ? KILN_FAULT_SEGV
                   : !strncmp(e, "hang:", 5) ? KILN_FAULT_HANG
                   : !strncmp(e, "die:", 4)  ? KILN_FAULT_DIE
                                             : KILN_FAULT_NONE;
        if (kind != KILN_FAULT_NONE) {
            r->faults[r->n_faults][0] = kind;
            r->faults[r->n_faults++][1] = atoi(strchr(e, ':') + 1);
        }
        e = strchr(e, ',');
        if (e)
            e++;
    }
}

static kiln_fault fault_for(const run *r, int trial)
{
    for (int k = 0; k < r->n_faults; k++)
        if (r->faults[k][1] == trial)
            return (kiln_fault)r->faults[k][0];
    return KILN_FAULT_NONE;
}

static void cfg_json(const task *t, const kiln_tune_cfg *c, char *buf, size_t size)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, size, "{");
    for (int k = 0; k < c->n && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s\"%s\": %d", k ? ", " : "", t->names[k],
                              c->v[k]);
    if (n < size)
        snprintf(buf + n, size - n, "}");
}

/* "1,3-5": task numbers (1-based); else a substring of template or key. */
static bool matches(const char *pat, int i, const kiln_task_info *ti)
{
    if (!pat || !*pat)
        return true;
    bool numeric = strspn(pat, "0123456789,-") == strlen(pat);
    if (!numeric)
        return strstr(ti->template_name, pat) || strstr(ti->workload, pat);
    for (const char *p = pat; *p;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        if (i + 1 >= a && i + 1 <= b)
            return true;
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p)
            break;
    }
    return false;
}

kiln_status kiln_tune_space_of(const kiln_tasks *ts, int i, kiln_tune_space *sp,
                               const char **names, kiln_error *err)
{
    kiln_task_info info;
    kiln_status s = kiln_tasks_info(ts, i, &info, err);
    if (s != KILN_OK)
        return s;
    memset(sp, 0, sizeof *sp);
    sp->n = info.n_knobs < KILN_TUNE_MAX_KNOBS ? info.n_knobs : KILN_TUNE_MAX_KNOBS;
    sp->deflt.n = sp->n;
    const int max_choices = (int)(sizeof sp->choices[0] / sizeof sp->choices[0][0]);
    for (int k = 0; k < sp->n; k++) {
        kiln_knob_info ki;
        if ((s = kiln_tasks_knob(ts, i, k, &ki, err)) != KILN_OK)
            return s;
        if (names)
            names[k] = ki.name;
        sp->n_choices[k] = ki.n_choices < max_choices ? ki.n_choices : max_choices;
        memcpy(sp->choices[k], ki.choices, sizeof(int) * (size_t)sp->n_choices[k]);
        sp->fixed[k] = !strcmp(ki.kind, "block");
        sp->deflt.v[k] = ki.value;
    }
    return KILN_OK;
}

static kiln_status load_tasks(run *r, const kiln_tasks *ts, kiln_error *err)
{
    r->n = kiln_tasks_count(ts);
    r->t = calloc((size_t)r->n + 1, sizeof *r->t);
    if (!r->t)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < r->n; i++) {
        task *t = &r->t[i];
        kiln_status s = kiln_tasks_info(ts, i, &t->info, err);
        if (s != KILN_OK)
            return s;
        if ((s = kiln_tune_space_of(ts, i, &t->sp, t->names, err)) != KILN_OK)
            return s;
        for (int j = 0; j < t->info.n_picks && t->n_picks < MAX_PICKS; j++) {
            kiln_tune_cfg *c = &t->picks[t->n_picks++];
            c->n = t->sp.n;
            memcpy(c->v, &t->info.picks[j * t->info.n_knobs], sizeof(int) * (size_t)c->n);
        }
        t->weight = t->info.steps * (t->info.flops / NOMINAL_FLOPS + 2e-6);
        t->selected = matches(r->o->tasks, i, &t->info);
        t->tunable = kiln_tune_space_size(&t->sp) > 1;
    }
    return KILN_OK;
}

static void progress(run *r, int i, int trials, int cap, double inc_us, double def_us,
                     double t_task, const char *tail)
{
    const task *t = &r->t[i];
    char capb[16];
    if (cap > 0)
        snprintf(capb, sizeof capb, "%d", cap);
    else
        snprintf(capb, sizeof capb, "-");
    double gf = inc_us > 0 ? t->info.flops / (inc_us * 1e-6) * 1e-9 : 0;
    fprintf(r->log, "[Task %2d/%2d] %-14s | trial %3d/%s | best %8.2f GFLOP/s", i + 1, r->n,
            t->info.template_name, trials, capb, gf);
    if (def_us > 0 && inc_us > 0)
        fprintf(r->log, " (%.2fx default)", def_us / inc_us);
    fprintf(r->log, " | %6.1f s%s\n", t_task, tail ? tail : "");
    fflush(r->log);
}

static void add_samples(kiln_trial *acc, const kiln_trial *t)
{
    for (int k = 0; k < t->n_samples && acc->n_samples < KILN_TUNE_MAX_SAMPLES; k++)
        acc->samples_us[acc->n_samples++] = t->samples_us[k];
}

/* Measures list[0..n) in `rounds` interleaved rounds. trial_from: list
 * entries from here on are new trials (their first measurement counts one
 * trial of the run and may get an injected fault). */
static void measure_batch(run *r, const task *t, kiln_measurer *m, kiln_trial *list, int n,
                          int trial_from, int rounds)
{
    bool alive[MAX_BATCH + 1];
    int req_len[MAX_BATCH + 1][KILN_TUNE_MAX_SAMPLES], n_req[MAX_BATCH + 1];
    for (int j = 0; j < n; j++) {
        alive[j] = true;
        list[j].status = KILN_TRIAL_OK;
        list[j].n_samples = 0;
        list[j].n_dropped = 0;
        list[j].n_rounds = 0;
        list[j].error[0] = 0;
        n_req[j] = 0;
    }
    const kiln_tune_exec *ex = r->o->exec;
    if (ex && ex->build && trial_from < n) {
        /* the new configurations built first (by the ranks in parallel),
         * none measured meanwhile */
        char cfgs[MAX_BATCH + 1][1024];
        const char *ptr[MAX_BATCH + 1];
        for (int j = trial_from; j < n; j++) {
            cfg_json(t, &list[j].cfg, cfgs[j], sizeof cfgs[j]);
            ptr[j - trial_from] = cfgs[j];
        }
        ex->build(ex->ctx, t->info.workload, ptr, n - trial_from);
    }
    for (int round = 0; round < rounds; round++)
        for (int q = 0; q < n; q++) {
            int j = (q + round) % n;
            if (!alive[j])
                continue;
            kiln_fault f = KILN_FAULT_NONE;
            if (round == 0 && j >= trial_from)
                f = fault_for(r, ++r->trial);
            char cfg[1024];
            cfg_json(t, &list[j].cfg, cfg, sizeof cfg);
            kiln_trial one;
            one.cfg = list[j].cfg;
            if (ex)
                ex->measure(ex->ctx, t->info.workload, cfg, REPEAT, MIN_REPEAT_MS, f, &one);
            else
                kiln_measurer_run(m, cfg, REPEAT, MIN_REPEAT_MS, f, &one);
            if (one.status != KILN_TRIAL_OK) {
                alive[j] = false;
                list[j].status = one.status;
                snprintf(list[j].error, sizeof list[j].error, "%s", one.error);
                continue;
            }
            int before = list[j].n_samples;
            add_samples(&list[j], &one);
            if (n_req[j] < KILN_TUNE_MAX_SAMPLES && list[j].n_samples > before)
                req_len[j][n_req[j]++] = list[j].n_samples - before;
            if (list[j].n_rounds < KILN_TUNE_MAX_SAMPLES && one.n_samples > 0)
                list[j].round_us[list[j].n_rounds++] =
                    kiln_tune_median(one.samples_us, one.n_samples);
            list[j].max_abs_diff = fmax(list[j].max_abs_diff, one.max_abs_diff);
        }
    for (int j = 0; j < n; j++)
        if (alive[j])
            r->sum.slow_requests += kiln_tune_drop_slow_requests(&list[j], req_len[j], n_req[j]);
}

static bool in_seen(const kiln_tune_cfg *seen, int n, const kiln_tune_cfg *c)
{
    for (int k = 0; k < n; k++)
        if (kiln_tune_cfg_equal(&seen[k], c))
            return true;
    return false;
}

/* Appends configuration c, proposed by `source`, to the batch's candidates
 * cand[0..*nc), unless the batch is full (room), c is the incumbent or it
 * is there already. */
static void add_cand(kiln_trial *cand, int *nc, int room, const kiln_tune_cfg *inc,
                     const kiln_tune_cfg *c, const char *source)
{
    if (*nc >= room || kiln_tune_cfg_equal(c, inc))
        return;
    for (int k = 0; k < *nc; k++)
        if (kiln_tune_cfg_equal(&cand[k].cfg, c))
            return;
    cand[*nc].cfg = *c;
    cand[(*nc)++].source = source;
}

static bool workload_cost(void *ctx, const int *v, double *cost)
{
    return kiln_workload_cost(ctx, v, cost);
}

/* "1st", "2nd", "3rd", "4th" ... */
static const char *ordinal(int n)
{
    return n % 100 / 10 == 1 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

/* Tunes task i within `budget_s` seconds (0: none). */
static kiln_status tune_task(run *r, int i, double budget_s, kiln_error *err)
{
    task *t = &r->t[i];
    const kiln_tune_options *o = r->o;
    const kiln_rec_task *rt = kiln_records_task(r->rec, i);
    double t0 = now_s();
    int trials = 0, batch = 0;
    if (rt->done) {
        t->tuned = t->resumed = true;
        t->improved = !kiln_tune_cfg_equal(&rt->tuned, &t->sp.deflt);
        t->def_us = rt->speedup > 0 ? rt->speedup : 1;
        t->best_us = 1;
        r->sum.resumed++;
        fprintf(r->log, "[Task %2d/%2d] %-14s | tuned before (records): %.2fx default, skipped\n",
                i + 1, r->n, t->info.template_name, rt->speedup);
        return KILN_OK;
    }
    kiln_workload *w = NULL;
    kiln_measurer *m = NULL;
    kiln_tune_model *model = NULL;
    kiln_status s = KILN_OK;
    /* the workload: measured here, or with an executor only for the
     * template's cost model (its workers build and measure) */
    s = kiln_workload_create(t->info.workload, KILN_TUNE_WORKLOAD_SEED, &w, err);
    if (s == KILN_OK && !o->exec)
        s = kiln_measurer_create(w, o->cache_dir, o->jobs, o->timeout_s, o->num_threads, &m, err);
    if (s == KILN_OK && m)
        kiln_measurer_set_cold(m, r->cold);
    if (s != KILN_OK) {
        kiln_workload_destroy(w);
        return s;
    }
    int cap_seen = rt->n_measured + 1024;
    kiln_tune_cfg *seen = malloc(sizeof *seen * (size_t)cap_seen);
    kiln_trial *list = calloc(MAX_BATCH + 1, sizeof *list);
    kiln_trial *inc_last = calloc(1, sizeof *inc_last);
    /* the progress line's "best": the incumbent's samples over every batch
     * since it became the incumbent (its last batch alone moved by the
     * machine's noise, ~10% here, from line to line) */
    kiln_trial *inc_hist = calloc(1, sizeof *inc_hist);
    if (!seen || !list || !inc_last || !inc_hist) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    int n_seen = rt->n_measured;
    if (n_seen)
        memcpy(seen, rt->measured, sizeof *seen * (size_t)n_seen);
    kiln_tune_cfg inc = rt->have_incumbent ? rt->incumbent : t->sp.deflt;
    kiln_tune_search st = {.radius = 1, .rng = o->seed ^ (uint64_t)(i + 1) * 0x9e37ULL};
    int batch_sz = o->batch > 0 ? (o->batch < MAX_BATCH ? o->batch : MAX_BATCH) : 4;
    int rounds = o->rounds > 0 ? o->rounds : 3;
    int cap = o->trials > 0 ? o->trials : (o->time_budget_s > 0 ? 0 : 32);
    double inc_us = 0;
    /* the progress line's "x default": the product of the ratios measured in
     * the batches that accepted each new incumbent, the old and the new one
     * timed in the same interleaved rounds (the default's own median, taken
     * batches earlier, moved with the machine's slow phases: a 2.13x read
     * that validated at 1.00x); 0, not shown, after a resume from a
     * non-default incumbent */
    double gain = kiln_tune_cfg_equal(&inc, &t->sp.deflt) ? 1.0 : 0.0;
    double inc_rel = 1.0; /* the incumbent's time over the default's (1 after a resume) */
    bool have_inc = false;
    if (n_seen)
        fprintf(r->log, "[Task %2d/%2d] %-14s | resuming: %d configuration%s measured before\n",
                i + 1, r->n, t->info.template_name, n_seen, n_seen == 1 ? "" : "s");
    kiln_tune_cfg warm;
    double warm_d = 0;
    bool warm_ok = !o->no_warm_start && n_seen == 0 &&
                   kiln_records_warm_start(r->rec, i, &t->sp, &warm, &warm_d);
    if (warm_ok) {
        char wj[1024];
        cfg_json(t, &warm, wj, sizeof wj);
        fprintf(r->log,
                "[Task %2d/%2d] %-14s | warm start: %s, from the nearest tuned task (distance "
                "%.2f)\n",
                i + 1, r->n, t->info.template_name, wj, warm_d);
    }
    /* the baselines (random, grid) measure no analytic picks and rank nothing */
    bool analytic = !o->tuner || (strcmp(o->tuner, "random") && strcmp(o->tuner, "grid"));
    model = analytic ? kiln_tune_model_create(&t->sp, workload_cost, w) : NULL;
    if (model) {
        kiln_tune_model_info mi;
        kiln_tune_model_stats(model, &mi);
        fprintf(r->log,
                "[Task %2d/%2d] %-14s | cost model: %lld configurations ranked, the default "
                "%d%s; the first predicted at %.2fx its time\n",
                i + 1, r->n, t->info.template_name, (long long)mi.evaluated, mi.default_rank,
                ordinal(mi.default_rank), mi.best_pred);
    }
    for (;;) {
        bool inc_is_trial = !in_seen(seen, n_seen, &inc);
        /* the first batch: the template's analytic picks too, before the
         * search's candidates */
        int picks = batch == 0 && n_seen == 0 && analytic ? t->n_picks : 0;
        int size = batch_sz + picks < MAX_BATCH ? batch_sz + picks : MAX_BATCH;
        int room = cap > 0 ? cap - trials - (inc_is_trial ? 1 : 0) : size;
        if (room > size)
            room = size;
        /* the batch: the incumbent, then its candidates, each once */
        kiln_trial *cand = list + 1;
        int nc = 0;
        if (batch == 0 && n_seen == 0 && warm_ok) /* the nearest tuned task's first */
            add_cand(cand, &nc, room, &inc, &warm, "warm");
        for (int j = 0; j < picks; j++)
            add_cand(cand, &nc, room, &inc, &t->picks[j], "pick");
        /* then what the corrected cost model predicts faster than the
         * incumbent (up to half the batch; two in the first), then the
         * search's */
        kiln_tune_cfg got[MAX_BATCH];
        int want = batch == 0 ? 2 : (batch_sz + 1) / 2;
        want = room - nc < want ? room - nc : want;
        int ng = model && want > 0
                     ? kiln_tune_model_next(model, inc_rel, &inc, seen, n_seen, want, got)
                     : 0;
        for (int k = 0; k < ng; k++)
            add_cand(cand, &nc, room, &inc, &got[k], "model");
        ng = room > nc ? kiln_tune_next(&t->sp, o->tuner, &st, &inc, seen, n_seen, room - nc, got)
                       : 0;
        for (int k = 0; k < ng; k++)
            add_cand(cand, &nc, room, &inc, &got[k], o->tuner ? o->tuner : "droplet");
        if (nc == 0 && !inc_is_trial)
            break; /* converged, or the trial cap reached */
        list[0].cfg = inc;
        list[0].source = inc_is_trial ? "default" : NULL;
        int n = 1 + nc;
        measure_batch(r, t, m, list, n, inc_is_trial ? 0 : 1, rounds);
        int accepted = inc_is_trial && list[0].status == KILN_TRIAL_OK ? 0 : -1;
        int best = -1;
        for (int k = 1; k < n; k++)
            if (list[k].status == KILN_TRIAL_OK &&
                (best < 0 || kiln_tune_median(list[k].samples_us, list[k].n_samples) <
                                 kiln_tune_median(list[best].samples_us, list[best].n_samples)))
                best = k;
        if (best >= 0 && kiln_tune_beats(&list[best], &list[0]))
            accepted = best;
        if (list[0].status == KILN_TRIAL_OK) {
            /* what ga breeds from and the cost model's correction learns:
             * each time relative to the default's, paired with the
             * incumbent's in the same rounds */
            double m0 = kiln_tune_median(list[0].samples_us, list[0].n_samples);
            for (int k = 0; k < n && m0 > 0; k++)
                if (list[k].status == KILN_TRIAL_OK) {
                    double rel =
                        inc_rel * kiln_tune_median(list[k].samples_us, list[k].n_samples) / m0;
                    kiln_tune_observe(&st, &list[k].cfg, rel);
                    kiln_tune_model_observe(model, &list[k].cfg, rel);
                }
            if (accepted > 0 && m0 > 0)
                inc_rel *= kiln_tune_median(list[accepted].samples_us,
                                            list[accepted].n_samples) / m0;
        }
        for (int k = inc_is_trial ? 0 : 1; k < n; k++) {
            trials++;
            if (list[k].status != KILN_TRIAL_OK) {
                r->sum.failed++;
                fprintf(r->log, "[Task %2d/%2d] %-14s | trial failed (%s): %s\n", i + 1, r->n,
                        t->info.template_name, kiln_trial_status_name(list[k].status),
                        list[k].error);
            }
            if (n_seen < cap_seen)
                seen[n_seen++] = list[k].cfg;
        }
        s = kiln_records_append_batch(r->rec, i, batch++, list, n, !inc_is_trial, accepted, err);
        if (s != KILN_OK)
            goto done;
        if (accepted > 0 && list[0].status == KILN_TRIAL_OK)
            gain *= kiln_tune_median(list[0].samples_us, list[0].n_samples) /
                    kiln_tune_median(list[accepted].samples_us, list[accepted].n_samples);
        if (accepted >= 0) {
            inc = list[accepted].cfg;
            *inc_last = list[accepted];
            *inc_hist = list[accepted];
            have_inc = true;
            st.radius = 1;
        } else if (list[0].status == KILN_TRIAL_OK) {
            *inc_last = list[0];
            add_samples(inc_hist, &list[0]);
            have_inc = true;
        } else if (inc_is_trial) {
            /* the default itself failed: nothing to compare with */
            s = kiln_errorf(err, KILN_ERR_INTERNAL, "task %d (%s): the default configuration "
                            "failed: %s", i + 1, t->info.template_name, list[0].error);
            goto done;
        }
        if (have_inc)
            inc_us = kiln_tune_median(inc_hist->samples_us, inc_hist->n_samples);
        if (kiln_tune_cfg_equal(&inc, &t->sp.deflt))
            gain = 1.0; /* 1.00x while the default leads */
        progress(r, i, trials, cap, inc_us, inc_us * gain, now_s() - t0, NULL);
        if ((cap > 0 && trials >= cap) || (budget_s > 0 && now_s() - t0 >= budget_s))
            break;
    }
    /* validation: the incumbent against the default, interleaved */
    kiln_trial *chosen = inc_last, *dflt = inc_last;
    if (have_inc && !kiln_tune_cfg_equal(&inc, &t->sp.deflt)) {
        list[0].cfg = t->sp.deflt;
        list[1].cfg = inc;
        measure_batch(r, t, m, list, 2, 2, rounds + 2);
        dflt = &list[0];
        chosen = kiln_tune_beats(&list[1], &list[0]) ? &list[1] : &list[0];
        if (list[0].status != KILN_TRIAL_OK) {
            s = kiln_errorf(err, KILN_ERR_INTERNAL, "task %d (%s): validating the default "
                            "failed: %s", i + 1, t->info.template_name, list[0].error);
            goto done;
        }
    }
    if (have_inc) {
        t->def_us = kiln_tune_median(dflt->samples_us, dflt->n_samples);
        t->best_us = kiln_tune_median(chosen->samples_us, chosen->n_samples);
        t->tuned = true;
        t->improved = chosen != dflt;
        double sp = t->best_us > 0 ? t->def_us / t->best_us : 1;
        s = kiln_records_append_tuned(r->rec, i, chosen, dflt, sp, err);
        if (s != KILN_OK)
            goto done;
        char tail[96];
        snprintf(tail, sizeof tail, " Done: %s (validated %.2fx)",
                 t->improved ? "tuned" : "default kept", sp);
        progress(r, i, trials, cap, t->best_us, t->def_us, now_s() - t0, tail);
    }
    if (model) {
        kiln_tune_model_info mi;
        kiln_tune_model_stats(model, &mi);
        if (mi.observed >= 3)
            fprintf(r->log,
                    "[Task %2d/%2d] %-14s | cost model corrected over %d measurements: its "
                    "predictions weighted %.2f\n",
                    i + 1, r->n, t->info.template_name, mi.observed, mi.b);
    }
done:
    kiln_tune_model_destroy(model);
    r->sum.trials += trials;
    free(seen);
    free(list);
    free(inc_last);
    free(inc_hist);
    kiln_measurer_destroy(m);
    kiln_workload_destroy(w);
    return s;
}

/* Fills the inputs of m with seeded uniform floats (others zero). */
static kiln_status set_inputs(kiln_module *m, kiln_error *err)
{
    uint64_t x = 0x6b696c6eULL;
    for (int i = 0; i < kiln_module_num_inputs(m); i++) {
        const char *name;
        kiln_dtype dt;
        kiln_shape sh;
        kiln_tensor tt;
        kiln_status s = kiln_module_input_info(m, i, &name, &dt, &sh);
        if (s == KILN_OK)
            s = kiln_tensor_alloc(&tt, dt, &sh, err);
        if (s != KILN_OK)
            return s;
        int64_t n = kiln_shape_numel(&sh);
        memset(tt.data, 0, (size_t)kiln_tensor_nbytes(&tt));
        if (dt == KILN_DTYPE_FLOAT32)
            for (int64_t k = 0; k < n; k++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                ((float *)tt.data)[k] = (float)((x >> 40) * (1.0 / (1 << 24)) * 2 - 1);
            }
        s = kiln_module_set_input(m, i, &tt, err);
        kiln_tensor_release(&tt);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

kiln_status kiln_tune_time_builds(char *const so[2], int num_threads, double ms[2], double *ratio,
                                  kiln_error *err)
{
    kiln_module_options mo = {.num_threads = num_threads, .bind_threads = -1};
    enum { ROUNDS = KILN_TUNE_E2E_ROUNDS };
    double med[2][ROUNDS];
    kiln_bench_options bo = {.repeat = 3, .min_repeat_ms = 50};
    kiln_bench_result *br = calloc(1, sizeof *br);
    kiln_status s = br ? KILN_OK : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int round = 0; round < ROUNDS && s == KILN_OK; round++)
        for (int q = 0; q < 2 && s == KILN_OK; q++) {
            int k = (q + round) % 2;
            kiln_module *m = NULL;
            if ((s = kiln_module_load(so[k], &mo, &m, err)) == KILN_OK &&
                (s = set_inputs(m, err)) == KILN_OK &&
                (s = kiln_module_bench(m, &bo, br, err)) == KILN_OK)
                med[k][round] = br->median;
            kiln_module_destroy(m);
        }
    if (s == KILN_OK) {
        double q[ROUNDS];
        for (int k = 0; k < 2; k++)
            ms[k] = kiln_tune_median(med[k], ROUNDS) * 1e3;
        for (int round = 0; round < ROUNDS; round++)
            q[round] = med[0][round] / med[1][round];
        *ratio = kiln_tune_median(q, ROUNDS);
    }
    free(br);
    return s;
}

/* The tuned build against the untuned one (kiln_tune_time_builds:
 * interleaved rounds, alternating order, the paired median of the rounds'
 * ratios, and each build's median). One module is loaded at a time (an idle thread
 * pool of the other would share the cores). Equal builds are not timed,
 * nor builds whose every task kept its default. */
static kiln_status end_to_end(run *r, const char *model, kiln_error *err)
{
    if (r->sum.improved == 0 && !(r->sum.layout_accepted && r->sum.layout_changed > 0)) {
        /* every task kept its default: the tuned build runs the untuned
         * one's kernels, though the .so differ (the model's metadata says
         * where each configuration came from), and timing two copies of one
         * build measures the machine alone (0.81x for vit-b-16 on a slow
         * Intel phase, 11 rounds) */
        r->sum.e2e_speedup = 1;
        return KILN_OK;
    }
    const kiln_tune_options *o = r->o;
    kiln_compile_options co = {.target = o->target, .cache_dir = o->cache_dir, .jobs = o->jobs};
    char *so[2] = {NULL, NULL};
    kiln_status s = kiln_compile_cached(model, o->seed, &co, &so[0], err);
    co.records = o->records;
    if (s == KILN_OK)
        s = kiln_compile_cached(model, o->seed, &co, &so[1], err);
    if (s == KILN_OK && !strcmp(so[0], so[1])) {
        r->sum.e2e_speedup = 1; /* the same build: every task kept its default */
        goto done;
    }
    double ms[2], ratio = 1;
    if (s == KILN_OK &&
        (s = kiln_tune_time_builds(so, o->num_threads, ms, &ratio, err)) == KILN_OK) {
        r->sum.e2e_untuned_ms = ms[0];
        r->sum.e2e_tuned_ms = ms[1];
        r->sum.e2e_speedup = ratio;
    }
done:
    for (int k = 0; k < 2; k++)
        free(so[k]);
    return s;
}

kiln_status kiln_tune_run(const char *model, const kiln_tune_options *opts,
                          kiln_tune_summary *sum, kiln_error *err)
{
    if (!model || !opts || !opts->records)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln tune: a model and --records");
    if (opts->tuner && strcmp(opts->tuner, "droplet") && strcmp(opts->tuner, "ga") &&
        strcmp(opts->tuner, "random") && strcmp(opts->tuner, "grid"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "unknown tuner '%s' (droplet, ga, random or grid)", opts->tuner);
    if (opts->workers > 1)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%d measurement workers: not available (one worker measures; on a "
                           "shared machine parallel measurements disturb each other)",
                           opts->workers);
    run r = {.o = opts, .log = opts->log ? opts->log : stderr, .t0 = now_s()};
    parse_faults(&r);
    kiln_graph *g = NULL;
    kiln_tasks *ts = NULL;
    const char **keys = NULL, **tpls = NULL;
    const char *const **names = NULL;
    int *nk = NULL;
    kiln_compile_options co = {.target = opts->target};
    kiln_status s = kiln_model_load(model, opts->seed, &g, err);
    if (s == KILN_OK)
        r.cold = opts->cold_weights == 1 || opts->cold_weights == 2 ? opts->cold_weights
                                                                     : kiln_tune_cold_level(g);
    if (s == KILN_OK && !opts->skip_layouts && !opts->exec && !opts->tasks) {
        /* the layout stage first: the tasks then are those of the blocks it
         * chose; a quarter of the time budget at most */
        s = kiln_tune_layouts(g, opts, r.cold,
                              opts->time_budget_s > 0
                                  ? opts->time_budget_s / (opts->layouts_only ? 1 : 4)
                                  : 0,
                              r.log, &r.sum, err);
        if (s == KILN_OK && r.sum.layout_accepted && r.sum.layout_changed > 0)
            co.records = opts->records;
    }
    if (s == KILN_OK)
        s = kiln_tasks_extract(g, &co, &ts, err);
    kiln_graph_destroy(g);
    if (s == KILN_OK)
        s = load_tasks(&r, ts, err);
    if (s != KILN_OK)
        goto done;
    keys = calloc((size_t)r.n + 1, sizeof *keys);
    tpls = calloc((size_t)r.n + 1, sizeof *tpls);
    names = calloc((size_t)r.n + 1, sizeof *names);
    nk = calloc((size_t)r.n + 1, sizeof *nk);
    if (!keys || !tpls || !names || !nk) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < r.n; i++) {
        keys[i] = r.t[i].info.workload;
        tpls[i] = r.t[i].info.template_name;
        names[i] = r.t[i].names;
        nk[i] = r.t[i].sp.n;
    }
    if ((s = kiln_records_open(opts->records, r.n, keys, tpls, nk, names, r.log, &r.rec, err)) !=
        KILN_OK)
        goto done;
    /* the order: largest estimated time first */
    int *order = calloc((size_t)r.n + 1, sizeof *order);
    if (!order) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    int n_sel = 0;
    double w_left = 0;
    for (int i = 0; i < r.n; i++) {
        r.sum.tasks++;
        if (r.t[i].tunable)
            r.sum.tunable++;
        if (!r.t[i].selected || !r.t[i].tunable || opts->layouts_only)
            continue;
        int k = n_sel++;
        while (k > 0 && r.t[order[k - 1]].weight < r.t[i].weight) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
        w_left += r.t[i].weight;
    }
    fprintf(r.log,
            "kiln tune: %s, %d tasks, %d tunable, %d selected; tuner %s; records %s; "
            "fingerprint %s%s%s; tasks timed with their weights %s\n",
            model, r.n, r.sum.tunable, n_sel, opts->tuner ? opts->tuner : "droplet",
            opts->records, kiln_cpu_fingerprint_id(), opts->exec ? "; workers: " : "",
            opts->exec && opts->exec->name ? opts->exec->name : "",
            r.cold == 2 ? "in the last-level cache (the model's fit it)"
                        : "out of every cache (the model's exceed half the last-level cache)");
    for (int q = 0; q < n_sel && s == KILN_OK; q++) {
        int i = order[q];
        double budget = 0;
        if (opts->time_budget_s > 0) {
            double left = opts->time_budget_s - (now_s() - r.t0);
            if (left <= 0) {
                r.sum.skipped += n_sel - q;
                fprintf(r.log, "kiln tune: time budget spent; %d task%s left at the default\n",
                        n_sel - q, n_sel - q == 1 ? "" : "s");
                break;
            }
            budget = w_left > 0 ? left * r.t[i].weight / w_left : left;
            if (budget < 0.5)
                budget = 0.5;
        }
        w_left -= r.t[i].weight;
        s = tune_task(&r, i, budget, err);
    }
    free(order);
    if (s != KILN_OK)
        goto done;
    double w_def = 0, w_best = 0;
    for (int i = 0; i < r.n; i++)
        if (r.t[i].tuned) {
            r.sum.tuned++;
            if (r.t[i].improved)
                r.sum.improved++;
            if (r.t[i].def_us > 0 && r.t[i].best_us > 0) {
                /* each task's estimated time, scaled by its validated ratio */
                w_def += r.t[i].weight;
                w_best += r.t[i].weight * r.t[i].best_us / r.t[i].def_us;
            }
        }
    double w_all = 0;
    for (int i = 0; i < r.n; i++)
        w_all += r.t[i].weight;
    r.sum.est_gain = w_all > 0 ? w_all / (w_all - w_def + w_best) : 1;
    if (!opts->skip_e2e && r.sum.tuned > 0) {
        kiln_records_close(r.rec);
        r.rec = NULL;
        s = end_to_end(&r, model, err);
    }
done:
    r.sum.seconds = now_s() - r.t0;
    if (sum)
        *sum = r.sum;
    kiln_records_close(r.rec);
    free(keys);
    free(tpls);
    free(names);
    free(nk);
    free(r.t);
    kiln_tasks_destroy(ts);
    return s;
}
