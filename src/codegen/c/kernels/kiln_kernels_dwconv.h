/* kiln_kernels_dwconv.h: depthwise 2-D convolution (groups == channels,
 * multiplier 1) in the blocked layout.
 *
 * Layouts (cb = channel block, padded with zeros):
 *   input, output, residual [n][ceil(c/cb)][h or oh][w or ow][cb]   NCHW{cb}c
 *   weights [ceil(c/cb)][kh][kw][cb]
 *   bias    [ceil(c/cb)*cb]
 * The output must not alias the input or the residual.
 *
 * Algorithm. Memory-bound: every input vector is used kh*kw times at most,
 * so the kernel vectorizes across the channel block (one vector per pixel)
 * and streams rows. Tasks are image x channel block x band of oh_tile output
 * rows. In an output row, the pixels whose filter window lies inside the
 * image columns run in tiles of ow_tile pixels held in registers (for each
 * filter tap one weight vector times ow_tile input vectors); the few border
 * pixels run one at a time with the taps clipped, except in rows of at most
 * 16 (AVX-512) or 8 pixels, a third or more of them border pixels, whose
 * input columns are copied, zero padded, into the workspace and run as one
 * register tile (kiln_dwconv_gathered);
 * filter rows outside the image are skipped. Bias starts the accumulators; residual, relu and clip
 * are applied before the only store.
 *
 * Microkernels: kiln_f32_dwconv_nchw16c_{T}x16__avx512 (and, for stride 1,
 * dilation 1, 3/5/7 columns and tiles of 6-8 pixels, the sliding
 * kiln_f32_dwconv_nchw16c_slide{T}x{kw}__avx512),
 * kiln_f32_dwconv_nchw8c_{T}x8__avx2, and a portable one for any cb. */
#ifndef KILN_KERNELS_DWCONV_H
#define KILN_KERNELS_DWCONV_H

#include "kiln_kernels_common.h"

typedef struct kiln_dwconv_params {
    int n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pad_t, pad_l, pad_b, pad_r;
    int cb;       /* channel block of the layouts */
    int epilogue; /* KILN_EPI_* bit flags */
    float clip_min, clip_max;
    /* knobs */
    int ow_tile; /* pixels per register tile (1..16) */
    int oh_tile; /* output rows per task (0: all) */
} kiln_dwconv_params;

#define KILN_DWCONV_MAXT 16

static inline int kiln_dwconv_supported(const kiln_dwconv_params *p)
{
    return p->cb >= 1 && p->kh >= 1 && p->kw >= 1 && p->sh >= 1 && p->sw >= 1 && p->dh >= 1 &&
           p->dw >= 1 && p->oh >= 1 && p->ow >= 1 && p->n >= 1 && p->c >= 1;
}

static inline double kiln_dwconv_flops(const kiln_dwconv_params *p)
{
    return 2.0 * p->n * p->c * p->oh * p->ow * (double)p->kh * p->kw;
}

static KILN_KINLINE int kiln_dwconv_t(const kiln_dwconv_params *p)
{
    return p->ow_tile < 1 ? 1 : p->ow_tile > KILN_DWCONV_MAXT ? KILN_DWCONV_MAXT : p->ow_tile;
}

static KILN_KINLINE int kiln_dwconv_ohb(const kiln_dwconv_params *p)
{
    return p->oh_tile <= 0 || p->oh_tile > p->oh ? p->oh : p->oh_tile;
}

static KILN_KINLINE int64_t kiln_dwconv_tasks(const kiln_dwconv_params *p)
{
    return (int64_t)p->n * kiln_k_cdiv(p->c, p->cb) * kiln_k_cdiv(p->oh, kiln_dwconv_ohb(p));
}

/* Pixels of a gathered border tile: as many accumulators as the ISA's
 * registers hold with room for the weight and the loads. */
static KILN_KINLINE int kiln_dwconv_gather_t(const kiln_dwconv_params *p)
{
    return p->cb >= 16 ? 16 : 8;
}

/* Per thread, when rows run gathered: their zero-padded input columns,
 * [kh][(ow - 1) * sw + (kw - 1) * dw + 1][cb] (0 otherwise, and when that
 * exceeds 256 KB: very large filters; border pixels then run one at a time
 * with clipped taps). */
