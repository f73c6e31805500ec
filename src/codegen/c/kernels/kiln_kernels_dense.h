/* kiln_kernels_dense.h: dense layer / GEMM, Y[m][n] = act(X[m][k] . W^T + bias
 * + residual), with W ([n][k], ONNX Gemm transB=1 / MatMul with a transposed
 * constant) packed at compile time.
 *
 * Layouts: X row-major [m][k]; W packed [ceil(n/nb)][k][nb] (zero-padded);
 * Y and residual row-major [m][n]; bias [n]. Y must not alias X or residual.
 *
 * Algorithm. Tasks are (group of m_group rows) x (group of n_group column
 * blocks). Inside a task, for each tile of m_tile rows the rows of X are
 * packed k-major into the workspace ([k][m_tile], a panel that stays in L1/L2
 * while every column tile of the group reuses it); a microkernel then holds
 * m_tile x n_tile blocks of nb columns in vector registers and, for each k,
 * loads n_tile weight vectors and broadcast-FMAs the m_tile panel values.
 * n_group is chosen so that the group's packed weights (k*n_group*nb floats)
 * fit half the L2 and are reused by all the row tiles. A partial last column
 * block uses masked loads and stores. Bias starts the accumulators; residual,
 * relu and clip are applied before the only store. A single row (batch-1
 * inference) is a GEMV bound by the weight stream; it skips the packing.
 *
 * 1x1 convolutions in the blocked layout go through kiln_kernels_conv.h (its
 * microkernel over pixels x output blocks with a 1x1 window is this same
 * GEMM on the NCHW16c layout, without a relayout).
 *
 * Microkernels: kiln_f32_gemm_{T}x{16*O}__avx512, kiln_f32_gemm_{T}x{8*O}__avx2,
 * and a portable one for any nb. */
#ifndef KILN_KERNELS_DENSE_H
#define KILN_KERNELS_DENSE_H

#include "kiln_kernels_common.h"
#include "kiln_kernels_conv.h" /* kiln_conv_isa, kiln_conv_max_t */

typedef struct kiln_dense_params {
    int m, k, n;
    int nb;       /* column block of the packed weights (16: AVX-512, 8: AVX2) */
    int epilogue; /* KILN_EPI_* bit flags */
    float clip_min, clip_max;
    /* knobs */
    int m_tile;  /* rows per register tile */
    int n_tile;  /* column blocks per register tile (1..4) */
    int m_group; /* rows per task (0: all) */
    int n_group; /* column blocks per task (0: all) */
} kiln_dense_params;

typedef struct kiln_dense_plan {
    int isa, T, O;
    int64_t nbn, m_group, n_group, n_mg, n_ng;
} kiln_dense_plan;

static KILN_KINLINE kiln_dense_plan kiln_dense_plan_of(const kiln_dense_params *p)
{
    kiln_dense_plan q;
    q.isa = kiln_conv_isa(p->nb);
    q.nbn = kiln_k_cdiv(p->n, p->nb);
    int o = p->n_tile < 1 ? 1 : p->n_tile > KILN_CONV_MAXO ? KILN_CONV_MAXO : p->n_tile;
    if (o > q.nbn)
        o = (int)q.nbn;
    q.O = o;
    int mt = kiln_conv_max_t(q.isa, o);
    q.T = p->m_tile < 1 ? 1 : p->m_tile > mt ? mt : p->m_tile;
    q.m_group = p->m_group <= 0 || p->m_group > p->m ? p->m : p->m_group;
    q.n_group = p->n_group <= 0 || p->n_group > q.nbn ? q.nbn : p->n_group;
    q.n_mg = kiln_k_cdiv(p->m, q.m_group);
    q.n_ng = kiln_k_cdiv(q.nbn, q.n_group);
    return q;
}

static inline int kiln_dense_supported(const kiln_dense_params *p)
{
    return p->m >= 1 && p->k >= 1 && p->n >= 1 && p->nb >= 1;
}

static inline double kiln_dense_flops(const kiln_dense_params *p)
{
    return 2.0 * p->m * (double)p->k * p->n;
}

static KILN_KINLINE int64_t kiln_dense_tasks(const kiln_dense_params *p)
{
    kiln_dense_plan q = kiln_dense_plan_of(p);
    return q.n_mg * q.n_ng;
}

static KILN_KINLINE size_t kiln_dense_workspace_bytes(const kiln_dense_params *p)
{
    return (size_t)KILN_CONV_MAXT * (size_t)p->k * sizeof(float) + 64;
}

static inline int64_t kiln_dense_packed_weight_floats(const kiln_dense_params *p)
{
    return kiln_k_cdiv(p->n, p->nb) * p->nb * (int64_t)p->k;
}

