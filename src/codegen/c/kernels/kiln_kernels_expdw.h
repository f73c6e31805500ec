/* kiln_kernels_expdw.h: an inverted-residual block's expand 1x1 conv and the
 * depthwise conv after it, fused so the wide (expanded) activation never
 * goes to memory at full size.
 *
 * Layouts (as kiln_kernels_conv.h and kiln_kernels_dwconv.h; cbi = e.cb_in,
 * cb = e.cb_out = d.cb, the wide channels a whole number of blocks):
 *   input   [n][ceil(c_in/cbi)][h][w][cbi]          NCHW{cbi}c
 *   we      the expand's packed weights, OIHW{cbi}i{cb}o (kiln_conv_pack_weights)
 *   wd      the depthwise's packed weights (kiln_dwconv_pack_weights)
 *   output  [n][c_wide/cb][oh][ow][cb]              NCHW{cb}c
 *
 * Algorithm. Tasks are image x group of oc_group wide channel blocks x band
 * of oh_tile output rows. A task walks its band in sub-bands of sub_rows
 * output rows; for each, the wide rows of its blocks that its filter
 * windows need (halo included) are held in the workspace,
 * [oc_group][rows][w][cb]: rows the previous sub-band already computed
 * move to the front (the halo, kh - sh rows at stride sh), the new ones come
 * from the expand 1x1, a pixel range of whole rows run as one long row of
 * the conv header's register tiles (kiln_conv_tile: bias, Relu, Clip in
 * registers), then the generated activation (`wide_epi`, for SiLU,
 * HardSwish, ..) on them while they are in cache. The depthwise then runs
 * per channel block on the held rows (kiln_dwconv_run on a one-block,
 * sub-band-high view: its top padding shifted, its image the held rows)
 * into the output, and the generated output epilogue (`out_epi`) runs on
 * what it wrote. order 1 makes every block's new rows, then runs the
 * depthwise; order 0 alternates per oc tile (its rows then in L1: no faster
 * on mobilenet-v2's 112x112x96, one thread). Only the halo rows at band
 * boundaries are computed twice (kh - sh rows per band). sub_rows keeps the
 * held rows within a quarter of the L2 (kiln_expdw_default_params).
 *
 * One thread, mobilenet-v2's shapes (the header timed alone, min of 30): 16->96 on
 * 112x112, 3x3 stride 2: 346 us fused against 465 separate (0.74); 24->144
 * on 56x56: 0.91-0.97; 32->192 and 40->240 on 28x28: 1.00-1.02 (the wide
 * tensor fits in the L2 there, and the separate kernels read it from it). */
#ifndef KILN_KERNELS_EXPDW_H
#define KILN_KERNELS_EXPDW_H

#include "kiln_kernels_conv.h"
#include "kiln_kernels_dwconv.h"

typedef struct kiln_expdw_params {
    kiln_conv_params e;   /* the expand: 1x1, stride 1, no padding; c_out = the wide channels */
    kiln_dwconv_params d; /* the depthwise on the wide tensor (h, w = e.h, e.w) */
    /* knobs (besides e.ow_tile, e.oc_tile, d.ow_tile) */
    int oh_tile;  /* output rows per task (0: all) */
    int oc_group; /* wide channel blocks per task (0: all) */
    int sub_rows; /* output rows per sub-band (0: the band) */
    int order;    /* 0: expand and depthwise per oc tile; 1: all blocks' expand, then depthwise */
} kiln_expdw_params;

static inline int kiln_expdw_supported(const kiln_expdw_params *p)
{
    const kiln_conv_params *e = &p->e;
    const kiln_dwconv_params *d = &p->d;
    return kiln_conv_supported(e) && kiln_dwconv_supported(d) && e->groups == 1 && e->kh == 1 &&
           e->kw == 1 && e->sh == 1 && e->sw == 1 && e->pad_t == 0 && e->pad_l == 0 &&
           e->pad_b == 0 && e->pad_r == 0 && e->oh == e->h && e->ow == e->w && d->h == e->h &&
           d->w == e->w && d->c == e->c_out && d->cb == e->cb_out && e->c_out % e->cb_out == 0 &&
           d->n == e->n;
}