/* Output columns [*lo, *hi) whose whole filter window is inside the image. */
static KILN_KINLINE void kiln_dwconv_interior(const kiln_dwconv_params *p, int64_t *lo,
                                              int64_t *hi)
{
    const int64_t OW = p->ow, W = p->w;
    int64_t ow_lo = kiln_k_min64(OW, kiln_k_cdiv(p->pad_l, p->sw));
    int64_t ow_hi = kiln_k_fdiv(W - 1 - (int64_t)(p->kw - 1) * p->dw + p->pad_l, p->sw) + 1;
    ow_hi = kiln_k_min64(OW, ow_hi);
    if (ow_hi < ow_lo)
        ow_hi = ow_lo;
    *lo = ow_lo;
    *hi = ow_hi;
}

/* Whether rows run as one gathered tile (kiln_dwconv_gathered): at most
 * gather_t pixels, of which border pixels are a third or more (a 7x7 filter
 * on 7 or 14 columns, 5x5 on 7; not 3x3 on 7 or 14, where the interior tile
 * and two short border chains were as fast). */
static KILN_KINLINE int kiln_dwconv_gathers(const kiln_dwconv_params *p)
{
    int64_t lo, hi;
    kiln_dwconv_interior(p, &lo, &hi);
    return p->ow <= kiln_dwconv_gather_t(p) && 3 * (p->ow - (hi - lo)) >= p->ow;
}

static inline size_t kiln_dwconv_workspace_bytes(const kiln_dwconv_params *p)
{
    if (!kiln_dwconv_gathers(p))
        return 0;
    size_t span = (size_t)(p->ow - 1) * (size_t)p->sw + (size_t)(p->kw - 1) * (size_t)p->dw + 1;
    size_t b = sizeof(float) * (size_t)p->kh * span * (size_t)p->cb;
    return b <= (256u << 10) ? b : 0;
}

static inline int64_t kiln_dwconv_packed_weight_floats(const kiln_dwconv_params *p)
{
    return kiln_k_cdiv(p->c, p->cb) * p->cb * (int64_t)p->kh * p->kw;
}

/* w: ONNX [c][1][kh][kw]. */
static inline void kiln_dwconv_pack_weights(const kiln_dwconv_params *p, const float *w,
                                            float *packed)
{
    int64_t cbn = kiln_k_cdiv(p->c, p->cb), taps = (int64_t)p->kh * p->kw;
    for (int64_t b = 0; b < cbn; b++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t l = 0; l < p->cb; l++) {
                int64_t c = b * p->cb + l;
                packed[(b * taps + t) * p->cb + l] = c < p->c ? w[c * taps + t] : 0.0f;
            }
}

/* Knobs: tiles of up to 8 pixels (enough independent FMA chains, and the
 * input vectors of a tile stay in L1), rows per task so that there are at
 * least 4 tasks per thread. */
static inline void kiln_dwconv_default_params(kiln_dwconv_params *p, int64_t l1_bytes,
                                              int64_t l2_bytes, int n_threads)
{
    (void)l1_bytes;
    (void)l2_bytes;
    int t = p->ow < 8 ? p->ow : 8;
    /* prefer a tile that divides the interior evenly among 6..8 */
    for (int c = 8; c >= 6 && p->ow >= 8; c--)
        if (p->ow % c == 0) {
            t = c;
            break;
        }
    p->ow_tile = t;
    int64_t base = (int64_t)p->n * kiln_k_cdiv(p->c, p->cb);
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    int64_t bands = kiln_k_min64(p->oh, kiln_k_cdiv(want, base));
    p->oh_tile = (int)kiln_k_cdiv(p->oh, bands > 0 ? bands : 1);
}

typedef struct kiln_dwconv_tile_args {
    const float *in;  /* input row base (row of filter row r_lo) at column of pixel 0, tap 0 */
    int64_t in_rs;    /* floats between filter rows (dh input rows) */
    int64_t in_ss;    /* floats between filter columns (dw * cb) */
    int64_t in_ps;    /* floats between output pixels (sw * cb) */
    int nkh, s_lo, s_hi;
    const float *w;   /* weights at filter row r_lo */
    int64_t w_rs;     /* floats between filter rows (kw * cb) */
    float *out;
    const float *res;
    const float *bias;
    int epi;
    float lo, hi;
} kiln_dwconv_tile_args;

