/* report/profile_run.h: the profiler's measurement, shared by `kiln profile`
 * (tools/kiln/cmd_profile.c, graph or reference executor) and the library
 * calls kiln_profile_module (include/kiln/profile.h) and kiln_vm_profile
 * (vm/vm.h). Private to kiln.
 *
 * Warm-up runs, then `repeat` rounds of a share of the instrumented runs and
 * one bench measurement (number N, repeat 1), so that both see the same
 * machine state; the counts the caller did not set adapt to the model's speed:
 * fast models get more instrumented runs (about FAST_RUNS_MS of them, at most
 * 500), models slower than 200 ms a run get fewer runs and a bench of
 * number 1, to keep the whole near 20 s. Fills the report's step times, Sum,
 * Total and bench figures (kiln_report_from_stamps); its steps must be
 * described already. */
#ifndef KILN_REPORT_PROFILE_RUN_H
#define KILN_REPORT_PROFILE_RUN_H

#include <stdint.h>

#include "kiln/profile.h"
#include "kiln/runtime.h"
#include "report/report.h"

#define KILN_PROFILE_DEFAULT_RUNS 20
#define KILN_PROFILE_DEFAULT_WARMUP 3
#define KILN_PROFILE_DEFAULT_BENCH_NUMBER 10
#define KILN_PROFILE_DEFAULT_BENCH_REPEAT 5

/* What is profiled: one whole run, `runs` instrumented runs into `stamps`
 * (runtime/profile.h layout), one bench measurement. */
typedef struct kiln_profile_target {
    void *ctx;
    kiln_status (*run)(void *ctx, kiln_error *err);
    kiln_status (*profile)(void *ctx, int runs, int64_t *stamps, kiln_error *err);
    kiln_status (*bench)(void *ctx, const kiln_bench_options *opts, kiln_bench_result *out,
                         kiln_error *err);
} kiln_profile_target;

/* The counts; set_* say which the caller chose (the others adapt). */
typedef struct kiln_profile_plan {
    int runs, warmup, number, repeat, no_bench;
    int set_runs, set_number, set_repeat;
} kiln_profile_plan;

kiln_status kiln_profile_measure(const kiln_profile_target *t, kiln_profile_plan *plan,
                                 kiln_report *r, kiln_error *err);

/* Describes what ctx runs into r: its configuration (model, named `model`
 * or the default name; executor, target, threads, ...) and its steps. */
typedef kiln_status (*kiln_profile_describe_fn)(void *ctx, const char *model, kiln_report *r,
                                                kiln_error *err);

/* kiln_profile_module for any target (the VM's kiln_vm_profile too): checks
 * opts (`what` names the caller in the message), describes, measures the
 * FMA peak (unless given), then kiln_profile_measure; *out owns the report. */
kiln_status kiln_profile_target_run(const kiln_profile_target *t, kiln_profile_describe_fn desc,
                                    const kiln_profile_options *opts, const char *what,
                                    kiln_profile **out, kiln_error *err);

#endif
