/* kiln_kernels_dense.h: dense layer / GEMM (ONNX Gemm, MatMul with a constant
 * 2-D B):
 *
 *   Y[m][n] = act(alpha * X[m][k] . W[k][n] + beta * bias + residual)
 *
 * with W constant, scaled by alpha and packed at compile time
 * (kiln_dense_pack_weights, from W given [n][k] or [k][n]).
 *
 * Layouts: X row-major [m][k]; packed W [ceil(n/nb)][k][nb] (zero-padded);
 * Y and residual row-major [m][n]; bias (bias_kind) a scalar, [n] per
 * column, [m] per row, or [m][n]. Y must not alias X, bias or residual.
 *
 * Algorithm. Tasks are (group of m_group rows) x (group of n_group column
 * blocks). Inside a task, for each tile of m_tile rows, a microkernel holds
 * m_tile x n_tile blocks of nb columns in vector registers and, for each k,
 * loads n_tile weight vectors and FMAs them with broadcasts of the m_tile
 * rows' X[.][k], read in place (m_tile sequential streams; packing X k-major
 * first cost 10-30% on vit-b-16's GEMMs, amortized over too few column
 * tiles). n_group is chosen so that the group's packed weights
 * (k*n_group*nb floats) fit half the L2 and are reused by all the row tiles.
 * Loop order in a task (the order knob): column tiles outer (kiln_dense_cols)
 * when the task's rows of X fit half the L2, so that each column tile's
 * weights come from memory once while its row tiles prefetch the next
 * tile's into L2, spread over their k loops (a network's weights are cold:
 * without it the first row tile waits for memory, ~8% of a ViT GEMM); or
 * row tiles outer (kiln_dense_rows), a row tile's X reused from L1 across
 * the column tiles, for tasks whose X does not fit. A partial last column block
 * uses masked loads and stores; each weight stream is prefetched
 * KILN_DENSE_PFD k steps ahead. The bias (times beta) starts the
 * accumulators; residual, relu and clip are applied before the only store. A
 * single row (batch-1 inference) is a GEMV bound by the weight stream:
 * n_tile weight streams, split into 4 / n_tile independent sums over k when
 * n_tile < 4 (FMA latency).
 *
 * Any other epilogue (the generated code's fused elementwise nodes) is a
 * callback, kiln_dense_run_epi's epi: called on each register tile right
 * after its store (at most 16 x 64 values, still in L1), with the tile's
 * position. Generated code passes a static function of its own, which gcc
 * inlines (every function here that takes it is always_inline).
 *
 * 1x1 convolutions in the blocked layout go through kiln_kernels_conv.h (its
 * microkernel over pixels x output blocks with a 1x1 window is this same
 * GEMM on the NCHW16c layout, without a relayout).
 *
 * Microkernels: kiln_f32_gemm_{T}x{16*O}__avx512, kiln_f32_gemm_{T}x{8*O}__avx2,
 * and a portable one for any nb.
 *
 * Generated code defines the params as a `static const` literal and calls
 * kiln_dense_run(_epi) with it, so gcc folds the geometry and the knobs;
 * libkiln calls the same header at compile time for the defaults and the
 * packing. */
#ifndef KILN_KERNELS_DENSE_H
#define KILN_KERNELS_DENSE_H

#include "kiln_kernels_common.h"
#include "kiln_kernels_conv.h" /* kiln_conv_isa, kiln_conv_max_t */

/* How far ahead (in k steps, one weight vector each) the microkernel
 * prefetches each of its weight streams: the packed panels stream from L2 (a
 * task's column group is sized to fit it, not L1), and the hardware
 * prefetchers alone left vit-b-16's GEMMs at ~60% of the FMA peak on one
 * core against ~73% with this (16 and 8 alike; 4 and 32 a little worse). */
#define KILN_DENSE_PFD 16

/* Denormals. An FMA with a denormal operand or result takes a microcode
 * assist, ~50x slower (a GEMM with a quarter of X denormal: 1% of peak), and
 * trained networks make them: GELU's tail (x * Phi(x) for x below about -13),
 * tiny weights. kiln_dense_run_epi runs with the x86 MXCSR's
 * flush-to-zero and denormals-are-zero bits set and restores the caller's
 * MXCSR before it returns (convnext_tiny's GEMMs after GELU were 10-40x
 * slower than their shapes). The result differs from IEEE only where a value
 * is below 2^-126 in magnitude. */
#if defined(__SSE__) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>
#define KILN_DENSE_FTZ_BEGIN                                                                       \
    const unsigned kiln_csr_ = _mm_getcsr();                                                       \
    _mm_setcsr(kiln_csr_ | 0x8040u)
#define KILN_DENSE_FTZ_END _mm_setcsr(kiln_csr_)
#else
#define KILN_DENSE_FTZ_BEGIN (void)0
#define KILN_DENSE_FTZ_END (void)0
#endif

/* bias_kind: how the bias is indexed (with KILN_EPI_BIAS) */
enum {
    KILN_DENSE_BIAS_COL = 0,    /* [n]: one per column (a dense layer's bias) */
    KILN_DENSE_BIAS_SCALAR = 1, /* [1] */
    KILN_DENSE_BIAS_ROW = 2,    /* [m] ([m][1]): one per row */
    KILN_DENSE_BIAS_FULL = 3,   /* [m][n] */
};