static inline double kiln_expdw_flops(const kiln_expdw_params *p)
{
    return kiln_conv_flops(&p->e) + kiln_dwconv_flops(&p->d);
}

static KILN_KINLINE int kiln_expdw_band(const kiln_expdw_params *p)
{
    return p->oh_tile <= 0 || p->oh_tile > p->d.oh ? p->d.oh : p->oh_tile;
}

static KILN_KINLINE int kiln_expdw_sub(const kiln_expdw_params *p)
{
    int band = kiln_expdw_band(p);
    return p->sub_rows <= 0 || p->sub_rows > band ? band : p->sub_rows;
}

static KILN_KINLINE int64_t kiln_expdw_ocg(const kiln_expdw_params *p)
{
    int64_t cbn = kiln_k_cdiv(p->e.c_out, p->e.cb_out);
    return p->oc_group <= 0 || p->oc_group > cbn ? cbn : p->oc_group;
}

static KILN_KINLINE int64_t kiln_expdw_tasks(const kiln_expdw_params *p)
{
    int64_t cbn = kiln_k_cdiv(p->e.c_out, p->e.cb_out);
    return (int64_t)p->d.n * kiln_k_cdiv(cbn, kiln_expdw_ocg(p)) *
           kiln_k_cdiv(p->d.oh, kiln_expdw_band(p));
}

/* Wide rows a sub-band of `sub` output rows reads at most. */
static KILN_KINLINE int64_t kiln_expdw_rows(const kiln_expdw_params *p, int sub)
{
    return kiln_k_min64(p->d.h, (int64_t)(sub - 1) * p->d.sh + (int64_t)(p->d.kh - 1) * p->d.dh + 1);
}

/* Floats of the held wide rows (the workspace's first part). */
static KILN_KINLINE int64_t kiln_expdw_wide_floats(const kiln_expdw_params *p, int sub)
{
    return kiln_expdw_ocg(p) * kiln_expdw_rows(p, sub) * p->e.w * p->e.cb_out;
}

/* Per thread: the held wide rows, 64-byte aligned, then the depthwise's own
 * workspace (gathered border windows). */
static inline size_t kiln_expdw_workspace_bytes(const kiln_expdw_params *p)
{
    size_t wide = sizeof(float) * (size_t)kiln_expdw_wide_floats(p, kiln_expdw_sub(p));
    wide = (wide + 63) & ~(size_t)63;
    return 64 + wide + kiln_dwconv_workspace_bytes(&p->d);
}

/* Knobs: the expand's register tile from the conv header's model; the
 * depthwise's from its own. Tasks: image x group of oc_group wide channel
 * blocks x band of oh_tile output rows, the split minimising the modelled
 * time of the busiest thread, counted in wide block-rows the expand makes:
 * a band reads (rows - 1) * sh + kh wide rows, so rows split across bands
 * compute their halo twice (5x5 stride 2 on 56 rows in 4 bands: 21% more),
 * while channel groups cost nothing but a group not a multiple of the
 * register tile's blocks (a narrower tile); near ties go to more tasks
 * (balance on a loaded machine). Sub-bands as high as keeps the held wide
 * rows within a quarter of the L2 (they are written by the expand and read
 * back kh / sh times by the depthwise). */