/* w: [n][k] row-major (W such that Y = X . W^T). */
static inline void kiln_dense_pack_weights(const kiln_dense_params *p, const float *w,
                                           float *packed)
{
    int64_t nbn = kiln_k_cdiv(p->n, p->nb);
    for (int64_t b = 0; b < nbn; b++)
        for (int64_t kk = 0; kk < p->k; kk++)
            for (int64_t l = 0; l < p->nb; l++) {
                int64_t j = b * p->nb + l;
                packed[(b * p->k + kk) * p->nb + l] = j < p->n ? w[j * p->k + kk] : 0.0f;
            }
}

static inline void kiln_dense_default_params(kiln_dense_params *p, int64_t l1_bytes,
                                             int64_t l2_bytes, int n_threads)
{
    (void)l1_bytes;
    p->m_tile = p->n_tile = 1;
    p->m_group = p->n_group = 0;
    kiln_dense_plan q = kiln_dense_plan_of(p);
    /* register tile: the conv model over rows (pixels) and column blocks */
    double best = 1e300;
    for (int o = 1; o <= KILN_CONV_MAXO && o <= q.nbn; o++) {
        int mt = kiln_conv_max_t(q.isa, o);
        for (int t = 1; t <= mt && (t <= p->m || t == 1); t++) {
            int64_t full = p->m / t, rem = p->m % t;
            int64_t tiles_o = kiln_k_cdiv(q.nbn, o);
            double c = tiles_o * (full * (double)kiln_k_max64((int64_t)t * o, 8) + full * 0.5 * o +
                                  (rem ? (double)kiln_k_max64(rem * o, 8) + 0.5 * o : 0.0));
            if (c < best * 0.999) {
                best = c;
                p->m_tile = t;
                p->n_tile = o;
            }
        }
    }
    q = kiln_dense_plan_of(p);
    int64_t wblock = (int64_t)p->k * p->nb * 4;
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
}

typedef struct kiln_dense_tile_args {
    const float *x;    /* packed panel [k][T] (or the X row when T == 1) */
    const float *w;    /* packed weights of column block 0 of the tile */
    int64_t w_os;      /* floats between column blocks (k * nb) */
    int k;
    float *y;          /* Y at row 0, column block 0 */
    const float *res;  /* residual, same offsets, or NULL */
    int64_t ldy;       /* n */
    const float *bias; /* at column block 0, or NULL */
    int nvalid;        /* valid columns of the tile's last block (nb when full) */
    int epi;
    float lo, hi;
} kiln_dense_tile_args;

