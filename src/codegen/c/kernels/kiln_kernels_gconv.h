/* kiln_kernels_gconv.h: grouped 2-D convolution with narrow groups (gw
 * input and gw output channels per group, 2 <= gw < cb, cb % gw == 0:
 * resnext's 32 groups of 4 and 8 channels) in the blocked layout, as gw
 * depthwise convolutions.
 *
 * Layouts (cb = channel block; c, the channel count in and out, a multiple
 * of cb, so a block holds cb / gw whole groups, the same in the input and
 * the output):
 *   input, output, residual [n][c/cb][h or oh][w or ow][cb]   NCHW{cb}c
 *   weights [c/cb][kh][kw][gw][cb]: lane l of plane j holds the weight of
 *           output channel l from input channel j of l's group
 *   bias    [c]
 * The output must not alias the input or the residual.
 *
 * Algorithm. Output lane l of a block is sum_j sum_taps w[j][l] x_j[l],
 * where x_j is the input block with each lane replaced by input channel j
 * of its group (lane (l / gw) * gw + j): a depthwise convolution over gw
 * "planes" of the input. A task is an image x channel block x band of
 * oh_tile output rows; for each tile of ow_tile pixels it writes the input
 * its band reads under the tile into the workspace as planes,
 * [row][column][gw][cb] with the padding as zeros (one lane permutation per
 * input vector and plane, ~1/9 of the FMAs of a 3x3 conv), then runs the
 * depthwise microkernels of kiln_kernels_dwconv.h on them for each output
 * row, each tap's kw columns and gw planes being kw * gw consecutive vectors
 * (that needs a column dilation of 1): every FMA useful, the planes in L1
 * (a whole row's planes, gw times the input row, were not: a first version
 * built them per band of rows and ran at L2 speed). The previous form, block-diagonal weights on the dense
 * conv microkernel, did cb / gw times the FMAs (4x for gw = 4): resnext's
 * narrow groups ran at 19-37% of peak in FLOPs of the convolution. */
#ifndef KILN_KERNELS_GCONV_H
#define KILN_KERNELS_GCONV_H

#include "kiln_kernels_dwconv.h"

typedef struct kiln_gconv_params {
    int n, c, h, w, oh, ow, kh, kw, sh, sw, dh, pad_t, pad_l, pad_b, pad_r;
    int gw; /* channels per group */
    int cb; /* channel block of the layouts */
    int epilogue; /* KILN_EPI_* bit flags */
    float clip_min, clip_max;
    /* knobs */
    int ow_tile; /* pixels per register tile (1..16) */
    int oh_tile; /* output rows per task (0: all) */
} kiln_gconv_params;

static inline int kiln_gconv_supported(const kiln_gconv_params *p)
{
    return p->cb >= 2 && p->gw >= 1 && p->gw < p->cb && p->cb % p->gw == 0 && p->c >= 1 &&
           p->c % p->cb == 0 && p->kh >= 1 && p->kw >= 1 && p->sh >= 1 && p->sw >= 1 &&
           p->dh >= 1 && p->oh >= 1 && p->ow >= 1 && p->n >= 1 && p->pad_t >= 0 &&
           p->pad_l >= 0 && p->pad_b >= 0 && p->pad_r >= 0;
}

/* Whether the planes pay against block-diagonal weights on the dense conv
 * microkernel (gconv2d_nchwc): per output vector, kh*kw*gw FMAs plus ~5
 * FMA-times of plane stores per input vector and plane read (sh*sw*gw)
 * against kh*kw*cb FMAs, with a 15% margin. Measured (one thread, AVX-512,
 * microseconds, planes against block-diagonal): 3x3 stride 1 gw 4 341 /
 * 708, gw 8 292 / 341; 3x3 stride 2 gw 4 157 / 200, gw 8 163 / 95; 5x5
 * stride 1 gw 4 167 / 385, stride 2 gw 8 143 / 110; 1x1 gw 4 36 / 23. */