static inline void kiln_expdw_default_params(kiln_expdw_params *p, int64_t l1_bytes,
                                             int64_t l2_bytes, int n_threads)
{
    kiln_conv_default_params(&p->e, l1_bytes, l2_bytes, n_threads);
    kiln_dwconv_default_params(&p->d, l1_bytes, l2_bytes, n_threads);
    const kiln_conv_plan q = kiln_conv_plan_isa(&p->e, kiln_conv_model_isa(p->e.cb_out));
    const int64_t thr = n_threads > 0 ? n_threads : 1, OH = p->d.oh;
    double best = 1e300;
    int64_t best_tasks = 0, best_ocg = q.cob, best_band = OH;
    for (int64_t ocg = 1; ocg <= q.cob; ocg++)
        for (int64_t bands = 1; bands <= OH && bands <= 8 * thr; bands++) {
            int64_t band = kiln_k_cdiv(OH, bands);
            if (kiln_k_cdiv(OH, band) != bands)
                continue; /* the same split as fewer bands */
            int64_t tasks = p->d.n * kiln_k_cdiv(q.cob, ocg) * bands;
            double cost = (double)kiln_expdw_rows(p, (int)band) * (double)ocg *
                          (ocg % q.O ? 1.05 : 1.0) * (double)kiln_k_cdiv(tasks, thr);
            if (cost < best * 0.98 || (cost <= best * 1.02 && tasks > best_tasks)) {
                best = cost < best ? cost : best;
                best_tasks = tasks;
                best_ocg = ocg;
                best_band = band;
            }
        }
    p->oc_group = (int)best_ocg;
    p->oh_tile = (int)best_band;
    p->order = 1;
    p->sub_rows = 1;
    while (p->sub_rows < p->oh_tile &&
           4 * (int64_t)sizeof(float) * kiln_expdw_wide_floats(p, p->sub_rows + 1) <= l2_bytes)
        p->sub_rows++;
}

/* The wide rows [*i0, *i1) that output rows [o0, o1) of the depthwise read,
 * clamped to the image (empty when every filter row is in the padding). */
static KILN_KINLINE void kiln_expdw_window(const kiln_dwconv_params *d, int64_t o0, int64_t o1,
                                           int64_t *i0, int64_t *i1)
{
    int64_t a = kiln_k_max64(0, o0 * d->sh - d->pad_t);
    int64_t z = kiln_k_min64(d->h, (o1 - 1) * d->sh - d->pad_t + (int64_t)(d->kh - 1) * d->dh + 1);
    a = kiln_k_min64(a, d->h);
    *i0 = a;
    *i1 = z < a ? a : z;
}

/* The first of wide rows [i0, i1) the expand must make when [h0, h1) are
 * held: the previous sub-band's rows from i0 on (the halo) are kept. */
static KILN_KINLINE int64_t kiln_expdw_from(int64_t h0, int64_t h1, int64_t i0, int64_t i1)
{
    return h1 > h0 && i0 >= h0 && i0 < h1 ? kiln_k_min64(h1, i1) : i0;
}

/* The oc tile widths of the expand's tiles (KILN_CONV_TILES_O in
 * kiln_kernels_conv.h): a task's run of wide blocks (oc_group, or the
 * remainder) in steps of O, whether walked in one expand (order 1) or tile
 * by tile (order 0: runs of at most O, each then one tile). */
static inline uint32_t kiln_expdw_oc_tiles(const kiln_expdw_params *p, int isa)
{
    const kiln_conv_plan q = kiln_conv_plan_isa(&p->e, isa);
    return kiln_conv_run_steps(q.O, kiln_expdw_ocg(p), kiln_k_cdiv(p->d.c, p->d.cb));
}

/* The pixel tile widths of the expand's tiles (KILN_CONV_TILES_T): each
 * sub-band's new wide rows, one run of (i1 - from) * w pixels, in steps of
 * T. The walk is kiln_expdw_run's; it depends on the band only, not on the
 * image or the channel group. */
