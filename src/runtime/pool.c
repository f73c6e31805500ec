/* runtime/pool.c: a fork-join thread pool for the kernels' parallel_for.
 *
 * Design (see docs/RUNTIME.md):
 * - num_threads - 1 workers; the calling thread is thread 0 and takes part.
 * - A job is published by writing its fields (fn, ctx, n, grain) and then
 *   bumping the generation counter `gen`. Workers wait for `gen` to change:
 *   they spin for spin_us (pause instructions, then sched_yield so that an
 *   oversubscribed machine still runs the thread being waited for), then sleep on a futex on
 *   `gen`, counted in `sleepers`; the caller issues a futex wake only when
 *   someone sleeps, so back-to-back jobs cost no system call.
 * - A job splits [0, n) into at most CHUNKS_PER_THREAD chunks per thread,
 *   each at least `grain` iterations, and deals them out in order: thread t
 *   owns the t-th contiguous run of chunks (its slot, one 64-bit word per
 *   thread = job generation, first and end chunk). A thread runs its own run
 *   front to back, then steals from the other threads' runs back to front;
 *   every claim is a compare-and-swap on the slot. So in a sequence of
 *   kernels over the same index space each thread tends to get the same part
 *   every time (the rows it wrote are the rows it reads next, from its own
 *   L2), while a thread that is late or preempted still loses its chunks to
 *   the others. A thread claims a chunk only if the slot still names its job,
 *   so a worker that wakes late finds nothing left and touches nothing: the
 *   caller never waits for a worker that has not started, only for chunks
 *   being run. The job's fields are read before the CAS (relaxed atomics);
 *   a successful CAS proves they belonged to that job (it was not finished,
 *   so the caller had not rewritten them).
 * - Join: every thread counts its finished chunks in `done`; the caller waits
 *   until done == chunk count, spinning, then sleeping on a futex (flag
 *   `caller_sleeping`); the thread finishing the last chunk wakes it only if
 *   it sleeps.
 * - Lost wake-ups are impossible because both sides use sequentially
 *   consistent atomics in the Dekker pattern: the waiter announces itself
 *   (sleepers++ / caller_sleeping = 1) and then re-checks the word inside
 *   futex_wait; the signaller changes the word and then reads the announcement.
 * - Nested use: a parallel_for called from inside a task of the same pool runs
 *   serially on the calling thread (thread-local "current pool, thread").
 * Nothing is allocated per job.
 */
#define _GNU_SOURCE
#include "runtime/fpenv.h"
#include "runtime/pool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "kiln/runtime.h"
#include "util/error.h"

#define CHUNKS_PER_THREAD 4
#define CACHE_LINE 64

/* gen << 32 | first chunk << 16 | end chunk, on a cache line of its own */
typedef struct pool_slot {
    alignas(CACHE_LINE) _Atomic uint64_t w;
} pool_slot;

typedef struct worker {
    struct kiln_pool *pool;
    int tid;
    int cpu; /* logical CPU to pin to, or -1 */
} worker;

struct kiln_pool {
    int n_threads;
    int n_started; /* workers running */
    int n_bound;
    int64_t spin_ns;
    pthread_t *threads;
    worker *workers;

