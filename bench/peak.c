/* bench/peak.c: the measured FP32 peak of this machine: a register-only
 * AVX-512 FMA loop (NACC independent accumulators, no memory traffic) on 1
 * and 2 threads; prints GFLOP/s (median, min, max of the repetitions).
 * kiln_bench_peak() is also used by bench_conv.c for "fraction of peak". */
#ifndef KILN_BENCH_PEAK_NO_MAIN
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define NACC 16
#define PEAK_ITERS 20000000LL

static double peak_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Returns FLOPs done; keeps the result live through *sink. */
static double peak_loop(long long iters, float *sink)
{
#ifdef __AVX512F__
    __m512 acc[NACC];
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < NACC; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (long long it = 0; it < iters; it++) {
        _Pragma("GCC unroll 16") for (int i = 0; i < NACC; i++) acc[i] =
            _mm512_fmadd_ps(acc[i], a, b);
        __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]));
    }
    __m512 s = acc[0];
    for (int i = 1; i < NACC; i++)
        s = _mm512_add_ps(s, acc[i]);
    *sink = _mm512_reduce_add_ps(s);
    return 2.0 * 16 * NACC * (double)iters;
#else
    float acc[NACC * 8];
    for (int i = 0; i < NACC * 8; i++)
        acc[i] = (float)i;
    for (long long it = 0; it < iters; it++)
        for (int i = 0; i < NACC * 8; i++)
            acc[i] = acc[i] * 0.999999f + 1e-7f;
    float s = 0;
    for (int i = 0; i < NACC * 8; i++)
        s += acc[i];
    *sink = s;
    return 2.0 * 8 * NACC * (double)iters;
#endif
}

typedef struct peak_arg {
    long long iters;
    double flops;
    float sink;
} peak_arg;

static void *peak_thread(void *p)
{
    peak_arg *a = p;
    a->flops = peak_loop(a->iters, &a->sink);
    return NULL;
}

/* GFLOP/s on `threads` threads (1 or 2), one measurement. */
static double peak_once(int threads, long long iters)
{
    pthread_t th[8];
    peak_arg args[8];
    double t0 = peak_now();
    for (int i = 1; i < threads; i++) {
        args[i].iters = iters;
        pthread_create(&th[i], NULL, peak_thread, &args[i]);
    }
    args[0].iters = iters;
    peak_thread(&args[0]);
    for (int i = 1; i < threads; i++)
        pthread_join(th[i], NULL);
    double t = peak_now() - t0, f = 0;
    for (int i = 0; i < threads; i++)
        f += args[i].flops;
    return f / t * 1e-9;
}

static int peak_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of `reps` measurements; mn and mx get the extremes (may be NULL). */
static double kiln_bench_peak(int threads, int reps, double *mn, double *mx)
{
    double v[64];
    if (reps > 64)
        reps = 64;
    peak_once(threads, PEAK_ITERS / 10); /* warm-up, frequency ramp; short reps: the max
                                            * of many is robust to a shared machine */
    for (int i = 0; i < reps; i++)
        v[i] = peak_once(threads, PEAK_ITERS / 40);
    qsort(v, (size_t)reps, sizeof v[0], peak_cmp);
    if (mn)
        *mn = v[0];
    if (mx)
        *mx = v[reps - 1];
    return v[reps / 2];
}

#ifndef KILN_BENCH_PEAK_NO_MAIN
int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 11;
    for (int t = 1; t <= 2; t++) {
        double mn, mx, med = kiln_bench_peak(t, reps, &mn, &mx);
        printf("peak fp32 %d thread%s: %.1f GFLOP/s (median of %d; min %.1f, max %.1f)\n", t,
               t > 1 ? "s" : " ", med, reps, mn, mx);
    }
    return 0;
}
#endif