static inline int kiln_gconv_planes_pay(int kh, int kw, int sh, int sw, int gw, int cb)
{
    int64_t taps = (int64_t)kh * kw;
    return 20 * (taps * gw + 5 * (int64_t)sh * sw * gw) < 17 * taps * cb;
}

static inline double kiln_gconv_flops(const kiln_gconv_params *p)
{
    return 2.0 * p->n * p->c * p->oh * p->ow * (double)p->gw * p->kh * p->kw;
}

static KILN_KINLINE int kiln_gconv_t(const kiln_gconv_params *p)
{
    return p->ow_tile < 1 ? 1 : p->ow_tile > KILN_DWCONV_MAXT ? KILN_DWCONV_MAXT : p->ow_tile;
}

static KILN_KINLINE int kiln_gconv_ohb(const kiln_gconv_params *p)
{
    return p->oh_tile <= 0 || p->oh_tile > p->oh ? p->oh : p->oh_tile;
}

static KILN_KINLINE int64_t kiln_gconv_tasks(const kiln_gconv_params *p)
{
    return (int64_t)p->n * (p->c / p->cb) * kiln_k_cdiv(p->oh, kiln_gconv_ohb(p));
}

/* The output task `task` of kiln_gconv_run writes: len floats from first
 * (one channel block, its band of rows, every column); generated code
 * applies the fused epilogue the header does not cover there. */
static KILN_KINLINE void kiln_gconv_task_out(const kiln_gconv_params *p, int64_t task,
                                             int64_t *first, int64_t *len)
{
    kiln_conv_band_out(p->oh, p->ow, p->cb, kiln_gconv_ohb(p), task, first, len);
}

/* Columns of the planes of a tile of T output pixels: every input column
 * their windows read, padding included. */
static KILN_KINLINE int64_t kiln_gconv_span(const kiln_gconv_params *p, int T)
{
    return (int64_t)(T - 1) * p->sw + p->kw;
}

/* Input rows a band of `rows` output rows reads. */
static KILN_KINLINE int64_t kiln_gconv_band_rows(const kiln_gconv_params *p, int64_t rows)
{
    return (rows - 1) * p->sh + (int64_t)(p->kh - 1) * p->dh + 1;
}

/* Per thread: the planes of a band's rows under one tile of pixels. */
static inline size_t kiln_gconv_workspace_bytes(const kiln_gconv_params *p)
{
    return sizeof(float) * (size_t)kiln_gconv_band_rows(p, kiln_gconv_ohb(p)) *
           (size_t)kiln_gconv_span(p, kiln_gconv_t(p)) * (size_t)p->gw * (size_t)p->cb;
}

static inline int64_t kiln_gconv_packed_weight_floats(const kiln_gconv_params *p)
{
    return (int64_t)p->c * p->kh * p->kw * p->gw;
}

/* w: ONNX [c][gw][kh][kw]. */
static inline void kiln_gconv_pack_weights(const kiln_gconv_params *p, const float *w,
                                           float *packed)
{
    const int64_t cb = p->cb, gw = p->gw, taps = (int64_t)p->kh * p->kw;
    for (int64_t b = 0; b < p->c / cb; b++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t j = 0; j < gw; j++)
                for (int64_t l = 0; l < cb; l++)
                    packed[((b * taps + t) * gw + j) * cb + l] = w[((b * cb + l) * gw + j) * taps + t];
}

/* Knobs: tiles of up to 8 pixels (as the depthwise template: enough
 * independent FMA chains), bands of rows so that there are at least 4 tasks
 * per thread and a band's planes stay within half the L2. */
