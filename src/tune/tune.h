/* tune/tune.h: auto-tuning (docs/TUNING.md). Internal to libkiln and the CLI.
 *
 *   fingerprint.c  the CPU fingerprint records carry (vendor, model, ISA
 *                  flags, caches, threads) and the template hash
 *   records.c      tuning records: JSON lines, append-only, flushed per
 *                  batch; reading them back for resume (a corrupt line is
 *                  reported with its number and skipped)
 *   measure.c      one configuration measured in a worker child process
 *                  (fork; a crash or a timeout costs one trial)
 *   search.c       the candidates of the next batch (droplet, ga, random,
 *                  grid) and the acceptance rule
 *   model.c        the template's cost model over the space: ranked once,
 *                  corrected online by the measurements
 *   worker.c       what a remote worker (an MPI rank, tools/kiln/tune_mpi.c)
 *                  does with the requests it is sent: build, measure
 *   tune.c         the tuning run: tasks, budget split, batches, validation,
 *                  progress lines, summary
 */
#ifndef KILN_TUNE_TUNE_H
#define KILN_TUNE_TUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

#define KILN_RECORDS_VERSION 2
#define KILN_TUNE_MAX_KNOBS 16
#define KILN_TUNE_MAX_SAMPLES 64

/* ---- fingerprint ----------------------------------------------------------- */
/* A JSON object {"vendor", "model", "isa": [...], "l1d_kib", "l2_kib",
 * "l3_kib", "threads"} (malloc'ed, compact) and its 16-hex-digit hash. Read
 * from /proc/cpuinfo and /sys/devices/system/cpu; fields that cannot be read
 * are empty or 0. Cached after the first call. */
const char *kiln_cpu_fingerprint_json(void);
const char *kiln_cpu_fingerprint_id(void);
/* Hash of what a template's generated code depends on besides the workload
 * and the knobs: kiln's version, the template's name and the kernel headers
 * compiled into libkiln. 16 hex digits into out[17]. */
void kiln_template_hash(const char *template_name, char out[17]);

/* ---- records ------------------------------------------------------------------ */
/* The shipped records directory `kiln compile` applies by default
 * (docs/TUNING.md, "Shipped records"): $KILN_RECORDS_DIR when set ("" or
 * "none": no shipped records, NULL), else the source tree's records/ or the
 * installed share/kiln/records, whichever exists; NULL when none does. */
const char *kiln_shipped_records_dir(void);

typedef enum {
    KILN_TRIAL_OK,       /* measured; samples valid */
    KILN_TRIAL_ERROR,    /* build or run failed with a message */
    KILN_TRIAL_MISMATCH, /* outputs differ from the reference */
    KILN_TRIAL_CRASH,    /* the worker died (signal) */
    KILN_TRIAL_TIMEOUT,  /* the worker was killed after the timeout */
} kiln_trial_status;
const char *kiln_trial_status_name(kiln_trial_status s);

typedef struct kiln_tune_cfg {
    int n;
    int v[KILN_TUNE_MAX_KNOBS]; /* knob values, in the task's knob order */
} kiln_tune_cfg;

/* One measurement of one configuration. */
typedef struct kiln_trial {
    kiln_tune_cfg cfg;
    kiln_trial_status status;
    int n_samples;
    double samples_us[KILN_TUNE_MAX_SAMPLES];
    int n_dropped; /* samples of slow requests (kiln_tune_drop_slow_requests) */
    double dropped_us[KILN_TUNE_MAX_SAMPLES];
    int n_rounds;  /* rounds of its batch, each one request, all samples kept: */
    double round_us[KILN_TUNE_MAX_SAMPLES]; /* that request's median, by round */
    double max_abs_diff;
    char error[256];
    /* who proposed it (the records' "source"): "default", "pick", "warm",
     * "model", or the tuner ("droplet", "ga", "random", "grid"); NULL: a
     * re-measured incumbent or a validation */
    const char *source;
} kiln_trial;

/* What a records file says about one workload (resume). */
typedef struct kiln_rec_task {
    int n_measured, cap;
    kiln_tune_cfg *measured; /* every configuration measured as a trial, any status */
    bool have_incumbent;     /* an accepted candidate */
    kiln_tune_cfg incumbent; /* the last accepted one */
    bool done;               /* a "tuned" record for this fingerprint and template hash */
    double speedup;          /* of that record */
    kiln_tune_cfg tuned;
} kiln_rec_task;

