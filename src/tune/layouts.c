/* tune/layouts.c: the tuner's layout stage (docs/TUNING.md, "Graph-level
 * layout choice"): alter-layout's DP (pass/layout_dp.c) run on measured
 * task times instead of its analytic costs, validated end to end.
 *
 *  1. A build of the model with the analytic choice lists the convs that
 *     are offered block choices (the decisions) and names each choice by
 *     kiln_layout_node_key (its input and output blocks among the rest).
 *  2. Builds with forced choices (kiln_layout_hints.force, passes and
 *     lowering only) find the task each key runs as: choice r of every
 *     decision, then of the even-numbered and of the odd-numbered ones
 *     only, so that a conv's choices meet each choice of its neighbour
 *     (its input block is its producer's output block): 1 + 3 (K - 1)
 *     builds for K choices.
 *  3. Per decision, in model order, the tasks of its keys are timed alone
 *     with their default knobs, interleaved round-robin in one batch (the
 *     task stage's worker and cache rules; one sample per call, many
 *     rounds); the first key costs its median, each other key that times
 *     the median over the rounds of its ratio to the first's sample of
 *     the same round. Keys timed before (an earlier conv of the same
 *     shapes, or the records of a resumed run) are not timed again. Each
 *     time is appended as a block line, status "measured".
 *  4. The DP runs on those times (a conv whose every choice has a time in
 *     its context is costed by them; others by analytic costs scaled to
 *     the times' units; layout transforms keep their analytic cost). A
 *     choice it takes over the analytic one is timed again beside it, and
 *     keeps the slower of its two estimates, before the DP runs again. When
 *     its choice is the analytic one, nothing changes and the times are
 *     written again as "tuned"; otherwise the two builds are timed end to
 *     end (kiln_tune_time_builds) and the times become "tuned" only when
 *     the measured choice is not slower (the paired median of the rounds'
 *     ratios at least 1); else the analytic choice stays.
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

/* One sample per call, many rounds: this machine's slow phases last
 * milliseconds to seconds, so a choice's samples are taken beside the
 * other choices' (three samples per call in three rounds read one choice
 * 2x apart from round to round). */
#define REPEAT 1
#define MIN_REPEAT_MS 1.0
#define ROUNDS_PER_BATCH_ROUND 3 /* rounds: --rounds (3) x this */

#define MAX_NODE_KEYS 16
#define MAX_ROUNDS 4 /* DP runs that may ask for more times */

typedef struct choice {
    char key[KILN_LAYOUT_KEY_MAX];
    int in_block, out_block, algo;
    bool shared;                   /* its task holds another conv too (an expand +
                                      depthwise pair): the conv's own time is not
                                      its task's, and it is not timed */
    char *workload, *tpl, *config; /* its task (NULL: not found) */
    bool timed;
    bool confirmed;                /* the DP took it over the analytic choice and a
                                      second batch timed it again (step 4) */
    kiln_trial t;                  /* its samples (timed here) */
    double us;                     /* median */
} choice;

/* A decision (a conv offered block choices) and the keys it was seen with. */
typedef struct node_keys {
    char *name;
    int n, ix[MAX_NODE_KEYS];
} node_keys;

typedef struct stage {
    const kiln_tune_options *o;
    FILE *log, *rec;
    const kiln_graph *g;
    choice *c;
    int n, cap;
    node_keys *nodes;
    int n_nodes;
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

static int add(stage *s, const char *key, const kiln_tpl_block *b)
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
    c->in_block = kiln_layout_block(b->lay.in);
    c->out_block = kiln_layout_block(b->lay.out);
    c->algo = b->lay.algo;
    return s->n++;
}

