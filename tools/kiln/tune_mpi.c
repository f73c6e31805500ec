/* tools/kiln/tune_mpi.c: `mpirun -n N kiln tune ...`: tuning workers over MPI
 * (docs/TUNING.md, "Workers over MPI").
 *
 * Rank 0 runs the tuner (src/tune: the search, the acceptance rule, the
 * records file, which only rank 0 writes) with an executor that sends its
 * requests to the other ranks; ranks 1..N-1 serve them (src/tune/worker.c).
 *
 * Measurements on one host disturb each other (on the 2-core development
 * machine, two at once halve each other's speed), so a run has one
 * measurement slot: one rank, on rank 0's host when it has a worker rank with
 * rank 0's CPU fingerprint, else the first rank with that fingerprint (the
 * records carry rank 0's fingerprint; a rank of another CPU class only
 * builds). A batch goes in two phases that never overlap: first its new
 * configurations are built, spread over every live rank (code generation
 * and $CC in parallel, into the model cache the ranks of one host share),
 * then the slot's rank measures the batch's interleaved rounds alone, one
 * configuration at a time, in its forked measurement child, while the other
 * ranks wait. Waiting ranks (and rank 0) poll for messages with a 2 ms sleep
 * instead of MPI's busy-wait, which would take a core from the measurement.
 *
 * Failures: a request gets an answer within a deadline (a measurement:
 * 1.25 x --timeout + 5 s, the rank's own child timeout included; a build:
 * --timeout per configuration + 5 s). A rank that misses it is dropped from
 * the run (reported on the log): a measurement in flight becomes a trial of
 * status "timeout" naming the rank, the builds in flight are lost (the
 * measuring rank builds them itself), and the slot moves to the next live
 * rank of the same host and fingerprint, else to rank 0 itself. For the job
 * to outlive a dead rank, Open MPI must not abort it: run with
 * `mpirun --enable-recovery` (or OMPI_MCA_orte_enable_recovery=1); without
 * it mpirun ends every rank, and a rerun resumes from the records (at most
 * the batch in flight is lost). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tune/tune.h"
#include "util/error.h"

kiln_status kiln_tune_mpi_run(const char *model, kiln_tune_options *o, kiln_tune_summary *sum,
                              bool *root, kiln_error *err);
bool kiln_tune_mpi_available(void);
bool kiln_tune_mpi_launched(void);
int kiln_tune_mpi_finish(int rc);

/* Launched by mpirun/srun with more than one rank? (Open MPI, PMI, PMIx.) */
bool kiln_tune_mpi_launched(void)
{
    const char *v[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        const char *e = getenv(v[k]);
        if (e && atoi(e) > 1)
            return true;
    }
    return false;
}

#ifndef KILN_HAVE_MPI

bool kiln_tune_mpi_available(void)
{
    return false;
}

kiln_status kiln_tune_mpi_run(const char *model, kiln_tune_options *o, kiln_tune_summary *sum,
                              bool *root, kiln_error *err)
{
    (void)model;
    (void)o;
    (void)sum;
    *root = true;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                       "MPI workers are not available: this kiln was built without MPI (install "
                       "Open MPI, libopenmpi-dev, and build again; docs/TUNING.md)");
}

int kiln_tune_mpi_finish(int rc)
{
    return rc;
}

#else

#include <mpi.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

enum { TAG_REQ = 11, TAG_RES = 12 };
enum { OP_STOP = 0, OP_BUILD = 1, OP_MEASURE = 2 };
#define MAX_RANKS 4096

typedef struct req_hdr {
    int op, n, repeat, fault;
    double min_repeat_ms;
} req_hdr; /* followed by the workload key and n configurations, each NUL-terminated */

typedef struct res_msg {
    int op, n_ok, n_failed;
    kiln_trial t;
} res_msg;

typedef struct hello {
    char fp[17];
    char host[MPI_MAX_PROCESSOR_NAME + 1];
} hello;

typedef struct mpi_ctx {
    int size;
    hello *h;    /* per rank */
    bool *alive; /* per rank (rank 0's entry: itself) */
    int slot;    /* the measuring rank; 0: rank 0 itself */
    double timeout_s;
    const kiln_tune_options *o;
    kiln_tune_worker *local; /* rank 0's own worker, when no rank is left */
    FILE *log;
    int dropped;
    char name[256];
} mpi_ctx;

bool kiln_tune_mpi_available(void)
{
    return true;
}

/* MPI_Finalize waits for every rank; after a rank was dropped it can wait
 * forever (seen with Open MPI 4.1 and a killed rank), so then the ranks
 * leave without it (rank 0 tells the others in its stop request). */
static bool g_finalize = true;