typedef struct kiln_dense_params {
    int m, k, n;
    int nb;        /* column block of the packed weights (16: AVX-512, 8: AVX2, else portable) */
    int w_kn;      /* packing: W is given [k][n] (MatMul, Gemm transB=0); 0: [n][k] (transB=1) */
    float alpha;   /* packing: the packed weights are alpha * W (1 for a plain layer) */
    int epilogue;  /* KILN_EPI_* bit flags */
    int bias_kind; /* KILN_DENSE_BIAS_* (with KILN_EPI_BIAS) */
    float beta;    /* the bias is scaled by beta (1 for a plain layer) */
    float clip_min, clip_max;
    /* knobs (kiln_dense_default_params fills them; out-of-range values are clamped) */
    int m_tile;  /* rows per register tile */
    int n_tile;  /* column blocks per register tile (1..4) */
    int m_group; /* rows per task (0: all) */
    int n_group; /* column blocks per task (0: all) */
    int order;   /* in a task: 1 column tiles outer, prefetching the next (kiln_dense_cols);
                    0 row tiles outer, no prefetch (kiln_dense_rows) */
    int k_block; /* K per pass over a task's tiles (0, or >= k: all of K in one pass) */
} kiln_dense_params;

/* K per pass (see kiln_dense_run_epi's K passes). */
static inline int kiln_dense_kc(const kiln_dense_params *p)
{
    return p->k_block > 0 && p->k_block < p->k ? p->k_block : p->k;
}

/* The epilogue callback: y points at Y[row0][col0] (leading dimension ldy),
 * the tile is rows x cols, its values final but for what the callback does
 * to them in place. */
typedef void (*kiln_dense_epi_fn)(void *ctx, float *y, int64_t ldy, int64_t row0, int rows,
                                  int64_t col0, int cols);

/* ceil(a / b), forced inline: the plan must fold to constants in the early
 * optimizations of generated code (kiln_k_cdiv is only `inline`), so that
 * the tile dispatch folds before gcc decides which microkernels to compile */
static KILN_KINLINE int64_t kiln_dense_cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

typedef struct kiln_dense_plan {
    int isa, T, O;
    int64_t nbn, m_group, n_group, n_mg, n_ng;
} kiln_dense_plan;

/* The plan for a register budget of `isa` (kiln_conv_isa on this build). */
static KILN_KINLINE kiln_dense_plan kiln_dense_plan_isa(const kiln_dense_params *p, int isa)
{
    kiln_dense_plan q;
    q.isa = isa;
    q.nbn = kiln_dense_cdiv(p->n, p->nb);
    int o = p->n_tile < 1 ? 1 : p->n_tile > KILN_CONV_MAXO ? KILN_CONV_MAXO : p->n_tile;
    if (o > q.nbn)
        o = (int)q.nbn;
    q.O = o;
    int mt = kiln_conv_max_t(q.isa, o);
    q.T = p->m_tile < 1 ? 1 : p->m_tile > mt ? mt : p->m_tile;
    if (q.T > p->m)
        q.T = p->m;
    q.m_group = p->m_group <= 0 || p->m_group > p->m ? p->m : p->m_group;
    q.n_group = p->n_group <= 0 || p->n_group > q.nbn ? q.nbn : p->n_group;
    q.n_mg = kiln_dense_cdiv(p->m, q.m_group);
    q.n_ng = kiln_dense_cdiv(q.nbn, q.n_group);
    return q;
}

static KILN_KINLINE kiln_dense_plan kiln_dense_plan_of(const kiln_dense_params *p)
{
    return kiln_dense_plan_isa(p, kiln_conv_isa(p->nb));
}

static inline int kiln_dense_supported(const kiln_dense_params *p)
{
    return p->m >= 1 && p->k >= 1 && p->n >= 1 && p->nb >= 1 && p->bias_kind >= 0 &&
           p->bias_kind <= KILN_DENSE_BIAS_FULL;
}

static inline double kiln_dense_flops(const kiln_dense_params *p)
{
    return 2.0 * p->m * (double)p->k * p->n;
}

/* Tasks (independent: any split of [0, tasks) over threads is valid). */
static KILN_KINLINE int64_t kiln_dense_tasks(const kiln_dense_params *p)
{
    kiln_dense_plan q = kiln_dense_plan_of(p);
    return q.n_mg * q.n_ng;
}

static inline int64_t kiln_dense_packed_weight_floats(const kiln_dense_params *p)
{
    return kiln_k_cdiv(p->n, p->nb) * p->nb * (int64_t)p->k;
}

/* w: [n][k] row-major (Y = X . W^T), or [k][n] with w_kn; packed gets
 * kiln_dense_packed_weight_floats(p) floats, alpha * W in column blocks. */
static inline void kiln_dense_pack_weights(const kiln_dense_params *p, const float *w,
                                           float *packed)
{
    const int64_t nbn = kiln_k_cdiv(p->n, p->nb), K = p->k, N = p->n, nb = p->nb;
    for (int64_t b = 0; b < nbn; b++)
        for (int64_t kk = 0; kk < K; kk++)
            for (int64_t l = 0; l < nb; l++) {
                int64_t j = b * nb + l;
                float v = 0.0f;
                if (j < N)
                    v = p->alpha * (p->w_kn ? w[kk * N + j] : w[j * K + kk]);
                packed[(b * K + kk) * nb + l] = v;
            }
}

/* The register tile's modelled cost over the whole product: per k step,
 * t * o FMAs (at least 8: the FMA latency times two ports), t broadcasts of
 * X (half an FMA each: they share the load ports with the weights), and o
 * weight vectors, which stream from L2 (two FMAs' worth each). Measured on
 * vit-b-16's and convnext_tiny's GEMMs (one core, AVX-512): 9x3 ~ 14x2 ~
 * 12x2 > 7x4 > 16x1, the last 20-35% slower, which the model without the
 * broadcasts had chosen. */
static inline double kiln_dense_tile_cost(int64_t m, int64_t nbn, int t, int o)
{
    int64_t full = m / t, rem = m % t;
    int64_t tiles_o = kiln_k_cdiv(nbn, o);
    return tiles_o * (full * ((double)kiln_k_max64((int64_t)t * o, 8) + 0.5 * t + 2.0 * o) +
                      (rem ? (double)kiln_k_max64(rem * o, 8) + 0.5 * rem + 2.0 * o : 0.0));
}

