/* bench/kernels/bench_conv.c: the convolution templates on the convolution
 * shapes of real networks (batch 1): all of resnet-50's, resnext-50's dense
 * ones, resnet-18's,
 * vgg-16's, mobilenet-v2's depthwise layers, inception-v3's stem, biggest
 * square convs and 1x7/7x1 (and 1x3/3x1) ones. Per shape: median ms,
 * GFLOP/s and fraction of the measured peak (bench/peak.c) on 1 and 2
 * threads, then per network the time-weighted total (sum of count x median
 * time, total FLOPs / that time).
 *
 * Usage: bench_conv [network-prefix] [--reps N] [--threads 1|2|12]
 *                   [--knobs T,O,ic,order,ohb,ocg] [--shape SUBSTRING] [--cold]
 *                   [--cold-io] [--cpu-time]
 * Knobs are the analytic defaults (kiln_conv_default_params with this
 * machine's L1d and L2 from sysconf, as the compiler uses, and the thread
 * count) unless given. --cold streams the weights from DRAM on every run (as
 * in a network whose weights exceed the caches) instead of reusing them.
 * --cold-io (with --cold or alone) also rotates the input, output and
 * residual through copies adding up to >= 64 MiB, so each run reads its input
 * and writes its output outside L1/L2 as a network's layer does (its input
 * was written by the previous layer on both cores, its output goes to an
 * arena region last touched layers ago). The copies lie on huge pages, as
 * the runtime allocates a network's weights and arena (module.c).
 * Environment: KB_VERBOSE=1 prints the knobs, KB_CBI=N forces the input
 * block, KB_RES=1 adds a residual to the epilogue, KB_TILE=T,O sets the
 * register tile (the other knobs stay the defaults). Two threads claim chunks
 * of the task range in order as the runtime's pool does (up to 8 chunks), the
 * second thread a spinning helper (no pool: that is the runtime's business). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "report/report.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "kiln_kernels_conv.h"
#include "kiln_kernels_dwconv.h"

typedef struct shape {
    const char *net, *name;
    int count;    /* times it occurs in the network */
    int cin, cout, h, w, kh, kw, s, ph, pw; /* symmetric pads */
    int dw;       /* depthwise */
} shape;