static inline uint32_t kiln_expdw_pixel_tiles(const kiln_expdw_params *p, int isa)
{
    const kiln_conv_plan q = kiln_conv_plan_isa(&p->e, isa);
    const int64_t band = kiln_expdw_band(p), sub = kiln_expdw_sub(p), OH = p->d.oh;
    uint32_t m = 0;
    for (int64_t t0 = 0; t0 < OH; t0 += band) {
        const int64_t t1 = kiln_k_min64(OH, t0 + band);
        int64_t h0 = 0, h1 = 0;
        for (int64_t o0 = t0; o0 < t1; o0 += sub) {
            int64_t i0, i1;
            kiln_expdw_window(&p->d, o0, kiln_k_min64(t1, o0 + sub), &i0, &i1);
            const int64_t npix = (i1 - kiln_expdw_from(h0, h1, i0, i1)) * p->e.w;
            if (npix > 0)
                m |= kiln_conv_steps(q.T, npix);
            h0 = i0;
            h1 = i1;
        }
    }
    return m;
}

/* Wide rows [r0, r1) of image n, channel blocks [ob0, ob1), from the
 * expand, into the held rows (wide: block ob0's, block stride rs_blk
 * floats) at row offset r0 - base, header epilogue in registers; then
 * wide_epi on each block's new rows. */
static KILN_KINLINE void kiln_expdw_expand(const kiln_expdw_params *p, const kiln_conv_plan *q,
                                           const float *in, const float *we, const float *be,
                                           float *wide, int64_t rs_blk, int64_t n, int64_t r0,
                                           int64_t r1, int64_t base, int64_t ob0, int64_t ob1,
                                           void (*wide_epi)(float *, int64_t))
{
    const kiln_conv_params *e = &p->e;
    const int64_t H = e->h, W = e->w, cbi = q->cbi, cbo = q->cbo;
    const int64_t npix = (r1 - r0) * W;
    if (npix <= 0)
        return;
    kiln_conv_tile_args a;
    a.in_cs = H * W * cbi;
    a.in_rs = 0;
    a.in_ss = 0;
    a.in_ps = cbi;
    a.nicb = (int)q->cib;
    a.nkh = 1;
    a.nkw = 1;
    a.cbi = (int)cbi;
    a.w_cs = cbi * cbo;
    a.w_rs = cbi * cbo;
    a.w_os = q->cib * a.w_cs;
    a.out_os = rs_blk;
    a.res = NULL;
    a.first = 1;
    a.last = 1;
    a.epi = e->epilogue & ~KILN_EPI_RESIDUAL;
    a.lo = e->clip_min;
    a.hi = e->clip_max;
    const float *src = in + n * q->cib * H * W * cbi + r0 * W * cbi;
    float *dst = wide + (r0 - base) * W * cbo; /* block ob0's */
    const float *bias = (e->epilogue & KILN_EPI_BIAS) ? be : NULL;
    for (int64_t px = 0; px < npix; px += q->T) {
        const int T = (int)kiln_k_min64(q->T, npix - px);
        a.in = src + px * cbi;
        for (int64_t ob = ob0; ob < ob1; ob += q->O) {
            const int O = (int)kiln_k_min64(q->O, ob1 - ob);
            a.w = we + ob * a.w_os;
            a.out = dst + (ob - ob0) * rs_blk + px * cbo;
            a.bias = bias ? bias + ob * cbo : NULL;
            kiln_conv_tile(q, T, O, &a);
        }
    }
    if (wide_epi)
        for (int64_t ob = ob0; ob < ob1; ob++)
            wide_epi(dst + (ob - ob0) * rs_blk, npix * cbo);
}

/* Runs tasks [task_begin, task_end). workspace: kiln_expdw_workspace_bytes.
 * be / bd may be NULL when the epilogues have no bias. wide_epi (may be
 * NULL) maps len wide floats in place; out_epi (may be NULL) is called with
 * ctx on each output span written, as (first, len) floats of the output. */