#define KILN_DWCONV_UKERNEL(NAME, V, VL, ZERO, LOAD, STORE, FMA, SET1, ADD, MAX, MIN)               \
    static KILN_KINLINE void NAME(const int T, const int64_t PS, const kiln_dwconv_tile_args *a)    \
    {                                                                                              \
        V acc[KILN_DWCONV_MAXT];                                                                   \
        const V init = a->bias ? LOAD(a->bias) : ZERO();                                           \
        KILN_KUNROLL for (int p = 0; p < T; p++) acc[p] = init;                                    \
        for (int r = 0; r < a->nkh; r++) {                                                         \
            const float *ip = a->in + r * a->in_rs;                                                \
            const float *wp = a->w + r * a->w_rs;                                                  \
            for (int s = a->s_lo; s < a->s_hi; s++) {                                              \
                const V wv = LOAD(wp + (int64_t)s * VL);                                           \
                const float *is = ip + s * a->in_ss;                                               \
                KILN_KUNROLL for (int p = 0; p < T; p++) acc[p] = FMA(LOAD(is + p * PS), wv, acc[p]); \
            }                                                                                      \
        }                                                                                          \
        const V lo = SET1(a->lo), hi = SET1(a->hi), z = ZERO();                                    \
        KILN_KUNROLL for (int p = 0; p < T; p++)                                                   \
        {                                                                                          \
            V v = acc[p];                                                                          \
            if (a->res)                                                                            \
                v = ADD(v, LOAD(a->res + p * VL));                                                 \
            if (a->epi & KILN_EPI_RELU)                                                            \
                v = MAX(v, z);                                                                     \
            if (a->epi & KILN_EPI_CLIP)                                                            \
                v = MIN(MAX(v, lo), hi);                                                           \
            STORE(a->out + p * VL, v);                                                             \
        }                                                                                          \
    }

#ifdef KILN_KERNELS_AVX512
KILN_DWCONV_UKERNEL(kiln_f32_dwconv_nchw16c_ukernel__avx512, __m512, 16, _mm512_setzero_ps,
                    _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps,
                    _mm512_add_ps, _mm512_max_ps, _mm512_min_ps)
#endif
#ifdef KILN_KERNELS_AVX2
KILN_DWCONV_UKERNEL(kiln_f32_dwconv_nchw8c_ukernel__avx2, __m256, 8, _mm256_setzero_ps,
                    _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_set1_ps,
                    _mm256_add_ps, _mm256_max_ps, _mm256_min_ps)
#endif

static inline void kiln_f32_dwconv_nchwc_ukernel__scalar(int T, int cb,
                                                         const kiln_dwconv_tile_args *a)
{
    for (int p = 0; p < T; p++) {
        float *y = a->out + (int64_t)p * cb;
        for (int l = 0; l < cb; l++)
            y[l] = a->bias ? a->bias[l] : 0.0f;
        for (int r = 0; r < a->nkh; r++)
            for (int s = a->s_lo; s < a->s_hi; s++) {
                const float *x = a->in + r * a->in_rs + s * a->in_ss + p * a->in_ps;
                const float *w = a->w + r * a->w_rs + (int64_t)s * cb;
                for (int l = 0; l < cb; l++)
                    y[l] += x[l] * w[l];
            }
        for (int l = 0; l < cb; l++) {
            float v = y[l];
            if (a->res)
                v += a->res[(int64_t)p * cb + l];
            y[l] = kiln_k_epi1(v, a->epi, a->lo, a->hi);
        }
    }
}

#define KILN_DW_DEF512(t)                                                                          \
    static KILN_KNOINLINE void kiln_f32_dwconv_nchw16c_##t##x16__avx512(const kiln_dwconv_tile_args *a) \
    {                                                                                              \
        if (a->in_ps == 16)                                                                        \
            kiln_f32_dwconv_nchw16c_ukernel__avx512(t, 16, a);                                     \
        else                                                                                       \
            kiln_f32_dwconv_nchw16c_ukernel__avx512(t, a->in_ps, a);                               \
    }
#define KILN_DW_DEF256(t)                                                                          \
    static KILN_KNOINLINE void kiln_f32_dwconv_nchw8c_##t##x8__avx2(const kiln_dwconv_tile_args *a) \
    {                                                                                              \
        if (a->in_ps == 8)                                                                         \
            kiln_f32_dwconv_nchw8c_ukernel__avx2(t, 8, a);                                         \
        else                                                                                       \
            kiln_f32_dwconv_nchw8c_ukernel__avx2(t, a->in_ps, a);                                  \
    }