/* Key i seen at decision k (of the analytic build's order). */
static void node_add(stage *s, int k, int i)
{
    node_keys *nk = &s->nodes[k];
    for (int j = 0; j < nk->n; j++)
        if (nk->ix[j] == i)
            return;
    if (nk->n < MAX_NODE_KEYS)
        nk->ix[nk->n++] = i;
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

/* Whether task t of b runs a conv besides its anchor. */
static bool task_shared(const kiln_build *b, int t)
{
    const kiln_pass_ctx *ctx = b->low->ctx;
    const kiln_task *tk = &b->low->tasks[t];
    const kiln_group *gr = &ctx->groups[tk->group];
    for (int j = 0; j < gr->n_nodes; j++) {
        const kiln_node *n = ctx->g->nodes[gr->nodes[j]];
        if (gr->nodes[j] != tk->anchor && (n->op == KILN_OP_CONV || n->op == KILN_OP_CONVTRANSPOSE))
            return true;
    }
    return false;
}

/* Records task t of b as what choice c runs as: the first task seen gives
 * the workload; a task of another template, or one holding another conv,
 * makes the key shared (not timed). */
static bool set_task(choice *c, const kiln_build *b, int t)
{
    const kiln_task *tk = &b->low->tasks[t];
    if (task_shared(b, t) || (c->tpl && strcmp(c->tpl, tk->tpl->name) != 0))
        c->shared = true;
    if (c->workload)
        return true;
    c->workload = strdup(tk->workload);
    c->tpl = strdup(tk->tpl->name);
    return c->workload && c->tpl;
}

/* Step 2: a build with choice r forced (phase: kiln_layout_hints); the
 * key each decision took there, and its task. */
static kiln_status find_tasks(stage *s, int r, int phase, kiln_error *err)
{
    kiln_layout_hints h = {.force = r, .force_phase = phase};
    kiln_build *b = NULL;
    kiln_status st = new_build(s, &h, &b, err);
    if (st == KILN_OK)
        st = kiln_build_lower(b, err);
    int n = 0;
    const kiln_layout_decision *d = st == KILN_OK ? kiln_build_layout_decisions(b, &n, NULL) : NULL;
    for (int k = 0; k < n && st == KILN_OK; k++) {
        /* the same decisions in the same order as the analytic build */
        if (k >= s->n_nodes || strcmp(d[k].name, s->nodes[k].name) != 0)
            continue;
        const char *key = d[k].keys[d[k].picked];
        int i = add(s, key, &d[k].blocks[d[k].picked]);
        if (i < 0) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        int t = kiln_build_task_of_node(b, d[k].name);
        if (t < 0)
            continue; /* fused into another conv's task: not timed alone */
        node_add(s, k, i);
        if (!set_task(&s->c[i], b, t))
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
    kiln_workload *w[MAX_NODE_KEYS] = {0};
    kiln_measurer *m[MAX_NODE_KEYS] = {0};
    bool ok = true;
    /* the first key, timed in an earlier batch, keeps its time: the others
     * are scaled to it */
    bool ref_timed = s->c[ix[0]].timed;
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
    int rounds = (s->o->rounds > 0 ? s->o->rounds : 3) * ROUNDS_PER_BATCH_ROUND;
    if (rounds > KILN_TUNE_MAX_SAMPLES)
        rounds = KILN_TUNE_MAX_SAMPLES;
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
    /* choice 0 by its median; the others by the median over the rounds of
     * their ratio to choice 0's sample of the same round (taken next to
     * it, so a slow phase slows both) */
    double ratio[KILN_TUNE_MAX_SAMPLES];
    for (int j = 0; j < nb; j++) {
        kiln_measurer_destroy(m[j]);
        kiln_workload_destroy(w[j]);
    }
    if (!ok)
        return false;
    const choice *c0 = &s->c[ix[0]];
    double us0 = ref_timed ? c0->us : kiln_tune_median(c0->t.samples_us, c0->t.n_samples);
    for (int j = ref_timed ? 1 : 0; j < nb; j++) {
        choice *c = &s->c[ix[j]];
        int n = c->t.n_samples < c0->t.n_samples ? c->t.n_samples : c0->t.n_samples;
        for (int k = 0; k < n; k++)
            ratio[k] = c->t.samples_us[k] / c0->t.samples_us[k];
        c->us = j == 0 ? us0 : us0 * kiln_tune_median(ratio, n);
        c->timed = true;
        line(s, c, "measured");
    }
    return true;
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
        if (s->c[i].timed && !s->c[i].shared)
            (*tm)[n++] = (kiln_layout_time){s->c[i].key, s->c[i].us};
    kiln_layout_times_sort(*tm, n);
    h->force = -1;
    h->n_times = n;
    h->times = *tm;
    return h;
}

static void block_name(const choice *c, char *buf, size_t size)
{
    const char *algo = c->algo == KILN_TPL_ALGO_WINOGRAD ? " winograd" : "";
    if (c->in_block == 1)
        snprintf(buf, size, "NCHW>%dc%s", c->out_block, algo);
    else
        snprintf(buf, size, "%dc>%dc%s", c->in_block, c->out_block, algo);
}

kiln_status kiln_tune_layouts(const kiln_graph *g,
                              const kiln_tune_options *o, int cold, double budget_s, FILE *log,
                              kiln_tune_summary *sum, kiln_error *err)
{
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
    /* step 1: every choice's key */
    d0 = malloc(sizeof *d0 * (size_t)n0);
    s.nodes = calloc((size_t)n0, sizeof *s.nodes);
    if (!d0 || !s.nodes) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    memcpy(d0, d, sizeof *d0 * (size_t)n0);
    s.n_nodes = n0;
    int max_k = 0;
    for (int k = 0; k < n0; k++) {
        if (!(s.nodes[k].name = strdup(d0[k].name))) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        d0[k].name = NULL; /* the build's */
        for (int j = 0; j < d0[k].n_blocks; j++)
            if (add(&s, d0[k].keys[j], &d0[k].blocks[j]) < 0) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        if (d0[k].n_blocks > max_k)
            max_k = d0[k].n_blocks;
    }
    /* step 2: the analytic choice's key first in each decision's list */
    for (int k = 0; k < n0; k++) {
        int i = find(&s, d0[k].keys[d0[k].picked]);
        s.nodes[k].ix[s.nodes[k].n++] = i;
    }
    st = find_tasks(&s, 0, 0, err);
    for (int r = 1; r < max_k && st == KILN_OK; r++)
        for (int phase = 0; phase < 3 && st == KILN_OK; phase++)
            st = find_tasks(&s, r, phase, err);
    if (st != KILN_OK)
        goto done;
    /* resume: times in the records already */
    if ((st = kiln_driver_block_times(o->records, false, &prev, err)) != KILN_OK)
        goto done;
    for (int i = 0; prev && i < s.n; i++) {
        double us = kiln_layout_time_of(prev, s.c[i].key);
        if (us > 0 && s.c[i].workload && !s.c[i].shared) {
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
    int n_time = 0, n_shared = 0;
    for (int i = 0; i < s.n; i++) {
        n_time += s.c[i].workload != NULL && !s.c[i].shared;
        n_shared += s.c[i].shared;
    }
    fprintf(s.log,
            "[Layout] %d conv%s offered block choices; %d distinct (conv, input block, output "
            "block) tasks to time",
            n0, n0 == 1 ? "" : "s", n_time);
    if (n_shared)
        fprintf(s.log, " (%d more run in a task with another conv: analytic costs)", n_shared);
    fprintf(s.log, "\n");
    /* step 3 */
    int todo = 0;
    for (int k = 0; k < n0; k++) {
        int ix[MAX_NODE_KEYS], nb = 0, untimed = 0;
        for (int j = 0; j < s.nodes[k].n; j++) {
            int i = s.nodes[k].ix[j];
            if (i < 0 || !s.c[i].workload || s.c[i].shared)
                continue;
            ix[nb++] = i;
            untimed += !s.c[i].timed;
        }
        if (nb < 2 || !untimed)
            continue;
        todo++;
        if (budget_s > 0 && now_s() - s.t0 > budget_s)
            continue; /* counted, not timed */
        double t1 = now_s();
        kiln_error e2 = {0};
        if (!time_decision(&s, ix, nb, &e2)) {
            if (e2.status != KILN_OK)
                fprintf(s.log, "[Layout] %s\n", e2.msg);
            continue;
        }
        char names[MAX_NODE_KEYS * 32] = "";
        size_t len = 0;
        for (int j = 0; j < nb && len < sizeof names; j++) {
            char bn[32];
            block_name(&s.c[ix[j]], bn, sizeof bn);
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s %.1f", j ? ", " : "",
                                    bn, s.c[ix[j]].us);
        }
        fprintf(s.log, "[Layout %3d/%3d] %-14s | us: %s | %5.1f s\n", k + 1, n0, s.c[ix[0]].tpl,
                names, now_s() - t1);
        fflush(s.log);
    }
    /* step 4: the DP on the times; the choices it makes that have no time
     * yet (a conv whose input block changed with its producer's choice)
     * are timed beside the conv's analytic choice, and the DP runs again,
     * until every choice it makes has a time (at most MAX_ROUNDS) */
    for (int round = 0;; round++) {
        free(h);
        free(tm);
        h = NULL;
        tm = NULL;
        kiln_build_destroy(b1);
        b1 = NULL;
        if (!(h = hints_of(&s, &tm))) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        if ((st = new_build(&s, h, &b1, err)) != KILN_OK ||
            (st = kiln_build_lower(b1, err)) != KILN_OK)
            goto done;
        if (round == MAX_ROUNDS || (budget_s > 0 && now_s() - s.t0 > budget_s))
            break;
        int nd = 0, more = 0;
        const kiln_layout_decision *dd = kiln_build_layout_decisions(b1, &nd, NULL);
        for (int k = 0; k < nd && k < n0 && st == KILN_OK; k++) {
            int ref = s.nodes[k].ix[0];
            if (strcmp(dd[k].name, s.nodes[k].name) != 0 || ref < 0 || !s.c[ref].timed)
                continue;
            int i = add(&s, dd[k].keys[dd[k].picked], &dd[k].blocks[dd[k].picked]);
            int t = kiln_build_task_of_node(b1, dd[k].name);
            if (i < 0) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            /* a timed choice the DP takes over the analytic one is timed
             * again in a batch of its own, and keeps the slower of its two
             * estimates: a winner must win twice (one batch's 9 rounds
             * moved a conv's 8c / 16c ratio from 1.35 to 0.61 on this
             * machine's noisy phases) */
            bool again = s.c[i].timed && i != ref && !s.c[i].confirmed && !s.c[i].shared;
            if ((s.c[i].timed && !again) || t < 0)
                continue;
            choice *c = &s.c[i];
            if (!again && !set_task(c, b1, t)) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            if (c->shared || s.c[ref].shared)
                continue;
            int ix[2] = {ref, i};
            double before = c->us;
            kiln_error e2 = {0};
            if (time_decision(&s, ix, 2, &e2)) {
                more++;
                if (again) {
                    c->confirmed = true;
                    if (before > c->us) {
                        c->us = before;
                        line(&s, c, "measured");
                    }
                }
                char bn[2][32];
                block_name(&s.c[ref], bn[0], sizeof bn[0]);
                block_name(c, bn[1], sizeof bn[1]);
                fprintf(s.log, "[Layout %3d/%3d] %-14s | us: %s %.1f, %s %.1f (the DP's choice%s) |\n",
                        k + 1, n0, c->tpl, bn[0], s.c[ref].us, bn[1], c->us,
                        again ? ", timed again: the slower estimate" : "");
            } else if (e2.status != KILN_OK) {
                fprintf(s.log, "[Layout] %s\n", e2.msg);
            }
        }
        if (st != KILN_OK)
            goto done;
        if (more == 0)
            break;
    }
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
        double ms[2] = {0, 0}, ratio = 0;
        if (st == KILN_OK)
            st = kiln_tune_time_builds(so, o->num_threads, ms, &ratio, err);
        if (st != KILN_OK)
            goto done;
        /* not slower: the median over KILN_TUNE_E2E_ROUNDS interleaved rounds
         * of the ratio of the two builds' times in the same round */
        sum->layout_speedup = ratio;
        sum->layout_accepted = ratio >= 1.0;
        fprintf(s.log,
                "[Layout] measured times change the blocks of %d conv%s: end to end %.3f ms "
                "against %.3f ms analytic, %.3fx paired: %s; %.1f s\n",
                changed, changed == 1 ? "" : "s", ms[1], ms[0], sum->layout_speedup,
                sum->layout_accepted ? "accepted" : "slower, the analytic choice stays",
                now_s() - s.t0);
    }
    if (sum->layout_accepted)
        for (int i = 0; i < s.n; i++)
            if (s.c[i].timed && !s.c[i].shared)
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
    for (int k = 0; k < s.n_nodes; k++)
        free(s.nodes[k].name);
    free(s.nodes);
    return st;
}
