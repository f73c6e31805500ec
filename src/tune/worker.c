/* tune/worker.c: what a remote tuning worker does with its requests (an MPI
 * rank: tools/kiln/tune_mpi.c; docs/TUNING.md, "Workers over MPI").
 *
 * A worker serves one task at a time: the task's small graph
 * (kiln_workload_create with the tuner's seed, so every rank builds the same
 * weights) and a measurer whose forked child measures, so that a crashing or
 * hanging candidate costs one trial and never the rank. A request for
 * another workload key replaces both. Builds run in this process: they only
 * generate and compile code (no candidate code runs), and put the small model
 * into the model cache, where the measuring child finds it. */
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"
#include "util/error.h"

struct kiln_tune_worker {
    char *cache_dir;
    int jobs, num_threads;
    int cold; /* kiln_measurer_set_cold of its measurers */
    double timeout_s;
    char *key;
    kiln_workload *w;
    kiln_measurer *m;
};

kiln_status kiln_tune_worker_create(const char *cache_dir, int jobs, double timeout_s,
                                    int num_threads, kiln_tune_worker **out, kiln_error *err)
{
    kiln_tune_worker *wk = calloc(1, sizeof *wk);
    if (!wk || (cache_dir && !(wk->cache_dir = strdup(cache_dir)))) {
        free(wk);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    wk->jobs = jobs;
    wk->num_threads = num_threads;
    wk->cold = 1;
    wk->timeout_s = timeout_s;
    *out = wk;
    return KILN_OK;
}

static void drop_task(kiln_tune_worker *wk)
{
    kiln_measurer_destroy(wk->m);
    kiln_workload_destroy(wk->w);
    free(wk->key);
    wk->m = NULL;
    wk->w = NULL;
    wk->key = NULL;
}

void kiln_tune_worker_destroy(kiln_tune_worker *wk)
{
    if (!wk)
        return;
    drop_task(wk);
    free(wk->cache_dir);
    free(wk);
}

void kiln_tune_worker_set_cold(kiln_tune_worker *wk, int cold)
{
    if (wk)
        wk->cold = cold == 2 ? 2 : 1;
}

/* The workload and measurer of `key`, made when another key was served. */
static kiln_status use_task(kiln_tune_worker *wk, const char *key, kiln_error *err)
{
    if (wk->key && !strcmp(wk->key, key) && wk->m)
        return KILN_OK;
    drop_task(wk);
    if (!(wk->key = strdup(key)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_status s = kiln_workload_create(key, KILN_TUNE_WORKLOAD_SEED, &wk->w, err);
    if (s == KILN_OK)
        s = kiln_measurer_create(wk->w, wk->cache_dir, wk->jobs, wk->timeout_s, wk->num_threads,
                                 &wk->m, err);
    if (s == KILN_OK)
        kiln_measurer_set_cold(wk->m, wk->cold);
    if (s != KILN_OK)
        drop_task(wk);
    return s;
}

kiln_status kiln_tune_worker_build(kiln_tune_worker *wk, const char *key, const char *config,
                                   kiln_error *err)
{
    kiln_status s = use_task(wk, key, err);
    if (s != KILN_OK)
        return s;
    kiln_measure_options mo = {.config = config,
                               .cache_dir = wk->cache_dir,
                               .jobs = wk->jobs,
                               .num_threads = wk->num_threads,
                               .build_only = 1};
    kiln_measure_result *r = calloc(1, sizeof *r);
    if (!r)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    s = kiln_workload_measure(wk->w, &mo, r, err);
    free(r);
    return s;
}

void kiln_tune_worker_measure(kiln_tune_worker *wk, const char *key, const char *config,
                              int repeat, double min_repeat_ms, kiln_fault fault, kiln_trial *t)
{
    kiln_error err = {0};
    t->n_samples = 0;
    t->max_abs_diff = 0;
    t->error[0] = 0;
    if (use_task(wk, key, &err) != KILN_OK) {
        t->status = KILN_TRIAL_ERROR;
        snprintf(t->error, sizeof t->error, "%.250s", err.msg);
        return;
    }
    kiln_measurer_run(wk->m, config, repeat, min_repeat_ms, fault, t);
}
