/* tune/measure.c: a configuration measured in a worker child process.
 *
 * The worker is a fork of the tuner holding the task's small graph
 * (kiln_workload) and, after its first measurement, the reference outputs.
 * It reads a request (configuration, samples wanted, fault to inject) from a
 * pipe, runs kiln_workload_measure (build through the model cache, one run
 * checked against the reference, the time evaluator over the task's step,
 * the task's weights evicted from the caches before every call: in the
 * network they were last read a whole run ago, and a configuration judged
 * with warm weights is judged on the wrong data) and writes the result
 * back. The parent waits for it with a timeout: a worker that dies (a
 * segfaulting candidate) or does not answer in time (a hanging one, killed
 * with SIGKILL) costs that one trial; the next request
 * forks a fresh worker. The worker never returns into the caller's code: it
 * leaves with _exit. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/graph.h"
#include "runtime/module_internal.h"
#include "tune/tune.h"
#include "util/error.h"

typedef struct request {
    char config[1024];
    int repeat;
    double min_repeat_ms;
    int fault;
} request;

typedef struct response {
    int status;
    int n;
    double samples_us[KILN_TUNE_MAX_SAMPLES];
    double max_abs_diff;
    char error[256];
} response;

struct kiln_measurer {
    kiln_workload *w;
    char *cache_dir;
    int jobs, num_threads;
    int cold; /* kiln_measure_options.cold_weights: 1 or 2 */
    double timeout_s;
    pid_t pid;
    int to_child, from_child;
};

static bool io_all(int fd, void *buf, size_t n, bool wr)
{
    char *p = buf;
    while (n) {
        ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static void worker_loop(kiln_measurer *m, int in, int out)
{
    request rq;
    while (io_all(in, &rq, sizeof rq, false)) {
        if (rq.fault == KILN_FAULT_SEGV)
            raise(SIGSEGV);
        if (rq.fault == KILN_FAULT_DIE)
            raise(SIGKILL);
        if (rq.fault == KILN_FAULT_HANG)
            for (;;)
                pause();
        response rs;
        memset(&rs, 0, sizeof rs);
        kiln_measure_options mo = {.config = rq.config,
                                   .bench = {.repeat = rq.repeat, .min_repeat_ms = rq.min_repeat_ms},
                                   .num_threads = m->num_threads,
                                   .cache_dir = m->cache_dir,
                                   .jobs = m->jobs,
                                   .cold_weights = m->cold};
        kiln_measure_result *r = calloc(1, sizeof *r);
        kiln_error err = {0};
        kiln_status s = r ? kiln_workload_measure(m->w, &mo, r, &err) : KILN_ERR_OUT_OF_MEMORY;
        if (s == KILN_OK) {
            rs.status = KILN_TRIAL_OK;
            rs.n = r->time.repeat < KILN_TUNE_MAX_SAMPLES ? r->time.repeat : KILN_TUNE_MAX_SAMPLES;
            for (int k = 0; k < rs.n; k++)
                rs.samples_us[k] = r->time.results[k] * 1e6;
            rs.max_abs_diff = r->max_abs_diff;
        } else {
            rs.status = s == KILN_ERR_MISMATCH ? KILN_TRIAL_MISMATCH : KILN_TRIAL_ERROR;
            snprintf(rs.error, sizeof rs.error, "%.250s", err.msg[0] ? err.msg : kiln_status_str(s));
        }
        free(r);
        if (!io_all(out, &rs, sizeof rs, true))
            break;
    }
    _exit(0);
}

static void stop_worker(kiln_measurer *m)
{
    if (m->pid <= 0)
        return;
    close(m->to_child);
    close(m->from_child);
    kill(m->pid, SIGKILL);
    while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    m->pid = 0;
}

static bool start_worker(kiln_measurer *m, char *why, size_t size)
{
    int a[2], b[2];
    if (pipe(a) != 0)
        goto fail;
    if (pipe(b) != 0) {
        close(a[0]);
        close(a[1]);
        goto fail;
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(a[0]);
        close(a[1]);
        close(b[0]);
        close(b[1]);
        goto fail;
    }
    if (pid == 0) {
        /* a crashing candidate ends the worker, whatever handlers the
         * parent installed (a test framework's, a crash reporter's) */
        const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGPIPE, SIGTERM, SIGINT};
        for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++)
            signal(sigs[k], SIG_DFL);
        close(a[1]);
        close(b[0]);
        worker_loop(m, a[0], b[1]);
    }
    close(a[0]);
    close(b[1]);
    m->pid = pid;
    m->to_child = a[1];
    m->from_child = b[0];
    return true;
fail:
    snprintf(why, size, "cannot start a measurement worker: %s", strerror(errno));
    return false;
}

