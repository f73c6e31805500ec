/* tests/runtime/test_pool.c: the thread pool behind kiln_rt.parallel_for:
 * every index covered exactly once for many (n, grain, threads), chunks of at
 * least `grain` (but the last), thread indices in range, nested calls
 * serialized on the calling thread, workers that went to sleep (spin 0) woken
 * correctly, thousands of back-to-back fork-joins, each thread's chunks in at
 * most one run per thread (its own, then stolen ones), and the fork-join overhead
 * printed (not asserted: timings are not tests). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/pool.h"
#include "test_support.h"

typedef struct cover_ctx {
    _Atomic int *count;
    int64_t n, grain;
    int threads;
    _Atomic int bad_chunk, bad_thread;
} cover_ctx;

static void cover_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    cover_ctx *c = ctx;
    if (thread < 0 || thread >= c->threads)
        atomic_fetch_add(&c->bad_thread, 1);
    int64_t g = c->grain < 1 ? 1 : c->grain;
    if (begin < 0 || end > c->n || begin >= end || (end - begin < g && end != c->n))
        atomic_fetch_add(&c->bad_chunk, 1);
    for (int64_t i = begin; i < end && i >= 0 && i < c->n; i++)
        atomic_fetch_add(&c->count[i], 1);
}

static void check_cover(kiln_pool *p, int threads, int64_t n, int64_t grain)
{
    cover_ctx c = {.n = n, .grain = grain, .threads = threads};
    c.count = calloc((size_t)(n > 0 ? n : 1), sizeof *c.count);
    assert_non_null(c.count);
    kiln_pool_parallel_for(p, n, grain, cover_task, &c);
    for (int64_t i = 0; i < n; i++)
        if (c.count[i] != 1)
            fail_msg("threads %d n %lld grain %lld: index %lld ran %d times", threads,
                     (long long)n, (long long)grain, (long long)i, c.count[i]);
    assert_int_equal(c.bad_chunk, 0);
    assert_int_equal(c.bad_thread, 0);
    free(c.count);
}

static void test_cover(void **state)
{
    (void)state;
    static const int64_t ns[] = {0, 1, 2, 3, 5, 7, 8, 16, 17, 63, 100, 1000, 4097};
    static const int64_t grains[] = {-1, 0, 1, 2, 3, 16, 100, 5000};
    for (int threads = 1; threads <= 5; threads++) {
        for (int spin = 0; spin <= 1; spin++) {
            kiln_pool *p = NULL;
            kiln_error err = {0};
            assert_int_equal(kiln_pool_create(threads, 0, spin ? 50 : 0, &p, &err), KILN_OK);
            assert_int_equal(kiln_pool_num_threads(p), threads);
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t b = 0; b < sizeof grains / sizeof grains[0]; b++)
                    check_cover(p, threads, ns[a], grains[b]);
            kiln_pool_destroy(p);
        }
    }
    /* NULL pool: the whole range on the caller */
    check_cover(NULL, 1, 10, 1);
    kiln_pool_destroy(NULL);
}

typedef struct nest_ctx {
    kiln_pool *pool;
    _Atomic int count[64 * 64];
    _Atomic int bad;
} nest_ctx;

typedef struct inner_ctx {
    nest_ctx *outer;
    int64_t row;
    int thread;
} inner_ctx;

static void inner_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    inner_ctx *c = ctx;
    if (thread != c->thread) /* nested calls run on the calling thread */
        atomic_fetch_add(&c->outer->bad, 1);
    for (int64_t j = begin; j < end; j++)
        atomic_fetch_add(&c->outer->count[c->row * 64 + j], 1);
}

static void outer_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    nest_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) {
        inner_ctx in = {c, i, thread};
        kiln_pool_parallel_for(c->pool, 64, 1, inner_task, &in);
    }
}

static void test_nested(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 3; threads++) {
        kiln_pool *p = NULL;
        assert_int_equal(kiln_pool_create(threads, 0, -1, &p, NULL), KILN_OK);
        nest_ctx *c = calloc(1, sizeof *c);
        assert_non_null(c);
        c->pool = p;
        for (int rep = 0; rep < 20; rep++)
            kiln_pool_parallel_for(p, 64, 1, outer_task, c);
        for (int i = 0; i < 64 * 64; i++)
            assert_int_equal(c->count[i], 20);
        assert_int_equal(c->bad, 0);
        free(c);
        kiln_pool_destroy(p);
    }
}