    /* the current job: written by the caller before `next` names it */
    _Atomic(kiln_task_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n, grain; /* chunks are whole units of grain */
    _Atomic uint32_t n_chunks;

    alignas(CACHE_LINE) _Atomic uint32_t gen;
    _Atomic uint32_t stop;
    alignas(CACHE_LINE) _Atomic uint32_t sleepers;
    pool_slot *slots; /* one per thread: its run of the current job's chunks */
    alignas(CACHE_LINE) _Atomic uint32_t done;
    _Atomic uint32_t caller_sleeping;
    alignas(CACHE_LINE) _Atomic int32_t bound_count;
};

/* the pool and thread index of the task running on this thread, if any */
static _Thread_local struct kiln_pool *tls_pool;
static _Thread_local int tls_tid;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One step of a spin-wait, iteration i >= 1: a pause instruction for the
 * first SPIN_PAUSES iterations (a wake-up within about a microsecond is
 * caught at once), then sched_yield(), so that on an oversubscribed machine
 * the thread we wait for (perhaps on this very core) gets to run. Returns
 * nonzero once the deadline has passed. */
#define SPIN_PAUSES 512
static int spin_pause(unsigned i, int64_t deadline)
{
    if (i < SPIN_PAUSES) {
        cpu_relax();
        return (i & 63) == 0 && now_ns() > deadline;
    }
    sched_yield();
    return now_ns() > deadline;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected)
{
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)addr;
    (void)expected;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
#endif
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Claims one chunk of job `gen` from slot s: the front one for its owner,
 * the back one for a thief. Returns the chunk index, or -1 when the slot is
 * empty or names another job. */
static int64_t claim(struct kiln_pool *p, uint32_t gen, int s, int owner)
{
    _Atomic uint64_t *slot = &p->slots[s].w;
    uint64_t w = atomic_load_explicit(slot, memory_order_acquire);
    for (;;) {
        uint32_t lo = (uint32_t)(w >> 16) & 0xffff, hi = (uint32_t)w & 0xffff;
        if ((uint32_t)(w >> 32) != gen || lo >= hi)
            return -1;
        uint64_t nw = owner ? w + (1u << 16) : w - 1;
        if (atomic_compare_exchange_weak_explicit(slot, &w, nw, memory_order_acquire,
                                                  memory_order_acquire))
            return owner ? lo : hi - 1;
    }
}

/* Runs chunks of job `gen` until none is left: its own run, then the
 * others'. */
static void run_chunks(struct kiln_pool *p, uint32_t gen, int tid)
{
    for (int k = 0; k < p->n_threads; k++) {
        int s = (tid + k) % p->n_threads;
        for (;;) {
            /* read before the claim; a successful claim proves they are this job's */
            kiln_task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
            void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
            int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
            int64_t grain = atomic_load_explicit(&p->grain, memory_order_relaxed);
            uint32_t n_chunks = atomic_load_explicit(&p->n_chunks, memory_order_relaxed);
            int64_t c = claim(p, gen, s, k == 0);
            if (c < 0)
                break;
            /* chunk c: units [c U / n_chunks, (c + 1) U / n_chunks) of grain */
            int64_t units = n / grain + (n % grain != 0);
            int64_t begin = c * units / n_chunks * grain;
            int64_t end = (c + 1) * units / n_chunks * grain;
            end = end < n ? end : n;
            fn(ctx, begin, end, tid);
            if (atomic_fetch_add(&p->done, 1) + 1 == n_chunks && tid != 0 &&
                atomic_load(&p->caller_sleeping))
                futex_wake_all(&p->done);
        }
    }
}

/* Waits until p->gen differs from `seen`; returns the new value. */
static uint32_t wait_generation(struct kiln_pool *p, uint32_t seen)
{
    uint32_t g;
    if (p->spin_ns > 0) {
        int64_t deadline = now_ns() + p->spin_ns;
        for (unsigned i = 1;; i++) {
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
            if (g != seen)
                return g;
            if (spin_pause(i, deadline))
                break;
        }
    }
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen)
        futex_wait(&p->gen, seen);
    atomic_fetch_sub(&p->sleepers, 1);
    return g;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    struct kiln_pool *p = w->pool;
#ifdef __linux__
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0)
            atomic_fetch_add(&p->bound_count, 1);
    }
#endif
    tls_pool = p;
    tls_tid = w->tid;
    (void)kiln_fp_flush_begin(); /* this thread runs compiled kernels only: FTZ/DAZ for good */
    uint32_t seen = 0; /* gen starts at 0 and is only bumped once workers run */
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load(&p->stop))
            break;
        run_chunks(p, seen, w->tid);
    }
    return NULL;
}

void kiln_pool_parallel_for(void *pool, int64_t n, int64_t grain, kiln_task_fn fn, void *ctx)
{
    struct kiln_pool *p = pool;
    if (n <= 0 || !fn)
        return;
    if (!p) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (tls_pool == p) { /* nested: serial on this thread */
        fn(ctx, 0, n, tls_tid);
        return;
    }
    if (grain < 1)
        grain = 1;
    int64_t max_chunks = n / grain + (n % grain != 0);
    int64_t n_chunks = (int64_t)p->n_threads * CHUNKS_PER_THREAD; /* < 65536 */
    if (n_chunks > max_chunks)
        n_chunks = max_chunks;
    if (p->n_started == 0 || n_chunks <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* chunks of whole units of `grain`, as equal as the units allow (chunk
     * c: units [c U / n_chunks, (c + 1) U / n_chunks)): every thread's run
     * then holds the same number of units, give or take one. (Chunks of
     * ceil(n / n_chunks) left the last thread's run short: 22 tasks made 7
     * chunks of 3 and one of 1, runs of 12 and 10 tasks, and a thread that
     * finished its run found nothing left to steal.) */
    /* the previous job is complete: no thread can claim from it any more */
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->grain, grain, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->n_chunks, (uint32_t)n_chunks, memory_order_relaxed);
    for (int t = 0; t < p->n_threads; t++) {
        uint64_t lo = (uint64_t)(n_chunks * t / p->n_threads);
        uint64_t hi = (uint64_t)(n_chunks * (t + 1) / p->n_threads);
        atomic_store_explicit(&p->slots[t].w, (uint64_t)gen << 32 | lo << 16 | hi,
                              memory_order_release);
    }
    atomic_store(&p->gen, gen); /* wakes the spinners (seq_cst) */
    if (atomic_load(&p->sleepers) > 0)
        futex_wake_all(&p->gen);

    struct kiln_pool *saved_pool = tls_pool;
    int saved_tid = tls_tid;
    tls_pool = p;
    tls_tid = 0;
    run_chunks(p, gen, 0);
    tls_pool = saved_pool;
    tls_tid = saved_tid;

    /* join: wait for the chunks other threads are still running */
    const uint32_t total = (uint32_t)n_chunks;
    if (atomic_load_explicit(&p->done, memory_order_acquire) == total)
        return;
    if (p->spin_ns > 0) {
        int64_t deadline = now_ns() + p->spin_ns;
        for (unsigned i = 1;; i++) {
            if (atomic_load_explicit(&p->done, memory_order_acquire) == total)
                return;
            if (spin_pause(i, deadline))
                break;
        }
    }
    atomic_store(&p->caller_sleeping, 1);
    uint32_t v;
    while ((v = atomic_load(&p->done)) != total)
        futex_wait(&p->done, v);
    atomic_store(&p->caller_sleeping, 0);
}