/* clang-format off */
static const shape SHAPES[] = {
    /* resnet-50 (torchvision: stride on the 3x3) */
    {"resnet50", "conv1 7x7/2",         1,    3,   64, 224, 224, 7, 7, 2, 3, 3, 0},
    {"resnet50", "l1 1x1 64>64",        1,   64,   64,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l1 3x3 64",           3,   64,   64,  56,  56, 3, 3, 1, 1, 1, 0},
    {"resnet50", "l1 1x1 64>256",       4,   64,  256,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l1 1x1 256>64",       2,  256,   64,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l2 1x1 256>128",      1,  256,  128,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l2 3x3/2 128",        1,  128,  128,  56,  56, 3, 3, 2, 1, 1, 0},
    {"resnet50", "l2 1x1 128>512",      4,  128,  512,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l2 ds 1x1/2 256>512", 1,  256,  512,  56,  56, 1, 1, 2, 0, 0, 0},
    {"resnet50", "l2 1x1 512>128",      3,  512,  128,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l2 3x3 128",          3,  128,  128,  28,  28, 3, 3, 1, 1, 1, 0},
    {"resnet50", "l3 1x1 512>256",      1,  512,  256,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l3 3x3/2 256",        1,  256,  256,  28,  28, 3, 3, 2, 1, 1, 0},
    {"resnet50", "l3 1x1 256>1024",     6,  256, 1024,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l3 ds 1x1/2 512>1024",1,  512, 1024,  28,  28, 1, 1, 2, 0, 0, 0},
    {"resnet50", "l3 1x1 1024>256",     5, 1024,  256,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l3 3x3 256",          5,  256,  256,  14,  14, 3, 3, 1, 1, 1, 0},
    {"resnet50", "l4 1x1 1024>512",     1, 1024,  512,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l4 3x3/2 512",        1,  512,  512,  14,  14, 3, 3, 2, 1, 1, 0},
    {"resnet50", "l4 1x1 512>2048",     3,  512, 2048,   7,   7, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l4 ds 1x1/2 1024>2048",1, 1024, 2048,  14,  14, 1, 1, 2, 0, 0, 0},
    {"resnet50", "l4 1x1 2048>512",     2, 2048,  512,   7,   7, 1, 1, 1, 0, 0, 0},
    {"resnet50", "l4 3x3 512",          2,  512,  512,   7,   7, 3, 3, 1, 1, 1, 0},
    /* resnext50_32x4d's dense convs (its grouped 3x3s run on other templates) */
    {"resnext50", "conv1 7x7/2",         1,    3,   64, 224, 224, 7, 7, 2, 3, 3, 0},
    {"resnext50", "l1 1x1 64>128",       1,   64,  128,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l1 1x1 256>128",      2,  256,  128,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l1 1x1 128>256",      3,  128,  256,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l1 ds 1x1 64>256",    1,   64,  256,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l2 1x1 256>256 @56",  1,  256,  256,  56,  56, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l2 1x1 256>512",      4,  256,  512,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l2 1x1 512>256",      3,  512,  256,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l2 ds 1x1/2 256>512", 1,  256,  512,  56,  56, 1, 1, 2, 0, 0, 0},
    {"resnext50", "l3 1x1 512>512 @28",  1,  512,  512,  28,  28, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l3 1x1 512>1024",     6,  512, 1024,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l3 1x1 1024>512",     5, 1024,  512,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l3 ds 1x1/2 512>1024",1,  512, 1024,  28,  28, 1, 1, 2, 0, 0, 0},
    {"resnext50", "l4 1x1 1024>1024 @14",1, 1024, 1024,  14,  14, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l4 1x1 1024>2048",    3, 1024, 2048,   7,   7, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l4 1x1 2048>1024",    2, 2048, 1024,   7,   7, 1, 1, 1, 0, 0, 0},
    {"resnext50", "l4 ds 1x1/2 1024>2048",1,1024, 2048,  14,  14, 1, 1, 2, 0, 0, 0},
    /* resnet-18 */
    {"resnet18", "conv1 7x7/2",         1,    3,   64, 224, 224, 7, 7, 2, 3, 3, 0},
    {"resnet18", "l1 3x3 64",           4,   64,   64,  56,  56, 3, 3, 1, 1, 1, 0},
    {"resnet18", "l2 3x3/2 64>128",     1,   64,  128,  56,  56, 3, 3, 2, 1, 1, 0},
    {"resnet18", "l2 3x3 128",          3,  128,  128,  28,  28, 3, 3, 1, 1, 1, 0},
    {"resnet18", "l2 ds 1x1/2 64>128",  1,   64,  128,  56,  56, 1, 1, 2, 0, 0, 0},
    {"resnet18", "l3 3x3/2 128>256",    1,  128,  256,  28,  28, 3, 3, 2, 1, 1, 0},
    {"resnet18", "l3 3x3 256",          3,  256,  256,  14,  14, 3, 3, 1, 1, 1, 0},
    {"resnet18", "l3 ds 1x1/2 128>256", 1,  128,  256,  28,  28, 1, 1, 2, 0, 0, 0},
    {"resnet18", "l4 3x3/2 256>512",    1,  256,  512,  14,  14, 3, 3, 2, 1, 1, 0},
    {"resnet18", "l4 3x3 512",          3,  512,  512,   7,   7, 3, 3, 1, 1, 1, 0},
    {"resnet18", "l4 ds 1x1/2 256>512", 1,  256,  512,  14,  14, 1, 1, 2, 0, 0, 0},
    /* vgg-16 */
    {"vgg16", "3x3 3>64 @224",          1,    3,   64, 224, 224, 3, 3, 1, 1, 1, 0},
    {"squeezenet11", "3x3/2 3>64 @224", 1,    3,   64, 224, 224, 3, 3, 2, 0, 0, 0},
    {"vgg16", "3x3 64 @224",            1,   64,   64, 224, 224, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 64>128 @112",        1,   64,  128, 112, 112, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 128 @112",           1,  128,  128, 112, 112, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 128>256 @56",        1,  128,  256,  56,  56, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 256 @56",            2,  256,  256,  56,  56, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 256>512 @28",        1,  256,  512,  28,  28, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 512 @28",            2,  512,  512,  28,  28, 3, 3, 1, 1, 1, 0},
    {"vgg16", "3x3 512 @14",            3,  512,  512,  14,  14, 3, 3, 1, 1, 1, 0},
    /* mobilenet-v2 depthwise 3x3 */
    {"mobilenetv2", "3x3/2 3>32 @224",  1,    3,   32, 224, 224, 3, 3, 2, 1, 1, 0},
    {"mobilenetv2", "1x1 32>16 @112",   1,   32,   16, 112, 112, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 16>96 @112",   1,   16,   96, 112, 112, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 96>24 @56",    1,   96,   24,  56,  56, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 24>144 @56",   2,   24,  144,  56,  56, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 144>24 @56",   1,  144,   24,  56,  56, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 144>32 @28",   1,  144,   32,  28,  28, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 32>192 @28",   3,   32,  192,  28,  28, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 192>32 @28",   2,  192,   32,  28,  28, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 192>64 @14",   1,  192,   64,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 64>384 @14",   4,   64,  384,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 384>64 @14",   3,  384,   64,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 384>96 @14",   1,  384,   96,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 96>576 @14",   3,   96,  576,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 576>96 @14",   2,  576,   96,  14,  14, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 576>160 @7",   1,  576,  160,   7,   7, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 160>960 @7",   3,  160,  960,   7,   7, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 960>160 @7",   2,  960,  160,   7,   7, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 960>320 @7",   1,  960,  320,   7,   7, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "1x1 320>1280 @7",  1,  320, 1280,   7,   7, 1, 1, 1, 0, 0, 0},
    {"mobilenetv2", "dw 32 @112",       1,   32,   32, 112, 112, 3, 3, 1, 1, 1, 1},
    {"mobilenetv2", "dw 96 @112/2",     1,   96,   96, 112, 112, 3, 3, 2, 1, 1, 1},
    {"mobilenetv2", "dw 144 @56",       1,  144,  144,  56,  56, 3, 3, 1, 1, 1, 1},
    {"mobilenetv2", "dw 144 @56/2",     1,  144,  144,  56,  56, 3, 3, 2, 1, 1, 1},
    {"mobilenetv2", "dw 192 @28",       2,  192,  192,  28,  28, 3, 3, 1, 1, 1, 1},
    {"mobilenetv2", "dw 192 @28/2",     1,  192,  192,  28,  28, 3, 3, 2, 1, 1, 1},
    {"mobilenetv2", "dw 384 @14",       4,  384,  384,  14,  14, 3, 3, 1, 1, 1, 1},
    {"mobilenetv2", "dw 576 @14",       2,  576,  576,  14,  14, 3, 3, 1, 1, 1, 1},
    {"mobilenetv2", "dw 576 @14/2",     1,  576,  576,  14,  14, 3, 3, 2, 1, 1, 1},
    {"mobilenetv2", "dw 960 @7",        3,  960,  960,   7,   7, 3, 3, 1, 1, 1, 1},
    /* inception-v3: the stem and the biggest square convs, then the asymmetric ones */
    {"inceptionv3", "3x3/2 3>32 @299",  1,    3,   32, 299, 299, 3, 3, 2, 0, 0, 0},
    {"inceptionv3", "3x3 32>32 @149",   1,   32,   32, 149, 149, 3, 3, 1, 0, 0, 0},
    {"inceptionv3", "3x3 32>64 @147",   1,   32,   64, 147, 147, 3, 3, 1, 1, 1, 0},
    {"inceptionv3", "1x1 64>80 @73",    1,   64,   80,  73,  73, 1, 1, 1, 0, 0, 0},
    {"inceptionv3", "3x3 80>192 @73",   1,   80,  192,  73,  73, 3, 3, 1, 0, 0, 0},
    {"inceptionv3", "5x5 48>64 @35",    3,   48,   64,  35,  35, 5, 5, 1, 2, 2, 0},
    {"inceptionv3", "3x3 64>96 @35",    4,   64,   96,  35,  35, 3, 3, 1, 1, 1, 0},
    {"inceptionv3", "3x3 96>96 @35",    3,   96,   96,  35,  35, 3, 3, 1, 1, 1, 0},
    {"inceptionv3", "3x3/2 288>384 @35",1,  288,  384,  35,  35, 3, 3, 2, 0, 0, 0},
    {"inceptionv3", "3x3/2 96>96 @35",  1,   96,   96,  35,  35, 3, 3, 2, 0, 0, 0},
    {"inceptionv3", "1x1 768>192 @17", 10,  768,  192,  17,  17, 1, 1, 1, 0, 0, 0},
    {"inceptionv3", "3x3/2 192>320 @17",1,  192,  320,  17,  17, 3, 3, 2, 0, 0, 0},
    {"inceptionv3", "3x3 448>384 @8",   2,  448,  384,   8,   8, 3, 3, 1, 1, 1, 0},
    {"inceptionv3", "1x1 2048>448 @8",  1, 2048,  448,   8,   8, 1, 1, 1, 0, 0, 0},
    {"inceptionv3", "1x7 128>128 @17",  2,  128,  128,  17,  17, 1, 7, 1, 0, 3, 0},
    {"inceptionv3", "7x1 128>192 @17",  2,  128,  192,  17,  17, 7, 1, 1, 3, 0, 0},
    {"inceptionv3", "1x7 160>160 @17",  4,  160,  160,  17,  17, 1, 7, 1, 0, 3, 0},
    {"inceptionv3", "7x1 160>192 @17",  4,  160,  192,  17,  17, 7, 1, 1, 3, 0, 0},
    {"inceptionv3", "1x7 192>192 @17",  4,  192,  192,  17,  17, 1, 7, 1, 0, 3, 0},
    {"inceptionv3", "7x1 192>192 @17",  4,  192,  192,  17,  17, 7, 1, 1, 3, 0, 0},
    {"inceptionv3", "1x3 384>384 @8",   2,  384,  384,   8,   8, 1, 3, 1, 0, 1, 0},
    {"inceptionv3", "3x1 384>384 @8",   2,  384,  384,   8,   8, 3, 1, 1, 1, 0, 0},
};
/* clang-format on */

static int g_cpu_time;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- a two-thread split with a spinning helper ------------------------------ */

typedef struct job {
    const shape *s;
    kiln_conv_params cp;
    kiln_dwconv_params dp;
    const float *in, *w, *bias, *res;
    float *out;
    void *ws[2];
} job;

static void job_run(const job *j, int64_t b, int64_t e, int thread)
{
    if (j->s->dw)
        kiln_dwconv_run(&j->dp, j->in, j->w, j->bias, j->res, j->out, b, e, NULL);
    else
        kiln_conv_run(&j->cp, j->in, j->w, j->bias, j->res, j->out, b, e, j->ws[thread]);
}

static int64_t job_tasks(const job *j)
{
    return j->s->dw ? kiln_dwconv_tasks(&j->dp) : kiln_conv_tasks(&j->cp);
}

static struct {
    _Atomic int gen, done, quit;
    _Atomic int64_t next; /* the next chunk to claim */
    const job *j;
    int64_t n, chunk;
    double cpu; /* the helper's CPU time in its chunks, seconds */
} helper;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Claims and runs chunks of the task range until none is left, as the
 * runtime's pool does (runtime/pool.c: up to 4 chunks per thread, taken in
 * order by whichever thread is free); returns this thread's CPU time in them. */
static double run_chunks(const job *j, int thread)
{
    double t0 = thread_cpu_s();
    for (;;) {
        int64_t c = atomic_fetch_add(&helper.next, 1), b = c * helper.chunk;
        if (b >= helper.n)
            break;
        job_run(j, b, b + helper.chunk < helper.n ? b + helper.chunk : helper.n, thread);
    }
    return thread_cpu_s() - t0;
}

static void *helper_main(void *arg)
{
    (void)arg;
    int seen = 0;
    for (;;) {
        int g;
        for (int spin = 0; (g = atomic_load_explicit(&helper.gen, memory_order_acquire)) == seen;
             spin++) {
            if (atomic_load(&helper.quit))
                return NULL;
            if (spin > 20000)
                sched_yield(); /* the machine is shared: let the other thread have the core */
        }
        seen = g;
        helper.cpu = run_chunks(helper.j, 1);
        atomic_store_explicit(&helper.done, g, memory_order_release);
    }
}

/* Runs the job; returns the threads' CPU time in their work divided by the
 * thread count (what --cpu-time reports: the time if the work were evenly
 * shared, without the waits; an uneven split of the tasks does not show). */
static double run_threads(const job *j, int threads)
{
    int64_t n = job_tasks(j);
    if (threads == 1) {
        double t0 = thread_cpu_s();
        job_run(j, 0, n, 0);
        return thread_cpu_s() - t0;
    }
    int64_t nc = n < 8 ? n : 8;
    helper.j = j;
    helper.n = n;
    helper.chunk = (n + nc - 1) / nc;
    atomic_store(&helper.next, 0);
    int g = atomic_load(&helper.gen) + 1;
    atomic_store_explicit(&helper.gen, g, memory_order_release);
    double mine = run_chunks(j, 0);
    for (int spin = 0; atomic_load_explicit(&helper.done, memory_order_acquire) != g; spin++)
        if (spin > 20000)
            sched_yield();
    return (mine + helper.cpu) / 2;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *rand_buf(int64_t n, unsigned seed)
{
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

/* n floats (any n >= 0) on 2 MiB-aligned memory advised MADV_HUGEPAGE, as
 * the runtime allocates a network's arena and weights (module.c: a network
 * streams its weights on every run, and with 4 KiB pages each page costs a
 * TLB miss) */
static float *huge_buf(int64_t n)
{
    size_t b = (size_t)((n * 4 + (2 << 20) - 1) / (2 << 20) * (2 << 20));
    if (b == 0)
        b = 2 << 20;
    float *p = aligned_alloc(2 << 20, b);
    if (!p) {
        fprintf(stderr, "bench_conv: out of memory\n");
        exit(1);
    }
    madvise(p, b, MADV_HUGEPAGE);
    return p;
}

typedef struct result {
    double ms, mn, mx, gflops;
} result;

static int g_knobs[6], g_have_knobs, g_cold, g_cold_io;
static int64_t g_l1 = 48 << 10, g_l2 = 1 << 20; /* the compiler's (sysconf), set in main */
/* The block width the compiler picks on this machine: the vector width. */
#ifdef __AVX512F__
#define KB_VEC 16
#else
#define KB_VEC 8
#endif

/* Median time of a shape on `threads` threads (1 or 2). */
static result bench_shape(const shape *s, int threads, int reps)
{
    job j = {.s = s};
    /* the blocks the compiler picks: NCHW{c}c for a 3-channel image; KB_CBI=N overrides */
    int cbi = s->cin == 3 ? 3 : KB_VEC;
    if (getenv("KB_CBI"))
        cbi = atoi(getenv("KB_CBI"));
    int oh = (s->h + 2 * s->ph - s->kh) / s->s + 1, ow = (s->w + 2 * s->pw - s->kw) / s->s + 1;
    double flops;
    int64_t nin, nw, nout;
    if (s->dw) {
        kiln_dwconv_params p = {.n = 1, .c = s->cin, .h = s->h, .w = s->w, .oh = oh, .ow = ow,
                                .kh = s->kh, .kw = s->kw, .sh = s->s, .sw = s->s, .dh = 1,
                                .dw = 1, .pad_t = s->ph, .pad_l = s->pw, .pad_b = s->ph,
                                .pad_r = s->pw, .cb = KB_VEC,
                                .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP, .clip_min = 0,
                                .clip_max = 6};
        kiln_dwconv_default_params(&p, g_l1, g_l2, threads);
        if (g_have_knobs) {
            p.ow_tile = g_knobs[0];
            p.oh_tile = g_knobs[4];
        }
        j.dp = p;
        flops = kiln_dwconv_flops(&p);
        nin = (int64_t)(s->cin + KB_VEC - 1) / KB_VEC * KB_VEC * s->h * s->w;
        nw = kiln_dwconv_packed_weight_floats(&p);
        nout = (int64_t)(s->cin + KB_VEC - 1) / KB_VEC * KB_VEC * oh * ow;
    } else {
        kiln_conv_params p = {.n = 1, .c_in = s->cin, .h = s->h, .w = s->w, .c_out = s->cout,
                              .oh = oh, .ow = ow, .kh = s->kh, .kw = s->kw, .sh = s->s,
                              .sw = s->s, .dh = 1, .dw = 1, .pad_t = s->ph, .pad_l = s->pw,
                              .pad_b = s->ph, .pad_r = s->pw, .groups = 1, .cb_in = cbi,
                              .cb_out = KB_VEC, .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU};
        if (getenv("KB_RES")) /* KB_RES=1: a residual added in the epilogue, as in a resnet */
            p.epilogue |= KILN_EPI_RESIDUAL;
        kiln_conv_default_params(&p, g_l1, g_l2, threads);
        if (g_have_knobs) {
            p.ow_tile = g_knobs[0];
            p.oc_tile = g_knobs[1];
            p.ic_tile = g_knobs[2];
            p.loop_order = g_knobs[3];
            p.oh_tile = g_knobs[4];
            p.oc_group = g_knobs[5];
        }
        if (getenv("KB_TILE")) /* KB_TILE=T,O: the register tile alone, the rest as chosen */
            sscanf(getenv("KB_TILE"), "%d,%d", &p.ow_tile, &p.oc_tile);
        j.cp = p;
        if (getenv("KB_VERBOSE"))
            printf(" [T%d O%d ic%d ord%d ohb%d ocg%d tasks%lld]", p.ow_tile, p.oc_tile, p.ic_tile,
                   p.loop_order, p.oh_tile, p.oc_group, (long long)kiln_conv_tasks(&p));
        flops = kiln_conv_flops(&p);
        nin = (int64_t)(s->cin + cbi - 1) / cbi * cbi * s->h * s->w;
        nw = kiln_conv_packed_weight_floats(&p);
        nout = (int64_t)(s->cout + KB_VEC - 1) / KB_VEC * KB_VEC * oh * ow;
        size_t wsb = kiln_conv_workspace_bytes(&p);
        j.ws[0] = wsb ? aligned_alloc(64, (wsb + 63) / 64 * 64) : NULL;
        j.ws[1] = wsb ? aligned_alloc(64, (wsb + 63) / 64 * 64) : NULL;
    }
    float *in = rand_buf(nin, 1), *w = rand_buf(nw, 2), *bias = rand_buf(nout, 3);
    float *out = rand_buf(nout, 4);
    /* --cold: rotate through copies of the weights adding up to >= 256 MiB, so
     * each run reads its weights from DRAM, as in a network whose weights do
     * not fit the caches; the copies lie in one region on huge pages, as the
     * runtime keeps a network's weights (module.c) */
    int ncopies = 1;
    float **wc = &w;
    int64_t wstride = (nw + 15) / 16 * 16;
    float *wregion = NULL;
    if (g_cold) {
        ncopies = (int)((256LL << 20) / (nw * 4) + 1);
        wc = malloc(sizeof *wc * (size_t)ncopies);
        wregion = huge_buf(wstride * (ncopies - 1));
        wc[0] = w;
        for (int c = 1; c < ncopies; c++) {
            wc[c] = wregion + (c - 1) * wstride;
            memcpy(wc[c], w, (size_t)nw * 4);
        }
    }
    float *res = getenv("KB_RES") ? rand_buf(nout, 5) : NULL;
    /* --cold-io: copies of the input, output and residual (index 0: the
     * originals), in one region on huge pages as the runtime's arena */
    int nio = 1;
    float *io_in[64], *io_out[64], *io_res[64], *ioregion = NULL;
    io_in[0] = in;
    io_out[0] = out;
    io_res[0] = res;
    if (g_cold_io) {
        int64_t sin = (nin + 15) / 16 * 16, sout = (nout + 15) / 16 * 16;
        int64_t per = sin + sout * (res ? 2 : 1);
        nio = (int)kiln_k_min64(64, (64LL << 20) / (per * 4) + 1);
        ioregion = huge_buf(per * (nio - 1));
        for (int c = 1; c < nio; c++) {
            float *b = ioregion + (c - 1) * per;
            io_in[c] = b;
            io_out[c] = b + sin;
            io_res[c] = res ? b + sin + sout : NULL;
            memcpy(io_in[c], in, (size_t)nin * 4);
            memcpy(io_out[c], out, (size_t)nout * 4);
            if (res)
                memcpy(io_res[c], res, (size_t)nout * 4);
        }
    }
    j.res = res;
    j.in = in;
    j.w = w;
    j.bias = bias;
    j.out = out;
    /* repetitions: at least `reps`, and about 0.25 s */
    run_threads(&j, threads);
    double t0 = now_s();
    run_threads(&j, threads);
    double one = now_s() - t0;
    int n = (int)(0.25 / (one > 1e-6 ? one : 1e-6));
    if (n < reps)
        n = reps;
    if (n > 2000)
        n = 2000;
    double *ts = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        j.w = wc[i % ncopies];
        j.in = io_in[i % nio];
        j.out = io_out[i % nio];
        j.res = io_res[i % nio];
        double a = now_s();
        double cpu = run_threads(&j, threads);
        ts[i] = g_cpu_time ? cpu : now_s() - a;
    }
    qsort(ts, (size_t)n, sizeof(double), cmp_d);
    result r = {ts[n / 2] * 1e3, ts[0] * 1e3, ts[n - 1] * 1e3, flops / ts[n / 2] * 1e-9};
    free(ts);
    free(ioregion);
    free(res);
    free(in);
    free(wregion);
    if (wc != &w)
        free(wc);
    free(w);
    free(bias);
    free(out);
    free(j.ws[0]);
    free(j.ws[1]);
    return r;
}

int main(int argc, char **argv)
{
    const char *filter = NULL, *only = NULL;
    int reps = 20, tmask = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            int t = atoi(argv[++i]);
            tmask = t == 1 ? 1 : t == 2 ? 2 : 3;
        } else if (!strcmp(argv[i], "--knobs") && i + 1 < argc) {
            g_have_knobs = sscanf(argv[++i], "%d,%d,%d,%d,%d,%d", &g_knobs[0], &g_knobs[1],
                                  &g_knobs[2], &g_knobs[3], &g_knobs[4], &g_knobs[5]) == 6;
        } else if (!strcmp(argv[i], "--cold")) {
            g_cold = 1;
        } else if (!strcmp(argv[i], "--cold-io")) {
            g_cold_io = 1;
        } else if (!strcmp(argv[i], "--cpu-time")) {
            g_cpu_time = 1;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            only = argv[++i];
        } else
            filter = argv[i];
    }
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 > 0)
        g_l1 = l1;
    if (l2 > 0)
        g_l2 = l2;
    pthread_t th;
    pthread_create(&th, NULL, helper_main, NULL);
    double peak[3] = {0, 0, 0};
    for (int t = 1; t <= 2; t++)
        if (tmask & t) {
            peak[t] = kiln_peak_measure(t, NULL, 0);
            printf("measured peak %d thread(s): %.1f GFLOP/s (best of five)\n", t, peak[t]);
        }
    const char *cur = NULL;
    double tot_t[3] = {0}, tot_f = 0;
    int nshapes = (int)(sizeof SHAPES / sizeof SHAPES[0]);
    for (int i = 0; i <= nshapes; i++) {
        const shape *s = i < nshapes ? &SHAPES[i] : NULL;
        if (s && filter && strncmp(s->net, filter, strlen(filter)))
            continue;
        if (s && only && !strstr(s->name, only))
            continue;
        if (cur && (!s || strcmp(cur, s->net))) {
            printf("== %s total (count-weighted): %.1f GFLOP", cur, tot_f * 1e-9);
            for (int t = 1; t <= 2; t++)
                if (tmask & t)
                    printf(" | %dT %.2f ms %.1f GFLOP/s %.0f%% of peak", t, tot_t[t] * 1e3,
                           tot_f / tot_t[t] * 1e-9, 100 * tot_f / tot_t[t] * 1e-9 / peak[t]);
            printf("\n\n");
            tot_t[1] = tot_t[2] = tot_f = 0;
        }
        if (!s)
            break;
        if (!cur || strcmp(cur, s->net)) {
            cur = s->net;
            printf("%-12s %-22s %3s | %-34s | %-34s\n", "network", "shape", "cnt",
                   "1 thread: ms (min-max) GFLOP/s %pk", "2 threads: ms (min-max) GFLOP/s %pk");
        }
        printf("%-12s %-22s %3d", s->net, s->name, s->count);
        double flops = 0;
        for (int t = 1; t <= 2; t++) {
            if (!(tmask & t)) {
                printf(" | %-34s", "-");
                continue;
            }
            result r = bench_shape(s, t, reps);
            flops = r.gflops * r.ms * 1e6;
            tot_t[t] += s->count * r.ms * 1e-3;
            printf(" | %7.3f (%6.3f-%7.3f) %6.1f %3.0f%%", r.ms, r.mn, r.mx, r.gflops,
                   100 * r.gflops / peak[t]);
        }
        tot_f += s->count * flops;
        printf("\n");
        fflush(stdout);
    }
    atomic_store(&helper.quit, 1);
    pthread_join(th, NULL);
    return 0;
}