/* The knobs after the register tile (p->m_tile, p->n_tile set): the task
 * groups and the loop order. */
static inline void kiln_dense_task_knobs(kiln_dense_params *p, int64_t l2_bytes, int n_threads)
{
    const int isa = kiln_conv_model_isa(p->nb);
    kiln_dense_plan q = kiln_dense_plan_isa(p, isa);
    int64_t wblock = (int64_t)kiln_dense_kc(p) * p->nb * 4;
    int64_t ng = q.nbn, mg = p->m;
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    for (;;) {
        int64_t tasks = kiln_k_cdiv(p->m, mg) * kiln_k_cdiv(q.nbn, ng);
        int64_t nhalf = kiln_k_max64(q.O, (ng / 2 + q.O - 1) / q.O * q.O);
        int64_t mhalf = kiln_k_max64(q.T, (mg / 2 + q.T - 1) / q.T * q.T);
        if (ng * wblock > l2_bytes / 2 && nhalf < ng)
            ng = nhalf;
        else if (tasks >= want)
            break;
        else if (nhalf < ng)
            ng = nhalf;
        else if (mhalf < mg)
            mg = mhalf;
        else
            break;
    }
    p->n_group = (int)ng;
    p->m_group = (int)mg;
    /* column tiles outer when the task's rows of X stay in L2 across its
     * column tiles; row tiles outer keep a row tile's X in L1 across the
     * column tiles instead, for tasks whose X does not fit (then the
     * prefetched tile would compete with X's stream for the L2: vit-b-16's
     * 197x3072 by 3072x768 lost 2% with it on 2 threads) */
    p->order = (int64_t)mg * kiln_dense_kc(p) * 4 <= l2_bytes / 2;
}

/* Fills the knobs of p (geometry and nb set) from the shape, the per-core
 * L1d/L2 sizes in bytes and the thread count. The register model is the
 * block width's (16: AVX-512, 8: AVX2), whatever the build compiling this:
 * the cheapest tile by kiln_dense_tile_cost, then kiln_dense_task_knobs. */
static inline void kiln_dense_default_params(kiln_dense_params *p, int64_t l1_bytes,
                                             int64_t l2_bytes, int n_threads)
{
    (void)l1_bytes;
    const int isa = kiln_conv_model_isa(p->nb);
    p->m_tile = p->n_tile = 1;
    p->m_group = p->n_group = 0;
    kiln_dense_plan q = kiln_dense_plan_isa(p, isa);
    double best = 1e300;
    for (int o = 1; o <= KILN_CONV_MAXO && o <= q.nbn; o++)
        for (int t = 1; kiln_conv_tile_ok(isa, p->m, q.nbn, t, o); t++) {
            double c = kiln_dense_tile_cost(p->m, q.nbn, t, o);
            if (c < best * 0.999) {
                best = c;
                p->m_tile = t;
                p->n_tile = o;
            }
        }
    /* K passes: when one column block's packed weights exceed a quarter of
     * the L2 and there are rows enough to reuse a column tile (a detection
     * head's fc6: 1,000 proposals x 12,544 -> 1,024), passes of ~512 k
     * steps keep a column tile's weights and a row tile's X in L1/L2 where
     * whole-K tiles streamed both from memory; a single row (a GEMV) streams
     * the weights once anyway */
    p->k_block = 0;
    if (p->m >= 64 && (int64_t)p->k * p->nb * 4 > l2_bytes / 4) {
        int64_t passes = kiln_k_cdiv(p->k, 512);
        p->k_block = (int)((kiln_k_cdiv(p->k, passes) + 7) / 8 * 8);
    }
    kiln_dense_task_knobs(p, l2_bytes, n_threads);
}

typedef struct kiln_dense_tile_args {
    const float *x;    /* X at the tile's first row */
    int64_t x_rs;      /* floats between rows of X (k) */
    const float *w;    /* packed weights of column block 0 of the tile */
    int64_t w_os;      /* floats between column blocks (k * nb) */
    int k;
    float *y;          /* Y at row 0, column block 0 */
    const float *res;  /* residual, same offsets, or NULL */
    int64_t ldy;       /* n */
    const float *bias; /* at the tile's first row / column in its kind's indexing, or NULL */
    int bias_kind;
    float beta;
    int nvalid;        /* valid columns of the tile's last block (nb when full) */
    int epi;
    float lo, hi;
    int acc_y; /* a later K pass: the accumulators start from Y, not the bias */
    int last;  /* the last K pass: residual, Relu and Clip before the store */
    /* L2 prefetch of weights a later tile reads (see kiln_dense_cols): one
     * 64-byte line every 2^pf_sh k steps, pf_n lines from pf (none: 0) */
    const char *pf;
    int pf_n, pf_sh;
} kiln_dense_tile_args;

