/* bench/kernels/bench_expdw.c: the fused expand 1x1 + depthwise
 * (kiln_kernels_expdw.h) against the two kernels it replaces
 * (kiln_kernels_conv.h then kiln_kernels_dwconv.h, the wide tensor through
 * memory), on the inverted-residual blocks of mobilenet-v2, mobilenet-v3
 * and efficientnet-b0 (batch 1, ReLU6 epilogues, one thread). Per shape:
 * the minimum over the runs of each, GFLOP/s of the fused one, and the
 * ratio fused / separate; the knobs are the analytic defaults with this
 * machine's L1d and L2 (sysconf), as the compiler uses them.
 *
 * Usage: bench_expdw [--reps N] [--sub ROWS] [--order 0|1] */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln_kernels_expdw.h"

typedef struct shape {
    const char *name;
    int cin, cwide, h, k, s;
} shape;

static const shape SHAPES[] = {
    {"mnv2 b2 16>96 112 3x3/2", 16, 96, 112, 3, 2},
    {"mnv2 b3 24>144 56 3x3/1", 24, 144, 56, 3, 1},
    {"mnv2 b4 24>144 56 3x3/2", 24, 144, 56, 3, 2},
    {"mnv2 b5 32>192 28 3x3/1", 32, 192, 28, 3, 1},
    {"mnv3 b2 16>64 112 3x3/2", 16, 64, 112, 3, 2},
    {"effb0 b4 24>144 56 5x5/2", 24, 144, 56, 5, 2},
    {"effb0 b5 40>240 28 5x5/1", 40, 240, 28, 5, 1},
    {"mnv2 b8 64>384 14 3x3/1", 64, 384, 14, 3, 1},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *buf(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    int reps = 30, sub = -1, order = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sub"))
            sub = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--order"))
            order = atoi(argv[i + 1]);
    }
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 <= 0)
        l1 = 32 << 10;
    if (l2 <= 0)
        l2 = 1 << 20;
    printf("%-28s %10s %10s %8s %7s\n", "shape", "fused us", "separ. us", "GFLOP/s", "ratio");
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        const shape *sh = &SHAPES[si];
        int H = sh->h, K = sh->k, S = sh->s, pad = K / 2, OH = (H + 2 * pad - K) / S + 1;
        kiln_expdw_params p = {0};
        p.e = (kiln_conv_params){.n = 1, .c_in = sh->cin, .h = H, .w = H, .c_out = sh->cwide,
                                 .oh = H, .ow = H, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1,
                                 .dw = 1, .groups = 1, .cb_in = 16, .cb_out = 16,
                                 .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP, .clip_max = 6.0f};
        p.d = (kiln_dwconv_params){.n = 1, .c = sh->cwide, .h = H, .w = H, .oh = OH, .ow = OH,
                                   .kh = K, .kw = K, .sh = S, .sw = S, .dh = 1, .dw = 1,
                                   .pad_t = pad, .pad_l = pad, .pad_b = pad, .pad_r = pad,
                                   .cb = 16, .epilogue = KILN_EPI_BIAS | KILN_EPI_CLIP,
                                   .clip_max = 6.0f};
        kiln_expdw_default_params(&p, l1, l2, 1);
        if (sub >= 0)
            p.sub_rows = sub;
        if (order >= 0)
            p.order = order;
        kiln_conv_params e = p.e;
        kiln_conv_default_params(&e, l1, l2, 1);
        kiln_dwconv_params d = p.d;
        kiln_dwconv_default_params(&d, l1, l2, 1);
        size_t n_in = (size_t)(sh->cin + 15) / 16 * 16 * H * H;
        size_t n_wide = (size_t)sh->cwide * H * H, n_out = (size_t)sh->cwide * OH * OH;
        float *in = buf(n_in), *we = buf((size_t)kiln_conv_packed_weight_floats(&p.e));
        float *be = buf((size_t)sh->cwide), *wd = buf((size_t)sh->cwide * K * K);
        float *bd = buf((size_t)sh->cwide), *wide = buf(n_wide), *out = buf(n_out);
        float *ws = buf(kiln_expdw_workspace_bytes(&p) / sizeof(float) + 16);
        float *ews = buf(kiln_conv_workspace_bytes(&e) / sizeof(float) + 16);
        float *dws = buf(kiln_dwconv_workspace_bytes(&d) / sizeof(float) + 16);
        double best_f = 1e30, best_s = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            kiln_expdw_run(&p, in, we, be, wd, bd, out, 0, kiln_expdw_tasks(&p), ws, NULL, NULL,
                           NULL);
            double t1 = now();
            kiln_conv_run(&e, in, we, be, NULL, wide, 0, kiln_conv_tasks(&e), ews);
            kiln_dwconv_run(&d, wide, wd, bd, NULL, out, 0, kiln_dwconv_tasks(&d), dws);
            double t2 = now();
            best_f = fmin(best_f, t1 - t0);
            best_s = fmin(best_s, t2 - t1);
        }
        printf("%-28s %10.1f %10.1f %8.1f %7.3f\n", sh->name, best_f * 1e6, best_s * 1e6,
               kiln_expdw_flops(&p) / best_f * 1e-9, best_f / best_s);
        free(in), free(we), free(be), free(wd), free(bd), free(wide), free(out), free(ws);
        free(ews), free(dws);
    }
    return 0;
}
