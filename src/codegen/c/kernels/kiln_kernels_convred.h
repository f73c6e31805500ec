/* kiln_kernels_convred.h: 2-D convolution with few output channels (1 to
 * KILN_CONVRED_MAXO: an image-to-image network's RGB output, a depth or
 * mask head, a 2-class segmentation head) by reducing over the input
 * channels, from the blocked layout into a row-major output.
 *
 * Layouts (cb = the input's channel block, cbk = ceil(c_in / cb)):
 *   input    [n][cbk][h][w][cb]                 NCHW{cb}c (padding lanes finite)
 *   weights  [cbk][kh][kw][c_out][cb]           zeros in the padding lanes
 *   bias     [c_out]
 *   output, residual [n][c_out][oh][ow]         row-major NCHW
 * The output must not alias the input or the residual.
 *
 * Algorithm. The blocked conv (kiln_kernels_conv.h) vectorises over output
 * channels, so 3 outputs fill 3 of 16 lanes (padded to a block: 5.3x the
 * FMAs; 32 -> 3 3x3 on 192x192 ran at 14% of peak). Here each lane holds an
 * input channel: a register tile is T output pixels x O output channels of
 * vector accumulators, and per filter tap and input block it loads T input
 * vectors and O weight vectors for O*T FMAs, every lane useful. At the end
 * each accumulator is summed across its lanes (one horizontal add per
 * output value, against K / cb FMAs for K = c_in * kh * kw), plus the
 * epilogue's bias, residual, Relu and Clip. Pixels whose window crosses the
 * left or right edge run one at a time with their taps clipped; rows
 * outside the image are skipped. A task is an image x a band of oh_tile
 * output rows, every output channel. */
#ifndef KILN_KERNELS_CONVRED_H
#define KILN_KERNELS_CONVRED_H

#include "kiln_kernels_common.h"

/* The most output channels the kernel takes. */
#define KILN_CONVRED_MAXO 4
/* The widest register tile (pixels). */
#define KILN_CONVRED_MAXT 16

typedef struct kiln_convred_params {
    int n, c_in, h, w, c_out, oh, ow, kh, kw, sh, sw, dh, dw, pad_t, pad_l, pad_b, pad_r;
    int cb;       /* the input's channel block */
    int epilogue; /* KILN_EPI_* bit flags */
    float clip_min, clip_max;
    /* knobs */
    int ow_tile; /* pixels per register tile: kiln_convred_tile_width's */
    int oh_tile; /* output rows per task (0: all) */
} kiln_convred_params;

static inline int kiln_convred_supported(const kiln_convred_params *p)
{
    return p->cb >= 1 && p->c_in >= 1 && p->c_out >= 1 && p->c_out <= KILN_CONVRED_MAXO &&
           p->kh >= 1 && p->kw >= 1 && p->sh >= 1 && p->sw >= 1 && p->dh >= 1 && p->dw >= 1 &&
           p->oh >= 1 && p->ow >= 1 && p->n >= 1 && p->h >= 1 && p->w >= 1 && p->pad_t >= 0 &&
           p->pad_l >= 0 && p->pad_b >= 0 && p->pad_r >= 0;
}

static inline double kiln_convred_flops(const kiln_convred_params *p)
{
    return 2.0 * p->n * p->c_out * (double)p->oh * p->ow * p->c_in * p->kh * p->kw;
}

/* Whether the reduction pays against the blocked conv padded to vec output
 * lanes: per output value K / vec FMAs plus ~8 vector operations of the
 * horizontal add, against K * ceil(O / vec) / O FMAs padded (every input
 * channel a broadcast FMA for a whole output block), with a 25% margin for
 * the reduction's extra loads. 3 outputs of a 3x3 conv on 32 channels: 26
 * against 96; a 1x1 conv from 16 channels to 4: 9 against 4 (padded). */
static inline int kiln_convred_pays(int64_t c_in, int64_t kh, int64_t kw, int64_t c_out, int vec)
{
    if (c_out < 1 || c_out > KILN_CONVRED_MAXO || vec < 4)
        return 0;
    double k = (double)c_in * (double)kh * (double)kw;
    double red = k / vec + 8.0;
    double pad = k * (double)((c_out + vec - 1) / vec) / (double)c_out;
    return red * 1.25 < pad;
}

/* The register tile width for O output channels: O * T accumulators, O
 * weight vectors and an input vector within 28 of AVX-512's 32 registers
 * (14 of AVX2's 16 for 8 lanes). */
static inline int kiln_convred_tile_width(int c_out, int cb)
{
    static const int t16[KILN_CONVRED_MAXO + 1] = {1, 16, 12, 8, 6};
    static const int t8[KILN_CONVRED_MAXO + 1] = {1, 8, 6, 4, 3};
    if (c_out < 1 || c_out > KILN_CONVRED_MAXO)
        return 1;
    return cb == 8 ? t8[c_out] : t16[c_out];
}