#define KILN_DENSE_UKERNEL(NAME, V, VL, ZERO, LOAD, STORE, LOADM, STOREM, FMA, SET1, ADD, MAX, MIN) \
    static KILN_KINLINE void NAME(const int T, const int O, const kiln_dense_tile_args *a)          \
    {                                                                                              \
        V acc[KILN_CONV_MAXT][KILN_CONV_MAXO];                                                     \
        const int nv = a->nvalid;                                                                  \
        const int64_t ldy = a->ldy, wos = a->w_os;                                                 \
        KILN_KUNROLL for (int o = 0; o < O; o++)                                                   \
        {                                                                                          \
            V init = ZERO();                                                                       \
            if (a->bias)                                                                           \
                init = (o == O - 1 && nv < VL) ? LOADM(a->bias + o * VL, nv)                       \
                                               : LOAD(a->bias + o * VL);                           \
            KILN_KUNROLL for (int p = 0; p < T; p++) acc[p][o] = init;                             \
        }                                                                                          \
        const float *x = a->x, *w = a->w;                                                          \
        for (int kk = 0; kk < a->k; kk++) {                                                        \
            V wv[KILN_CONV_MAXO];                                                                  \
            KILN_KUNROLL for (int o = 0; o < O; o++) wv[o] = LOAD(w + o * wos + (int64_t)kk * VL); \
            KILN_KUNROLL for (int p = 0; p < T; p++)                                               \
            {                                                                                      \
                V xv = SET1(x[(int64_t)kk * T + p]);                                               \
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
                if (a->res)                                                                        \
                    v = ADD(v, part ? LOADM(a->res + off, nv) : LOAD(a->res + off));              \
                if (a->epi & KILN_EPI_RELU)                                                        \
                    v = MAX(v, z);                                                                 \
                if (a->epi & KILN_EPI_CLIP)                                                        \
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
                   _mm512_set1_ps, _mm512_add_ps, _mm512_max_ps, _mm512_min_ps)
#endif
#ifdef KILN_KERNELS_AVX2
#define KILN_K256_MASK(nv)                                                                         \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(nv), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define KILN_K256_LOADM(ptr, nv) _mm256_maskload_ps((ptr), KILN_K256_MASK(nv))
#define KILN_K256_STOREM(ptr, v, nv) _mm256_maskstore_ps((ptr), KILN_K256_MASK(nv), (v))
KILN_DENSE_UKERNEL(kiln_f32_gemm_ukernel__avx2, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
                   _mm256_storeu_ps, KILN_K256_LOADM, KILN_K256_STOREM, _mm256_fmadd_ps,
                   _mm256_set1_ps, _mm256_add_ps, _mm256_max_ps, _mm256_min_ps)
#endif

static inline void kiln_f32_gemm_ukernel__scalar(int T, int O, int nb,
                                                 const kiln_dense_tile_args *a)
{
    for (int p = 0; p < T; p++)
        for (int o = 0; o < O; o++) {
            int nv = o == O - 1 ? a->nvalid : nb;
            float *y = a->y + p * a->ldy + (int64_t)o * nb;
            const float *w = a->w + o * a->w_os;
            for (int l = 0; l < nv; l++) {
                float s = a->bias ? a->bias[o * nb + l] : 0.0f;
                for (int kk = 0; kk < a->k; kk++)
                    s += a->x[(int64_t)kk * T + p] * w[(int64_t)kk * nb + l];
                if (a->res)
                    s += a->res[p * a->ldy + (int64_t)o * nb + l];
                y[l] = kiln_k_epi1(s, a->epi, a->lo, a->hi);
            }
        }
}

#define KILN_GEMM_DEF512(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##__avx512(const kiln_dense_tile_args *a)   \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx512(t, o, a);                                                    \
    }
#define KILN_GEMM_DEF256(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_gemm_##t##x##n##__avx2(const kiln_dense_tile_args *a)     \
    {                                                                                              \
        kiln_f32_gemm_ukernel__avx2(t, o, a);                                                      \
    }
#define KILN_GEMM_CASE512(t, o, n)                                                                 \
    case t:                                                                                        \
        kiln_f32_gemm_##t##x##n##__avx512(a);                                                      \
        return;
#define KILN_GEMM_CASE256(t, o, n)                                                                 \
    case t:                                                                                        \
        kiln_f32_gemm_##t##x##n##__avx2(a);                                                        \
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

static KILN_KINLINE void kiln_dense_tile(const kiln_dense_plan *q, int nb, int T, int O,
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
    kiln_f32_gemm_ukernel__scalar(T, O, nb, a);
}

/* Runs tasks [task_begin, task_end). workspace: kiln_dense_workspace_bytes(p)
 * bytes for this thread. */
static KILN_KINLINE void kiln_dense_run(const kiln_dense_params *p, const float *x,
                                        const float *w_packed, const float *bias,
                                        const float *residual, float *y, int64_t task_begin,
                                        int64_t task_end, void *workspace)
{
    const kiln_dense_plan q = kiln_dense_plan_of(p);
    const int64_t K = p->k, N = p->n, nb = p->nb;
    float *panel = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    kiln_dense_tile_args a;
    a.w_os = K * nb;
    a.k = p->k;
    a.ldy = N;
    a.epi = p->epilogue;
    a.lo = p->clip_min;
    a.hi = p->clip_max;
    const float *bias_p = (p->epilogue & KILN_EPI_BIAS) ? bias : NULL;
    const float *res_p = (p->epilogue & KILN_EPI_RESIDUAL) ? residual : NULL;
    for (int64_t task = task_begin; task < task_end; task++) {
        int64_t ngi = task % q.n_ng, mgi = task / q.n_ng;
        int64_t m0 = mgi * q.m_group, m1 = kiln_k_min64(p->m, m0 + q.m_group);
        int64_t b0 = ngi * q.n_group, b1 = kiln_k_min64(q.nbn, b0 + q.n_group);
        for (int64_t mt = m0; mt < m1; mt += q.T) {
            const int T = (int)kiln_k_min64(q.T, m1 - mt);
            if (T == 1) {
                a.x = x + mt * K;
            } else {
                for (int64_t kk = 0; kk < K; kk++)
                    for (int pp = 0; pp < T; pp++)
                        panel[kk * T + pp] = x[(mt + pp) * K + kk];
                a.x = panel;
            }
            for (int64_t b = b0; b < b1; b += q.O) {
                const int O = (int)kiln_k_min64(q.O, b1 - b);
                int64_t col_end = (b + O) * nb;
                a.nvalid = (int)(col_end <= N ? nb : N - (b + O - 1) * nb);
                a.w = w_packed + b * K * nb;
                a.y = y + mt * N + b * nb;
                a.res = res_p ? res_p + mt * N + b * nb : NULL;
                a.bias = bias_p ? bias_p + b * nb : NULL;
                kiln_dense_tile(&q, (int)nb, T, O, &a);
            }
        }
    }
}

#endif /* KILN_KERNELS_DENSE_H */