/* One SIMD microkernel body; T and O are constants in each instantiation. */
#define KILN_DENSE_UKERNEL(NAME, V, VL, ZERO, LOAD, STORE, LOADM, STOREM, FMA, SET1, ADD, MUL,    \
                           MAX, MIN)                                                               \
    static KILN_KINLINE void NAME(const int T, const int O, const int PF,                          \
                                  const kiln_dense_tile_args *a)                                   \
    {                                                                                              \
        V acc[KILN_CONV_MAXT][KILN_CONV_MAXO];                                                     \
        const int nv = a->nvalid, bk = a->bias_kind;                                               \
        const int64_t ldy = a->ldy, wos = a->w_os;                                                 \
        const float *bias = a->bias;                                                               \
        const V beta = SET1(a->beta);                                                              \
        KILN_KUNROLL for (int o = 0; o < O; o++)                                                   \
        {                                                                                          \
            const int part = o == O - 1 && nv < VL;                                                \
            V init = ZERO();                                                                       \
            if (bias && bk == KILN_DENSE_BIAS_COL)                                                 \
                init = part ? LOADM(bias + o * VL, nv) : LOAD(bias + o * VL);                      \
            else if (bias && bk == KILN_DENSE_BIAS_SCALAR)                                         \
                init = SET1(bias[0]);                                                              \
            if (bias && a->beta != 1.0f)                                                           \
                init = MUL(init, beta);                                                            \
            KILN_KUNROLL for (int p = 0; p < T; p++)                                               \
            {                                                                                      \
                V v = init;                                                                        \
                if (a->acc_y)                                                                      \
                    v = part ? LOADM(a->y + p * ldy + o * VL, nv) : LOAD(a->y + p * ldy + o * VL); \
                else if (bias && bk == KILN_DENSE_BIAS_ROW)                                        \
                    v = SET1(a->beta * bias[p]);                                                   \
                else if (bias && bk == KILN_DENSE_BIAS_FULL)                                       \
                    v = MUL(beta, part ? LOADM(bias + p * ldy + o * VL, nv)                        \
                                       : LOAD(bias + p * ldy + o * VL));                           \
                acc[p][o] = v;                                                                     \
            }                                                                                      \
        }                                                                                          \
        const float *x = a->x, *w = a->w;                                                          \
        const int64_t xrs = a->x_rs;                                                               \
        int kk = 0;                                                                                \
        if (T == 1 && O <= 2) {                                                                    \
            /* one row, one or two blocks: 4 / O independent sums over k (acc[1..]) hide  */      \
            /* the FMA latency of a short GEMV */                                                 \
            const int U = 4 / O;                                                                   \
            KILN_KUNROLL for (int u = 1; u < U; u++)                                               \
                KILN_KUNROLL for (int o = 0; o < O; o++) acc[u][o] = ZERO();                       \
            for (; kk + U <= a->k; kk += U)                                                        \
                KILN_KUNROLL for (int u = 0; u < U; u++)                                           \
                {                                                                                  \
                    V xv = SET1(x[kk + u]);                                                        \
                    KILN_KUNROLL for (int o = 0; o < O; o++) acc[u][o] =                           \
                        FMA(xv, LOAD(w + o * wos + (int64_t)(kk + u) * VL), acc[u][o]);            \
                }                                                                                  \
            KILN_KUNROLL for (int u = 1; u < U; u++)                                               \
                KILN_KUNROLL for (int o = 0; o < O; o++) acc[0][o] = ADD(acc[0][o], acc[u][o]);    \
        }                                                                                          \
        for (; kk < a->k; kk++) {                                                                  \
            V wv[KILN_CONV_MAXO];                                                                  \
            KILN_KUNROLL for (int o = 0; o < O; o++) wv[o] = LOAD(w + o * wos + (int64_t)kk * VL); \
            KILN_KUNROLL for (int o = 0; o < O; o++)                                               \
                __builtin_prefetch(w + o * wos + (int64_t)(kk + KILN_DENSE_PFD) * VL);             \
            if (PF && (kk & ((1 << a->pf_sh) - 1)) == 0 && (kk >> a->pf_sh) < a->pf_n)             \
                __builtin_prefetch(a->pf + ((int64_t)(kk >> a->pf_sh) << 6), 0, 2);                \
            KILN_KUNROLL for (int p = 0; p < T; p++)                                               \
            {                                                                                      \
                V xv = SET1(x[p * xrs + kk]);                                                      \
                KILN_KUNROLL for (int o = 0; o < O; o++) acc[p][o] = FMA(xv, wv[o], acc[p][o]);    \
            }                                                                                      \
        }                                                                                          \
        const V lo = SET1(a->lo), hi = SET1(a->hi), z = ZERO();                                    \
        KILN_KUNROLL for (int o = 0; o < O; o++)                                                   \
        {                                                                                          \
            const int part = o == O - 1 && nv < VL;                                                \
            KILN_KUNROLL for (int p = 0; p < T; p++)                                               \
            {                                                                                      \
                V v = acc[p][o];                                                                   \
                const int64_t off = p * ldy + o * VL;                                              \
                if (a->res && a->last)                                                             \
                    v = ADD(v, part ? LOADM(a->res + off, nv) : LOAD(a->res + off));              \
                if ((a->epi & KILN_EPI_RELU) && a->last)                                           \
                    v = MAX(v, z);                                                                 \
                if ((a->epi & KILN_EPI_CLIP) && a->last)                                           \
                    v = MIN(MAX(v, lo), hi);                                                       \
                if (part)                                                                          \
                    STOREM(a->y + off, v, nv);                                                     \
                else                                                                               \
                    STORE(a->y + off, v);                                                          \
            }                                                                                      \
        }                                                                                          \
    }

#ifdef KILN_KERNELS_AVX512
#define KILN_K512_MASK(nv) ((__mmask16)((1u << (nv)) - 1u))
#define KILN_K512_LOADM(ptr, nv) _mm512_maskz_loadu_ps(KILN_K512_MASK(nv), (ptr))
#define KILN_K512_STOREM(ptr, v, nv) _mm512_mask_storeu_ps((ptr), KILN_K512_MASK(nv), (v))
KILN_DENSE_UKERNEL(kiln_f32_gemm_ukernel__avx512, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
                   _mm512_storeu_ps, KILN_K512_LOADM, KILN_K512_STOREM, _mm512_fmadd_ps,
                   _mm512_set1_ps, _mm512_add_ps, _mm512_mul_ps, _mm512_max_ps, _mm512_min_ps)
#endif
#ifdef KILN_KERNELS_AVX2
#define KILN_K256_MASK(nv)                                                                         \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(nv), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define KILN_K256_LOADM(ptr, nv) _mm256_maskload_ps((ptr), KILN_K256_MASK(nv))
#define KILN_K256_STOREM(ptr, v, nv) _mm256_maskstore_ps((ptr), KILN_K256_MASK(nv), (v))
KILN_DENSE_UKERNEL(kiln_f32_gemm_ukernel__avx2, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
                   _mm256_storeu_ps, KILN_K256_LOADM, KILN_K256_STOREM, _mm256_fmadd_ps,
                   _mm256_set1_ps, _mm256_add_ps, _mm256_mul_ps, _mm256_max_ps, _mm256_min_ps)