static void sum_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    atomic_fetch_add((_Atomic int64_t *)ctx, end - begin);
}

static void test_back_to_back(void **state)
{
    (void)state;
    /* also across sleeps: with spin 0 every job must wake sleeping workers */
    for (int spin = 0; spin <= 1; spin++) {
        kiln_pool *p = NULL;
        assert_int_equal(kiln_pool_create(3, 0, spin ? 100 : 0, &p, NULL), KILN_OK);
        _Atomic int64_t total = 0;
        for (int i = 0; i < 5000; i++) {
            kiln_pool_parallel_for(p, 37, 1, sum_task, &total);
            if (i % 1000 == 0) {
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
            }
        }
        assert_int_equal(total, 5000 * 37);
        kiln_pool_destroy(p);
    }
}

static void mark_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)begin;
    (void)end;
    atomic_fetch_or((_Atomic unsigned *)ctx, 1u << thread);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* The workers do take part: with 8 chunks of 1 ms, some chunk runs on a
 * worker (retried, so that a busy machine that delays the worker once cannot
 * fail the test). */
static void test_workers_participate(void **state)
{
    (void)state;
    kiln_pool *p = NULL;
    assert_int_equal(kiln_pool_create(2, 0, -1, &p, NULL), KILN_OK);
    _Atomic unsigned seen = 0;
    for (int attempt = 0; attempt < 50 && !(seen & 2u); attempt++)
        kiln_pool_parallel_for(p, 8, 1, mark_task, &seen);
    assert_true(seen & 2u);
    assert_int_equal(seen & ~3u, 0);
    kiln_pool_destroy(p);
}

/* kiln_pool_wake brings workers asleep on their futex (idle far longer than
 * the spin) into a job, for every pool size; NULL and one-thread pools have
 * nothing to wake. */
static void test_wake(void **state)
{
    (void)state;
    assert_int_equal(kiln_pool_wake(NULL, 0), 1);
    for (int threads = 1; threads <= 4; threads++) {
        kiln_pool *p = NULL;
        assert_int_equal(kiln_pool_create(threads, 0, 50, &p, NULL), KILN_OK);
        for (int round = 0; round < 3; round++) {
            struct timespec ts = {0, 5000000}; /* 100x the spin: the workers sleep */
            nanosleep(&ts, NULL);
            assert_int_equal(kiln_pool_wake(p, 5000000), 1);
            _Atomic unsigned seen = 0; /* the pool still runs jobs after it */
            kiln_pool_parallel_for(p, 8, 1, mark_task, &seen);
            assert_int_not_equal(seen, 0);
        }
        kiln_pool_destroy(p);
    }
}

typedef struct owner_ctx {
    int owner[64];
} owner_ctx;

static void owner_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    owner_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++)
        c->owner[i] = thread;
    struct timespec ts = {0, 20000 + 10000 * thread}; /* uneven: some chunks get stolen */
    nanosleep(&ts, NULL);
}

/* Chunks are dealt out in contiguous runs, one per thread (thread t's run
 * is chunks [n * t / threads, n * (t + 1) / threads)); a thread runs its
 * own run front to back, and a thread that runs out steals from the back of
 * the others'. So in every job, the chunks of its own run that thread t ran
 * are a prefix of that run (perhaps empty, when it started late and lost
 * all of it), whatever the scheduling: what the others stole is a suffix.
 * (What a thief ran is not one piece per victim: two thieves taking turns
 * at one victim's back interleave.) A pool handing chunks out from one
 * shared counter interleaves them (thread 0 running 0, 2, 4, ...) and
 * fails this. */