#define KILN_DW_CASE512(t)                                                                         \
    case t:                                                                                        \
        kiln_f32_dwconv_nchw16c_##t##x16__avx512(a);                                               \
        return;
#define KILN_DW_CASE256(t)                                                                         \
    case t:                                                                                        \
        kiln_f32_dwconv_nchw8c_##t##x8__avx2(a);                                                   \
        return;
#define KILN_DW_T8(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8)
#define KILN_DW_T16(M) KILN_DW_T8(M) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16)

#ifdef KILN_KERNELS_AVX512
KILN_DW_T16(KILN_DW_DEF512)
#endif
#ifdef KILN_KERNELS_AVX2
KILN_DW_T16(KILN_DW_DEF256)
#endif

#ifdef KILN_KERNELS_AVX512
/* Stride 1, dilation 1, a whole filter row (interior tiles): the T + KW - 1
 * input vectors of a filter row loaded once into registers and reused by
 * every tap, where the tile above loads T per tap (kh*kw*(T+1) loads for
 * kh*kw*T FMAs: the loads were the bound). ConvNeXt's 7x7 on 56x56x96, one
 * thread: 245 -> 182 us. */
#define KILN_DW_SLIDE512(T, KW)                                                                    \
    static KILN_KNOINLINE void kiln_f32_dwconv_nchw16c_slide##T##x##KW##__avx512(                  \
        const kiln_dwconv_tile_args *a)                                                            \
    {                                                                                              \
        __m512 acc[T];                                                                             \
        const __m512 init = a->bias ? _mm512_loadu_ps(a->bias) : _mm512_setzero_ps();             \
        KILN_KUNROLL for (int p = 0; p < T; p++) acc[p] = init;                                    \
        for (int r = 0; r < a->nkh; r++) {                                                         \
            const float *ip = a->in + r * a->in_rs;                                                \
            const float *wp = a->w + r * a->w_rs;                                                  \
            __m512 x[T + KW - 1];                                                                  \
            KILN_KUNROLL for (int j = 0; j < T + KW - 1; j++) x[j] = _mm512_loadu_ps(ip + j * 16);  \
            KILN_KUNROLL for (int s = 0; s < KW; s++)                                              \
            {                                                                                      \
                const __m512 wv = _mm512_loadu_ps(wp + s * 16);                                    \
                KILN_KUNROLL for (int p = 0; p < T; p++) acc[p] = _mm512_fmadd_ps(x[p + s], wv, acc[p]); \
            }                                                                                      \
        }                                                                                          \
        const __m512 lo = _mm512_set1_ps(a->lo), hi = _mm512_set1_ps(a->hi), z = _mm512_setzero_ps(); \
        KILN_KUNROLL for (int p = 0; p < T; p++)                                                   \
        {                                                                                          \
            __m512 v = acc[p];                                                                     \
            if (a->res)                                                                            \
                v = _mm512_add_ps(v, _mm512_loadu_ps(a->res + p * 16));                            \
            if (a->epi & KILN_EPI_RELU)                                                            \
                v = _mm512_max_ps(v, z);                                                           \
            if (a->epi & KILN_EPI_CLIP)                                                            \
                v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);                                       \
            _mm512_storeu_ps(a->out + p * 16, v);                                                  \
        }                                                                                          \
    }
#define KILN_DW_SLIDE_KW(T) KILN_DW_SLIDE512(T, 3) KILN_DW_SLIDE512(T, 5) KILN_DW_SLIDE512(T, 7)
KILN_DW_SLIDE_KW(6)
KILN_DW_SLIDE_KW(7)
KILN_DW_SLIDE_KW(8)
#define KILN_DW_SLIDE_CASE(T, KW)                                                                  \
    case T * 8 + KW:                                                                               \
        kiln_f32_dwconv_nchw16c_slide##T##x##KW##__avx512(a);                                      \
        return 1;