int kiln_tune_mpi_finish(int rc)
{
    if (g_finalize) {
        MPI_Finalize();
        return rc;
    }
    fflush(NULL);
    _exit(rc);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    nanosleep(&(struct timespec){0, 2000000}, NULL);
}

/* Waits for request q until `deadline` (MONOTONIC seconds), sleeping between
 * tests; on the deadline cancels it. True when it completed. */
static bool wait_until(MPI_Request *q, double deadline)
{
    for (;;) {
        int done = 0;
        if (MPI_Test(q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            done = 0;
        if (done)
            return true;
        if (now_s() >= deadline)
            break;
        nap();
    }
    MPI_Cancel(q);
    MPI_Status st;
    MPI_Wait(q, &st);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    return !cancelled;
}

static bool send_bytes(const void *buf, int n, int dest, int tag, double deadline)
{
    MPI_Request q;
    if (MPI_Isend(buf, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &q) != MPI_SUCCESS)
        return false;
    return wait_until(&q, deadline);
}

/* A request: header, key, configs. malloc'ed; *len its size. */
static char *pack(const req_hdr *h, const char *key, const char *const *cfgs, int *len)
{
    size_t n = sizeof *h + strlen(key) + 1;
    for (int k = 0; k < h->n; k++)
        n += strlen(cfgs[k]) + 1;
    char *b = malloc(n);
    if (!b)
        return NULL;
    memcpy(b, h, sizeof *h);
    size_t p = sizeof *h;
    size_t kl = strlen(key) + 1;
    memcpy(b + p, key, kl);
    p += kl;
    for (int k = 0; k < h->n; k++) {
        size_t cl = strlen(cfgs[k]) + 1;
        memcpy(b + p, cfgs[k], cl);
        p += cl;
    }
    *len = (int)n;
    return b;
}

static void drop_rank(mpi_ctx *c, int rank, const char *why)
{
    if (!c->alive[rank])
        return;
    c->alive[rank] = false;
    c->dropped++;
    fprintf(c->log, "kiln tune: MPI rank %d (%s) dropped from the run: %s\n", rank,
            c->h[rank].host, why);
    if (rank != c->slot)
        return;
    /* the slot moves: a live rank of the same host and fingerprint, else
     * one of the fingerprint anywhere, else rank 0 itself */
    int next = 0;
    for (int pass = 0; pass < 2 && !next; pass++)
        for (int k = 1; k < c->size && !next; k++)
            if (c->alive[k] && !strcmp(c->h[k].fp, c->h[0].fp) &&
                (pass == 1 || !strcmp(c->h[k].host, c->h[rank].host)))
                next = k;
    c->slot = next;
    if (next)
        fprintf(c->log, "kiln tune: measurements move to MPI rank %d (%s)\n", next,
                c->h[next].host);
    else
        fprintf(c->log, "kiln tune: no worker rank left: rank 0 measures itself\n");
}

/* Sends one request to `rank` and waits for its answer into *res. */
static bool call(int rank, const req_hdr *h, const char *key,
                 const char *const *cfgs, double wait_s, res_msg *res, char *why, size_t why_size)
{
    int len = 0;
    char *b = pack(h, key, cfgs, &len);
    if (!b) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    double deadline = now_s() + wait_s;
    bool ok = send_bytes(b, len, rank, TAG_REQ, deadline);
    free(b);
    if (!ok) {
        snprintf(why, why_size, "the request could not be sent in %.0f s", wait_s);
        return false;
    }
    MPI_Request q;
    if (MPI_Irecv(res, (int)sizeof *res, MPI_BYTE, rank, TAG_RES, MPI_COMM_WORLD, &q) !=
            MPI_SUCCESS ||
        !wait_until(&q, deadline)) {
        snprintf(why, why_size, "no answer in %.0f s (dead or hung)", wait_s);
        return false;
    }
    return true;
}

static void local_measure(mpi_ctx *c, const char *key, const char *config, int repeat,
                          double min_ms, kiln_fault fault, kiln_trial *t)
{
    kiln_error err = {0};
    if (!c->local && kiln_tune_worker_create(c->o->cache_dir, c->o->jobs, c->o->timeout_s,
                                             c->o->num_threads, &c->local, &err) != KILN_OK) {
        t->status = KILN_TRIAL_ERROR;
        snprintf(t->error, sizeof t->error, "%.250s", err.msg);
        return;
    }
    kiln_tune_worker_set_cold(c->local, c->o->cold_weights);
    kiln_tune_worker_measure(c->local, key, config, repeat, min_ms, fault, t);
}

static void ex_measure(void *ctx, const char *key, const char *config, int repeat, double min_ms,
                       kiln_fault fault, kiln_trial *t)
{
    mpi_ctx *c = ctx;
    kiln_tune_cfg cfg = t->cfg;
    if (c->slot == 0) {
        local_measure(c, key, config, repeat, min_ms, fault, t);
        t->cfg = cfg;
        return;
    }
    req_hdr h = {.op = OP_MEASURE, .n = 1, .repeat = repeat, .fault = fault,
                 .min_repeat_ms = min_ms};
    res_msg *res = calloc(1, sizeof *res);
    char why[128];
    int rank = c->slot;
    if (res && call(rank, &h, key, &config, 1.25 * c->timeout_s + 5, res, why, sizeof why)) {
        *t = res->t;
    } else {
        if (!res)
            snprintf(why, sizeof why, "out of memory");
        drop_rank(c, rank, why);
        memset(t, 0, sizeof *t);
        t->status = KILN_TRIAL_TIMEOUT;
        snprintf(t->error, sizeof t->error,
                 "MPI rank %d (%.64s) measuring this configuration: %.100s; the rank was dropped", rank,
                 c->h[rank].host, why);
    }
    t->cfg = cfg;
    free(res);
}

static void ex_build(void *ctx, const char *key, const char *const *cfgs, int n)
{
    mpi_ctx *c = ctx;
    int ranks[MAX_RANKS], nr = 0;
    for (int k = 1; k < c->size && nr < MAX_RANKS; k++)
        if (c->alive[k])
            ranks[nr++] = k;
    if (nr == 0 || n <= 0)
        return; /* rank 0 measures: the measurement builds */
    /* configuration j goes to ranks[j % nr]; every rank's share in one
     * request, all sent first, then the answers collected */
    int share = (n + nr - 1) / nr, used = nr < n ? nr : n;
    const char **mine = malloc(sizeof *mine * (size_t)share + 1);
    MPI_Request *q = calloc((size_t)used, sizeof *q);
    res_msg *res = calloc((size_t)used, sizeof *res);
    double *deadline = calloc((size_t)used, sizeof *deadline);
    bool *sent = calloc((size_t)used, sizeof *sent);
    if (!mine || !q || !res || !deadline || !sent)
        goto done;
    for (int r = 0; r < used; r++) {
        int m = 0;
        for (int j = r; j < n; j += nr)
            mine[m++] = cfgs[j];
        req_hdr h = {.op = OP_BUILD, .n = m};
        int len = 0;
        char *b = pack(&h, key, mine, &len);
        deadline[r] = now_s() + m * c->timeout_s + 5;
        if (!b)
            continue;
        sent[r] = send_bytes(b, len, ranks[r], TAG_REQ, deadline[r]) &&
                  MPI_Irecv(&res[r], (int)sizeof res[r], MPI_BYTE, ranks[r], TAG_RES,
                            MPI_COMM_WORLD, &q[r]) == MPI_SUCCESS;
        free(b);
        if (!sent[r])
            drop_rank(c, ranks[r], "a build request could not be sent");
    }
    for (int r = 0; r < used; r++)
        if (sent[r] && !wait_until(&q[r], deadline[r])) {
            char why[96];
            snprintf(why, sizeof why, "no answer to a build request by its deadline (dead or "
                     "hung)");
            drop_rank(c, ranks[r], why);
        }
done:
    free(mine);
    free(q);
    free(res);
    free(deadline);
    free(sent);
}

/* Ranks 1..N-1: serve requests until OP_STOP. */
static void serve(const kiln_tune_options *o)
{
    kiln_tune_worker *wk = NULL;
    kiln_error err = {0};
    if (kiln_tune_worker_create(o->cache_dir, o->jobs, o->timeout_s, o->num_threads, &wk, &err) !=
        KILN_OK)
        return;
    kiln_tune_worker_set_cold(wk, o->cold_weights);
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(0, TAG_REQ, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS)
            break;
        if (!flag) {
            nap();
            continue;
        }
        int len = 0;
        MPI_Get_count(&st, MPI_BYTE, &len);
        char *b = malloc((size_t)len + 1);
        if (!b || len < (int)sizeof(req_hdr) ||
            MPI_Recv(b, len, MPI_BYTE, 0, TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS) {
            free(b);
            break;
        }
        b[len] = 0;
        req_hdr h;
        memcpy(&h, b, sizeof h);
        if (h.op == OP_STOP) {
            g_finalize = h.n == 0; /* n: ranks dropped during the run */
            free(b);
            break;
        }
        if (h.op == OP_MEASURE && h.fault == KILN_FAULT_DIE)
            raise(SIGKILL); /* fault injection: this rank dies mid-request */
        const char *key = b + sizeof h;
        const char *p = key + strlen(key) + 1;
        res_msg *res = calloc(1, sizeof *res);
        if (!res) {
            free(b);
            break;
        }
        res->op = h.op;
        for (int k = 0; k < h.n && p < b + len; k++) {
            if (h.op == OP_BUILD) {
                kiln_error e = {0};
                if (kiln_tune_worker_build(wk, key, p, &e) == KILN_OK)
                    res->n_ok++;
                else
                    res->n_failed++;
            } else {
                kiln_tune_worker_measure(wk, key, p, h.repeat, h.min_repeat_ms,
                                         (kiln_fault)h.fault, &res->t);
            }
            p += strlen(p) + 1;
        }
        MPI_Send(res, (int)sizeof *res, MPI_BYTE, 0, TAG_RES, MPI_COMM_WORLD);
        free(res);
        free(b);
    }
    kiln_tune_worker_destroy(wk);
}

kiln_status kiln_tune_mpi_run(const char *model, kiln_tune_options *o, kiln_tune_summary *sum,
                              bool *root, kiln_error *err)
{
    int inited = 0, rank = 0, size = 1;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "MPI_Init failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *root = rank == 0;
    kiln_status s = KILN_OK;
    hello me = {{0}, {0}};
    int hl = 0;
    snprintf(me.fp, sizeof me.fp, "%s", kiln_cpu_fingerprint_id());
    MPI_Get_processor_name(me.host, &hl);
    mpi_ctx c = {.size = size, .o = o, .log = o->log ? o->log : stderr};
    if (size > MAX_RANKS) {
        s = kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%d MPI ranks: at most %d", size, MAX_RANKS);
        goto out;
    }
    c.h = calloc((size_t)size, sizeof *c.h);
    c.alive = calloc((size_t)size, sizeof *c.alive);
    /* where the weights are when a task is timed: every rank decides it from
     * the model as rank 0's kiln_tune_run does (kiln_tune_cold_level) */
    if (o->cold_weights != 1 && o->cold_weights != 2) {
        kiln_graph *g = NULL;
        kiln_error lerr = {0};
        o->cold_weights = kiln_model_load(model, o->seed, &g, &lerr) == KILN_OK
                              ? kiln_tune_cold_level(g)
                              : 1; /* rank 0's kiln_tune_run reports a bad model */
        kiln_graph_destroy(g);
    }
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, c.h, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        serve(o);
        goto out;
    }
    if (!c.h || !c.alive) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto stop;
    }
    c.timeout_s = o->timeout_s > 0 ? o->timeout_s : 60;
    int hosts = 0;
    for (int k = 0; k < size; k++) {
        c.alive[k] = true;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++)
            seen = !strcmp(c.h[j].host, c.h[k].host);
        hosts += !seen;
    }
    /* the slot: a worker of rank 0's host and fingerprint, else of its
     * fingerprint anywhere, else rank 0 */
    for (int pass = 0; pass < 2 && !c.slot; pass++)
        for (int k = 1; k < size && !c.slot; k++)
            if (!strcmp(c.h[k].fp, c.h[0].fp) && (pass == 1 || !strcmp(c.h[k].host, c.h[0].host)))
                c.slot = k;
    snprintf(c.name, sizeof c.name, "%d MPI ranks on %d host%s, building on ranks 1-%d, "
             "measuring on rank %d (%.64s), one measurement at a time",
             size, hosts, hosts == 1 ? "" : "s", size - 1, c.slot, c.h[c.slot].host);
    if (size == 1)
        snprintf(c.name, sizeof c.name, "1 MPI rank: rank 0 builds and measures");
    kiln_tune_exec ex = {.ctx = &c, .name = c.name, .build = ex_build, .measure = ex_measure};
    o->exec = &ex;
    s = kiln_tune_run(model, o, sum, err);
    o->exec = NULL;
    if (c.dropped)
        fprintf(c.log, "kiln tune: %d MPI rank%s dropped during the run (their trials in flight "
                "are recorded as timeouts)\n", c.dropped, c.dropped == 1 ? "" : "s");
stop:
    for (int k = 1; k < size; k++)
        if (c.alive && c.alive[k]) {
            req_hdr h = {.op = OP_STOP, .n = c.dropped};
            int len = 0;
            h.n = 0; /* pack's count of configurations */
            char *b = pack(&h, "", NULL, &len);
            if (b)
                memcpy(b, &(req_hdr){.op = OP_STOP, .n = c.dropped}, sizeof h);
            if (b)
                send_bytes(b, len, k, TAG_REQ, now_s() + 10);
            free(b);
        }
out:
    if (rank == 0 && c.dropped)
        g_finalize = false;
    kiln_tune_worker_destroy(c.local);
    free(c.h);
    free(c.alive);
    return s; /* the caller ends with kiln_tune_mpi_finish */
}

#endif