/* The records of one file for the workloads of a run. */
typedef struct kiln_records kiln_records;

/* Opens `path` for appending (created when absent) and reads what is in it
 * for workloads keys[0..n) with knob names names[i][0..n_knobs[i]) (the
 * order of a configuration). Lines that are not records are reported on
 * `log` with their number and skipped; lines of other fingerprints or
 * template hashes are ignored for resume. */
kiln_status kiln_records_open(const char *path, int n, const char *const *keys,
                              const char *const *templates, const int *n_knobs,
                              const char *const *const *names, FILE *log, kiln_records **out,
                              kiln_error *err);
void kiln_records_close(kiln_records *r);
const kiln_rec_task *kiln_records_task(const kiln_records *r, int i);
int kiln_records_skipped_lines(const kiln_records *r);
/* Appends one line per trial of a batch of task i (role "incumbent" for
 * trials[0] when `incumbent_repeat`, else "candidate"; `accepted` names the
 * trial that became the incumbent, -1 none) and flushes to disk. */
kiln_status kiln_records_append_batch(kiln_records *r, int i, int batch, const kiln_trial *trials,
                                      int n, bool incumbent_repeat, int accepted,
                                      kiln_error *err);
/* Appends the task's validated result: status "tuned", the knobs chosen,
 * their samples and the default's, and speedup = median(default) /
 * median(chosen) (1 when the default is kept). */
kiln_status kiln_records_append_tuned(kiln_records *r, int i, const kiln_trial *chosen,
                                      const kiln_trial *deflt, double speedup, kiln_error *err);

/* Warm start: the configuration of the tuned task nearest to task i (same
 * template, fingerprint and template hash; its workload key equal but for
 * the numbers in it, nearest by the sum of |ln(1+a) - ln(1+b)| over them),
 * from the file or tuned earlier in this run, its knob values moved to the
 * nearest choices of task i's space (block knobs stay). False when there is
 * none or it is the default. */
struct kiln_tune_space;
bool kiln_records_warm_start(const kiln_records *r, int i, const struct kiln_tune_space *sp,
                             kiln_tune_cfg *out, double *distance);

/* ---- measurement ------------------------------------------------------------- */
/* Injected faults (tests): the worker segfaults, hangs, or (die) is killed
 * with SIGKILL: the forked worker, or with MPI the rank serving the trial. */
typedef enum { KILN_FAULT_NONE, KILN_FAULT_SEGV, KILN_FAULT_HANG, KILN_FAULT_DIE } kiln_fault;

typedef struct kiln_measurer kiln_measurer;
/* A measurer for workload w: a worker child is forked on the first measure
 * and again after one died. The caller must not have started threads (the
 * worker is a fork). */
kiln_status kiln_measurer_create(kiln_workload *w, const char *cache_dir, int jobs,
                                 double timeout_s, int num_threads, kiln_measurer **out,
                                 kiln_error *err);
void kiln_measurer_destroy(kiln_measurer *m); /* kills the worker; NULL: no-op */
/* Where a task's weights are before each timed call (kiln_measure_options
 * .cold_weights): 1 (the default) out of every cache, 2 in the last-level
 * cache only. Set before the first measure (the worker is forked then). */
void kiln_measurer_set_cold(kiln_measurer *m, int cold);
/* The level for a network: 2 when its constants take at most half the
 * last-level cache (a run then finds each layer's weights there: mobilenet-
 * v2's 14 MB on a 32 MB L3), else 1 (resnet-50's 100 MB come from memory).
 * kiln_tune_run decides it so from the model; so do the MPI ranks. */
int kiln_tune_cold_level(const kiln_graph *g);
/* Measures configuration `config_json` (repeat samples of at least
 * min_repeat_ms each) into *t (cfg copied from the caller's t->cfg). Never
 * fails the run: a crash, timeout or error is t->status with t->error. */
void kiln_measurer_run(kiln_measurer *m, const char *config_json, int repeat,
                       double min_repeat_ms, kiln_fault fault, kiln_trial *t);

