/* runtime/profile.h: instrumented runs for the per-operator profiler
 * (private to kiln: tools/kiln/cmd_profile.c and the tests use it).
 *
 * An instrumented run executes exactly the steps of kiln_module_run, in the
 * same order with the same arguments, and reads CLOCK_MONOTONIC before and
 * after every step into a buffer the caller allocated beforehand: nothing is
 * allocated, printed or looked up during the runs. kiln_module_run itself has
 * no hook, so a module that is not being profiled pays nothing.
 *
 * Stamp layout, in nanoseconds of CLOCK_MONOTONIC, KILN_PROFILE_STAMPS(n)
 * int64 per run, runs back to back:
 *     [0]            the run starts
 *     [1 + 2 s]      step s starts        (s = 0 .. n - 1)
 *     [2 + 2 s]      step s ends
 *     [2 n + 1]      the run ends
 */
#ifndef KILN_RUNTIME_PROFILE_H
#define KILN_RUNTIME_PROFILE_H

#include <stdint.h>

#include "kiln/runtime.h"

#define KILN_PROFILE_STAMPS(n_steps) (2 * (int64_t)(n_steps) + 2)

/* `runs` instrumented runs of the module; `stamps` holds
 * runs * KILN_PROFILE_STAMPS(kiln_module_num_steps(m)) entries. */
kiln_status kiln_module_profile(kiln_module *m, int runs, int64_t *stamps, kiln_error *err);

/* The same over any stepwise executor (the reference executor): run_step(ctx,
 * s, err) runs step s; a failing step stops the profile with its status. */
typedef kiln_status (*kiln_profile_step_fn)(void *ctx, int step, kiln_error *err);
kiln_status kiln_profile_steps(kiln_profile_step_fn run_step, void *ctx, int n_steps, int runs,
                               int64_t *stamps, kiln_error *err);

/* Cost of one CLOCK_MONOTONIC read in nanoseconds (median of a few batches). */
double kiln_profile_clock_ns(void);

/* Workers of the module's pool pinned to cores (0: binding off). */
int kiln_module_num_bound(const kiln_module *m);

#endif