/* The sliding tile when one fits (1), else 0. */
static KILN_KINLINE int kiln_dwconv_slide(int T, int kw, const kiln_dwconv_tile_args *a)
{
    if (a->s_lo != 0 || a->s_hi != kw || a->in_ss != 16 || a->in_ps != 16)
        return 0;
    switch (T * 8 + kw) {
        KILN_DW_SLIDE_CASE(6, 3) KILN_DW_SLIDE_CASE(6, 5) KILN_DW_SLIDE_CASE(6, 7)
        KILN_DW_SLIDE_CASE(7, 3) KILN_DW_SLIDE_CASE(7, 5) KILN_DW_SLIDE_CASE(7, 7)
        KILN_DW_SLIDE_CASE(8, 3) KILN_DW_SLIDE_CASE(8, 5) KILN_DW_SLIDE_CASE(8, 7)
    default:
        return 0;
    }
}
#endif

static KILN_KDISPATCH void kiln_dwconv_tile(int cb, int T, const kiln_dwconv_tile_args *a)
{
#ifdef KILN_KERNELS_AVX512
    if (cb == 16) {
        switch (T) { KILN_DW_T16(KILN_DW_CASE512) }
        return;
    }
#endif
#ifdef KILN_KERNELS_AVX2
    if (cb == 8) {
        switch (T) { KILN_DW_T16(KILN_DW_CASE256) }
        return;
    }
#endif
    kiln_f32_dwconv_nchwc_ukernel__scalar(T, cb, a);
}

/* The output task `task` of kiln_dwconv_run writes: len floats from first
 * (one channel block, its band of rows, every column); generated code
 * applies the fused epilogue the header does not cover there. Tasks are
 * image x channel block x band of ohb output rows (kiln_kernels_gconv.h's
 * too). */
static KILN_KINLINE void kiln_conv_band_out(int64_t OH, int64_t OW, int64_t cb, int64_t ohb,
                                            int64_t task, int64_t *first, int64_t *len)
{
    const int64_t nbands = kiln_k_cdiv(OH, ohb);
    int64_t band = task % nbands, rest = task / nbands; /* rest: image * blocks + block */
    int64_t oh0 = band * ohb, oh1 = kiln_k_min64(OH, oh0 + ohb);
    *first = rest * OH * OW * cb + oh0 * OW * cb;
    *len = (oh1 - oh0) * OW * cb;
}

static KILN_KINLINE void kiln_dwconv_task_out(const kiln_dwconv_params *p, int64_t task,
                                              int64_t *first, int64_t *len)
{
    kiln_conv_band_out(p->oh, p->ow, p->cb, kiln_dwconv_ohb(p), task, first, len);
}

/* Pixels [ow0, ow0 + T) of an output row, T <= gather_t: the input columns
 * their windows span (the row's nkh filter rows, zeros outside the image)
 * copied into ws as [nkh][span][cb], then one register tile over it with
 * every tap, T independent accumulator chains. Used for rows of at most
 * gather_t pixels, a third or more of them border pixels (kiln_dwconv_gathers):
 * as an interior tile plus border
 * pixels one at a time with clipped taps (each a chain of kh*kw dependent
 * FMAs) a 7x7 conv on 7x7 and 14x14 images ran at 16-30% of peak; gathered,
 * 44 against 73 us and 79 against 91 us (convnext_tiny, 2 threads, loaded
 * machine). Wider rows keep the clipped border pixels: there out-of-order
 * execution overlaps their chains, and gathering them was 10% slower. */
static KILN_KINLINE int64_t kiln_dwconv_span(const kiln_dwconv_params *p, int T)
{
    return (int64_t)(T - 1) * p->sw + (int64_t)(p->kw - 1) * p->dw + 1;
}

static KILN_KINLINE void kiln_dwconv_gathered(const kiln_dwconv_params *p, const float *row,
                                              int64_t ow0, int T, kiln_dwconv_tile_args *a,
                                              float *ws, float *orow, const float *rrow)
{
    const int64_t cb = p->cb, W = p->w, row_rs = (int64_t)p->dh * W * cb;
    const int64_t span = kiln_dwconv_span(p, T), c0 = ow0 * p->sw - p->pad_l;
    for (int r = 0; r < a->nkh; r++) {
        float *d = ws + (int64_t)r * span * cb;
        const float *sr = row + r * row_rs;
        /* memcpy/memset of one block: lane loops here were vectorized
         * wrongly by gcc 12 -O3 (clang, gcc -O2 and the sanitizer builds
         * were right; compiler/test_channels_last, which compiles it as a
         * model does, caught it) */
        for (int64_t j = 0; j < span; j++) {
            int64_t iw = c0 + j;
            if (iw >= 0 && iw < W)
                memcpy(d + j * cb, sr + iw * cb, sizeof(float) * (size_t)cb);
            else
                memset(d + j * cb, 0, sizeof(float) * (size_t)cb);
        }
    }
    kiln_dwconv_tile_args g = *a;
    g.in = ws;
    g.in_rs = span * cb;
    g.s_lo = 0;
    g.s_hi = p->kw;
    g.out = orow + ow0 * cb;
    g.res = rrow ? rrow + ow0 * cb : NULL;
    kiln_dwconv_tile(p->cb, T, &g);
}