/* ---- workers ------------------------------------------------------------------
 * Where a run builds and measures, when not in its own forked worker: an
 * executor (tools/kiln/tune_mpi.c sends the requests to MPI ranks). build()
 * is called with a batch's new configurations before they are measured (the
 * builds may run in parallel; a failure there is not reported: measure()
 * builds again and reports it); measure() is kiln_measurer_run's contract for
 * task `key`. Both never fail the run. */
#define KILN_TUNE_WORKLOAD_SEED 0x74756e65ULL /* weights of a task built alone */

typedef struct kiln_tune_exec {
    void *ctx;
    const char *name; /* for the header line: "3 MPI ranks (...)" */
    void (*build)(void *ctx, const char *key, const char *const *configs, int n);
    void (*measure)(void *ctx, const char *key, const char *config, int repeat,
                    double min_repeat_ms, kiln_fault fault, kiln_trial *t);
} kiln_tune_exec;

/* The state of a worker that serves requests for one task at a time: the
 * task's workload and its measurer (a forked child), made again when a
 * request names another workload key. */
typedef struct kiln_tune_worker kiln_tune_worker;
kiln_status kiln_tune_worker_create(const char *cache_dir, int jobs, double timeout_s,
                                    int num_threads, kiln_tune_worker **out, kiln_error *err);
void kiln_tune_worker_destroy(kiln_tune_worker *wk); /* NULL: no-op */
/* kiln_measurer_set_cold for the measurers this worker makes (default 1). */
void kiln_tune_worker_set_cold(kiln_tune_worker *wk, int cold);
/* Builds configuration `config` of task `key` into the model cache, in this
 * process (no candidate code runs). Returns the build's status. */
kiln_status kiln_tune_worker_build(kiln_tune_worker *wk, const char *key, const char *config,
                                   kiln_error *err);
/* Measures it in the worker's child (kiln_measurer_run); never fails. */
void kiln_tune_worker_measure(kiln_tune_worker *wk, const char *key, const char *config,
                              int repeat, double min_repeat_ms, kiln_fault fault, kiln_trial *t);

/* ---- search ------------------------------------------------------------------ */
double kiln_tune_median(const double *v, int n);
double kiln_tune_mad(const double *v, int n); /* median absolute deviation */
/* The acceptance rule: challenger c beats incumbent i when
 * median(c) < median(i) - max(2% of median(i), 2 x max(MAD(i), MAD(c))),
 * and, when both carry the same rounds (n_rounds >= 2), the median over
 * the rounds of round_us(c) / round_us(i), each pair taken side by side,
 * is below 0.98: a challenger that looks faster only because the
 * incumbent's requests fell in a slow phase is not taken. */
bool kiln_tune_beats(const kiln_trial *c, const kiln_trial *i);
/* t's samples are n_req requests' in order, request r holding req_len[r] of
 * them. A request whose median exceeds KILN_TUNE_SLOW_REQUEST x the median
 * of t's fastest request ran at a fraction of the machine (on the 2-vCPU
 * VMs whole requests read twice their time, the two threads at one's
 * speed, in phases: docs/TUNING.md): its samples move to t->dropped_us,
 * before the rule compares. The fastest request always stays. Returns the
 * number of requests dropped. */
#define KILN_TUNE_SLOW_REQUEST 1.5
int kiln_tune_drop_slow_requests(kiln_trial *t, const int *req_len, int n_req);

/* A task's knob space: the knobs of kind "block" are fixed (a model decides
 * them with the neighbouring kernels), as are knobs with one choice. */
typedef struct kiln_tune_space {
    int n;
    int n_choices[KILN_TUNE_MAX_KNOBS];
    int choices[KILN_TUNE_MAX_KNOBS][16];
    bool fixed[KILN_TUNE_MAX_KNOBS];
    kiln_tune_cfg deflt;
} kiln_tune_space;

/* Search state of one task. */
#define KILN_TUNE_ELITE 12
typedef struct kiln_tune_search {
    int radius;    /* droplet: the distance tried next (1 after a move) */
    uint64_t grid; /* grid: the next index in mixed radix */
    uint64_t rng;  /* random and ga: generator state */
    /* ga's parents: the fastest configurations measured (kiln_tune_observe),
     * their times relative to the default's */
    int n_elite;
    kiln_tune_cfg elite[KILN_TUNE_ELITE];
    double elite_rel[KILN_TUNE_ELITE];
} kiln_tune_search;