static KILN_KINLINE int kiln_convred_ohb(const kiln_convred_params *p)
{
    return p->oh_tile >= 1 && p->oh_tile <= p->oh ? p->oh_tile : p->oh;
}

static KILN_KINLINE int64_t kiln_convred_tasks(const kiln_convred_params *p)
{
    return (int64_t)p->n * kiln_k_cdiv(p->oh, kiln_convred_ohb(p));
}

/* Task `task`'s output: ns spans of len floats, the first at first, each
 * st floats after the previous (one per output channel); generated code
 * applies the fused epilogue the kernel does not cover there. */
static KILN_KINLINE void kiln_convred_task_out(const kiln_convred_params *p, int64_t task,
                                               int64_t *first, int64_t *len, int64_t *ns,
                                               int64_t *st)
{
    const int64_t ohb = kiln_convred_ohb(p), nb = kiln_k_cdiv(p->oh, ohb);
    const int64_t img = task / nb, oh0 = task % nb * ohb;
    const int64_t oh1 = kiln_k_min64(p->oh, oh0 + ohb);
    *first = (img * p->c_out * p->oh + oh0) * p->ow;
    *len = (oh1 - oh0) * p->ow;
    *ns = p->c_out;
    *st = (int64_t)p->oh * p->ow;
}

static inline int64_t kiln_convred_packed_weight_floats(const kiln_convred_params *p)
{
    return kiln_k_cdiv(p->c_in, p->cb) * p->kh * p->kw * p->c_out * p->cb;
}

/* w: OIHW float32 [c_out][c_in][kh][kw] -> [cbk][kh][kw][c_out][cb]. */
static inline void kiln_convred_pack_weights(const kiln_convred_params *p, const float *w,
                                             float *packed)
{
    const int64_t cbk = kiln_k_cdiv(p->c_in, p->cb);
    int64_t i = 0;
    for (int64_t k = 0; k < cbk; k++)
        for (int64_t y = 0; y < p->kh; y++)
            for (int64_t x = 0; x < p->kw; x++)
                for (int64_t o = 0; o < p->c_out; o++)
                    for (int64_t l = 0; l < p->cb; l++, i++) {
                        int64_t c = k * p->cb + l;
                        packed[i] = c < p->c_in ? w[((o * p->c_in + c) * p->kh + y) * p->kw + x]
                                                : 0.0f;
                    }
}

static inline void kiln_convred_default_params(kiln_convred_params *p, int threads)
{
    p->ow_tile = kiln_convred_tile_width(p->c_out, p->cb);
    /* bands of rows: at least 4 tasks per thread where the rows allow */
    int64_t want = (int64_t)(threads < 1 ? 1 : threads) * 4;
    int64_t per_img = kiln_k_cdiv(want, p->n);
    p->oh_tile = (int)kiln_k_max64(1, p->oh / kiln_k_max64(1, per_img));
}

/* One register tile: T pixels from output column ow0 (taps kw in
 * [kw0, kw1) for all of them) of output row `oh`, O channels. */
typedef struct kiln_convred_tile_args {
    const float *in;   /* the image's input, blocked */
    const float *w;    /* packed weights */
    int64_t kh0, kh1;  /* the filter rows inside the image */
    int64_t ih0;       /* input row of filter row 0 */
    int64_t iw0;       /* input column of tap 0 of the first pixel */
    int kw0, kw1;
    float *sums;       /* [O][T] the tile's sums */
} kiln_convred_tile_args;

/* The portable tile, any cb, O and T. */
static inline void kiln_convred_tile__scalar(const kiln_convred_params *p, int O, int T,
                                             const kiln_convred_tile_args *a)
{
    const int64_t cb = p->cb, cbk = kiln_k_cdiv(p->c_in, cb), H = p->h, W = p->w;
    for (int i = 0; i < O * T; i++)
        a->sums[i] = 0.0f;
    for (int64_t k = 0; k < cbk; k++)
        for (int64_t y = a->kh0; y < a->kh1; y++) {
            const float *row = a->in + ((k * H + a->ih0 + y * p->dh) * W) * cb;
            const float *wr = a->w + ((k * p->kh + y) * p->kw) * p->c_out * cb;
            for (int x = a->kw0; x < a->kw1; x++)
                for (int t = 0; t < T; t++) {
                    const float *xv = row + (a->iw0 + (int64_t)t * p->sw + (int64_t)x * p->dw) * cb;
                    for (int o = 0; o < O; o++) {
                        const float *wv = wr + ((int64_t)x * p->c_out + o) * cb;
                        float s = 0.0f;
                        for (int64_t l = 0; l < cb; l++)
                            s += xv[l] * wv[l];
                        a->sums[o * T + t] += s;
                    }
                }
        }
}

