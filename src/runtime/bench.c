/* runtime/bench.c: the time evaluator, with TVM's time_evaluator semantics.
 *
 *   run once (warm-up, not timed)
 *   for each of `repeat` measurements:
 *       [flush the caches]
 *       time `number` back-to-back runs (CLOCK_MONOTONIC)
 *       while that took less than min_repeat_ms: grow number to
 *           max(min_repeat_ms / (time per run) + 1, number * 1.618)
 *           and measure again ([flush] first); the grown number is kept for
 *           the following measurements, as in TVM
 *       result = time / number
 *       [sleep cooldown_ms, except after the last]
 *   mean, median, min, max, std (population, as numpy.std) over the results.
 *
 * The cache flush writes over a buffer of twice the L2 + last-level cache,
 * allocated once per benchmark (never inside a timed region).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln/runtime.h"
#include "runtime/module_internal.h"
#include "util/error.h"

#define GOLDEN_RATIO 1.618
#define MAX_NUMBER (INT_MAX / 2)
#define ZERO_TIME_LIMIT 100 /* TVM's limit_zero_time_iterations */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static long cache_size_from_sys(int level)
{
    long total = 0;
    for (int idx = 0; idx < 16; idx++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        int lv = 0;
        int ok = fscanf(f, "%d", &lv) == 1;
        fclose(f);
        if (!ok || lv != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            long v = strtol(buf, &end, 10);
            if (*end == 'K')
                v *= 1024;
            else if (*end == 'M')
                v *= 1024 * 1024;
            if (v > total)
                total = v;
        }
        fclose(f);
    }
    return total;
}

/* /sys first: it gives the cache CPU 0 uses (an AMD EPYC VM's L3 is its
 * CCD's 32 MiB), where glibc's sysconf reads CPUID leaves that on such a VM
 * add up the host's L3 (384 MiB): a network of 100 MB of weights then
 * "fitted" the LLC, and the tuner timed its convs with their weights in the
 * LLC where the network reads them from memory. */
long kiln_cache_bytes(int level)
{
    long v = cache_size_from_sys(level);
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (v <= 0 && level == 2)
        v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    else if (v <= 0 && level == 3)
        v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return v > 0 ? v : 0;
}

/* Bytes to write over to evict the caches: 2 x (L2 + LLC), at least 8 MiB and
 * at most 1 GiB. */
static size_t flush_bytes(void)
{
    long l2 = kiln_cache_bytes(2), l3 = kiln_cache_bytes(3);
    long long total = 2LL * ((l2 > 0 ? l2 : 0) + (l3 > 0 ? l3 : 0));
    if (total < (8LL << 20))
        total = 8LL << 20;
    if (total > (1LL << 30))
        total = 1LL << 30;
    return (size_t)total;
}

