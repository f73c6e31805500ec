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
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_PEAK_X86 1
#endif

#include "report/report.h"

#define ITERS 16000000L
#define TRIES 5
#define ACC 12
#define PAIR_RETRIES 3    /* re-measurements of n threads that did not scale */
#define PAIR_SCALING 1.3  /* n threads below this x one thread: did not scale */

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

/* Whether cpu0 shares its core with another logical CPU (SMT siblings:
 * "0,8" or "0-1" in sysfs); unknown counts as shared. */
static bool smt_siblings(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "r");
    if (!f)
        return true;
    char line[64] = "";
    bool shared = !fgets(line, sizeof line, f) || strpbrk(line, ",-") != NULL;
    fclose(f);
    return shared;
}

void kiln_peak_measure_pair(int threads, double *peak, double *peak1, char *how, size_t size)
{
    *peak = kiln_peak_measure(threads, how, size);
    *peak1 = threads > 1 ? kiln_peak_measure(1, NULL, 0) : *peak;
    if (threads < 2 || *peak1 <= 0)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus > 0 && cpus < threads ? (int)cpus : threads;
    if (n < 2)
        return;
    /* Threads on cores of their own scale an FMA loop ~n-fold. On a VM
     * whose vCPUs share a physical core for a while (a slow phase), n
     * threads read no more than one: every "% of peak" would then be
     * measured against half the machine, and kernels timed in a calm phase
     * would show over 100%. Such a reading is retried after a pause. */
    for (int r = 0; r < PAIR_RETRIES && *peak < PAIR_SCALING * *peak1; r++) {
        nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
        double again = kiln_peak_measure(threads, NULL, 0);
        if (again > *peak)
            *peak = again;
    }
    if (*peak >= PAIR_SCALING * *peak1 || smt_siblings())
        return;
    /* Still not scaling, and each CPU is a core of its own (no SMT
     * sibling): the cores exist, so the peak is n times one thread's. */
    double measured = *peak;
    *peak = n * *peak1;
    if (how && size) {
        size_t len = strlen(how);
        snprintf(how + len, size - len,
                 "; %d threads read %.1f GFLOP/s, under %.1fx one thread, in %d tries: "
                 "taken as %d x one thread",
                 threads, measured, PAIR_SCALING, 1 + PAIR_RETRIES, n);
    }
}