/* Runs tasks [task_begin, task_end); workspace: kiln_dwconv_workspace_bytes
 * (NULL: border pixels one at a time). */
static KILN_KINLINE void kiln_dwconv_run(const kiln_dwconv_params *p, const float *in,
                                         const float *w_packed, const float *bias,
                                         const float *residual, float *out, int64_t task_begin,
                                         int64_t task_end, void *workspace)
{
    float *ws = kiln_dwconv_workspace_bytes(p) ? (float *)workspace : NULL;
    const int cb = p->cb, T = kiln_dwconv_t(p), ohb = kiln_dwconv_ohb(p);
    const int64_t H = p->h, W = p->w, OH = p->oh, OW = p->ow;
    const int64_t cbn = kiln_k_cdiv(p->c, cb), nbands = kiln_k_cdiv(OH, ohb);
    const int64_t taps = (int64_t)p->kh * p->kw;
    /* output columns whose whole filter window is inside the image */
    int64_t ow_lo, ow_hi;
    kiln_dwconv_interior(p, &ow_lo, &ow_hi);
    kiln_dwconv_tile_args a;
    a.in_ss = (int64_t)p->dw * cb;
    a.in_ps = (int64_t)p->sw * cb;
    a.w_rs = (int64_t)p->kw * cb;
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
        a.in_rs = (int64_t)p->dh * W * cb;
        const float *wb = w_packed + cblk * taps * cb;
        int64_t oh1 = kiln_k_min64(OH, (band + 1) * ohb);
        for (int64_t oh = band * ohb; oh < oh1; oh++) {
            int64_t ih0 = oh * p->sh - p->pad_t;
            int64_t r_lo = ih0 >= 0 ? 0 : kiln_k_cdiv(-ih0, p->dh);
            int64_t r_hi = kiln_k_min64(p->kh, kiln_k_fdiv(H - 1 - ih0, p->dh) + 1);
            if (r_hi <= r_lo)
                r_lo = r_hi = 0;
            a.nkh = (int)(r_hi - r_lo);
            const float *row = src + (ih0 + r_lo * p->dh) * W * cb;
            a.w = wb + r_lo * a.w_rs;
            float *orow = dst + oh * OW * cb;
            const float *rrow = res ? res + oh * OW * cb : NULL;
            if (ws && a.nkh > 0) {
                /* a short row with border pixels: one gathered tile */
                kiln_dwconv_gathered(p, row, 0, (int)OW, &a, ws, orow, rrow);
                continue;
            }
            for (int64_t ow = 0; ow < OW;) {
                int tw;
                int64_t iw0 = ow * p->sw - p->pad_l;
                if (ow < ow_lo || ow >= ow_hi) { /* border pixel: clip the taps */
                    tw = 1;
                    int64_t s_lo = iw0 >= 0 ? 0 : kiln_k_cdiv(-iw0, p->dw);
                    int64_t s_hi = kiln_k_min64(p->kw, kiln_k_fdiv(W - 1 - iw0, p->dw) + 1);
                    if (s_hi < s_lo)
                        s_hi = s_lo;
                    a.s_lo = (int)s_lo;
                    a.s_hi = (int)s_hi;
                } else {
                    tw = (int)kiln_k_min64(T, ow_hi - ow);
                    a.s_lo = 0;
                    a.s_hi = p->kw;
                }
                a.in = row + iw0 * cb;
                a.out = orow + ow * cb;
                a.res = rrow ? rrow + ow * cb : NULL;
#ifdef KILN_KERNELS_AVX512
                if (cb == 16 && kiln_dwconv_slide(tw, p->kw, &a)) {
                    ow += tw;
                    continue;
                }
#endif
                kiln_dwconv_tile(cb, tw, &a);
                ow += tw;
            }
        }
    }
}

#endif /* KILN_KERNELS_DWCONV_H */
