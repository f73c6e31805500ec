/* kiln_kernels_wino.h: 3x3 stride-1 convolution (groups 1, any equal row
 * and column dilation) by Winograd's minimal filtering F(4x4, 3x3) in the
 * blocked layout NCHW{cb}c.
 *
 * Each 4x4 output tile comes from a 6x6 input patch: V = B^T d B (the input
 * transform), U = G g G^T per (output, input) channel pair (done once, when
 * the weights are packed), then for each of the 36 positions a matrix
 * product over the input channels, M[pos] = V[pos] x U[pos], and the output
 * transform Y = A^T M A. The products take 36 x 16 multiply-adds per 4x4 tile
 * and channel pair where the direct conv takes 16 x 9: 4x fewer, for the
 * price of the transforms and of weights 36/9 = 4x larger (so the template
 * takes maps with enough tiles to reuse them: tpl_conv2d_wino_nchwc.c).
 * Interpolation points 0, +-1, +-2 and infinity (Lavin and Gray, 2016).
 *
 * Layouts (cb = cb_in = cb_out; blocks padded with zeros):
 *   input     [n][cib][h][w][cb]          NCHW{cb}c
 *   packed U  [36][cob][cib][cb][cb]      per position, OI{cb}i{cb}o
 *   output, residual [n][cob][oh][ow][cb] NCHW{cb}c
 *   bias      [cob*cb]
 *
 * Work: a task is an image x a band of `th` tile rows with every output
 * channel. It transforms its band's patches into the workspace
 * (V: [36][cib][tiles][cb], the band's input read once), then for each oc
 * tile of O blocks and each run of T tiles multiplies the 36 positions with
 * the conv header's register-tiled microkernel (T tiles x O blocks, the
 * input channel blocks as its reduction; V from L2, U streaming from L2 or
 * beyond) into M ([36][O][T][cb], L1/L2) and transforms M into the output
 * with the epilogue (bias, residual, relu, clip) at the only store.
 *
 * Dilation d (an FCN's or DeepLab's atrous 3x3 convs, d = 2 and 4): the
 * outputs whose row is r mod d and column s mod d form an undilated 3x3
 * conv over the input rows and columns of the same residues (the input
 * grid taken every d-th element from (r - pad_t, s - pad_l)), so the
 * output splits into d x d phases of 4x4 tiles: tile rows are (phase row
 * r, tile row in the phase), tile columns likewise, each tile's 6x6 patch
 * read with row stride d*W and column stride d (no copy of the input), its
 * 4x4 outputs written d rows and d columns apart. The products are the
 * undilated ones; a task's band of tile rows covers scattered output rows,
 * so a dilated task has no output spans (task_out) and the template takes
 * only the header's epilogue for it. */
#ifndef KILN_KERNELS_WINO_H
#define KILN_KERNELS_WINO_H

#include "kiln_kernels_conv.h"

typedef struct kiln_wino_params {
    int n, c_in, h, w, c_out, oh, ow, pad_t, pad_l;
    int dil;       /* dilation of rows and columns (0 or 1: none) */
    int cb;        /* channel block of the input and output layouts */
    int epilogue;  /* KILN_EPI_* bit flags; residual added before the activation */
    float clip_min, clip_max;
    /* knobs (kiln_wino_default_params) */
    int tile_T;    /* tiles per microkernel call */
    int oc_tile;   /* output channel blocks per microkernel call */
    int th;        /* tile rows per task */
} kiln_wino_params;

#define KILN_WINO_POS 36
#define KILN_WINO_MAXCB 64 /* the widest channel block the transforms take */

typedef struct kiln_wino_plan {
    int isa;
    int64_t cib, cob, nth, ntw, nbands, band_tiles;
    int64_t d, pth, ptw; /* dilation; tile rows and columns per phase */
} kiln_wino_plan;

static KILN_KINLINE kiln_wino_plan kiln_wino_plan_of(const kiln_wino_params *p)
{
    kiln_wino_plan q;
    q.isa = kiln_conv_isa(p->cb);
    q.cib = kiln_k_cdiv(p->c_in, p->cb);
    q.cob = kiln_k_cdiv(p->c_out, p->cb);
    q.d = p->dil > 1 ? p->dil : 1;
    q.pth = kiln_k_cdiv(kiln_k_cdiv(p->oh, q.d), 4);
    q.ptw = kiln_k_cdiv(kiln_k_cdiv(p->ow, q.d), 4);
    q.nth = q.d * q.pth;
    q.ntw = q.d * q.ptw;
    int th = p->th < 1 ? 1 : p->th > q.nth ? (int)q.nth : p->th;
    q.nbands = kiln_k_cdiv(q.nth, th);
    q.band_tiles = (int64_t)th * q.ntw;
    return q;
}