#endif

/* The portable microkernel, any nb (T <= 8: kiln_conv_max_t): per column
 * block, runs of up to 32 columns x T rows accumulate in a local array, the
 * k loop innermost over the run's columns (contiguous in the packed block,
 * zero-padded: whole runs are computed, only valid columns stored), which
 * gcc vectorizes when nb is a constant. */
static KILN_KINLINE void kiln_f32_gemm_ukernel__scalar(const int T, const int O, const int nb,
                                                       const kiln_dense_tile_args *a)
{
    float acc[8][32];
    for (int o = 0; o < O; o++) {
        const int nv = o == O - 1 ? a->nvalid : nb;
        const float *w = a->w + o * a->w_os;
        for (int l0 = 0; l0 < nv; l0 += 32) {
            const int nl = nb - l0 < 32 ? nb - l0 : 32;
            for (int p = 0; p < T; p++)
                for (int l = 0; l < nl; l++) {
                    const int64_t c = (int64_t)o * nb + l0 + l;
                    float bv = 0.0f;
                    if (a->acc_y && l0 + l < nv)
                        bv = a->y[p * a->ldy + c];
                    else if (a->bias && l0 + l < nv)
                        bv = a->beta * (a->bias_kind == KILN_DENSE_BIAS_COL      ? a->bias[c]
                                        : a->bias_kind == KILN_DENSE_BIAS_SCALAR ? a->bias[0]
                                        : a->bias_kind == KILN_DENSE_BIAS_ROW    ? a->bias[p]
                                                                : a->bias[p * a->ldy + c]);
                    acc[p][l] = bv;
                }
            for (int kk = 0; kk < a->k; kk++) {
                const float *wk = w + (int64_t)kk * nb + l0;
                for (int p = 0; p < T; p++) {
                    const float xv = a->x[p * a->x_rs + kk];
                    for (int l = 0; l < nl; l++)
                        acc[p][l] += xv * wk[l];
                }
            }
            for (int p = 0; p < T; p++)
                for (int l = 0; l < nl && l0 + l < nv; l++) {
                    const int64_t off = p * a->ldy + (int64_t)o * nb + l0 + l;
                    float v = acc[p][l];
                    if (a->res && a->last)
                        v += a->res[off];
                    a->y[off] = a->last ? kiln_k_epi1(v, a->epi, a->lo, a->hi) : v;
                }
        }
    }
}

/* ---- the tile widths a kernel takes ---------------------------------------- */

/* As in kiln_kernels_conv.h: gcc's early passes run over every T x O
 * microkernel the dispatch below reaches before constant propagation picks
 * the few a kernel takes (vit-b-16 compiled in 12.0 s of CPU, 8.1 s with
 * the sets, AMD EPYC). A generated dense kernel defines KILN_DENSE_TILES_T and
 * KILN_DENSE_TILES_O (bit k: a width of k) from kiln_dense_tile_sets, and
 * the dispatch instantiates only those; a width outside them still computes
 * the right result on the portable microkernel (kiln_dense_tile_slow).
 * Without the macros every width is instantiated. */
#ifndef KILN_DENSE_TILES_T
#define KILN_DENSE_TILES_T 0xffffffffu
#endif
#ifndef KILN_DENSE_TILES_O
#define KILN_DENSE_TILES_O 0xffffffffu
#endif

/* The row (*tm) and column-block (*om) tile widths of kiln_dense_run_epi's
 * loops for p with the microkernels of `isa`: each task's rows (m_group, or
 * the last group's remainder) in tiles of T, its column blocks (n_group, or
 * the remainder) in tiles of O. */
static inline void kiln_dense_tile_sets(const kiln_dense_params *p, int isa, uint32_t *tm,
                                        uint32_t *om)
{
    const kiln_dense_plan q = kiln_dense_plan_isa(p, isa);
    *tm = kiln_conv_run_steps(q.T, q.m_group, p->m);
    *om = kiln_conv_run_steps(q.O, q.n_group, q.nbn);
}

/* A tile outside KILN_DENSE_TILES_*: correct and slower, never taken when
 * the sets are right. It runs on the portable microkernel in slices of at
 * most 8 rows (its limit; SIMD tiles have up to 16). noipa: one copy; a
 * plain call to the portable microkernel made gcc clone it per constant
 * width (146 s for one kernel). */
static KILN_CONV_NOIPA void kiln_dense_tile_slow(int T, int O, int nb,
                                                 const kiln_dense_tile_args *a)
{
#ifdef KILN_DENSE_COUNT_SLOW
    KILN_DENSE_COUNT_SLOW++;
#endif
    for (int p0 = 0; p0 < T; p0 += 8) {
        kiln_dense_tile_args s = *a;
        s.x = a->x + p0 * a->x_rs;
        s.y = a->y + p0 * a->ldy;
        s.res = a->res ? a->res + p0 * a->ldy : NULL;
        if (a->bias && a->bias_kind == KILN_DENSE_BIAS_ROW)
            s.bias = a->bias + p0;
        else if (a->bias && a->bias_kind == KILN_DENSE_BIAS_FULL)
            s.bias = a->bias + p0 * a->ldy;
        kiln_f32_gemm_ukernel__scalar(T - p0 < 8 ? T - p0 : 8, O, nb, &s);
    }
}

/* Each tile in two variants: without the L2 prefetch of a later tile's
 * weights (rows outer), and with it (suffix p; columns outer): the test
 * and its operands stay out of the k loop that does not prefetch. */