/* Tells the search that configuration c ran at `rel` times the default's
 * time (paired: its median over the incumbent's in the same batch, times
 * the incumbent's own figure). Keeps the KILN_TUNE_ELITE fastest, a
 * configuration observed again taking its latest figure; ga breeds from
 * them, the other tuners ignore them. */
void kiln_tune_observe(kiln_tune_search *st, const kiln_tune_cfg *c, double rel);

bool kiln_tune_cfg_equal(const kiln_tune_cfg *a, const kiln_tune_cfg *b);
/* The index of value v among knob k's choices, -1 when it is none. */
int kiln_tune_choice_index(const kiln_tune_space *sp, int k, int v);
/* Whether the search may move knob k: not a block knob, several choices. */
bool kiln_tune_knob_tunable(const kiln_tune_space *sp, int k);
/* Up to `want` configurations to measure next around `incumbent`, none of
 * them in seen[0..n_seen) nor the incumbent: droplet (coordinate descent
 * over neighbouring choices: distance 1 on each knob, then 2, 3 ..., then
 * pairs of knobs at distance 1), ga (children of the observed elite:
 * parents by binary tournament, uniform crossover, each knob mutated with
 * probability 1 / tunable knobs; random draws while fewer than two are
 * observed), random (uniform over the space) or grid (the space in
 * order). Returns how many; 0: the space is exhausted. */
int kiln_tune_next(const kiln_tune_space *sp, const char *tuner, kiln_tune_search *st,
                   const kiln_tune_cfg *incumbent, const kiln_tune_cfg *seen, int n_seen,
                   int want, kiln_tune_cfg *out);
int64_t kiln_tune_space_size(const kiln_tune_space *sp); /* tunable configurations */
/* Task i's knob space (kiln_tasks_knob, at most KILN_TUNE_MAX_KNOBS knobs and
 * 16 choices each; "block" knobs fixed); names[k] gets knob k's name
 * (valid while ts lives) unless names is NULL. */
kiln_status kiln_tune_space_of(const kiln_tasks *ts, int i, kiln_tune_space *sp,
                               const char **names, kiln_error *err);

/* ---- the cost model (model.c) --------------------------------------------------
 * A template's analytic model over a task's space, ranked once and
 * corrected online by what is measured (docs/TUNING.md, "The cost model").
 * cost(ctx, v, &c): the model's time at knob values v (the space's order);
 * false when it has none (kiln_workload_cost is one). */
typedef bool (*kiln_tune_cost_fn)(void *ctx, const int *v, double *cost);
typedef struct kiln_tune_model kiln_tune_model;
/* Evaluates cost over sp (the whole space, or the configurations at most
 * two knobs from the default when it holds more than 262,144) and keeps the
 * ranking; NULL when the model fails on the default. sp must outlive the
 * model. */
kiln_tune_model *kiln_tune_model_create(const kiln_tune_space *sp, kiln_tune_cost_fn cost,
                                        void *ctx);
void kiln_tune_model_destroy(kiln_tune_model *m); /* NULL: no-op */
typedef struct kiln_tune_model_info {
    int64_t evaluated; /* configurations the ranking evaluated */
    int default_rank;  /* the default's place in the model's ranking (1: first) */
    double best_pred;  /* the first's predicted time over the default's */
    int observed;      /* measurements fitted */
    double b;          /* the fit's weight of the model's own prediction (1: trusted as is) */
} kiln_tune_model_info;
void kiln_tune_model_stats(const kiln_tune_model *m, kiln_tune_model_info *info);
/* Configuration c measured at `rel` times the default's time (paired, as
 * kiln_tune_observe); refits the correction. */
void kiln_tune_model_observe(kiln_tune_model *m, const kiln_tune_cfg *c, double rel);
/* The corrected prediction of c's time over the default's (0: none). */
double kiln_tune_model_predict(const kiln_tune_model *m, const kiln_tune_cfg *c);
/* Up to `want` (at most 16) configurations of the ranking, neither the
 * incumbent nor seen, whose corrected prediction is below 0.98 x inc_rel
 * (the incumbent's time over the default's), best first. NULL model: 0. */
int kiln_tune_model_next(const kiln_tune_model *m, double inc_rel, const kiln_tune_cfg *inc,
                         const kiln_tune_cfg *seen, int n_seen, int want, kiln_tune_cfg *out);