static inline void kiln_gconv_default_params(kiln_gconv_params *p, int64_t l1_bytes,
                                             int64_t l2_bytes, int n_threads)
{
    (void)l1_bytes;
    int t = p->ow < 8 ? p->ow : 8;
    for (int c = 8; c >= 6 && p->ow >= 8; c--)
        if (p->ow % c == 0) {
            t = c;
            break;
        }
    p->ow_tile = t;
    int64_t base = (int64_t)p->n * (p->c / p->cb);
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    int64_t bands = kiln_k_min64(p->oh, kiln_k_cdiv(want, base));
    p->oh_tile = (int)kiln_k_cdiv(p->oh, bands > 0 ? bands : 1);
    while (p->oh_tile > 1 && (int64_t)kiln_gconv_workspace_bytes(p) > l2_bytes / 2)
        p->oh_tile = (p->oh_tile + 1) / 2;
}

/* The lane permutations of the planes: plane j takes lane (l / gw) * gw + j
 * to lane l (AVX-512, 16 lanes, or AVX2, 8 lanes; set up once per run). */
typedef struct kiln_gconv_perm {
#ifdef KILN_KERNELS_AVX512
    __m512i idx[16];
#endif
#ifdef KILN_KERNELS_AVX2
    __m256i idx8[8];
#endif
    int unused;
} kiln_gconv_perm;

static KILN_KINLINE void kiln_gconv_perm_init(const kiln_gconv_params *p, kiln_gconv_perm *m)
{
#ifdef KILN_KERNELS_AVX512
    if (p->cb == 16)
        for (int j = 0; j < p->gw; j++) {
            int32_t lanes[16];
            for (int l = 0; l < 16; l++)
                lanes[l] = (l / p->gw) * p->gw + j;
            m->idx[j] = _mm512_loadu_si512(lanes);
        }
#endif
#ifdef KILN_KERNELS_AVX2
    if (p->cb == 8)
        for (int j = 0; j < p->gw; j++) {
            int32_t lanes[8];
            for (int l = 0; l < 8; l++)
                lanes[l] = (l / p->gw) * p->gw + j;
            m->idx8[j] = _mm256_loadu_si256((const __m256i *)lanes);
        }
#endif
    (void)p;
    m->unused = 0;
}

/* The planes of input rows [ih0, ih0 + rows) x columns [c0, c0 + span) of
 * one image's channel block `src`, [rows][span][gw][cb], zero outside the
 * image. Called for a row or two at a time: no calls, no setup inside. */
static KILN_KINLINE void kiln_gconv_planes(const kiln_gconv_params *p, const kiln_gconv_perm *m,
                                           const float *src, int64_t ih0, int64_t rows,
                                           int64_t c0, int64_t span, float *ws)
{
    const int64_t cb = p->cb, gw = p->gw, W = p->w;
    const int64_t vec = gw * cb; /* floats per column */
    int64_t lo = kiln_k_min64(span, kiln_k_max64(0, -c0));
    int64_t hi = kiln_k_max64(lo, kiln_k_min64(span, W - c0));
    (void)m;
    for (int64_t r = 0; r < rows; r++) {
        float *d = ws + r * span * vec;
        int64_t ih = ih0 + r;
        int64_t a = lo, b = hi;
        if (ih < 0 || ih >= p->h)
            a = b = span; /* all zeros */
        for (int64_t i = 0; i < a * vec; i++)
            d[i] = 0.0f;
        for (int64_t i = b * vec; i < span * vec; i++)
            d[i] = 0.0f;
        const float *s = src + (ih * W + c0) * cb;
        for (int64_t col = a; col < b; col++) {
            const float *x = s + col * cb;
            float *y = d + col * vec;
#ifdef KILN_KERNELS_AVX512
            if (cb == 16) {
                const __m512 v = _mm512_loadu_ps(x);
                for (int64_t j = 0; j < gw; j++)
                    _mm512_storeu_ps(y + j * 16, _mm512_permutexvar_ps(m->idx[j], v));
                continue;
            }
#endif
#ifdef KILN_KERNELS_AVX2
            if (cb == 8) {
                const __m256 v = _mm256_loadu_ps(x);
                for (int64_t j = 0; j < gw; j++)
                    _mm256_storeu_ps(y + j * 8, _mm256_permutevar8x32_ps(v, m->idx8[j]));
                continue;
            }
#endif
            for (int64_t j = 0; j < gw; j++)
                for (int64_t l = 0; l < cb; l++)
                    y[j * cb + l] = x[(l / gw) * gw + j];
        }
    }
}