#define KILN_GEMM_DEF512(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##__avx512(const kiln_dense_tile_args *a)   \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx512(t, o, 0, a);                                                 \
    }                                                                                              \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##p__avx512(const kiln_dense_tile_args *a)  \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx512(t, o, 1, a);                                                 \
    }
#define KILN_GEMM_DEF256(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##__avx2(const kiln_dense_tile_args *a)     \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx2(t, o, 0, a);                                                   \
    }                                                                                              \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##p__avx2(const kiln_dense_tile_args *a)    \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx2(t, o, 1, a);                                                   \
    }
#define KILN_GEMM_CASE512(t, o, n)                                                                 \
    case t:                                                                                        \
        if (!((KILN_DENSE_TILES_T >> t) & (KILN_DENSE_TILES_O >> o) & 1u))                         \
            kiln_dense_tile_slow(t, o, nb, a);                                                     \
        else if (pf)                                                                               \
            kiln_f32_gemm_##t##x##n##p__avx512(a);                                                 \
        else                                                                                       \
            kiln_f32_gemm_##t##x##n##__avx512(a);                                                  \
        return;
#define KILN_GEMM_CASE256(t, o, n)                                                                 \
    case t:                                                                                        \
        if (!((KILN_DENSE_TILES_T >> t) & (KILN_DENSE_TILES_O >> o) & 1u))                         \
            kiln_dense_tile_slow(t, o, nb, a);                                                     \
        else if (pf)                                                                               \
            kiln_f32_gemm_##t##x##n##p__avx2(a);                                                   \
        else                                                                                       \
            kiln_f32_gemm_##t##x##n##__avx2(a);                                                    \
        return;

#ifdef KILN_KERNELS_AVX512
KILN_CONV_T16(KILN_GEMM_DEF512, 1, 16)
KILN_CONV_T14(KILN_GEMM_DEF512, 2, 32)
KILN_CONV_T9(KILN_GEMM_DEF512, 3, 48)
KILN_CONV_T7(KILN_GEMM_DEF512, 4, 64)
#endif
#ifdef KILN_KERNELS_AVX2
KILN_CONV_T12(KILN_GEMM_DEF256, 1, 8)
KILN_CONV_T6(KILN_GEMM_DEF256, 2, 16)
KILN_CONV_T4(KILN_GEMM_DEF256, 3, 24)
KILN_CONV_T2(KILN_GEMM_DEF256, 4, 32)
#endif

static KILN_KDISPATCH void kiln_dense_tile(const kiln_dense_plan *q, int nb, int T, int O, int pf,
                                         const kiln_dense_tile_args *a)
{
#ifdef KILN_KERNELS_AVX512
    if (q->isa == KILN_ISA_AVX512) {
        switch (O) {
        case 1:
            switch (T) { KILN_CONV_T16(KILN_GEMM_CASE512, 1, 16) }
            break;
        case 2:
            switch (T) { KILN_CONV_T14(KILN_GEMM_CASE512, 2, 32) }
            break;
        case 3:
            switch (T) { KILN_CONV_T9(KILN_GEMM_CASE512, 3, 48) }
            break;
        case 4:
            switch (T) { KILN_CONV_T7(KILN_GEMM_CASE512, 4, 64) }
            break;
        }
        return;
    }
#endif
#ifdef KILN_KERNELS_AVX2
    if (q->isa == KILN_ISA_AVX2) {
        switch (O) {
        case 1:
            switch (T) { KILN_CONV_T12(KILN_GEMM_CASE256, 1, 8) }
            break;
        case 2:
            switch (T) { KILN_CONV_T6(KILN_GEMM_CASE256, 2, 16) }
            break;
        case 3:
            switch (T) { KILN_CONV_T4(KILN_GEMM_CASE256, 3, 24) }
            break;
        case 4:
            switch (T) { KILN_CONV_T2(KILN_GEMM_CASE256, 4, 32) }
            break;
        }
        return;
    }
#endif
    (void)q;
    (void)pf;
    kiln_f32_gemm_ukernel__scalar(T, O, nb, a);
}

/* What a task's tiles share. */
typedef struct kiln_dense_ctx {
    const kiln_dense_params *p;
    const kiln_dense_plan *q;
    const float *x, *w, *bias, *res;
    float *y;
    kiln_dense_epi_fn epi;
    void *epi_ctx;
} kiln_dense_ctx;

/* The register tile of T rows at row mt and O column blocks at block b;
 * pf: the variant that prefetches (a->pf, kiln_dense_cols). */
static KILN_KINLINE void kiln_dense_tile_at(const kiln_dense_ctx *c, kiln_dense_tile_args *a,
                                            const int T, const int O, const int pf, int64_t mt,
                                            int64_t b)
{
    const kiln_dense_params *p = c->p;
    const int64_t K = p->k, N = p->n, nb = p->nb;
    const int64_t col0 = b * nb, col_end = (b + O) * nb;
    a->x = c->x + mt * K;
    a->nvalid = (int)(col_end <= N ? nb : N - (b + O - 1) * nb);
    a->w = c->w + b * K * nb;
    a->y = c->y + mt * N + col0;
    a->res = c->res ? c->res + mt * N + col0 : NULL;
    a->bias = !c->bias                                 ? NULL
              : p->bias_kind == KILN_DENSE_BIAS_COL    ? c->bias + col0
              : p->bias_kind == KILN_DENSE_BIAS_SCALAR ? c->bias
              : p->bias_kind == KILN_DENSE_BIAS_ROW    ? c->bias + mt
                                                       : c->bias + mt * N + col0;
#ifdef KILN_DENSE_TILE_SEEN
    KILN_DENSE_TILE_SEEN(T, O); /* the kernel tests: which widths the loops take */
#endif
    kiln_dense_tile(c->q, (int)nb, T, O, pf, a);
    if (c->epi && a->last)
        c->epi(c->epi_ctx, a->y, N, mt, T, col0, (int)((col_end < N ? col_end : N) - col0));
}