kiln_status kiln_measurer_create(kiln_workload *w, const char *cache_dir, int jobs,
                                 double timeout_s, int num_threads, kiln_measurer **out,
                                 kiln_error *err)
{
    kiln_measurer *m = calloc(1, sizeof *m);
    if (!m || (cache_dir && !(m->cache_dir = strdup(cache_dir)))) {
        free(m);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    m->w = w;
    m->jobs = jobs;
    m->num_threads = num_threads;
    m->cold = 1;
    m->timeout_s = timeout_s > 0 ? timeout_s : 60;
    *out = m;
    return KILN_OK;
}

int kiln_tune_cold_level(const kiln_graph *g)
{
    double bytes = 0;
    for (int v = 0; g && v < g->n_values; v++) {
        const kiln_value *x = g->values[v];
        if (x->kind == KILN_VALUE_CONST && x->data) {
            int64_t n = kiln_shape_numel(&x->shape);
            bytes += n > 0 ? (double)n * (double)kiln_dtype_size(x->dtype) : 0;
        }
    }
    long llc = kiln_cache_bytes(3);
    return llc > 0 && 2.0 * bytes <= (double)llc ? 2 : 1;
}

void kiln_measurer_set_cold(kiln_measurer *m, int cold)
{
    if (m)
        m->cold = cold == 2 ? 2 : 1;
}

void kiln_measurer_destroy(kiln_measurer *m)
{
    if (!m)
        return;
    stop_worker(m);
    free(m->cache_dir);
    free(m);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Why the worker died, after it closed its pipe. */
static void reap(kiln_measurer *m, kiln_trial *t)
{
    int st = 0;
    pid_t pid = m->pid;
    close(m->to_child);
    close(m->from_child);
    m->pid = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    t->status = KILN_TRIAL_CRASH;
    if (WIFSIGNALED(st))
        snprintf(t->error, sizeof t->error, "the measurement worker died of signal %d (%s)",
                 WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(t->error, sizeof t->error, "the measurement worker exited with status %d",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

void kiln_measurer_run(kiln_measurer *m, const char *config_json, int repeat,
                       double min_repeat_ms, kiln_fault fault, kiln_trial *t)
{
    t->n_samples = 0;
    t->error[0] = 0;
    t->max_abs_diff = 0;
    if (m->pid <= 0 && !start_worker(m, t->error, sizeof t->error)) {
        t->status = KILN_TRIAL_ERROR;
        return;
    }
    request rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.config, sizeof rq.config, "%s", config_json);
    rq.repeat = repeat > 0 ? (repeat < KILN_TUNE_MAX_SAMPLES ? repeat : KILN_TUNE_MAX_SAMPLES) : 3;
    rq.min_repeat_ms = min_repeat_ms;
    rq.fault = (int)fault;
    /* a worker that died between requests: EPIPE, not SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    bool sent = io_all(m->to_child, &rq, sizeof rq, true);
    sigaction(SIGPIPE, &old, NULL);
    if (!sent) {
        reap(m, t);
        return;
    }
    response rs;
    size_t got = 0;
    double deadline = now_s() + m->timeout_s;
    while (got < sizeof rs) {
        double left = deadline - now_s();
        if (left <= 0) {
            stop_worker(m);
            t->status = KILN_TRIAL_TIMEOUT;
            snprintf(t->error, sizeof t->error,
                     "no result after %.1f s (build and measurement): the worker was killed",
                     m->timeout_s);
            return;
        }
        struct pollfd pf = {.fd = m->from_child, .events = POLLIN};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue; /* the deadline check above decides */
        ssize_t k = read(m->from_child, (char *)&rs + got, sizeof rs - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            reap(m, t);
            return;
        }
        got += (size_t)k;
    }
    t->status = (kiln_trial_status)rs.status;
    t->n_samples = rs.n;
    memcpy(t->samples_us, rs.samples_us, sizeof t->samples_us);
    t->max_abs_diff = rs.max_abs_diff;
    snprintf(t->error, sizeof t->error, "%s", rs.error);
}