static inline int kiln_wino_supported(const kiln_wino_params *p)
{
    const int d = p->dil > 1 ? p->dil : 1;
    return p->n > 0 && p->c_in > 0 && p->c_out > 0 && p->cb > 0 && p->cb <= KILN_WINO_MAXCB &&
           p->dil >= 0 && p->oh > 0 && p->ow > 0 && p->oh <= p->h + 2 * p->pad_t &&
           p->ow <= p->w + 2 * p->pad_l && p->pad_t >= 0 && p->pad_t <= 2 * d && p->pad_l >= 0 &&
           p->pad_l <= 2 * d;
}

static inline double kiln_wino_flops(const kiln_wino_params *p)
{
    /* the direct conv's count, as the profile compares templates on */
    return 2.0 * p->n * p->c_out * p->oh * p->ow * (double)p->c_in * 9;
}

static KILN_KINLINE int64_t kiln_wino_tasks(const kiln_wino_params *p)
{
    return (int64_t)p->n * kiln_wino_plan_of(p).nbands;
}

/* The output of task `task`: n_spans runs of len floats, the s-th at
 * first + s * stride (one per output channel block: the band's rows).
 * Undilated only (see the top). */
static KILN_KINLINE void kiln_wino_task_out(const kiln_wino_params *p, int64_t task,
                                            int64_t *first, int64_t *len, int64_t *n_spans,
                                            int64_t *stride)
{
    kiln_wino_plan q = kiln_wino_plan_of(p);
    int64_t b = task % q.nbands, n = task / q.nbands;
    int64_t th = q.band_tiles / q.ntw;
    int64_t oh0 = b * th * 4, oh1 = kiln_k_min64(p->oh, oh0 + th * 4);
    *stride = (int64_t)p->oh * p->ow * p->cb;
    *first = n * q.cob * *stride + oh0 * p->ow * p->cb;
    *len = (oh1 - oh0) * p->ow * p->cb;
    *n_spans = q.cob;
}

static KILN_KINLINE size_t kiln_wino_workspace_bytes(const kiln_wino_params *p)
{
    kiln_wino_plan q = kiln_wino_plan_of(p);
    int64_t v = KILN_WINO_POS * q.cib * q.band_tiles * p->cb;
    int64_t m = KILN_WINO_POS * (int64_t)KILN_CONV_MAXO * KILN_CONV_MAXT * p->cb;
    return (size_t)(v + m) * sizeof(float) + 64;
}

static inline int64_t kiln_wino_packed_weight_floats(const kiln_wino_params *p)
{
    kiln_wino_plan q = kiln_wino_plan_of(p);
    return KILN_WINO_POS * q.cob * q.cib * (int64_t)p->cb * p->cb;
}

/* w_oihw: [c_out][c_in][3][3] (ONNX). U = G g G^T per channel pair, in
 * double, stored per position. */
