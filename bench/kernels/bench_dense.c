/* bench/kernels/bench_dense.c: the dense template on the dense layers of
 * real networks (classifier heads at batch 1, which are weight-streaming
 * GEMVs, and vit-b-16's projections, which are GEMMs): median ms, GFLOP/s,
 * fraction of the measured peak (bench/peak.c) and weight bandwidth, on 1
 * and 2 threads (the second half of the task range on a helper thread), with
 * the knobs a compiled model gets (kiln_dense_default_params with this
 * machine's caches and 2 threads, as the dense template asks), printed last.
 *
 * --cold N cycles the runs through N copies of the weights (N x the weights
 * beyond the last-level cache: weights streamed from memory, as in a network).
 *
 * --cpu-time times the calling thread's CPU time instead of the wall clock
 * (one-thread figures on a shared machine; the 2-thread ones mean nothing then).
 *
 * Usage: bench_dense [--reps N] [--knobs T,O,mg,ng] [--cold N] [--cpu-time] [--only SUBSTRING] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "report/report.h"

#include <sched.h>
#include <string.h>

#include "kiln_kernels_dense.h"

typedef struct dshape {
    const char *name;
    int m, k, n;
} dshape;

static const dshape SHAPES[] = {
    {"resnet fc 2048>1000", 1, 2048, 1000},    {"mobilenetv2 fc 1280>1000", 1, 1280, 1000},
    {"vgg fc6 25088>4096", 1, 25088, 4096},    {"vgg fc7 4096>4096", 1, 4096, 4096},
    {"vgg fc8 4096>1000", 1, 4096, 1000},      {"mlp fc1 784>128", 1, 784, 128},
    {"mlp fc3 64>10", 1, 64, 10},              {"vit head 768>1000", 1, 768, 1000},
    {"vit qkv 197x768>2304", 197, 768, 2304},  {"vit proj 197x768>768", 197, 768, 768},
    {"vit mlp1 197x768>3072", 197, 768, 3072}, {"vit mlp2 197x3072>768", 197, 3072, 768},
};

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct job {
    kiln_dense_params p;
    const float *x, *w, *b;
    float *y;
} job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gen, done, quit;
    const job *j;
    int64_t b, e;
} H = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL, 0, 0};

static void *helper_main(void *arg)
{
    (void)arg;
    int seen = 0;
    pthread_mutex_lock(&H.mu);
    for (;;) {
        while (H.gen == seen && !H.quit)
            pthread_cond_wait(&H.cv, &H.mu);
        if (H.quit)
            break;
        seen = H.gen;
        const job *j = H.j;
        int64_t b = H.b, e = H.e;
        pthread_mutex_unlock(&H.mu);
        kiln_dense_run(&j->p, j->x, j->w, j->b, NULL, j->y, b, e);
        pthread_mutex_lock(&H.mu);
        H.done = seen;
        pthread_cond_broadcast(&H.cv);
    }
    pthread_mutex_unlock(&H.mu);
    return NULL;
}

static void run(const job *j, int threads)
{
    int64_t n = kiln_dense_tasks(&j->p);
    if (threads == 1) {
        kiln_dense_run(&j->p, j->x, j->w, j->b, NULL, j->y, 0, n);
        return;
    }
    pthread_mutex_lock(&H.mu);
    H.j = j;
    H.b = n / 2;
    H.e = n;
    int g = ++H.gen;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
    kiln_dense_run(&j->p, j->x, j->w, j->b, NULL, j->y, 0, n / 2);
    pthread_mutex_lock(&H.mu);
    while (H.done != g)
        pthread_cond_wait(&H.cv, &H.mu);
    pthread_mutex_unlock(&H.mu);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *rand_buf(int64_t n)
{
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    int reps = 20, knobs[5] = {0}, have = 0, cold = 1;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--knobs") && i + 1 < argc)
            have = sscanf(argv[++i], "%d,%d,%d,%d", &knobs[0], &knobs[1], &knobs[2], &knobs[3]) == 4;
        else if (!strcmp(argv[i], "--cpu-time"))
            clock_id = CLOCK_THREAD_CPUTIME_ID;
        else if (!strcmp(argv[i], "--cold") && i + 1 < argc)
            cold = atoi(argv[++i]) > 1 ? atoi(argv[i]) : 1;

    }
    pthread_t th;
    pthread_create(&th, NULL, helper_main, NULL);
    double peak[3];
    for (int t = 1; t <= 2; t++) {
        peak[t] = kiln_peak_measure(t, NULL, 0);
        printf("measured peak %d thread(s): %.1f GFLOP/s (best of five)\n", t, peak[t]);
    }
    printf("%-26s | %-44s | %-44s\n", "shape", "1 thread: ms GFLOP/s %peak GB/s(weights)",
           "2 threads: ms GFLOP/s %peak GB/s(weights)");
    /* the caches the compiler's target reads (target/target.c), and its
     * thread count: the configuration a compiled model gets */
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    l1 = l1 > 0 ? l1 : 32 << 10;
    l2 = l2 > 0 ? l2 : 1 << 20;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const dshape *s = &SHAPES[i];
        if (only && !strstr(s->name, only))
            continue;
        printf("%-26s", s->name);
        kiln_dense_params shown = {0};
        for (int t = 1; t <= 2; t++) {
            job j = {.p = {.m = s->m, .k = s->k, .n = s->n, .nb = 16, .alpha = 1.0f, .beta = 1.0f,
                           .epilogue = KILN_EPI_BIAS}};
            kiln_dense_default_params(&j.p, l1, l2, 2);
            if (have) {
                j.p.m_tile = knobs[0];
                j.p.n_tile = knobs[1];
                j.p.m_group = knobs[2];
                j.p.n_group = knobs[3];
            }

            float *x = rand_buf((int64_t)s->m * s->k), *ws[64];
            for (int c = 0; c < cold && c < 64; c++)
                ws[c] = rand_buf(kiln_dense_packed_weight_floats(&j.p));
            float *w = ws[0];
            float *b = rand_buf(s->n), *y = rand_buf((int64_t)s->m * s->n);
            j.x = x;
            j.w = w;
            j.b = b;
            j.y = y;
            shown = j.p;
            run(&j, t);
            double t0 = now_s();
            run(&j, t);
            double one = now_s() - t0;
            int n = (int)(0.25 / (one > 1e-6 ? one : 1e-6));
            n = n < reps ? reps : n > 2000 ? 2000 : n;
            double *ts = malloc(sizeof(double) * (size_t)n);
            for (int r = 0; r < n; r++) {
                j.w = ws[r % (cold < 64 ? cold : 64)];
                double a = now_s();
                run(&j, t);
                ts[r] = now_s() - a;
            }
            qsort(ts, (size_t)n, sizeof(double), cmp_d);
            double med = ts[n / 2], gf = kiln_dense_flops(&j.p) / med * 1e-9;
            printf(" | %8.3f ms %7.1f %4.0f%% %6.1f", med * 1e3, gf, 100 * gf / peak[t],
                   (double)s->k * s->n * 4 / med * 1e-9);
            free(ts);
            free(x);
            for (int c = 0; c < cold && c < 64; c++)
                free(ws[c]);
            (void)w;
            free(b);
            free(y);
        }
        printf(" | T%d O%d mg%d ng%d\n", shown.m_tile, shown.n_tile, shown.m_group, shown.n_group);
        fflush(stdout);
    }
    pthread_mutex_lock(&H.mu);
    H.quit = 1;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
    pthread_join(th, NULL);
    return 0;
}