static void flush_caches(unsigned char *buf, size_t n, unsigned salt)
{
    memset(buf, (int)(salt & 0xff), n);
    __asm__ __volatile__("" : : "r"(buf) : "memory"); /* the writes are observable */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

kiln_status kiln_bench_function(kiln_bench_fn fn, void *ctx, int threads,
                                const kiln_bench_options *opts, kiln_bench_result *out,
                                kiln_error *err)
{
    if (!fn || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bench: NULL argument");
    kiln_bench_options o = {.number = 1, .repeat = 3};
    if (opts) {
        o = *opts;
        if (o.number == 0)
            o.number = 1;
        if (o.repeat == 0)
            o.repeat = 3;
    }
    if (o.number < 1 || o.number > MAX_NUMBER)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bench: number %d is not in 1..%d",
                           o.number, MAX_NUMBER);
    if (o.repeat < 1 || o.repeat > KILN_BENCH_MAX_REPEAT)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bench: repeat %d is not in 1..%d",
                           o.repeat, KILN_BENCH_MAX_REPEAT);
    if (!(o.min_repeat_ms >= 0) || !isfinite(o.min_repeat_ms) || o.min_repeat_ms > 3.6e6)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "bench: min_repeat_ms %g is not in 0..3600000", o.min_repeat_ms);
    if (!(o.cooldown_ms >= 0) || !isfinite(o.cooldown_ms) || o.cooldown_ms > 3.6e6)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "bench: cooldown_ms %g is not in 0..3600000", o.cooldown_ms);

    kiln_status st = KILN_OK;
    kiln_bench_result *r = calloc(1, sizeof *r);
    double *sorted = calloc((size_t)o.repeat, sizeof *sorted);
    size_t flush_n = o.flush_cache ? flush_bytes() : 0;
    unsigned char *flush_buf = flush_n ? malloc(flush_n) : NULL;
    if (!r || !sorted || (flush_n && !flush_buf)) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "bench: out of memory");
        goto done;
    }

    if (o.preproc && (st = o.preproc(o.preproc_ctx, err)) != KILN_OK)
        goto done;
    if ((st = fn(ctx, err)) != KILN_OK) /* warm-up */
        goto done;
    int number = o.number;
    unsigned salt = 1;
    for (int i = 0; i < o.repeat; i++) {
        double duration_ms = 0;
        int zero_times = 0;
        do {
            if (duration_ms > 0) {
                double grown = o.min_repeat_ms / (duration_ms / number) + 1;
                if (grown < number * GOLDEN_RATIO)
                    grown = number * GOLDEN_RATIO;
                number = grown >= MAX_NUMBER ? MAX_NUMBER : (int)grown;
            }
            if (flush_buf)
                flush_caches(flush_buf, flush_n, salt++);
            if (o.preproc) { /* each run timed alone, after its preproc */
                double sum = 0;
                for (int j = 0; j < number; j++) {
                    if ((st = o.preproc(o.preproc_ctx, err)) != KILN_OK)
                        goto done;
                    double t0 = now_s();
                    if ((st = fn(ctx, err)) != KILN_OK)
                        goto done;
                    sum += now_s() - t0;
                }
                duration_ms = sum * 1e3;
            } else {
                double t0 = now_s();
                for (int j = 0; j < number; j++)
                    if ((st = fn(ctx, err)) != KILN_OK)
                        goto done;
                duration_ms = (now_s() - t0) * 1e3;
            }
            if (duration_ms <= 0)
                zero_times++;
        } while (duration_ms < o.min_repeat_ms && zero_times < ZERO_TIME_LIMIT &&
                 number < MAX_NUMBER);
        r->results[i] = duration_ms / 1e3 / number;
        if (o.cooldown_ms > 0 && i + 1 < o.repeat)
            sleep_ms(o.cooldown_ms);
    }

    double sum = 0;
    for (int i = 0; i < o.repeat; i++)
        sum += r->results[i];
    r->mean = sum / o.repeat;
    double var = 0;
    for (int i = 0; i < o.repeat; i++)
        var += (r->results[i] - r->mean) * (r->results[i] - r->mean);
    r->std = sqrt(var / o.repeat);
    memcpy(sorted, r->results, (size_t)o.repeat * sizeof *sorted);
    qsort(sorted, (size_t)o.repeat, sizeof *sorted, cmp_double);
    r->min = sorted[0];
    r->max = sorted[o.repeat - 1];
    r->median = o.repeat % 2 ? sorted[o.repeat / 2]
                             : (sorted[o.repeat / 2 - 1] + sorted[o.repeat / 2]) / 2;
    /* rounding can put the mean a hair outside [min, max] when all are equal */
    if (r->mean < r->min)
        r->mean = r->min;
    if (r->mean > r->max)
        r->mean = r->max;
    r->number = number;
    r->repeat = o.repeat;
    r->threads = threads;
    memcpy(out, r, sizeof *r);
done:
    free(flush_buf);
    free(sorted);
    free(r);
    return st;
}

static kiln_status run_module(void *ctx, kiln_error *err)
{
    return kiln_module_run(ctx, err);
}

kiln_status kiln_module_bench(kiln_module *m, const kiln_bench_options *opts,
                              kiln_bench_result *out, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bench: NULL module");
    return kiln_bench_function(run_module, m, m->num_threads, opts, out, err);
}