static inline void kiln_wino_pack_weights(const kiln_wino_params *p, const float *w_oihw,
                                          float *packed)
{
    static const double G[6][3] = {{1.0 / 4, 0, 0},
                                   {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                   {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                   {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                   {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                   {0, 0, 1}};
    kiln_wino_plan q = kiln_wino_plan_of(p);
    const int64_t cb = p->cb;
    for (int64_t i = 0; i < kiln_wino_packed_weight_floats(p); i++)
        packed[i] = 0.0f;
    for (int64_t oc = 0; oc < p->c_out; oc++)
        for (int64_t ic = 0; ic < p->c_in; ic++) {
            const float *g = w_oihw + (oc * p->c_in + ic) * 9;
            double t[6][3], u[6][6];
            for (int i = 0; i < 6; i++)
                for (int k = 0; k < 3; k++)
                    t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++)
                    u[i][j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
            int64_t ob = oc / cb, co = oc % cb, ib = ic / cb, ci = ic % cb;
            for (int pos = 0; pos < KILN_WINO_POS; pos++)
                packed[(((pos * q.cob + ob) * q.cib + ib) * cb + ci) * cb + co] =
                    (float)u[pos / 6][pos % 6];
        }
}

/* Fills the knobs from the shape, the per-core L2 size and the thread
 * count: the register tile as the direct conv's model picks it for a row of
 * band_tiles pixels; tile rows per task as many as keep at least 4 tasks
 * per thread and the band's V in half the L2 (at least 1). */
static inline void kiln_wino_default_params(kiln_wino_params *p, int64_t l2_bytes, int n_threads)
{
    p->th = 1;
    p->tile_T = p->oc_tile = 1;
    kiln_wino_plan q = kiln_wino_plan_of(p);
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    for (int64_t th = 2; th <= q.nth; th++) {
        int64_t bands = kiln_k_cdiv(q.nth, th);
        int64_t vbytes = KILN_WINO_POS * q.cib * th * q.ntw * p->cb * 4;
        if ((int64_t)p->n * bands < want || vbytes > l2_bytes / 2)
            break;
        p->th = (int)th;
    }
    q = kiln_wino_plan_of(p);
    kiln_conv_pick_tile(kiln_conv_model_isa(p->cb), q.band_tiles, q.cob, &p->tile_T,
                        &p->oc_tile);
}

/* The transforms work on all cb lanes of a block at once: every statement
 * is a loop over the lanes (innermost, cb a constant in generated code, so
 * each is one vector operation). */
#define KILN_WINO_LANES for (int l = 0; l < cb; l++)

/* V = B^T d B of one patch: d's row i at d + i * drs, column k at + k * dcs
 * (lanes contiguous); V's position pos goes to v + pos * vps. */
static KILN_KINLINE void kiln_wino_in_tf(const float *d, int64_t drs, int64_t dcs, float *v,
                                         int64_t vps, const int cb)
{
    float t[6][6][KILN_WINO_MAXCB];
    for (int k = 0; k < 6; k++) {
        const float *c = d + k * dcs;
        KILN_WINO_LANES
        {
            float d0 = c[0 * drs + l], d1 = c[1 * drs + l], d2 = c[2 * drs + l];
            float d3 = c[3 * drs + l], d4 = c[4 * drs + l], d5 = c[5 * drs + l];
            t[0][k][l] = 4.0f * d0 - 5.0f * d2 + d4;
            t[1][k][l] = -4.0f * (d1 + d2) + d3 + d4;
            t[2][k][l] = 4.0f * (d1 - d2) - d3 + d4;
            t[3][k][l] = -2.0f * (d1 - d3) - d2 + d4;
            t[4][k][l] = 2.0f * (d1 - d3) - d2 + d4;
            t[5][k][l] = 4.0f * d1 - 5.0f * d3 + d5;
        }
    }
    for (int i = 0; i < 6; i++) {
        float *vi = v + (int64_t)(i * 6) * vps;
        KILN_WINO_LANES
        {
            float d0 = t[i][0][l], d1 = t[i][1][l], d2 = t[i][2][l], d3 = t[i][3][l];
            float d4 = t[i][4][l], d5 = t[i][5][l];
            vi[0 * vps + l] = 4.0f * d0 - 5.0f * d2 + d4;
            vi[1 * vps + l] = -4.0f * (d1 + d2) + d3 + d4;
            vi[2 * vps + l] = 4.0f * (d1 - d2) - d3 + d4;
            vi[3 * vps + l] = -2.0f * (d1 - d3) - d2 + d4;
            vi[4 * vps + l] = 2.0f * (d1 - d3) - d2 + d4;
            vi[5 * vps + l] = 4.0f * d1 - 5.0f * d3 + d5;
        }
    }
}

/* Y = A^T M A of one tile (position pos at m + pos * mps), the epilogue,
 * and the store of its rows < nr and columns < nc to y (row stride yrs,
 * column stride ycs: cb, or d * cb dilated); res likewise, or NULL. */
static KILN_KINLINE void kiln_wino_out_tf(const float *m, int64_t mps, float *y, const float *res,
                                          int64_t yrs, int64_t ycs, int nr, int nc,
                                          const float *bias, int epi, float lo, float hi,
                                          const int cb)
{
    float t[4][6][KILN_WINO_MAXCB];
    for (int k = 0; k < 6; k++) {
        const float *c = m + k * mps;
        KILN_WINO_LANES
        {
            float m0 = c[0 * mps + l], m1 = c[6 * mps + l], m2 = c[12 * mps + l];
            float m3 = c[18 * mps + l], m4 = c[24 * mps + l], m5 = c[30 * mps + l];
            float s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
            t[0][k][l] = m0 + s12 + s34;
            t[1][k][l] = d12 + 2.0f * d34;
            t[2][k][l] = s12 + 4.0f * s34;
            t[3][k][l] = d12 + 8.0f * d34 + m5;
        }
    }
    for (int i = 0; i < nr; i++) {
        float r[4][KILN_WINO_MAXCB];
        KILN_WINO_LANES
        {
            float m0 = t[i][0][l], m1 = t[i][1][l], m2 = t[i][2][l], m3 = t[i][3][l];
            float m4 = t[i][4][l], m5 = t[i][5][l];
            float s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
            float b0 = bias ? bias[l] : 0.0f;
            r[0][l] = m0 + s12 + s34 + b0;
            r[1][l] = d12 + 2.0f * d34 + b0;
            r[2][l] = s12 + 4.0f * s34 + b0;
            r[3][l] = d12 + 8.0f * d34 + m5 + b0;
        }
        for (int k = 0; k < nc; k++) {
            float *yo = y + i * yrs + (int64_t)k * ycs;
            const float *ro = res ? res + i * yrs + (int64_t)k * ycs : NULL;
            KILN_WINO_LANES
            {
                float v = r[k][l] + (ro ? ro[l] : 0.0f);
                yo[l] = kiln_k_epi1(v, epi, lo, hi);
            }
        }
    }
}

/* The microkernel tile of the products for the microkernels of `isa`: *O
 * output blocks (oc_tile) by *T transformed tiles (tile_T), clamped to
 * the register budget. */
static KILN_KINLINE void kiln_wino_tile(const kiln_wino_params *p, int isa, int *T, int *O)
{
    const int o = p->oc_tile < 1 ? 1 : p->oc_tile > KILN_CONV_MAXO ? KILN_CONV_MAXO : p->oc_tile;
    const int mt = kiln_conv_max_t(isa, o);
    *O = o;
    *T = p->tile_T < 1 ? 1 : p->tile_T > mt ? mt : p->tile_T;
}

/* The tile widths kiln_wino_run's products take (kiln_kernels_conv.h's
 * KILN_CONV_TILES_T / _O, which a generated Winograd kernel defines before
 * this header): each band's tiles (band_tiles, or the last band's) in
 * steps of T, the output blocks in steps of O. */
static inline void kiln_wino_tile_sets(const kiln_wino_params *p, int isa, uint32_t *tm,
                                       uint32_t *om)
{
    const kiln_wino_plan q = kiln_wino_plan_of(p);
    int T, O;
    kiln_wino_tile(p, isa, &T, &O);
    *tm = kiln_conv_run_steps(T, q.band_tiles, q.nth * q.ntw);
    *om = kiln_conv_steps(O, q.cob);
}

/* Runs tasks [task_begin, task_end). */
static KILN_KINLINE void kiln_wino_run(const kiln_wino_params *p, const float *in,
                                       const float *u_packed, const float *bias,
                                       const float *residual, float *out, int64_t task_begin,
                                       int64_t task_end, void *workspace)
{
    const kiln_wino_plan q = kiln_wino_plan_of(p);
    /* knobs clamped to the microkernels this build has */
    const int cb = p->cb;
    int T, O;
    kiln_wino_tile(p, q.isa, &T, &O);
    const int64_t H = p->h, W = p->w, OH = p->oh, OW = p->ow, nt = q.band_tiles, d = q.d;
    const int64_t th = nt / q.ntw;
    const int64_t vps = q.cib * nt * cb;     /* floats between V's positions */
    const int64_t mps = (int64_t)O * T * cb; /* floats between M's positions */
    const int64_t ups = q.cob * q.cib * cb * cb;
    float *V = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    float *M = V + KILN_WINO_POS * vps;
    const float *bias_p = (p->epilogue & KILN_EPI_BIAS) ? bias : NULL;
    const float *res_p = (p->epilogue & KILN_EPI_RESIDUAL) ? residual : NULL;
    const int epi = p->epilogue;
    kiln_conv_plan cq;
    cq.isa = q.isa;
    cq.cbo = cb;
    float patch[36 * KILN_WINO_MAXCB];
    for (int64_t task = task_begin; task < task_end; task++) {
        const int64_t b = task % q.nbands, n = task / q.nbands;
        const int64_t tr0 = b * th, tr1 = kiln_k_min64(q.nth, tr0 + th);
        const int64_t ntb = (tr1 - tr0) * q.ntw; /* tiles of this band */
        /* input transform of the band */
        for (int64_t ib = 0; ib < q.cib; ib++) {
            const float *src = in + (n * q.cib + ib) * H * W * cb;
            for (int64_t tr = tr0; tr < tr1; tr++)
                for (int64_t tc = 0; tc < q.ntw; tc++) {
                    /* the tile's first output (phase r, s: see the top) */
                    const int64_t oh0 = d == 1 ? tr * 4 : tr / q.pth + tr % q.pth * 4 * d;
                    const int64_t ow0 = d == 1 ? tc * 4 : tc / q.ptw + tc % q.ptw * 4 * d;
                    const int64_t ih0 = oh0 - p->pad_t, iw0 = ow0 - p->pad_l;
                    float *v = V + (ib * nt + (tr - tr0) * q.ntw + tc) * cb;
                    if (ih0 >= 0 && iw0 >= 0 && ih0 + 5 * d + 1 <= H && iw0 + 5 * d + 1 <= W) {
                        kiln_wino_in_tf(src + (ih0 * W + iw0) * cb, d * W * cb, d * cb, v, vps,
                                        cb);
                        continue;
                    }
                    float *dp = patch;
                    for (int i = 0; i < 6; i++)
                        for (int k = 0; k < 6; k++) {
                            int64_t ih = ih0 + i * d, iw = iw0 + k * d;
                            int ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
                            for (int l = 0; l < cb; l++)
                                dp[(i * 6 + k) * cb + l] = ok ? src[(ih * W + iw) * cb + l] : 0.0f;
                        }
                    kiln_wino_in_tf(dp, 6 * cb, cb, v, vps, cb);
                }
        }
        /* the products and the output transform, O blocks x T tiles at a time */
        kiln_conv_tile_args a;
        a.in_cs = nt * cb;
        a.in_rs = 0;
        a.in_ss = 0;
        a.in_ps = cb;
        a.nicb = (int)q.cib;
        a.nkh = a.nkw = 1;
        a.cbi = cb;
        a.w_os = q.cib * cb * cb;
        a.w_cs = (int64_t)cb * cb;
        a.w_rs = 0;
        a.res = NULL;
        a.bias = NULL;
        a.first = a.last = 1;
        a.epi = 0;
        a.lo = a.hi = 0.0f;
        for (int64_t ob = 0; ob < q.cob; ob += O) {
            const int Oc = (int)kiln_k_min64(O, q.cob - ob);
            for (int64_t t0 = 0; t0 < ntb; t0 += T) {
                const int Tc = (int)kiln_k_min64(T, ntb - t0);
                a.out_os = (int64_t)Tc * cb;
                for (int pos = 0; pos < KILN_WINO_POS; pos++) {
                    a.in = V + pos * vps + t0 * cb;
                    a.w = u_packed + pos * ups + ob * a.w_os;
                    a.out = M + pos * mps;
                    kiln_conv_tile(&cq, Tc, Oc, &a);
                }
                for (int o = 0; o < Oc; o++)
                    for (int tt = 0; tt < Tc; tt++) {
                        const int64_t tile = t0 + tt;
                        const int64_t tr = tr0 + tile / q.ntw, tc = tile % q.ntw;
                        const int64_t oh0 = d == 1 ? tr * 4 : tr / q.pth + tr % q.pth * 4 * d;
                        const int64_t ow0 = d == 1 ? tc * 4 : tc / q.ptw + tc % q.ptw * 4 * d;
                        if (d > 1 && (oh0 >= OH || ow0 >= OW))
                            continue; /* a short phase's padding tile */
                        const int nr = (int)kiln_k_min64(4, kiln_k_cdiv(OH - oh0, d));
                        const int nc = (int)kiln_k_min64(4, kiln_k_cdiv(OW - ow0, d));
                        const int64_t off =
                            ((n * q.cob + ob + o) * OH + oh0) * OW * cb + ow0 * cb;
                        kiln_wino_out_tf(M + ((int64_t)o * Tc + tt) * cb, mps, out + off,
                                         res_p ? res_p + off : NULL, d * OW * cb, d * cb, nr,
                                         nc, bias_p ? bias_p + (ob + o) * cb : NULL, epi,
                                         p->clip_min, p->clip_max, cb);
                    }
            }
        }
    }
}

#endif /* KILN_KERNELS_WINO_H */