static void test_runs_per_thread(void **state)
{
    (void)state;
    for (int threads = 2; threads <= 4; threads++) {
        kiln_pool *p = NULL;
        assert_int_equal(kiln_pool_create(threads, 0, -1, &p, NULL), KILN_OK);
        int64_t n = 4 * threads; /* one index per chunk */
        for (int job = 0; job < 100; job++) {
            owner_ctx c;
            memset(&c, 0xff, sizeof c);
            kiln_pool_parallel_for(p, n, 1, owner_task, &c);
            for (int64_t i = 0; i < n; i++)
                assert_in_range(c.owner[i], 0, threads - 1);
            for (int t = 0; t < threads; t++) {
                int64_t lo = n * t / threads, hi = n * (t + 1) / threads, i = lo;
                while (i < hi && c.owner[i] == t)
                    i++;
                for (; i < hi; i++)
                    if (c.owner[i] == t)
                        fail_msg("threads %d job %d: thread %d ran chunk %lld of its run "
                                 "[%lld, %lld) after a chunk it did not run",
                                 threads, job, t, (long long)i, (long long)lo, (long long)hi);
            }
        }
        kiln_pool_destroy(p);
    }
}

static void test_bad_args(void **state)
{
    (void)state;
    kiln_pool *p = (kiln_pool *)state;
    kiln_error err = {0};
    assert_int_equal(kiln_pool_create(0, 0, 0, &p, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_pool_create(KILN_MAX_THREADS + 1, 0, 0, &p, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_ptr_equal(p, (kiln_pool *)state);
    int n = 0;
    assert_int_equal(kiln_threads_resolve(7, &n, &err), KILN_OK);
    assert_int_equal(n, 7);
    assert_int_equal(kiln_threads_resolve(-2, &n, &err), KILN_ERR_INVALID_ARGUMENT);
    setenv("KILN_NUM_THREADS", "5", 1);
    assert_int_equal(kiln_threads_resolve(0, &n, &err), KILN_OK);
    assert_int_equal(n, 5);
    setenv("KILN_NUM_THREADS", "0", 1); /* 0: the default */
    assert_int_equal(kiln_threads_resolve(0, &n, &err), KILN_OK);
    assert_int_equal(n, kiln_cpu_physical_cores());
    setenv("KILN_NUM_THREADS", "-3", 1);
    assert_int_equal(kiln_threads_resolve(0, &n, &err), KILN_ERR_INVALID_ARGUMENT);
    unsetenv("KILN_NUM_THREADS");
    /* null task / empty range do nothing */
    kiln_pool_parallel_for(NULL, 5, 1, NULL, NULL);
}

static void empty_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)ctx;
    (void)begin;
    (void)end;
    (void)thread;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints the median time of an empty fork-join over 1 and 2 threads. */
static void test_overhead(void **state)
{
    (void)state;
    enum { CALLS = 2000, BATCH = 10 };
    static double t[CALLS / BATCH];
    for (int threads = 1; threads <= 2; threads++) {
        kiln_pool *p = NULL;
        assert_int_equal(kiln_pool_create(threads, 0, -1, &p, NULL), KILN_OK);
        for (int i = 0; i < 100; i++)
            kiln_pool_parallel_for(p, 1024, 1, empty_task, NULL);
        for (int b = 0; b < CALLS / BATCH; b++) {
            double t0 = now_us();
            for (int i = 0; i < BATCH; i++)
                kiln_pool_parallel_for(p, 1024, 1, empty_task, NULL);
            t[b] = (now_us() - t0) / BATCH;
        }
        qsort(t, CALLS / BATCH, sizeof t[0], cmp_double);
        print_message("fork-join overhead, %d thread%s: median %.2f us, min %.2f us (empty "
                      "parallel_for over 1024 iterations)\n",
                      threads, threads == 1 ? "" : "s", t[CALLS / BATCH / 2], t[0]);
        kiln_pool_destroy(p);
    }
}

int main(void)
{
    unsetenv("KILN_SPIN_US");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cover),         cmocka_unit_test(test_nested),
        cmocka_unit_test(test_back_to_back),  cmocka_unit_test(test_workers_participate),
        cmocka_unit_test(test_bad_args),      cmocka_unit_test(test_runs_per_thread),
        cmocka_unit_test(test_overhead),      cmocka_unit_test(test_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