#if defined(KILN_KERNELS_AVX512) || defined(KILN_KERNELS_AVX2)
/* A SIMD tile of O channels x T pixels on VL-lane blocks: the accumulators
 * stay in registers (O and T are constants in each instantiation). */
#define KILN_CONVRED_UKERNEL(NAME, O, T, VL, V, ZERO, LOAD, FMA, HSUM)                             \
    static KILN_KNOINLINE void NAME(const kiln_convred_params *p, const kiln_convred_tile_args *a) \
    {                                                                                              \
        const int64_t cbk = kiln_k_cdiv(p->c_in, VL), H = p->h, W = p->w, CO = p->c_out;          \
        const int64_t xs = (int64_t)p->sw * VL, ks = (int64_t)p->dw * VL;                          \
        V acc[O][T];                                                                               \
        KILN_KUNROLL for (int o = 0; o < O; o++) KILN_KUNROLL for (int t = 0; t < T; t++)          \
            acc[o][t] = ZERO();                                                                    \
        for (int64_t k = 0; k < cbk; k++)                                                          \
            for (int64_t y = a->kh0; y < a->kh1; y++) {                                            \
                const int64_t rb = ((k * H + a->ih0 + y * p->dh) * W + a->iw0) * VL;               \
                const float *wr = a->w + ((k * p->kh + y) * p->kw) * CO * VL;                      \
                for (int x = a->kw0; x < a->kw1; x++) {                                            \
                    const float *xp = a->in + (rb + x * ks);                                       \
                    const float *wp = wr + (int64_t)x * CO * VL;                                   \
                    V wv[O];                                                                       \
                    KILN_KUNROLL for (int o = 0; o < O; o++) wv[o] = LOAD(wp + o * VL);            \
                    KILN_KUNROLL for (int t = 0; t < T; t++)                                       \
                    {                                                                              \
                        V xv = LOAD(xp + t * xs);                                                  \
                        KILN_KUNROLL for (int o = 0; o < O; o++) acc[o][t] =                       \
                            FMA(xv, wv[o], acc[o][t]);                                             \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        KILN_KUNROLL for (int o = 0; o < O; o++) KILN_KUNROLL for (int t = 0; t < T; t++)          \
            a->sums[o * T + t] = HSUM(acc[o][t]);                                                  \
    }
#endif

#if defined(KILN_KERNELS_AVX512)
#define KILN_CR512(O, T)                                                                           \
    KILN_CONVRED_UKERNEL(kiln_f32_convred_nchw16c_##O##x##T##__avx512, O, T, 16, __m512,           \
                         _mm512_setzero_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)
KILN_CR512(1, 1)
KILN_CR512(1, 16)
KILN_CR512(2, 1)
KILN_CR512(2, 12)
KILN_CR512(3, 1)
KILN_CR512(3, 8)
KILN_CR512(4, 1)
KILN_CR512(4, 6)
#endif

#if defined(KILN_KERNELS_AVX2)
static KILN_KINLINE float kiln_convred_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define KILN_CR256(O, T)                                                                           \
    KILN_CONVRED_UKERNEL(kiln_f32_convred_nchw8c_##O##x##T##__avx2, O, T, 8, __m256,               \
                         _mm256_setzero_ps, _mm256_loadu_ps, _mm256_fmadd_ps, kiln_convred_hsum256)
KILN_CR256(1, 1)
KILN_CR256(1, 8)
KILN_CR256(2, 1)
KILN_CR256(2, 6)
KILN_CR256(3, 1)
KILN_CR256(3, 4)
KILN_CR256(4, 1)
KILN_CR256(4, 3)
#endif

/* One tile of O channels x T pixels: a SIMD microkernel where one is
 * instantiated (T 1 or kiln_convred_tile_width's), else the portable one. */
static KILN_KDISPATCH void kiln_convred_tile(const kiln_convred_params *p, int O, int T,
                                             const kiln_convred_tile_args *a)
{
#if defined(KILN_KERNELS_AVX512)
    if (p->cb == 16) {
#define KILN_CR512_CASE(o, t)                                                                      \
    if (O == o && T == t) {                                                                        \
        kiln_f32_convred_nchw16c_##o##x##t##__avx512(p, a);                                        \
        return;                                                                                    \
    }
        KILN_CR512_CASE(1, 1) KILN_CR512_CASE(1, 16) KILN_CR512_CASE(2, 1) KILN_CR512_CASE(2, 12)
        KILN_CR512_CASE(3, 1) KILN_CR512_CASE(3, 8) KILN_CR512_CASE(4, 1) KILN_CR512_CASE(4, 6)
#undef KILN_CR512_CASE
    }
#endif
#if defined(KILN_KERNELS_AVX2)
    if (p->cb == 8) {
#define KILN_CR256_CASE(o, t)                                                                      \
    if (O == o && T == t) {                                                                        \
        kiln_f32_convred_nchw8c_##o##x##t##__avx2(p, a);                                           \
        return;                                                                                    \
    }
        KILN_CR256_CASE(1, 1) KILN_CR256_CASE(1, 8) KILN_CR256_CASE(2, 1) KILN_CR256_CASE(2, 6)
        KILN_CR256_CASE(3, 1) KILN_CR256_CASE(3, 4) KILN_CR256_CASE(4, 1) KILN_CR256_CASE(4, 3)
#undef KILN_CR256_CASE
    }
#endif
    kiln_convred_tile__scalar(p, O, T, a);
}

/* Output column ow's taps inside the image: [*kw0, *kw1). */
static KILN_KINLINE void kiln_convred_col_taps(const kiln_convred_params *p, int64_t ow, int *kw0,
                                               int *kw1)
{
    int64_t c0 = ow * p->sw - p->pad_l, lo = 0, hi = p->kw;
    while (lo < hi && c0 + lo * p->dw < 0)
        lo++;
    while (hi > lo && c0 + (hi - 1) * p->dw >= p->w)
        hi--;
    *kw0 = (int)lo;
    *kw1 = (int)hi;
}

/* Stores a tile's sums with the epilogue: out = act(sum + bias + residual). */
static KILN_KINLINE void kiln_convred_store(const kiln_convred_params *p, int O, int T,
                                            const float *sums, const float *bias,
                                            const float *res, float *out, int64_t off)
{
    const int64_t plane = (int64_t)p->oh * p->ow;
    for (int o = 0; o < O; o++)
        for (int t = 0; t < T; t++) {
            float v = sums[o * T + t];
            int64_t i = off + o * plane + t;
            if (p->epilogue & KILN_EPI_BIAS)
                v += bias[o];
            if (p->epilogue & KILN_EPI_RESIDUAL)
                v += res[i];
            out[i] = kiln_k_epi1(v, p->epilogue, p->clip_min, p->clip_max);
        }
}

/* Runs tasks [task_begin, task_end); no workspace. */
static KILN_KINLINE void kiln_convred_run(const kiln_convred_params *p, const float *in,
                                          const float *w_packed, const float *bias,
                                          const float *residual, float *out, int64_t task_begin,
                                          int64_t task_end, void *workspace)
{
    (void)workspace;
    const int O = p->c_out, T = p->ow_tile >= 1 && p->ow_tile <= KILN_CONVRED_MAXT
                                    ? p->ow_tile
                                    : kiln_convred_tile_width(p->c_out, p->cb);
    const int64_t ohb = kiln_convred_ohb(p), nb = kiln_k_cdiv(p->oh, ohb);
    const int64_t cbk = kiln_k_cdiv(p->c_in, p->cb);
    /* the interior columns: every tap inside the image */
    int64_t lo = 0, hi = p->ow;
    while (lo < p->ow && lo * p->sw - p->pad_l < 0)
        lo++;
    while (hi > lo && (hi - 1) * p->sw - p->pad_l + (int64_t)(p->kw - 1) * p->dw >= p->w)
        hi--;
    float sums[KILN_CONVRED_MAXO * KILN_CONVRED_MAXT];
    for (int64_t task = task_begin; task < task_end; task++) {
        const int64_t img = task / nb, oh0 = task % nb * ohb;
        const int64_t oh1 = kiln_k_min64(p->oh, oh0 + ohb);
        kiln_convred_tile_args a;
        a.in = in + img * cbk * p->h * p->w * p->cb;
        a.w = w_packed;
        a.sums = sums;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            a.ih0 = oh * p->sh - p->pad_t;
            a.kh0 = 0;
            a.kh1 = p->kh;
            while (a.kh0 < a.kh1 && a.ih0 + a.kh0 * p->dh < 0)
                a.kh0++;
            while (a.kh1 > a.kh0 && a.ih0 + (a.kh1 - 1) * p->dh >= p->h)
                a.kh1--;
            const int64_t off = (img * O * p->oh + oh) * p->ow;
            for (int64_t ow = 0; ow < p->ow;) {
                /* a whole interior tile, else one pixel with its taps clipped */
                const int t = ow >= lo && ow + T <= hi ? T : 1;
                kiln_convred_col_taps(p, ow, &a.kw0, &a.kw1);
                a.iw0 = ow * p->sw - p->pad_l;
                kiln_convred_tile(p, O, t, &a);
                kiln_convred_store(p, O, t, sums, bias, residual, out, off + ow);
                ow += t;
            }
        }
    }
}

#endif /* KILN_KERNELS_CONVRED_H */