/* T rows at mt across the task's column blocks [b0, b1): whole tiles of q.O
 * blocks, then the rest (o_rest blocks: a constant per kind of group). */
static KILN_KINLINE void kiln_dense_row_at(const kiln_dense_ctx *c, kiln_dense_tile_args *a,
                                           const int T, int64_t mt, int64_t b0, int64_t b1,
                                           const int o_rest)
{
    const int O = c->q->O;
    int64_t b = b0;
    for (; b + O <= b1; b += O)
        kiln_dense_tile_at(c, a, T, O, 0, mt, b);
    if (o_rest)
        kiln_dense_tile_at(c, a, T, o_rest, 0, mt, b);
}

/* The rows [m0, m1) of a task, row tile by row tile (q.T rows, then
 * t_rest), each across the task's column tiles: the row tile's X stays in
 * L1 while the task's weights (n_group blocks, sized for L2) stream past. */
static KILN_KINLINE void kiln_dense_rows(const kiln_dense_ctx *c, kiln_dense_tile_args *a,
                                         int64_t m0, int64_t m1, const int t_rest, int64_t b0,
                                         int64_t b1, const int o_rest)
{
    const int T = c->q->T;
    int64_t mt = m0;
    for (; mt + T <= m1; mt += T)
        kiln_dense_row_at(c, a, T, mt, b0, b1, o_rest);
    if (t_rest)
        kiln_dense_row_at(c, a, t_rest, mt, b0, b1, o_rest);
}

/* Shares out an L2 prefetch of `lines` 64-byte lines at pf over the k loops
 * of `tiles` row tiles: row tile r takes its slice, one line every 2^sh k
 * steps with the widest stride that fits the slice in the k loop. With K
 * passes (lpb > 0) the lines are the pass's slices of the tile's column
 * blocks, lpb lines each, one block every bstride bytes, and a row tile's
 * share stays within one slice; otherwise (lpb 0) they are contiguous. */
static KILN_KINLINE void kiln_dense_pf_share(kiln_dense_tile_args *a, const char *pf,
                                             int64_t lines, int64_t lpb, int64_t bstride,
                                             int64_t tiles, int64_t r)
{
    a->pf_n = 0;
    a->pf_sh = 0;
    if (!pf || tiles < 2)
        return;
    const int64_t per = (lines + tiles - 1) / tiles, first = r * per;
    if (first >= lines)
        return;
    int64_t n = lines - first < per ? lines - first : per;
    const char *at = pf + first * 64;
    if (lpb > 0) {
        const int64_t off = first % lpb;
        at = pf + first / lpb * bstride + off * 64;
        if (n > lpb - off)
            n = lpb - off;
    }
    int sh = 0;
    while (sh < 6 && ((int64_t)a->k >> (sh + 1)) >= n)
        sh++;
    a->pf = at;
    a->pf_n = (int)n;
    a->pf_sh = sh;
}

/* The 64-byte lines of one column block's slice of a K pass of kp steps;
 * 0 without K passes (kp == k: the blocks are one contiguous stream). */
static KILN_KINLINE int64_t kiln_dense_pass_lines(const kiln_dense_params *p, int64_t kp)
{
    return kp < p->k ? (kp * p->nb * (int64_t)sizeof(float) + 63) / 64 : 0;
}

/* The 64-byte lines the prefetch of column blocks [b, b + nbl) covers in a
 * pass of kp steps: the blocks' slices of the pass, or the whole blocks. */
static KILN_KINLINE int64_t kiln_dense_lines(const kiln_dense_params *p, int64_t nbl, int64_t kp)
{
    const int64_t lpb = kiln_dense_pass_lines(p, kp);
    return lpb ? nbl * lpb : (nbl * p->k * p->nb * (int64_t)sizeof(float) + 63) / 64;
}

/* The rows [m0, m1) of a task over its column blocks [b0, b1), column tile
 * by column tile (q.O blocks, then o_rest: constants per kind of group),
 * each over whole row tiles of q.T rows, then t_rest. A column tile's
 * weights come from memory once, then from L2 for the other row tiles, and
 * its row tiles prefetch the next column tile's weights into L2, spread
 * over their k loops, so that the next tile's first row tile does not wait
 * for memory (after the task's last tile: pf_after, the next task's first
 * tile, pf_lines lines; NULL: none). The rows' X stays in L2 (a task's
 * X is m_group x k floats). */
static KILN_KINLINE void kiln_dense_cols(const kiln_dense_ctx *c, kiln_dense_tile_args *a,
                                         int64_t m0, int64_t m1, const int t_rest, int64_t b0,
                                         int64_t b1, const int o_rest, const char *pf_after,
                                         int64_t pf_lines)
{
    const kiln_dense_params *p = c->p;
    const int T = c->q->T, O = c->q->O;
    const int64_t tiles = (m1 - m0) / T + (t_rest != 0);
    const int64_t lpb = kiln_dense_pass_lines(p, a->k);
    const int64_t bstride = p->k * p->nb * (int64_t)sizeof(float);
    for (int64_t b = b0; b < b1;) {
        const int full = b + O <= b1;
        const int64_t bn = full ? b + O : b1;
        const char *pf = pf_after;
        int64_t lines = pf_lines;
        if (bn < b1) {
            pf = (const char *)(c->w + bn * p->k * p->nb);
            lines = kiln_dense_lines(p, b1 - bn < O ? b1 - bn : O, a->k);
        }
        int64_t mt = m0, r = 0;
        for (; mt + T <= m1; mt += T, r++) {
            kiln_dense_pf_share(a, pf, lines, lpb, bstride, tiles, r);
            if (full)
                kiln_dense_tile_at(c, a, T, O, 1, mt, b);
            else
                kiln_dense_tile_at(c, a, T, o_rest, 1, mt, b);
        }
        if (t_rest) {
            kiln_dense_pf_share(a, pf, lines, lpb, bstride, tiles, r);
            if (full)
                kiln_dense_tile_at(c, a, t_rest, O, 1, mt, b);
            else
                kiln_dense_tile_at(c, a, t_rest, o_rest, 1, mt, b);
        }
        b = bn;
    }
}

