/* report/peak.c: the machine's FP32 peak for "fraction of peak": a
 * register-only loop of independent FMAs (12 accumulators, enough to cover
 * the FMA latency on two ports), on `threads` threads started together, each
 * doing a fixed number of iterations; GFLOP/s = all FMAs x 2 x lanes / wall
 * time. AVX-512 when the CPU has it (compiled with a target attribute, picked
 * at run time), else AVX2+FMA, else a scalar loop. The threads meet at a
 * spinning barrier before the clock starts, so a vCPU that the hypervisor has
 * to wake up first does not count as slow FMAs; each try lasts about 20 ms
 * and the best of five is kept (a busy moment only lowers a reading). */
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_PEAK_X86 1
#endif

#include "report/report.h"

#define ITERS 16000000L
#define TRIES 5
#define ACC 12

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile float g_sink; /* keeps the results alive; written once per loop */

#ifdef KILN_PEAK_X86
__attribute__((target("avx512f"))) static void loop_avx512(long iters)
{
    __m512 a[ACC];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < ACC; k++)
        a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < ACC; k++)
            a[k] = _mm512_fmadd_ps(a[k], m, c);
    __m512 s = a[0];
    for (int k = 1; k < ACC; k++)
        s = _mm512_add_ps(s, a[k]);
    g_sink = _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static void loop_avx2(long iters)
{
    __m256 a[ACC];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < ACC; k++)
        a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < ACC; k++)
            a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 s = a[0];
    for (int k = 1; k < ACC; k++)
        s = _mm256_add_ps(s, a[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    g_sink = out[0] + out[7];
}
#endif

static void loop_scalar(long iters)
{
    float a[ACC];
    for (int k = 0; k < ACC; k++)
        a[k] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < ACC; k++)
            a[k] = a[k] * 0.999999f + 1e-7f;
    float s = 0;
    for (int k = 0; k < ACC; k++)
        s += a[k];
    g_sink = s;
}

typedef struct peak_job {
    void (*fn)(long);
    long iters;
    atomic_int arrived; /* threads spinning at the start line */
    int threads;
} peak_job;

/* every thread spins here until all have arrived: all are running when the
 * caller reads the clock */
static void spin_start(peak_job *j)
{
    atomic_fetch_add(&j->arrived, 1);
    while (atomic_load(&j->arrived) < j->threads)
        ;
}

static void *worker(void *p)
{
    peak_job *j = p;
    spin_start(j);
    j->fn(j->iters);
    return NULL;
}

/* seconds for `threads` threads (the caller is one) to run `iters` each */
static double timed(void (*fn)(long), long iters, int threads)
{
    pthread_t tid[256];
    if (threads > 256)
        threads = 256;
    peak_job job = {fn, iters, 0, threads};
    int started = 1;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, worker, &job) != 0)
            break;
    if (started < threads) { /* could not start them all: release the others */
        atomic_fetch_add(&job.arrived, 1 + threads - started); /* the caller and the missing */
        for (int t = 1; t < started; t++)
            pthread_join(tid[t], NULL);
        return -1;
    }
    spin_start(&job);
    double t0 = now_s();
    fn(iters);
    for (int t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);
    return now_s() - t0;
}

double kiln_peak_measure(int threads, char *how, size_t size)
{
    void (*fn)(long) = loop_scalar;
    int lanes = 1;
    const char *name = "scalar FMA loop";
#ifdef KILN_PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        fn = loop_avx512;
        lanes = 16;
        name = "AVX-512 FMA loop";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        fn = loop_avx2;
        lanes = 8;
        name = "AVX2 FMA loop";
    }
#endif
    if (threads < 1)
        threads = 1;
    long iters = lanes == 1 ? ITERS / 8 : ITERS / (lanes / 8 > 0 ? lanes / 8 : 1);
    double best = 0;
    for (int t = 0; t < TRIES; t++) {
        double dt = timed(fn, iters, threads);
        if (dt <= 0)
            continue;
        double gf = (double)iters * ACC * 2.0 * lanes * threads / dt / 1e9;
        if (gf > best)
            best = gf;
    }
    if (how && size)
        snprintf(how, size, "measured: %s, %d thread%s, 12 accumulators", name, threads,
                 threads == 1 ? "" : "s");
    return best;
}