/* ---- waking the workers before a timed call ------------------------------ */

typedef struct wake_ctx {
    _Atomic uint64_t arrived[(KILN_MAX_THREADS + 63) / 64];
} wake_ctx;

/* One chunk of a wake job: marks its thread and stays ~2 us, so that a
 * worker that has just seen the job finds its own chunk unclaimed. */
static void wake_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)begin;
    (void)end;
    wake_ctx *c = ctx;
    atomic_fetch_or(&c->arrived[thread / 64], (uint64_t)1 << (thread % 64));
    int64_t until = now_ns() + 2000;
    for (unsigned i = 1; now_ns() < until; i++)
        if (spin_pause(i, until))
            break;
}

int kiln_pool_wake(kiln_pool *p, int64_t timeout_us)
{
    if (!p || p->n_started == 0 || tls_pool == p)
        return 1;
    /* no worker asleep on the futex: they spin (or run), and one that is
     * only descheduled is not helped by waiting for it (a tiny kernel timed
     * hundreds of times on a busy machine waited for it before every run) */
    if (atomic_load(&p->sleepers) == 0)
        return 1;
    wake_ctx c;
    for (int w = 0; w < (KILN_MAX_THREADS + 63) / 64; w++)
        atomic_init(&c.arrived[w], 0);
    const int want = p->n_started + 1;
    int64_t deadline = now_ns() + (timeout_us > 0 ? timeout_us : 0) * 1000;
    for (;;) {
        kiln_pool_parallel_for(p, p->n_threads, 1, wake_task, &c);
        int n = 0;
        for (int w = 0; w < (p->n_threads + 63) / 64; w++)
            n += __builtin_popcountll(atomic_load(&c.arrived[w]));
        if (n >= want)
            return 1;
        if (now_ns() > deadline)
            return 0;
    }
}

/* ---- CPU topology ---------------------------------------------------------- */

static int read_int_file(const char *path, long *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fscanf(f, "%ld", out) == 1;
    fclose(f);
    return ok;
}

/* Fills cpus[] with the first logical CPU of each distinct physical core this
 * process may use (at most max); returns the count (0 if unknown). */
static int physical_core_cpus(int *cpus, int max)
{
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    long pkg[CPU_SETSIZE > 1024 ? 1024 : CPU_SETSIZE], core[CPU_SETSIZE > 1024 ? 1024 : CPU_SETSIZE];
    int n = 0, limit = (int)(sizeof pkg / sizeof pkg[0]);
    for (int cpu = 0; cpu < CPU_SETSIZE && n < limit && n < max; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        char path[128];
        long c = cpu, k = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        int have_core = read_int_file(path, &c);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        if (!read_int_file(path, &k))
            k = 0;
        if (!have_core)
            c = cpu; /* unknown topology: every CPU is its own core */
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup = pkg[j] == k && core[j] == c;
        if (dup)
            continue;
        pkg[n] = k;
        core[n] = c;
        cpus[n++] = cpu;
    }
    return n;
#else
    (void)cpus;
    (void)max;
    return 0;
#endif
}

int kiln_cpu_physical_cores(void)
{
    int cpus[KILN_MAX_THREADS];
    int n = physical_core_cpus(cpus, KILN_MAX_THREADS);
    if (n > 0)
        return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)(c > KILN_MAX_THREADS ? KILN_MAX_THREADS : c) : 1;
}

int kiln_runtime_physical_cores(void)
{
    return kiln_cpu_physical_cores();
}

static int parse_positive(const char *s, long *out)
{
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0)
        return 0;
    *out = v;
    return 1;
}