static KILN_KINLINE void kiln_expdw_run(const kiln_expdw_params *p, const float *in,
                                        const float *we, const float *be, const float *wd,
                                        const float *bd, float *out, int64_t task_begin,
                                        int64_t task_end, void *workspace,
                                        void (*wide_epi)(float *, int64_t),
                                        void (*out_epi)(void *, int64_t, int64_t), void *ctx)
{
    const kiln_conv_plan q = kiln_conv_plan_of(&p->e);
    const kiln_dwconv_params *d = &p->d;
    const int band = kiln_expdw_band(p), sub = kiln_expdw_sub(p);
    const int64_t H = d->h, W = d->w, OH = d->oh, OW = d->ow, cb = d->cb;
    const int64_t cbn = kiln_k_cdiv(d->c, cb), nbands = kiln_k_cdiv(OH, band);
    const int64_t ocg = kiln_expdw_ocg(p), n_ocg = kiln_k_cdiv(cbn, ocg);
    const int64_t taps = (int64_t)d->kh * d->kw;
    const int64_t rs_blk = kiln_expdw_rows(p, sub) * W * cb; /* floats per held block */
    float *wide = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    size_t wide_b = (sizeof(float) * (size_t)(ocg * rs_blk) + 63) & ~(size_t)63;
    void *dws = (char *)wide + wide_b;
    for (int64_t task = task_begin; task < task_end; task++) {
        const int64_t b = task % nbands, rest = task / nbands;
        const int64_t n = rest / n_ocg, g0 = rest % n_ocg * ocg, g1 = kiln_k_min64(cbn, g0 + ocg);
        const int64_t t0 = b * band, t1 = kiln_k_min64(OH, t0 + band);
        int64_t h0 = 0, h1 = 0; /* wide rows held: [h0, h1) */
        for (int64_t o0 = t0; o0 < t1; o0 += sub) {
            const int64_t o1 = kiln_k_min64(t1, o0 + sub);
            int64_t i0, i1;
            kiln_expdw_window(d, o0, o1, &i0, &i1);
            const int64_t from = kiln_expdw_from(h0, h1, i0, i1);
            if (from > i0 && i0 > h0) /* the halo: move it to the front */
                for (int64_t j = 0; j < g1 - g0; j++)
                    memmove(wide + j * rs_blk, wide + j * rs_blk + (i0 - h0) * W * cb,
                            sizeof(float) * (size_t)((from - i0) * W * cb));
            h0 = i0;
            h1 = i1;
            /* the depthwise on the held rows, one channel block at a time */
            kiln_dwconv_params dl = *d;
            dl.n = 1;
            dl.c = (int)cb;
            dl.h = (int)(i1 - i0);
            dl.oh = (int)(o1 - o0);
            dl.oh_tile = dl.oh;
            dl.pad_t = (int)(d->pad_t + i0 - o0 * d->sh);
            if (dl.h < 1) { /* every filter row in the padding: bias only */
                dl.h = 1;
                dl.pad_t += (int)H + d->kh * d->dh;
            }
            /* order 0: each oc tile's new rows, then its depthwise, while
             * they are in L1; 1: every block's rows, then the depthwise */
            const int64_t step = p->order == 1 ? g1 - g0 : q.O;
            for (int64_t ob = g0; ob < g1; ob += step) {
                const int64_t ob1 = kiln_k_min64(g1, ob + step);
                kiln_expdw_expand(p, &q, in, we, be, wide + (ob - g0) * rs_blk, rs_blk, n, from, i1,
                                  i0, ob, ob1, wide_epi);
                for (int64_t blk = ob; blk < ob1; blk++) {
                    int64_t first = ((n * cbn + blk) * OH + o0) * OW * cb;
                    kiln_dwconv_run(&dl, wide + (blk - g0) * rs_blk, wd + blk * taps * cb,
                                    bd ? bd + blk * cb : NULL, NULL, out + first, 0, 1, dws);
                    if (out_epi)
                        out_epi(ctx, first, (o1 - o0) * OW * cb);
                }
            }
        }
    }
}

#endif /* KILN_KERNELS_EXPDW_H */