/* ---- the run ----------------------------------------------------------------- */
/* The rounds of an end-to-end A/B: at least 20, as issue #13's bar asks of
 * its interleaved A/B; 11 left a 1-5% call to a shared machine's phases
 * (resnet-50 tuned / untuned read 0.968x in 11 rounds and 1.053x in 20). */
#define KILN_TUNE_E2E_ROUNDS 21

/* Two builds of one model timed end to end: KILN_TUNE_E2E_ROUNDS
 * interleaved rounds in alternating order, one module loaded at a time, seeded inputs; ms[k]
 * receives the median of so[k] in milliseconds, *ratio the median over the
 * rounds of so[0]'s time over so[1]'s in the same round (the two timed
 * back to back, so a slow phase of the machine slows both). */
kiln_status kiln_tune_time_builds(char *const so[2], int num_threads, double ms[2], double *ratio,
                                  kiln_error *err);

typedef struct kiln_tune_options {
    const char *records;     /* required */
    double time_budget_s;    /* 0: none (then trials bounds each task) */
    int trials;              /* per task; 0: 32 when no time budget, else unbounded */
    const char *tuner;       /* "droplet" (default), "ga", "random", "grid" */
    const char *tasks;       /* NULL: all; else a comma list of task numbers/ranges
                                ("1,3-5") or a substring of template or key */
    int workers;             /* 1 (N > 1 local workers: not available) */
    const kiln_tune_exec *exec; /* NULL: measure in this process's forked worker */
    const char *target;      /* NULL: the host */
    const char *cache_dir;
    int jobs;
    uint64_t seed;           /* zoo weights */
    double timeout_s;        /* per measurement (build + run); 0: 60 */
    int batch;               /* candidates per batch; 0: 4 */
    int rounds;              /* interleaved rounds per batch; 0: 3 */
    int num_threads;         /* 0: the runtime's default */
    bool skip_e2e;           /* no end-to-end A/B at the end */
    bool skip_layouts;       /* no layout stage (block choices timed) */
    bool layouts_only;       /* the layout stage alone: no task's knobs tuned */
    bool no_warm_start;      /* do not try the nearest tuned task's configuration */
    int cold_weights;        /* 0: kiln_tune_cold_level of the model; 1 or 2: that level
                                (kiln_measurer_set_cold) */
    FILE *log;               /* progress lines (NULL: stderr) */
} kiln_tune_options;

typedef struct kiln_tune_summary {
    int tasks, tunable, tuned, improved, resumed, skipped;
    int trials, failed;
    int slow_requests; /* measurement requests dropped as slow (kiln_tune_drop_slow_requests) */
    double seconds;
    double est_gain;     /* estimated end-to-end speedup from the tasks' times */
    double e2e_speedup;  /* measured: the paired median of untuned/tuned time per round
                            (kiln_tune_time_builds; 0: not measured) */
    double e2e_untuned_ms, e2e_tuned_ms;
    /* the layout stage (layouts.c) */
    int layout_convs;       /* convs offered block choices */
    int layout_measured;    /* of them, with every choice timed */
    int layout_changed;     /* convs whose block the measured times changed */
    bool layout_accepted;   /* the measured choice validated: its block lines are tuned */
    double layout_speedup;  /* its end-to-end A/B, paired (0: not timed) */
} kiln_tune_summary;

/* The layout stage (docs/TUNING.md, "Graph-level layout choice"): every
 * block choice of every conv of g timed as its task, interleaved with the
 * conv's other choices; alter-layout's DP run on those times; a choice that
 * differs from the analytic one timed end to end against it; block lines
 * written (status "measured", then "tuned" when the choice is not slower).
 * budget_s 0: no limit. Fills the layout fields of *sum. */
kiln_status kiln_tune_layouts(const kiln_graph *g,
                              const kiln_tune_options *o, int cold, double budget_s, FILE *log,
                              kiln_tune_summary *sum, kiln_error *err);

/* Tunes model (a zoo name or .onnx path) into opts->records. Progress on
 * opts->log. A candidate's crash, timeout or mismatch costs one trial. */
kiln_status kiln_tune_run(const char *model, const kiln_tune_options *opts,
                          kiln_tune_summary *sum, kiln_error *err);

#endif
