/* runtime/profile.c: instrumented runs (see profile.h).
 *
 * The module loop is kiln_module_run's loop with a clock read between steps:
 *     stamp run start
 *     for each step: stamp, fn(args, rt), stamp
 *     stamp run end
 * Two reads per step keep the kernel's own time apart from the time between
 * kernels (the loop, the reads themselves), so the report can show both. A
 * read of CLOCK_MONOTONIC goes through the vDSO (tens of nanoseconds); the
 * overhead estimate the report prints is kiln_profile_clock_ns() times the
 * number of reads. */
#include <stdlib.h>
#include <time.h>

#include "runtime/module_internal.h"
#include "runtime/profile.h"
#include "util/error.h"

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

kiln_status kiln_module_profile(kiln_module *m, int runs, int64_t *stamps, kiln_error *err)
{
    if (!m || !stamps || runs < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_module_profile: NULL argument or runs < 1");
    const int n = m->desc->n_steps;
    int64_t *t = stamps;
    for (int r = 0; r < runs; r++) {
        *t++ = now_ns();
        for (int s = 0; s < n; s++) {
            *t++ = now_ns();
            kiln_status st = kiln_module_exec_step(m, s, err);
            if (st != KILN_OK)
                return st;
            *t++ = now_ns();
        }
        *t++ = now_ns();
    }
    return KILN_OK;
}

kiln_status kiln_profile_steps(kiln_profile_step_fn run_step, void *ctx, int n_steps, int runs,
                               int64_t *stamps, kiln_error *err)
{
    if (!run_step || !stamps || runs < 1 || n_steps < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_profile_steps: NULL argument or runs < 1");
    int64_t *t = stamps;
    for (int r = 0; r < runs; r++) {
        *t++ = now_ns();
        for (int s = 0; s < n_steps; s++) {
            *t++ = now_ns();
            kiln_status st = run_step(ctx, s, err);
            if (st != KILN_OK)
                return st;
            *t++ = now_ns();
        }
        *t++ = now_ns();
    }
    return KILN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kiln_profile_clock_ns(void)
{
    enum { BATCHES = 9, READS = 2000 };
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        int64_t t0 = now_ns(), last = t0;
        for (int i = 0; i < READS; i++)
            last = now_ns();
        per[b] = (double)(last - t0) / READS;
    }
    qsort(per, BATCHES, sizeof *per, cmp_double);
    return per[BATCHES / 2];
}

int kiln_module_num_bound(const kiln_module *m)
{
    return m ? kiln_pool_num_bound(m->pool) : 0;
}
