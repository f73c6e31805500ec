/* bench/peak.c: the measured FP32 peak of this machine on 1 and 2 threads,
 * as the profiler and bench/compare.py measure it (kiln_peak_measure in
 * src/report/peak.c: a register-only FMA loop, no memory traffic, threads
 * started together, best of five tries). Prints GFLOP/s of each of REPS
 * such measurements' median, min and max. */
#include <stdio.h>
#include <stdlib.h>

#include "report/report.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 64)
        reps = 5;
    char how[128] = "";
    for (int t = 1; t <= 2; t++) {
        double v[64];
        for (int i = 0; i < reps; i++)
            v[i] = kiln_peak_measure(t, how, sizeof how);
        qsort(v, (size_t)reps, sizeof v[0], cmp_double);
        printf("peak fp32 %d thread%s: %.1f GFLOP/s (median of %d; min %.1f, max %.1f; %s)\n", t,
               t > 1 ? "s" : " ", v[reps / 2], reps, v[0], v[reps - 1], how);
    }
    return 0;
}
