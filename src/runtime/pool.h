/* runtime/pool.h: the runtime's thread pool (private to src/runtime and the tests).
 *
 * One pool serves one calling thread at a time (a module is not thread-safe).
 * kiln_pool_parallel_for has the signature of kiln_rt.parallel_for (kiln/abi.h):
 * it splits [0, n) into chunks of at least `grain` iterations, runs them on
 * the workers and on the calling thread (thread 0), and returns when all are
 * done. A parallel_for issued from inside a task of the same pool runs
 * serially on the issuing thread (with that thread's index). It allocates
 * nothing.
 */
#ifndef KILN_RUNTIME_POOL_H
#define KILN_RUNTIME_POOL_H

#include "kiln/abi.h"
#include "kiln/types.h"

typedef struct kiln_pool kiln_pool;

/* num_threads >= 1 counts the calling thread (num_threads - 1 workers are
 * started). bind: pin worker i to physical core i (modulo the cores this
 * process may use). spin_us: how long an idle thread spins before sleeping;
 * negative: $KILN_SPIN_US, else the default (KILN_POOL_DEFAULT_SPIN_US). */
#define KILN_POOL_DEFAULT_SPIN_US 200
kiln_status kiln_pool_create(int num_threads, int bind, int spin_us, kiln_pool **out,
                             kiln_error *err);
void kiln_pool_destroy(kiln_pool *p); /* NULL-safe; joins the workers */
int kiln_pool_num_threads(const kiln_pool *p);
/* Number of workers actually pinned (0 when bind is off or pinning failed). */
int kiln_pool_num_bound(const kiln_pool *p);

void kiln_pool_parallel_for(void *pool, int64_t n, int64_t grain, kiln_task_fn fn, void *ctx);

/* Brings every worker out of its sleep: when some worker sleeps on the
 * futex, issues small jobs until each thread has run a chunk of one (then
 * the workers spin for spin_us, waiting for the next job), or until
 * timeout_us has passed. Returns 1 when none slept or all took part, 0 on
 * the timeout. A kernel inside a network starts with the workers awake,
 * kept so by the kernel before it; a kernel timed alone after work on the
 * calling thread (a cache eviction longer than spin_us) starts with them
 * asleep, and a worker that wakes late loses its chunks to the caller: the
 * call's start runs on fewer threads. A timing harness calls this just
 * before the timed call. */
int kiln_pool_wake(kiln_pool *p, int64_t timeout_us);

/* Physical cores this process may run on: distinct (package, core) ids of the
 * CPUs in its affinity mask, from /sys; the CPU count when /sys says nothing.
 * At least 1. */
int kiln_cpu_physical_cores(void);

/* Resolves a requested thread count: requested > 0 is used as is; 0 reads
 * $KILN_NUM_THREADS (a positive integer) and falls back to the physical cores.
 * A malformed variable or a count above KILN_MAX_THREADS is an error. */
#define KILN_MAX_THREADS 1024
kiln_status kiln_threads_resolve(int requested, int *out, kiln_error *err);
/* bind -1: $KILN_BIND_THREADS ("0"/"1", default 0). */
kiln_status kiln_bind_resolve(int requested, int *out, kiln_error *err);

#endif