/* Runs tasks [task_begin, task_end) with the epilogue callback epi (NULL:
 * none) on each register tile after the header's own epilogue; no
 * workspace. bias and residual may be NULL when the epilogue flags lack
 * them. Partial tiles are only at the ends of the last row and column
 * groups, each of a size known from the params: every microkernel call has
 * a constant T x O, so generated code compiles just those (2-4) tiles. */
static KILN_KINLINE void kiln_dense_run_epi(const kiln_dense_params *p, const float *x,
                                            const float *w_packed, const float *bias,
                                            const float *residual, float *y, int64_t task_begin,
                                            int64_t task_end, kiln_dense_epi_fn epi,
                                            void *epi_ctx)
{
    const kiln_dense_plan q = kiln_dense_plan_of(p);
    kiln_dense_ctx c = {p, &q, x, w_packed, (p->epilogue & KILN_EPI_BIAS) ? bias : NULL,
                        (p->epilogue & KILN_EPI_RESIDUAL) ? residual : NULL, y, epi, epi_ctx};
    kiln_dense_tile_args a;
    a.w_os = (int64_t)p->k * p->nb;
    a.x_rs = p->k;
    a.k = p->k;
    a.ldy = p->n;
    a.epi = p->epilogue;
    a.lo = p->clip_min;
    a.hi = p->clip_max;
    a.bias_kind = p->bias_kind;
    a.beta = p->beta;
    a.pf = NULL;
    a.pf_n = a.pf_sh = 0;
    /* the remainders of a whole group and of the last one */
    const int64_t mg_last = p->m - (q.n_mg - 1) * q.m_group;
    const int64_t ng_last = q.nbn - (q.n_ng - 1) * q.n_group;
    const int t_rest = (int)(q.m_group % q.T), t_rest_last = (int)(mg_last % q.T);
    const int o_rest = (int)(q.n_group % q.O), o_rest_last = (int)(ng_last % q.O);
    const int kc = kiln_dense_kc(p);
    KILN_DENSE_FTZ_BEGIN;
    for (int64_t task = task_begin; task < task_end; task++) {
        for (int k0 = 0; k0 < p->k; k0 += kc) {
            /* K pass [k0, k0 + kc): the first starts from the bias, later ones
             * from Y; the last applies the epilogue */
            a.k = p->k - k0 < kc ? p->k - k0 : kc;
            a.acc_y = k0 > 0;
            a.last = k0 + a.k >= p->k;
            c.x = x + k0;
            c.w = w_packed + (int64_t)k0 * p->nb;
            int64_t ngi = task % q.n_ng, mgi = task / q.n_ng;
            int64_t m0 = mgi * q.m_group, m1 = m0 + q.m_group < p->m ? m0 + q.m_group : p->m;
            int64_t b0 = ngi * q.n_group, b1 = b0 + q.n_group < q.nbn ? b0 + q.n_group : q.nbn;
            const int mlast = mgi == q.n_mg - 1, nlast = ngi == q.n_ng - 1;
            /* what this thread runs next: this task's next K pass (its first
             * column tile, from k0 + kc), else the next task's first column
             * tile (from k 0) */
            const char *pf = NULL;
            int64_t lines = 0;
            if (k0 + a.k < p->k) {
                pf = (const char *)(w_packed + b0 * p->k * p->nb + (int64_t)(k0 + a.k) * p->nb);
                lines = kiln_dense_lines(p, b1 - b0 < q.O ? b1 - b0 : q.O, a.k);
            } else if (task + 1 < task_end) {
                const int64_t nb0 = ((task + 1) % q.n_ng) * q.n_group;
                pf = (const char *)(w_packed + nb0 * p->k * p->nb);
                lines = kiln_dense_lines(p, q.nbn - nb0 < q.O ? q.nbn - nb0 : q.O, a.k);
            }
            /* four calls, so that each has constant remainders (see above) */
            if (!p->order && !mlast && !nlast)
                kiln_dense_rows(&c, &a, m0, m1, t_rest, b0, b1, o_rest);
            else if (!p->order && !mlast)
                kiln_dense_rows(&c, &a, m0, m1, t_rest, b0, b1, o_rest_last);
            else if (!p->order && !nlast)
                kiln_dense_rows(&c, &a, m0, m1, t_rest_last, b0, b1, o_rest);
            else if (!p->order)
                kiln_dense_rows(&c, &a, m0, m1, t_rest_last, b0, b1, o_rest_last);
            else if (!mlast && !nlast)
                kiln_dense_cols(&c, &a, m0, m1, t_rest, b0, b1, o_rest, pf, lines);
            else if (!mlast)
                kiln_dense_cols(&c, &a, m0, m1, t_rest, b0, b1, o_rest_last, pf, lines);
            else if (!nlast)
                kiln_dense_cols(&c, &a, m0, m1, t_rest_last, b0, b1, o_rest, pf, lines);
            else
                kiln_dense_cols(&c, &a, m0, m1, t_rest_last, b0, b1, o_rest_last, pf, lines);
        }
    }
    KILN_DENSE_FTZ_END;
}

/* kiln_dense_run_epi without a callback. */
static KILN_KINLINE void kiln_dense_run(const kiln_dense_params *p, const float *x,
                                        const float *w_packed, const float *bias,
                                        const float *residual, float *y, int64_t task_begin,
                                        int64_t task_end)
{
    kiln_dense_run_epi(p, x, w_packed, bias, residual, y, task_begin, task_end, NULL, NULL);
}

#endif /* KILN_KERNELS_DENSE_H */