/* Runs tasks [task_begin, task_end); workspace: kiln_gconv_workspace_bytes.
 * In a task, for each tile of pixels, down the band's output rows: the
 * planes of the input rows an output row is the first to read, then the
 * tile (a plane row is written just before its first use and read by the
 * kh output rows that use it while it is in L1; all of a band's rows first
 * left them in L2 and ran slower than the block-diagonal form). */
static KILN_KINLINE void kiln_gconv_run(const kiln_gconv_params *p, const float *in,
                                        const float *w_packed, const float *bias,
                                        const float *residual, float *out, int64_t task_begin,
                                        int64_t task_end, void *workspace)
{
    float *ws = (float *)workspace;
    const int cb = p->cb, T = kiln_gconv_t(p), ohb = kiln_gconv_ohb(p);
    const int64_t H = p->h, W = p->w, OH = p->oh, OW = p->ow, gw = p->gw;
    const int64_t cbn = p->c / cb, nbands = kiln_k_cdiv(OH, ohb), vec = gw * cb;
    const int64_t taps = (int64_t)p->kh * p->kw;
    kiln_gconv_perm perm;
    kiln_gconv_perm_init(p, &perm);
    kiln_dwconv_tile_args a;
    a.in_ss = cb;                   /* between (column, plane) vectors */
    a.in_ps = (int64_t)p->sw * vec; /* between output pixels */
    a.nkh = p->kh;
    a.s_lo = 0;
    a.s_hi = p->kw * p->gw;
    a.w_rs = (int64_t)p->kw * vec;
    a.epi = p->epilogue;
    a.lo = p->clip_min;
    a.hi = p->clip_max;
    for (int64_t task = task_begin; task < task_end; task++) {
        int64_t band = task % nbands, rest = task / nbands;
        int64_t cblk = rest % cbn, n = rest / cbn;
        const float *src = in + (n * cbn + cblk) * H * W * cb;
        float *dst = out + (n * cbn + cblk) * OH * OW * cb;
        const float *res = (p->epilogue & KILN_EPI_RESIDUAL) && residual
                               ? residual + (n * cbn + cblk) * OH * OW * cb
                               : NULL;
        a.bias = (p->epilogue & KILN_EPI_BIAS) && bias ? bias + cblk * cb : NULL;
        a.w = w_packed + cblk * taps * vec;
        int64_t oh0 = band * ohb, oh1 = kiln_k_min64(OH, oh0 + ohb);
        int64_t ih0 = oh0 * p->sh - p->pad_t, rows = kiln_gconv_band_rows(p, oh1 - oh0);
        for (int64_t ow = 0; ow < OW; ow += T) {
            int tw = (int)kiln_k_min64(T, OW - ow);
            int64_t span = kiln_gconv_span(p, tw);
            int64_t c0 = ow * p->sw - p->pad_l, built = 0;
            a.in_rs = (int64_t)p->dh * span * vec; /* between filter rows */
            for (int64_t oh = oh0; oh < oh1; oh++) {
                /* the plane rows this output row is the first to read */
                int64_t need = kiln_k_min64(rows, (oh - oh0) * p->sh + (int64_t)(p->kh - 1) * p->dh + 1);
                if (need > built) {
                    kiln_gconv_planes(p, &perm, src, ih0 + built, need - built, c0, span,
                                      ws + built * span * vec);
                    built = need;
                }
                a.in = ws + (oh - oh0) * p->sh * span * vec;
                a.out = dst + (oh * OW + ow) * cb;
                a.res = res ? res + (oh * OW + ow) * cb : NULL;
                kiln_dwconv_tile(cb, tw, &a);
            }
        }
    }
}

#endif /* KILN_KERNELS_GCONV_H */