kiln_status kiln_threads_resolve(int requested, int *out, kiln_error *err)
{
    if (requested < 0 || requested > KILN_MAX_THREADS)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "number of threads %d is out of range (1..%d, or 0 for the default)",
                           requested, KILN_MAX_THREADS);
    if (requested > 0) {
        *out = requested;
        return KILN_OK;
    }
    const char *env = getenv("KILN_NUM_THREADS");
    if (env && *env) {
        long v;
        if (!parse_positive(env, &v) || v > KILN_MAX_THREADS)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "KILN_NUM_THREADS='%s' is not a number of threads (0..%d; 0 or "
                               "unset: the number of physical cores)",
                               env, KILN_MAX_THREADS);
        if (v > 0) {
            *out = (int)v;
            return KILN_OK;
        }
    }
    *out = kiln_cpu_physical_cores();
    return KILN_OK;
}

kiln_status kiln_bind_resolve(int requested, int *out, kiln_error *err)
{
    if (requested == 0 || requested == 1) {
        *out = requested;
        return KILN_OK;
    }
    if (requested != -1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "bind_threads %d is not -1 (environment), 0 or 1", requested);
    const char *env = getenv("KILN_BIND_THREADS");
    long v = 0;
    if (env && *env && (!parse_positive(env, &v) || v > 1))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "KILN_BIND_THREADS='%s' is not 0 or 1", env);
    *out = (int)v;
    return KILN_OK;
}

/* ---- create / destroy ---------------------------------------------------- */

kiln_status kiln_pool_create(int num_threads, int bind, int spin_us, kiln_pool **out,
                             kiln_error *err)
{
    if (num_threads < 1 || num_threads > KILN_MAX_THREADS)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "thread pool: %d threads is out of range (1..%d)", num_threads,
                           KILN_MAX_THREADS);
    if (spin_us < 0) {
        const char *env = getenv("KILN_SPIN_US");
        long v;
        if (env && *env) {
            if (!parse_positive(env, &v) || v > 10000000)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "KILN_SPIN_US='%s' is not a number of microseconds "
                                   "(0..10000000)",
                                   env);
            spin_us = (int)v;
        } else {
            spin_us = KILN_POOL_DEFAULT_SPIN_US;
        }
    }
    size_t size = (sizeof(struct kiln_pool) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    struct kiln_pool *p = aligned_alloc(CACHE_LINE, size);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    memset(p, 0, size);
    p->n_threads = num_threads;
    p->slots = aligned_alloc(CACHE_LINE, (size_t)num_threads * sizeof *p->slots);
    if (!p->slots) {
        free(p);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    }
    for (int t = 0; t < num_threads; t++)
        atomic_init(&p->slots[t].w, 0);
    p->spin_ns = (int64_t)spin_us * 1000;
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->n_chunks, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->fn, NULL);
    atomic_init(&p->ctx, NULL);
    atomic_init(&p->n, 0);
    atomic_init(&p->grain, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->bound_count, 0);
    kiln_status st = KILN_OK;
    int n_workers = num_threads - 1;
    if (n_workers > 0) {
        p->threads = calloc((size_t)n_workers, sizeof *p->threads);
        p->workers = calloc((size_t)n_workers, sizeof *p->workers);
        if (!p->threads || !p->workers) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
            goto fail;
        }
    }
    int cpus[KILN_MAX_THREADS];
    int n_cores = bind ? physical_core_cpus(cpus, KILN_MAX_THREADS) : 0;
    for (int i = 0; i < n_workers; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->tid = i + 1;
        w->cpu = n_cores > 0 ? cpus[(i + 1) % n_cores] : -1;
        int rc = pthread_create(&p->threads[i], NULL, worker_main, w);
        if (rc != 0) {
            st = kiln_errorf(err, KILN_ERR_INTERNAL,
                             "thread pool: cannot start worker %d of %d: %s", i + 1, n_workers,
                             strerror(rc));
            goto fail;
        }
        p->n_started++;
    }
    *out = p;
    return KILN_OK;
fail:
    kiln_pool_destroy(p);
    return st;
}

void kiln_pool_destroy(kiln_pool *p)
{
    if (!p)
        return;
    if (p->n_started > 0) {
        atomic_store(&p->stop, 1);
        atomic_fetch_add(&p->gen, 1);
        futex_wake_all(&p->gen);
        for (int i = 0; i < p->n_started; i++)
            pthread_join(p->threads[i], NULL);
    }
    free(p->threads);
    free(p->workers);
    free(p->slots);
    free(p);
}

int kiln_pool_num_threads(const kiln_pool *p)
{
    return p ? p->n_threads : 1;
}

int kiln_pool_num_bound(const kiln_pool *p)
{
    return p ? atomic_load(&((kiln_pool *)p)->bound_count) : 0;
}
