/* kiln_kernels_conv.h: direct 2-D convolution in blocked layouts, groups == 1
 * or groups whose channel counts the blocks divide (see kiln_conv_supported).
 *
 * Layouts (cbi = cb_in, cbo = cb_out, blocks padded with zeros):
 *   input     [n][ceil(c_in/cbi)][h][w][cbi]                 NCHW{cbi}c
 *   weights   [c_out/cbo][c_in_g/cbi][kh][kw][cbi][cbo]      OIHW{cbi}i{cbo}o (c_in_g = c_in/groups)
 *   output, residual [n][ceil(c_out/cbo)][oh][ow][cbo]       NCHW{cbo}c
 *   bias      [ceil(c_out/cbo)*cbo]
 * The output must not alias the input or the residual.
 *
 * Algorithm. The work splits into tasks (image x group of `oc_group` output
 * channel blocks x band of `oh_tile` output rows, bands inner or, with
 * task_order 1, outer); tasks are independent and
 * any split of [0, kiln_conv_tasks(p)) over threads is valid. Inside a task,
 * an output tile of ow_tile pixels of one row x oc_tile channel blocks is held
 * in vector registers (ow_tile*oc_tile accumulators); the microkernel walks
 * the input channel blocks (ic_tile of them per pass), the filter rows and
 * columns and the cbi channels of a block, loads oc_tile weight vectors and
 * broadcast-FMAs each of the ow_tile input pixels into them. Filter rows that
 * fall into the top/bottom padding are skipped per output row; when the
 * columns need padding the task first copies its band of input rows into the
 * workspace with the padding columns zeroed, so the microkernel has no bounds
 * checks (a conv with an input prologue, a per-channel affine map and clamp
 * such as a pre-activation BatchNorm-Relu, always copies and applies it in
 * that copy: see "the input prologue"). The epilogue (bias as the initial
 * value, residual, relu, clip) is applied on the registers before the only
 * store (when ic_tile covers all the input blocks; otherwise partial sums go
 * through the output and the last pass applies it). loop_order 0 runs ic passes > rows > pixel tiles > oc
 * tiles (the input tile stays in L1 while the oc tiles' weights stream from
 * L2); 1 runs oc tiles > ic passes > rows > pixel tiles (one oc tile's
 * weights for the pass stay in L1 while the input band streams), better when
 * the weights are large and the image small. In order 1 the tile calls of a
 * pass share out a far prefetch into L2 of the next pass's weights (the next
 * ic pass, or the next oc tile's first), so weights that come from memory
 * (a network's, which do not stay in the caches from one run to the next)
 * arrive while the current pass computes instead of on the first row's
 * demand loads.
 *
 * Microkernels: kiln_f32_conv_nchw16c_{T}x{16*O}__avx512 (T pixels x O blocks
 * of 16, T*O + O + 1 <= 32 zmm registers), kiln_f32_conv_nchw8c_{T}x{8*O}__avx2
 * (T*O + O + 1 <= 16 ymm), and a portable one for any block width. The SIMD
 * ones prefetch each oc block's weight stream KILN_CONV_PFD channels ahead:
 * in a network the weights come from L2 or beyond (resnet-50's shapes with
 * the weights flushed from the caches before each run: 0.83-0.97x, one
 * thread, min of 63 runs, shared machine; with warm weights within +-3%).
 *
 * Generated code defines the params as a `static const` literal and calls
 * kiln_conv_run with it: every function here is always_inline, so gcc folds
 * the geometry and the knobs and keeps only the tiles used. */
#ifndef KILN_KERNELS_CONV_H
#define KILN_KERNELS_CONV_H

#include "kiln_kernels_common.h"

typedef struct kiln_conv_params {
    int n, c_in, h, w, c_out, oh, ow, kh, kw, sh, sw, dh, dw, pad_t, pad_l, pad_b, pad_r, groups;
    int cb_in, cb_out; /* channel blocks of the blocked layouts */
    int epilogue;      /* KILN_EPI_* bit flags; residual added before the activation */
    float clip_min, clip_max;
    /* knobs (kiln_conv_default_params fills them; out-of-range values are clamped) */
    int ow_tile;    /* output pixels per register tile */
    int oc_tile;    /* output channel blocks per register tile */
    int ic_tile;    /* input channel blocks per accumulation pass (0: all) */
    int loop_order; /* 0: rows > pixel tiles > oc tiles; 1: oc tiles > rows > pixel tiles */
    int oh_tile;    /* output rows per task (0: all) */
    int oc_group;   /* output channel blocks per task (0: all of a group) */
    int task_order; /* task index: 0 image > oc group > band; 1 image > band > oc group */
    /* the input prologue (kiln_conv_run_pro; see "the input prologue"):
     * KILN_CONV_PRO_* flags, 0 none; the clamp's bounds */
    int pro;
    float pro_lo, pro_hi;
    /* 1: output columns run in segments that read the same filter columns
     * inside the image, and skip the others (see "column segments"); set by
     * kiln_conv_default_params where that pays */
    int colseg;
} kiln_conv_params;

#define KILN_CONV_MAXT 16
#define KILN_CONV_MAXO 4
/* Weight prefetch distance of the SIMD microkernels, in input channels: an
 * oc block's weights are one contiguous stream over (ic block, filter row,
 * column, channel), so each step prefetches the vector PFD steps ahead
 * (past the stream's end it is a harmless hint). */
#define KILN_CONV_PFD 16
/* The fewest output pixels a task of loop order 0 has (see
 * kiln_conv_default_params). */
#define KILN_CONV_ORDER0_PIXELS 64

/* ---- derived geometry ------------------------------------------------------ */

enum { KILN_ISA_PORTABLE = 0, KILN_ISA_AVX2 = 1, KILN_ISA_AVX512 = 2 };

/* The ISA of the microkernels for an output block width on this build. */
static KILN_KINLINE int kiln_conv_isa(int cb_out)
{
#ifdef KILN_KERNELS_AVX512
    if (cb_out == 16)
        return KILN_ISA_AVX512;
#endif
#ifdef KILN_KERNELS_AVX2
    if (cb_out == 8)
        return KILN_ISA_AVX2;
#endif
    (void)cb_out;
    return KILN_ISA_PORTABLE;
}

/* Largest pixel tile for an oc tile of o blocks (register budget): T x O
 * accumulators, O weight vectors and the input broadcast, T*O + O + 1
 * registers. (AVX-512's 7x4 tile, 33 of them, made gcc 12 keep one
 * accumulator on the stack, a store and reload per input channel in the
 * conv's and the dense's inner loops; on the AMD EPYC with AVX-512, 2
 * threads, weights and activations cold, resnet-50's 1x1 1024>256 on 14x14
 * took 0.340 ms with 7x4 against 0.296 with 6x4 and 0.295 with 7x3, its
 * 2048>512 on 7x7 0.349 against 0.314 and 0.301.) */
static KILN_KINLINE int kiln_conv_max_t(int isa, int o)
{
    if (isa == KILN_ISA_AVX512)
        return o == 1 ? 16 : o == 2 ? 14 : o == 3 ? 9 : 6;
    if (isa == KILN_ISA_AVX2)
        return o == 1 ? 12 : o == 2 ? 6 : o == 3 ? 4 : 2;
    return 8;
}

typedef struct kiln_conv_plan {
    int isa, cbi, cbo;
    int64_t cib, cob;     /* input / output channel blocks of the layouts */
    int64_t cib_g, cob_g; /* per conv group */
    int T, O, ict, order, oh_tile;
    int64_t oc_group, n_ocg, n_bands;
    int task_order;
    int copy;          /* the columns need padding: copy bands into the workspace */
    int64_t wpad;      /* padded width of the copied band (pixels) */
    int64_t band_rows; /* most input rows a band copy holds */
    int stage_tile;    /* the prologue is staged per pixel tile (see "the input prologue") */
    int colseg;        /* column segments (p->colseg, where kiln_conv_colseg_ok) */
} kiln_conv_plan;

/* ---- column segments ------------------------------------------------------- */

/* An atrous conv whose rate nears the map's width (DeepLabV3's ASPP at rate
 * 12 on a 16x16 map) reads padding with most of its filter columns: each
 * output column of that conv reads 1.5 of its 3 columns inside the image.
 * With p->colseg the output columns run in segments, maximal runs of columns
 * that read the same filter columns [lo, hi) inside the image, and each
 * segment's tiles walk those columns only; the input is read in place (no
 * band copy with padding columns, unless a prologue needs one), and filter
 * rows outside the image are skipped as always. A segment's tiles are
 * narrower than a row's, so it is taken only where at least a quarter of
 * the column taps read padding (kiln_conv_colseg_pays). lo and hi never grow
 * along a row, so a row has at most 2 kw + 2 segments. */
#define KILN_CONV_COLSEG_MAXKW 15
#define KILN_CONV_MAXSEG (2 * KILN_CONV_COLSEG_MAXKW + 2)

typedef struct kiln_conv_seg {
    int64_t ow0, ow1; /* output columns [ow0, ow1) */
    int lo, hi;       /* filter columns [lo, hi) inside the image (lo == hi: none) */
} kiln_conv_seg;

/* The filter columns [*lo, *hi) output column ow reads inside the image. */
static KILN_KINLINE void kiln_conv_col_range(const kiln_conv_params *p, int64_t ow, int *lo, int *hi)
{
    int64_t ix0 = ow * p->sw - p->pad_l;
    int64_t l = ix0 >= 0 ? 0 : kiln_k_cdiv(-ix0, p->dw);
    int64_t h = kiln_k_min64(p->kw, kiln_k_fdiv(p->w - 1 - ix0, p->dw) + 1);
    if (h <= l)
        l = h = 0;
    *lo = (int)l;
    *hi = (int)h;
}

/* The segments of a row into s[KILN_CONV_MAXSEG]; their count, or -1 past
 * that (a filter wider than KILN_CONV_COLSEG_MAXKW). */
static KILN_KINLINE int kiln_conv_col_segs(const kiln_conv_params *p, kiln_conv_seg *s)
{
    int ns = 0;
    for (int64_t ow = 0; ow < p->ow; ow++) {
        int lo, hi;
        kiln_conv_col_range(p, ow, &lo, &hi);
        if (ns && s[ns - 1].lo == lo && s[ns - 1].hi == hi) {
            s[ns - 1].ow1 = ow + 1;
            continue;
        }
        if (ns == KILN_CONV_MAXSEG)
            return -1;
        s[ns].ow0 = ow;
        s[ns].ow1 = ow + 1;
        s[ns].lo = lo;
        s[ns].hi = hi;
        ns++;
    }
    return ns;
}

/* Whether column segments may run p (the kernels take them). */
static KILN_KINLINE int kiln_conv_colseg_ok(const kiln_conv_params *p)
{
    return p->kw > 1 && p->kw <= KILN_CONV_COLSEG_MAXKW && p->ow > 0;
}

/* Whether they pay: at least a quarter of the column taps read padding. */
static inline int kiln_conv_colseg_pays(const kiln_conv_params *p)
{
    kiln_conv_seg s[KILN_CONV_MAXSEG];
    int ns = kiln_conv_colseg_ok(p) ? kiln_conv_col_segs(p, s) : -1;
    int64_t pad = 0;
    for (int k = 0; k < ns; k++)
        pad += (s[k].ow1 - s[k].ow0) * (p->kw - (s[k].hi - s[k].lo));
    return ns > 0 && 4 * pad >= (int64_t)p->ow * p->kw;
}

/* The ISA whose register budget the knobs are chosen for: the target's
 * microkernels, which the block width says (16: AVX-512, 8: AVX2), not the
 * ISA the code choosing them was compiled for (libkiln computes the knobs
 * and is built without ISA flags: kiln_conv_isa there is always portable,
 * whose budget of 8 pixels at any oc tile the AVX2 kernels then clamped to
 * 2 pixels at 4 oc blocks). The direct, grouped, Winograd and dense
 * templates' defaults and tuning spaces use it. */
static inline int kiln_conv_model_isa(int cb)
{
    return cb == 16 ? KILN_ISA_AVX512 : cb == 8 ? KILN_ISA_AVX2 : KILN_ISA_PORTABLE;
}

/* The plan for the register budget of `isa` (kiln_conv_plan_of: this
 * build's microkernels). */
static KILN_KINLINE kiln_conv_plan kiln_conv_plan_isa(const kiln_conv_params *p, int isa)
{
    kiln_conv_plan q;
    q.isa = isa;
    q.cbi = p->cb_in;
    q.cbo = p->cb_out;
    int g = p->groups > 0 ? p->groups : 1;
    q.cib = kiln_k_cdiv(p->c_in, p->cb_in);
    q.cob = kiln_k_cdiv(p->c_out, p->cb_out);
    q.cib_g = g == 1 ? q.cib : (p->c_in / g) / p->cb_in;
    q.cob_g = g == 1 ? q.cob : (p->c_out / g) / p->cb_out;
    int o = p->oc_tile < 1 ? 1 : p->oc_tile > KILN_CONV_MAXO ? KILN_CONV_MAXO : p->oc_tile;
    if (o > q.cob_g)
        o = (int)q.cob_g;
    q.O = o;
    int mt = kiln_conv_max_t(q.isa, o);
    q.T = p->ow_tile < 1 ? 1 : p->ow_tile > mt ? mt : p->ow_tile;
    q.ict = p->ic_tile <= 0 || p->ic_tile > q.cib_g ? (int)q.cib_g : p->ic_tile;
    q.order = p->loop_order == 1 ? 1 : 0;
    q.oh_tile = p->oh_tile <= 0 || p->oh_tile > p->oh ? p->oh : p->oh_tile;
    q.oc_group = p->oc_group <= 0 || p->oc_group > q.cob_g ? q.cob_g : p->oc_group;
    q.n_ocg = (q.cob_g / q.oc_group + (q.cob_g % q.oc_group != 0)) * g;
    q.n_bands = kiln_k_cdiv(p->oh, q.oh_tile);
    q.task_order = p->task_order == 1 ? 1 : 0;
    int64_t last_col = (int64_t)(p->ow - 1) * p->sw + (int64_t)(p->kw - 1) * p->dw; /* padded */
    q.stage_tile = p->pro && q.order == 0 && p->kh == 1 && p->kw == 1 && !p->pad_t && !p->pad_l &&
                   !p->pad_b && !p->pad_r;
    q.colseg = p->colseg && kiln_conv_colseg_ok(p);
    q.copy = (p->pro && !q.stage_tile) ||
             (!q.colseg && (p->pad_l > 0 || last_col - p->pad_l >= p->w));
    q.wpad = kiln_k_max64(p->w + p->pad_l, last_col + 1);
    q.band_rows = kiln_k_min64(p->h, (int64_t)(q.oh_tile - 1) * p->sh + (int64_t)(p->kh - 1) * p->dh + 1);
    return q;
}

static KILN_KINLINE kiln_conv_plan kiln_conv_plan_of(const kiln_conv_params *p)
{
    return kiln_conv_plan_isa(p, kiln_conv_isa(p->cb_out));
}

/* ---- public API -------------------------------------------------------------- */

/* Whether the templates handle p: groups == 1, or each group's input and
 * output channels are whole blocks. Depthwise convolutions belong to
 * kiln_kernels_dwconv.h. */
static inline int kiln_conv_supported(const kiln_conv_params *p)
{
    if (p->cb_in < 1 || p->cb_out < 1 || p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1 ||
        p->dh < 1 || p->dw < 1 || p->oh < 1 || p->ow < 1 || p->n < 1)
        return 0;
    int g = p->groups;
    if (g == 1)
        return 1;
    return g > 1 && p->c_in % g == 0 && p->c_out % g == 0 && (p->c_in / g) % p->cb_in == 0 &&
           (p->c_out / g) % p->cb_out == 0;
}

static inline double kiln_conv_flops(const kiln_conv_params *p)
{
    return 2.0 * p->n * p->c_out * p->oh * p->ow * (double)(p->c_in / p->groups) * p->kh * p->kw;
}

/* Task `task`'s image, oc group (of all groups) and band of rows. */
static KILN_KINLINE void kiln_conv_task_of(const kiln_conv_plan *q, int64_t task, int64_t *n,
                                           int64_t *gi, int64_t *b)
{
    if (q->task_order == 1) {
        *gi = task % q->n_ocg;
        *b = task / q->n_ocg % q->n_bands;
        *n = task / q->n_ocg / q->n_bands;
    } else {
        *b = task % q->n_bands;
        *gi = task / q->n_bands % q->n_ocg;
        *n = task / q->n_bands / q->n_ocg;
    }
}

static KILN_KINLINE int64_t kiln_conv_tasks(const kiln_conv_params *p)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    return (int64_t)p->n * q.n_ocg * q.n_bands;
}

/* The output task `task` of kiln_conv_run writes: n_spans runs of len
 * floats, the s-th starting at first + s * stride (one run per output
 * channel block of its group, its band of rows, every column). Generated
 * code applies the fused epilogue the header does not cover to these right
 * after the task, while they are in cache. */
static KILN_KINLINE void kiln_conv_task_out(const kiln_conv_params *p, int64_t task, int64_t *first,
                                            int64_t *len, int64_t *n_spans, int64_t *stride)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    int64_t b, gi, n;
    kiln_conv_task_of(&q, task, &n, &gi, &b);
    int64_t ocg_per_group = q.n_ocg / (p->groups > 0 ? p->groups : 1);
    int64_t grp = gi / ocg_per_group, gsub = gi % ocg_per_group;
    int64_t oh0 = b * q.oh_tile, oh1 = kiln_k_min64(p->oh, oh0 + q.oh_tile);
    int64_t ob0 = grp * q.cob_g + gsub * q.oc_group;
    int64_t ob1 = kiln_k_min64((grp + 1) * q.cob_g, ob0 + q.oc_group);
    *stride = (int64_t)p->oh * p->ow * q.cbo;
    *first = (n * q.cob + ob0) * *stride + oh0 * p->ow * q.cbo;
    *len = (oh1 - oh0) * p->ow * q.cbo;
    *n_spans = ob1 - ob0;
}

/* Per thread. The staged tile is sized for the largest pixel tile any
 * ISA's microkernels run for the ow_tile knob, not for this build's: libkiln
 * (built without ISA flags, a portable budget of 8 pixels) sizes the
 * workspace that generated code (AVX2: up to 12 pixels, AVX-512: 16) fills. */
static KILN_KINLINE size_t kiln_conv_workspace_bytes(const kiln_conv_params *p)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    if (q.stage_tile) {
        int64_t t = p->ow_tile < 1 ? 1 : p->ow_tile > KILN_CONV_MAXT ? KILN_CONV_MAXT : p->ow_tile;
        return (size_t)(t * q.ict * q.cbi) * sizeof(float) + 64;
    }
    if (!q.copy)
        return 0;
    return (size_t)(q.cib_g * q.band_rows * q.wpad * q.cbi) * sizeof(float) + 64;
}

static inline int64_t kiln_conv_packed_weight_floats(const kiln_conv_params *p)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    return q.cob * q.cib_g * p->kh * p->kw * (int64_t)p->cb_in * p->cb_out;
}

/* w_oihw: [c_out][c_in/groups][kh][kw] (ONNX). packed: packed_weight_floats. */
static inline void kiln_conv_pack_weights(const kiln_conv_params *p, const float *w_oihw,
                                          float *packed)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    int64_t cin_g = p->c_in / p->groups, cout_g = q.cob_g * p->cb_out;
    int64_t taps = (int64_t)p->kh * p->kw;
    float *d = packed;
    for (int64_t ob = 0; ob < q.cob; ob++)
        for (int64_t ib = 0; ib < q.cib_g; ib++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t ci = 0; ci < p->cb_in; ci++)
                    for (int64_t co = 0; co < p->cb_out; co++) {
                        int64_t oc = ob * p->cb_out + co, ic = ib * p->cb_in + ci;
                        int ok = oc < p->c_out && ic < cin_g;
                        if (p->groups > 1)
                            ok = ok && (oc % cout_g) < p->c_out / p->groups;
                        *d++ = ok ? w_oihw[(oc * cin_g + ic) * taps + t] : 0.0f;
                    }
}

/* Packed weights (kiln_conv_pack_weights) with every input channel ic
 * scaled by s[ic] (c_in floats; groups == 1): a conv of x * s (a
 * squeeze-and-excitation scale, run-time data) as a conv of x. */
static inline void kiln_conv_scale_weights(const kiln_conv_params *p, const float *restrict w,
                                           const float *restrict s, float *restrict out)
{
    kiln_conv_plan q = kiln_conv_plan_of(p);
    const int64_t taps = (int64_t)p->kh * p->kw, cbi = p->cb_in, cbo = p->cb_out;
    for (int64_t ob = 0; ob < q.cob; ob++)
        for (int64_t ib = 0; ib < q.cib_g; ib++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t ci = 0; ci < cbi; ci++) {
                    const int64_t ic = ib * cbi + ci;
                    const float sc = ic < p->c_in ? s[ic] : 0.0f;
                    for (int64_t co = 0; co < cbo; co++)
                        out[co] = w[co] * sc;
                    w += cbo;
                    out += cbo;
                }
}

/* The register tile (T pixels x O output blocks) for rows of `px` pixels
 * and `cob` output blocks with the microkernels of `isa`: the one that
 * minimises the modelled cycles per row and oc sweep. Per input channel a
 * tile costs max(T*O, 8) FMA slots (8 = 2 FMA ports x 4 cycles latency:
 * fewer accumulators leave the ports idle) plus half a slot for each of
 * its O weight loads and T input broadcasts (they share the load ports, as
 * in kiln_dense_default_params), and 2 cycles of call overhead per tile;
 * the bigger tile wins ties. Without the broadcasts, AVX2's 16 registers
 * went to 10x1 and 12x1 tiles; with them 4x3, 5x2 and 6x2 (AMD EPYC, AVX2,
 * 2 threads, kiln bench, 6 alternated rounds: densenet-121 0.91x,
 * mobilenet-v2 0.94x, resnet-50 and inception-v3 0.99x, resnet-18 1.02x,
 * vgg-16 1.01x). (The Winograd template picks its tile over a band's tiles
 * with this too.) */
static inline double kiln_conv_tile_cost(int64_t px, int64_t cob, double wcost, int t, int o)
{
    int64_t full = px / t, rem = px % t;
    int64_t ofull = cob / o, orem = cob % o;
    double row = 0;
    for (int k = 0; k < 2; k++) {
        int64_t oo = k ? orem : o, on = k ? (orem ? 1 : 0) : ofull;
        double c = full * ((double)kiln_k_max64((int64_t)t * oo, 8) + wcost * oo + 0.5 * t) +
                   (rem ? (double)kiln_k_max64(rem * oo, 8) + wcost * oo + 0.5 * rem : 0.0);
        row += c * on;
    }
    return row + 2.0 * (full + (rem != 0)) * kiln_k_cdiv(cob, o); /* per-tile overhead */
}

/* Whether tile t x o exists for `isa` on rows of px pixels and cob blocks
 * (also a dense tile: rows of X for pixels, column blocks for cob). */
static inline int kiln_conv_tile_ok(int isa, int64_t px, int64_t cob, int t, int o)
{
    return o >= 1 && o <= KILN_CONV_MAXO && o <= cob && t >= 1 && t <= kiln_conv_max_t(isa, o) &&
           (t <= px || t == 1);
}

/* The tile for rows made of n runs of px[k] pixels, each run's cost
 * weighted by wt[k] (a whole row: one run of weight 1). */
static inline void kiln_conv_pick_tile_runs(int isa, const int64_t *px, const double *wt, int n,
                                            int64_t cob, double wcost, int *T, int *O)
{
    int64_t widest = 0;
    for (int k = 0; k < n; k++)
        widest = kiln_k_max64(widest, px[k]);
    double best = 1e300;
    *T = *O = 1;
    for (int o = 1; o <= KILN_CONV_MAXO && o <= cob; o++)
        for (int t = 1; kiln_conv_tile_ok(isa, widest, cob, t, o); t++) {
            double row = 0;
            for (int k = 0; k < n; k++)
                row += kiln_conv_tile_cost(px[k], cob, wcost, t, o) * wt[k];
            if (row < best * 0.999) {
                best = row;
                *T = t;
                *O = o;
            }
        }
}

static inline void kiln_conv_pick_tile_w(int isa, int64_t px, int64_t cob, double wcost, int *T,
                                         int *O)
{
    const double one = 1.0;
    kiln_conv_pick_tile_runs(isa, &px, &one, 1, cob, wcost, T, O);
}

static inline void kiln_conv_pick_tile(int isa, int64_t px, int64_t cob, int *T, int *O)
{
    kiln_conv_pick_tile_w(isa, px, cob, 0.5, T, O);
}

/* The register tile of p's rows: over the whole row, or with column
 * segments over each segment, weighted by the filter columns it reads. */
static inline void kiln_conv_pick_tile_p(const kiln_conv_params *p, int isa, int64_t cob,
                                         double wcost, int *T, int *O)
{
    kiln_conv_seg s[KILN_CONV_MAXSEG];
    int ns = p->colseg && kiln_conv_colseg_ok(p) ? kiln_conv_col_segs(p, s) : -1;
    if (ns < 0) {
        kiln_conv_pick_tile_w(isa, p->ow, cob, wcost, T, O);
        return;
    }
    int64_t px[KILN_CONV_MAXSEG];
    double wt[KILN_CONV_MAXSEG];
    for (int k = 0; k < ns; k++) {
        px[k] = s[k].ow1 - s[k].ow0;
        wt[k] = s[k].hi - s[k].lo;
    }
    kiln_conv_pick_tile_runs(isa, px, wt, ns, cob, wcost, T, O);
}

/* The slot cost of a weight vector load that comes from the L2 (see
 * kiln_conv_default_params), AVX2. */
#define KILN_CONV_WLOAD_L2_AVX2 2.0

/* The knobs after the register tile back at their "all"/order-0 values. */
static inline void kiln_conv_clear_task_knobs(kiln_conv_params *p)
{
    p->ic_tile = 0;
    p->oh_tile = 0;
    p->oc_group = 0;
    p->loop_order = 0;
}

/* Loop order 1's ic pass: as many input blocks as keep the oc tile's
 * weights for the pass in half the L1 (at least one). */
static inline int kiln_conv_pass_blocks(const kiln_conv_params *p, int64_t l1_bytes)
{
    kiln_conv_plan q = kiln_conv_plan_isa(p, kiln_conv_model_isa(p->cb_out));
    int64_t wpass = (int64_t)q.O * p->kh * p->kw * q.cbi * q.cbo * 4; /* bytes / ic block */
    return (int)kiln_k_max64(1, kiln_k_min64(q.cib_g, l1_bytes / 2 / wpass));
}

/* The knobs after the register tile (p->ow_tile, p->oc_tile set): the task
 * split, the task order, the loop order and the ic passes. */
static inline void kiln_conv_task_knobs(kiln_conv_params *p, int64_t l1_bytes, int64_t l2_bytes,
                                        int n_threads)
{
    kiln_conv_clear_task_knobs(p);
    const int isa = kiln_conv_model_isa(p->cb_out);
    kiln_conv_plan q = kiln_conv_plan_isa(p, isa);
    /* Tasks: start with whole images; split oc groups while a group's
     * weights overflow half the L2 (each thread then keeps its share), then
     * rows or oc groups until there are >= 4 tasks per thread: each band of
     * rows more re-reads the group's weights, each oc group more re-reads
     * (with padded columns: copies) the input, so the split adds whichever
     * traffic is smaller, weights counted twice (they come from memory, the
     * input from the caches). Small images with many channels thus split
     * over output channels, each thread streaming its own part of the
     * weights once (resnet-50's 2048>512 1x1 on 7x7, cold weights, 2
     * threads: 0.355 -> 0.328 ms against rows first). */
    int64_t wblock = q.cib_g * p->kh * p->kw * (int64_t)q.cbi * q.cbo * 4; /* bytes / oc block */
    int64_t wgroup = q.cob_g * wblock;
    int64_t igroup = q.cib_g * p->h * p->w * (int64_t)q.cbi * 4 * (q.copy ? 2 : 1);
    int64_t ocg = q.cob_g, ohb = p->oh;
    int64_t want = 4 * (int64_t)(n_threads > 0 ? n_threads : 1);
    for (;;) {
        int64_t nb = kiln_k_cdiv(p->oh, ohb), ng = kiln_k_cdiv(q.cob_g, ocg);
        int64_t tasks = (int64_t)p->n * p->groups * ng * nb;
        int64_t half = kiln_k_max64(q.O, (ocg / 2 + q.O - 1) / q.O * q.O);
        if (ocg * wblock > l2_bytes / 2 && half < ocg)
            ocg = half;
        else if (tasks >= want)
            break;
        else if (ohb > 1 && (half >= ocg || 2 * wgroup * nb <= igroup * ng))
            ohb = kiln_k_cdiv(ohb, 2);
        else if (half < ocg)
            ocg = half;
        else
            break;
    }
    p->oc_group = (int)ocg;
    p->oh_tile = (int)ohb;
    /* Task order: the pool deals each thread a contiguous run of tasks
     * (runtime/pool.c), so the order says what a thread keeps: with oc
     * groups outer, its groups' weights (read once) and every input row;
     * with bands outer, its rows of the input (read once, and, layer after
     * layer, the rows it wrote) and every weight. Bands go outer when the
     * group's input is larger than its weights (resnet-50's 1x1s on 28x28
     * with 512 channels: 1.6 MB of input against 0.25-0.5 MB of weights).
     * 2 threads, kiln bench, 6 alternated rounds against bands inner
     * always: densenet-121 0.94x, resnet-50 0.965x, resnext-50 0.976x,
     * inception-v3 1.007x (its 768-channel 1x1s on 17x17, whose 0.9 MB
     * input a thread holds in its L2, ran 1.06-1.17x); adding "and the
     * input is over half the L2" kept inception at 0.99x but the others
     * at 0.98x. */
    p->task_order = igroup > wgroup ? 1 : 0;
    /* Loop order: rows outermost while the group's weights fit half the L2,
     * one pixel tile's input fits half the L1 and a task has more than
     * KILN_CONV_ORDER0_PIXELS output pixels; else oc tiles outermost. Rows
     * outermost, a task's first row reads all its weights (from memory, in a
     * network) with no work yet to hide them behind, and each weight serves
     * only the task's pixels: on a small image (7x7, 8x8) that first row is
     * most of the task, while oc tiles outermost fetch the next chunk of
     * weights as the current one computes (resnet-50's 512>2048 1x1 on 7x7,
     * cold weights and activations, 2 threads, CPU time: 0.400 -> 0.360 ms;
     * inception-v3's 1x3 384 on 8x8 0.20 -> 0.19; its 3x3/2 96 on 35x35, 85
     * pixels a task, no gain). */
    int64_t in_tile = q.cib_g * p->kh * ((int64_t)(q.T - 1) * p->sw + (p->kw - 1) * p->dw + 1) * q.cbi * 4;
    p->loop_order = (ocg * wblock <= l2_bytes / 2 && in_tile <= l1_bytes / 2 &&
                     ohb * p->ow > KILN_CONV_ORDER0_PIXELS)
                        ? 0
                        : 1;
    /* oc tiles outermost: an ic pass takes as many input blocks as keep the
     * oc tile's weights for the pass in half the L1 (at least one), so every
     * row and pixel tile of the band after the first reads them from L1, and
     * the tile calls prefetch the next pass's into L2 meanwhile (kiln_conv_run).
     * resnet-50's layer-4 convs with cold weights, one thread: 0.83-0.91x the
     * time of whole-reduction passes (3x3 512 on 7x7: 1.77 -> 1.53 ms) */
    p->ic_tile = p->loop_order == 1 ? kiln_conv_pass_blocks(p, l1_bytes) : 0;
}

/* Fills the knobs of p (whose geometry, groups, cb_in, cb_out and epilogue
 * are set) from the shape, the per-core L1d/L2 sizes in bytes and the thread
 * count. See the comment at the top for the model.
 *
 * Weights from the L2: in loop order 0 without ic passes an oc tile's
 * weights for the whole reduction are read once per pixel tile; when they
 * exceed half the L1 they come from the L2 every time, and on AVX2 the tile
 * is picked again with a weight vector load costing
 * KILN_CONV_WLOAD_L2_AVX2 slots instead of 0.5 (fewer oc blocks, more
 * pixels), in loop order 0 still (the wider tile's input may pass the
 * half of the L1 that otherwise sends a conv to order 1). AMD EPYC, 2 threads, weights and
 * activations cold (bench_conv --cold --cold-io), 3 rounds, resnet-50's
 * convs with a 5x2 tile against the 4x3 the plain model picks: 1x1
 * 1024>256 on 14x14 0.67x the time, 512>256 0.70x, 256>64 0.67x, 512>128
 * 0.77x, 256>128 0.92x, 3x3 64 on 56x56 0.92x; where the weights stay in
 * the L1 (64>256 1.09x, 128>512 0.99x) or the loop order is 1 (ic passes
 * sized for the L1: 3x3 256 1.18x, 512>2048 1.19x) the plain pick stays.
 * Not applied on AVX-512 (unmeasured there). */
static inline void kiln_conv_default_params(kiln_conv_params *p, int64_t l1_bytes,
                                            int64_t l2_bytes, int n_threads)
{
    p->ow_tile = p->oc_tile = 1;
    p->colseg = kiln_conv_colseg_pays(p);
    kiln_conv_clear_task_knobs(p);
    const int isa = kiln_conv_model_isa(p->cb_out);
    kiln_conv_plan q = kiln_conv_plan_isa(p, isa);
    kiln_conv_pick_tile_p(p, isa, q.cob_g, 0.5, &p->ow_tile, &p->oc_tile);
    kiln_conv_task_knobs(p, l1_bytes, l2_bytes, n_threads);
    if (isa != KILN_ISA_AVX2 || p->loop_order != 0)
        return;
    q = kiln_conv_plan_isa(p, isa);
    int64_t wtile = q.cib_g * p->kh * p->kw * (int64_t)q.O * q.cbi * q.cbo * 4;
    if (wtile <= l1_bytes / 2)
        return;
    kiln_conv_params t = *p;
    kiln_conv_pick_tile_p(p, isa, q.cob_g, KILN_CONV_WLOAD_L2_AVX2, &t.ow_tile, &t.oc_tile);
    if (t.ow_tile == p->ow_tile && t.oc_tile == p->oc_tile)
        return;
    kiln_conv_task_knobs(&t, l1_bytes, l2_bytes, n_threads);
    t.loop_order = 0; /* the wider pixel tile's input may pass half the L1: it stays order 0 */
    t.ic_tile = 0;
    *p = t;
}

/* ---- microkernels ------------------------------------------------------------ */

typedef struct kiln_conv_tile_args {
    const float *in;   /* input of ic block 0 at the first filter row used, pixel 0, tap 0 */
    int64_t in_cs;     /* floats between input channel blocks */
    int64_t in_rs;     /* floats between filter rows (dh input rows) */
    int64_t in_ss;     /* floats between filter columns (dw * cbi) */
    int64_t in_ps;     /* floats between output pixels (sw * cbi) */
    int nicb, nkh, nkw, cbi;
    const float *w;    /* weights of oc block 0, the pass's first ic block, first filter row used */
    int64_t w_os;      /* floats between oc blocks */
    int64_t w_cs;      /* floats between ic blocks */
    int64_t w_rs;      /* floats between filter rows */
    float *out;        /* output at oc block 0, pixel 0 */
    const float *res;  /* residual, same offsets as out, or NULL */
    int64_t out_os;    /* floats between oc blocks */
    const float *bias; /* at oc block 0, or NULL */
    int first, last, epi;
    float lo, hi;
} kiln_conv_tile_args;

/* The far prefetch of a tile: taps [lo, hi) of its walk (ic block, filter
 * row, column) also prefetch into L2 their weight lines `off` floats ahead
 * (the same position in the next chunk of weights); lo >= hi: none. */
typedef struct kiln_conv_far {
    int64_t off;
    int lo, hi;
} kiln_conv_far;

/* One SIMD microkernel body; T, O, PS (in_ps) and CBI are constants after
 * inlining where the caller knows them; FAR (a constant) says whether it
 * does the far prefetch of f (only the whole-vector input blocks do: in the
 * loop of a runtime CBI the test costs more than it saves). */
/* One tap of the microkernel below: its CBI input channels, each loading O
 * weight vectors (and prefetching them KILN_CONV_PFD channels ahead, and
 * FARPF) and FMA-ing them into the T x O accumulators. Two copies, with and
 * without the far prefetch, so the tap loop has no test per channel (a branch
 * per channel and oc block cost the order-0 tiles 2-7%). */
#define KILN_CONV_TAP(V, VL, LOAD, SET1, FMA, FARPF)                                               \
    for (int ci = 0; ci < CBI; ci++) {                                                             \
        V wv[KILN_CONV_MAXO];                                                                      \
        KILN_KUNROLL for (int o = 0; o < O; o++) {                                                 \
            wv[o] = LOAD(wp + (int64_t)ci * VL + o * wos);                                         \
            if ((ci * VL) % 16 == 0) { /* once per 64-byte line */                                 \
                __builtin_prefetch(wp + (int64_t)(ci + KILN_CONV_PFD) * VL + o * wos, 0, 3);       \
                FARPF;                                                                             \
            }                                                                                      \
        }                                                                                          \
        KILN_KUNROLL for (int p = 0; p < T; p++)                                                   \
        {                                                                                          \
            V x = SET1(ip[p * PS + ci]);                                                           \
            KILN_KUNROLL for (int o = 0; o < O; o++) acc[p][o] = FMA(x, wv[o], acc[p][o]);         \
        }                                                                                          \
    }

/* The tap walk: a 1x1 conv walks its input blocks with one pointer pair and
 * the far prefetch's taps as a range (no test per tap); other windows test
 * for the far prefetch once per filter row. With the test and the index
 * arithmetic per tap (8 channels, ~40 cycles of FMAs on AVX2), the walk cost
 * a quarter of the time: resnet-50's 1x1s through kiln_conv_run, one thread,
 * warm, AMD EPYC (AVX2): 512>2048 on 7x7 64 -> 80 GFLOP/s, 1024>256 on 14x14
 * 70 -> 92, 128>512 on 28x28 36 -> 80; 3x3s 1-4%. kiln bench, 2 threads,
 * alternated rounds, the 1x1 walk (4 rounds) then the per-row test (3):
 * mobilenet-v2 0.80x, resnext-50 0.86x, efficientnet-b0 0.92x (1x1 walk
 * alone), resnet-50 0.91 x 0.97, inception-v3 0.96 x 0.96, densenet-121
 * 0.90 x 1.00, vgg-16 0.98 (per-row test). */
#define KILN_CONV_UKERNEL(NAME, V, VL, ZERO, LOAD, STORE, FMA, SET1, ADD, MAX, MIN)                 \
    static KILN_KINLINE void NAME(const int T, const int O, const int64_t PS, const int CBI,         \
                                  const int FAR, const kiln_conv_tile_args *a,                       \
                                  const kiln_conv_far *f)                                            \
    {                                                                                                \
        V acc[KILN_CONV_MAXT][KILN_CONV_MAXO];                                                       \
        const int64_t os = a->out_os, wos = a->w_os;                                                 \
        KILN_KUNROLL for (int o = 0; o < O; o++)                                                     \
        {                                                                                            \
            V init = (a->first && a->bias) ? LOAD(a->bias + o * VL) : ZERO();                        \
            KILN_KUNROLL for (int p = 0; p < T; p++) acc[p][o] =                                     \
                a->first ? init : LOAD(a->out + o * os + p * VL);                                    \
        }                                                                                            \
        int tap = 0;                                                                                 \
        if (a->nkh == 1 && a->nkw == 1) {                                                            \
            /* 1x1: a tap per input block, one pointer pair, the far prefetch's taps a range */     \
            const float *ip = a->in, *wp = a->w;                                                     \
            const int64_t ics = a->in_cs, wcs = a->w_cs;                                             \
            const int nb = a->nicb;                                                                  \
            const int flo = FAR ? (f->lo < 0 ? 0 : f->lo > nb ? nb : f->lo) : nb;                    \
            const int fhi = FAR ? (f->hi < flo ? flo : f->hi > nb ? nb : f->hi) : nb;                \
            int icb = 0;                                                                             \
            for (; icb < flo; icb++, ip += ics, wp += wcs) {                                         \
                KILN_CONV_TAP(V, VL, LOAD, SET1, FMA, (void)0);                                      \
            }                                                                                        \
            for (; icb < fhi; icb++, ip += ics, wp += wcs) {                                         \
                KILN_CONV_TAP(V, VL, LOAD, SET1, FMA,                                                \
                              __builtin_prefetch(wp + (int64_t)ci * VL + o * wos + f->off, 0, 2));   \
            }                                                                                        \
            for (; icb < nb; icb++, ip += ics, wp += wcs) {                                          \
                KILN_CONV_TAP(V, VL, LOAD, SET1, FMA, (void)0);                                      \
            }                                                                                        \
        } else                                                                                       \
        for (int icb = 0; icb < a->nicb; icb++) {                                                    \
            for (int r = 0; r < a->nkh; r++) {                                                       \
                const float *ip = a->in + icb * a->in_cs + r * a->in_rs;                             \
                const float *wp = a->w + icb * a->w_cs + r * a->w_rs;                                \
                const int nkw = a->nkw;                                                              \
                const int64_t iss = a->in_ss;                                                        \
                if (FAR && tap < f->hi && tap + nkw > f->lo) {                                       \
                    for (int s = 0; s < nkw; s++, tap++, ip += iss, wp += CBI * VL) {                \
                        if (tap >= f->lo && tap < f->hi) {                                           \
                            KILN_CONV_TAP(V, VL, LOAD, SET1, FMA,                                    \
                                          __builtin_prefetch(wp + (int64_t)ci * VL + o * wos +       \
                                                                 f->off,                             \
                                                             0, 2));                                 \
                        } else {                                                                     \
                            KILN_CONV_TAP(V, VL, LOAD, SET1, FMA, (void)0);                          \
                        }                                                                            \
                    }                                                                                \
                } else { /* no far prefetch in this filter row: no per-tap test */                   \
                    for (int s = 0; s < nkw; s++, ip += iss, wp += CBI * VL) {                       \
                        KILN_CONV_TAP(V, VL, LOAD, SET1, FMA, (void)0);                              \
                    }                                                                                \
                    tap += nkw;                                                                      \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        const int last = a->last, epi = a->epi;                                                      \
        const V lo = SET1(a->lo), hi = SET1(a->hi), z = ZERO();                                      \
        KILN_KUNROLL for (int o = 0; o < O; o++)                                                     \
        {                                                                                            \
            KILN_KUNROLL for (int p = 0; p < T; p++)                                                 \
            {                                                                                        \
                V v = acc[p][o];                                                                     \
                if (last) {                                                                          \
                    if (a->res)                                                                      \
                        v = ADD(v, LOAD(a->res + o * os + p * VL));                                  \
                    if (epi & KILN_EPI_RELU)                                                         \
                        v = MAX(v, z);                                                               \
                    if (epi & KILN_EPI_CLIP)                                                         \
                        v = MIN(MAX(v, lo), hi);                                                     \
                }                                                                                    \
                STORE(a->out + o * os + p * VL, v);                                                  \
            }                                                                                        \
        }                                                                                            \
    }

#ifdef KILN_KERNELS_AVX512
KILN_CONV_UKERNEL(kiln_f32_conv_nchw16c_ukernel__avx512, __m512, 16, _mm512_setzero_ps,
                  _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps,
                  _mm512_add_ps, _mm512_max_ps, _mm512_min_ps)
#endif
#ifdef KILN_KERNELS_AVX2
KILN_CONV_UKERNEL(kiln_f32_conv_nchw8c_ukernel__avx2, __m256, 8, _mm256_setzero_ps,
                  _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_set1_ps,
                  _mm256_add_ps, _mm256_max_ps, _mm256_min_ps)
#endif

/* Portable microkernel for any block width: accumulates in the output. */
static inline void kiln_f32_conv_nchwc_ukernel__scalar(int T, int O, int cbo,
                                                       const kiln_conv_tile_args *a)
{
    for (int o = 0; o < O; o++) {
        for (int p = 0; p < T; p++) {
            float *y = a->out + o * a->out_os + (int64_t)p * cbo;
            if (a->first)
                for (int l = 0; l < cbo; l++)
                    y[l] = a->bias ? a->bias[o * cbo + l] : 0.0f;
            for (int icb = 0; icb < a->nicb; icb++)
                for (int r = 0; r < a->nkh; r++)
                    for (int s = 0; s < a->nkw; s++) {
                        const float *ip = a->in + icb * a->in_cs + r * a->in_rs + s * a->in_ss +
                                          p * a->in_ps;
                        const float *wp = a->w + o * a->w_os + icb * a->w_cs + r * a->w_rs +
                                          (int64_t)s * a->cbi * cbo;
                        for (int ci = 0; ci < a->cbi; ci++) {
                            float x = ip[ci];
                            const float *wr = wp + (int64_t)ci * cbo;
                            for (int l = 0; l < cbo; l++)
                                y[l] += x * wr[l];
                        }
                    }
            if (a->last)
                for (int l = 0; l < cbo; l++) {
                    float v = y[l];
                    if (a->res)
                        v += a->res[o * a->out_os + (int64_t)p * cbo + l];
                    y[l] = kiln_k_epi1(v, a->epi, a->lo, a->hi);
                }
        }
    }
}

/* ---- the tile widths a kernel takes --------------------------------------- */

/* gcc compiles every microkernel variant the value ranges of T and O reach
 * (a 56-pixel row in tiles of 6 reaches T in 2..6, of which it takes 6 and
 * 2), about half a second each. A generated conv kernel therefore defines
 * KILN_CONV_TILES_T and KILN_CONV_TILES_O before including this header: the
 * bit sets (bit k: a width of k) of the pixel and oc tile widths its loops
 * take (kiln_conv_tile_sets, computed by codegen from the same params), and
 * the dispatch below instantiates only those; resnet-50's 1x1 256>64 conv
 * compiled in 1.3 s instead of 3.1. A width outside the sets still computes
 * the right result, on the portable microkernel (kiln_conv_tile_slow; the
 * kernel tests set the sets at run time and count its calls). Without the
 * macros (the other templates that include this header) every width is
 * instantiated, as before. */
#ifndef KILN_CONV_TILES_T
#define KILN_CONV_TILES_T 0xffffffffu
#endif
#ifndef KILN_CONV_TILES_O
#define KILN_CONV_TILES_O 0xffffffffu
#endif

/* The input strides of the SIMD tiles a kernel takes (a bit set, like the
 * widths above): bit 0 whole input blocks of one vector at unit pixel
 * stride (in_ps == cbi == the vector width: every 1x1 and stride-1 conv,
 * and the Winograd and expand-depthwise products), bit 1 whole blocks at
 * pixel stride 2 (AVX-512), bit 2 any other (in_ps and cbi at run time,
 * without the far prefetch). Each is a copy of every tile; a kernel needs
 * one or two, and gcc compiled all three (about a third of a conv kernel's
 * compile time). Generated code defines KILN_CONV_PS (kiln_conv_ps_set); a
 * tile outside it runs the portable microkernel (kiln_conv_tile_slow). */
#ifndef KILN_CONV_PS
#define KILN_CONV_PS 7u
#endif

/* The bit of KILN_CONV_PS for cbi input channels at pixel stride ps on the
 * microkernels of `isa`. */
static inline uint32_t kiln_conv_ps_bit(int isa, int cbi, int64_t ps)
{
    const int vl = isa == KILN_ISA_AVX512 ? 16 : isa == KILN_ISA_AVX2 ? 8 : 0;
    if (vl && cbi == vl && ps == vl)
        return 1u;
    if (isa == KILN_ISA_AVX512 && cbi == 16 && ps == 32)
        return 2u;
    return 4u;
}

/* The widths of a walk over n items in steps of at most `step`: step when
 * n >= step, and the remainder n % step. */
static inline uint32_t kiln_conv_steps(int64_t step, int64_t n)
{
    if (step <= 0 || step > 31)
        return 0xffffffffu;
    uint32_t m = n >= step ? 1u << step : 0u;
    if (n % step)
        m |= 1u << (n % step);
    return m;
}

/* The widths of a walk over n items in runs of `run` (the last run the
 * remainder), each run in steps of at most `step`. */
static inline uint32_t kiln_conv_run_steps(int64_t step, int64_t run, int64_t n)
{
    uint32_t m = kiln_conv_steps(step, run);
    if (run > 0 && n % run)
        m |= kiln_conv_steps(step, n % run);
    return m;
}

/* The pixel (*tm) and oc (*om) tile widths of kiln_conv_run_pro's loops for
 * p with the microkernels of `isa`: each row's ow pixels (with column
 * segments, each segment's) in tiles of T; each task's run of oc blocks
 * (oc_group of them, or the group's remainder) in tiles of O. */
static inline void kiln_conv_tile_sets(const kiln_conv_params *p, int isa, uint32_t *tm,
                                       uint32_t *om)
{
    const kiln_conv_plan q = kiln_conv_plan_isa(p, isa);
    *tm = kiln_conv_steps(q.T, p->ow);
    *om = kiln_conv_run_steps(q.O, q.oc_group, q.cob_g);
    kiln_conv_seg s[KILN_CONV_MAXSEG];
    int ns = q.colseg ? kiln_conv_col_segs(p, s) : -1;
    if (ns >= 0) { /* each segment in tiles of T */
        *tm = 0;
        for (int k = 0; k < ns; k++)
            *tm |= kiln_conv_steps(q.T, s[k].ow1 - s[k].ow0);
    }
}

/* KILN_CONV_PS of kiln_conv_run_pro on p with the microkernels of `isa`:
 * the conv's pixel stride, and the staged tile's unit stride. */
static inline uint32_t kiln_conv_ps_set(const kiln_conv_params *p, int isa)
{
    const kiln_conv_plan q = kiln_conv_plan_isa(p, isa);
    uint32_t m = kiln_conv_ps_bit(isa, q.cbi, (int64_t)p->sw * q.cbi);
    if (q.stage_tile)
        m |= kiln_conv_ps_bit(isa, q.cbi, q.cbi);
    return m;
}

/* A tile whose width is outside KILN_CONV_TILES_*: the portable microkernel
 * (correct and slower; never taken when the sets are right). noipa: one
 * copy, not a clone per constant width. */
#if defined(__GNUC__) && !defined(__clang__)
#define KILN_CONV_NOIPA __attribute__((noipa, unused))
#else
#define KILN_CONV_NOIPA KILN_KNOINLINE
#endif
static KILN_CONV_NOIPA void kiln_conv_tile_slow(int T, int O, int cbo, const kiln_conv_tile_args *a)
{
#ifdef KILN_CONV_COUNT_SLOW
    KILN_CONV_COUNT_SLOW++;
#endif
    kiln_f32_conv_nchwc_ukernel__scalar(T, O, cbo, a);
}

/* Tile instantiations with XNNPACK-style names. */
#define KILN_CONV_DEF512(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_conv_nchw16c_##t##x##n##__avx512(const kiln_conv_tile_args *a, \
                                                                        const kiln_conv_far *f)    \
    {                                                                                              \
        if ((KILN_CONV_PS & 1u) && a->in_ps == 16 && a->cbi == 16)                                 \
            kiln_f32_conv_nchw16c_ukernel__avx512(t, o, 16, 16, 1, a, f);                          \
        else if ((KILN_CONV_PS & 2u) && a->in_ps == 32 && a->cbi == 16)                            \
            kiln_f32_conv_nchw16c_ukernel__avx512(t, o, 32, 16, 1, a, f);                          \
        else if (KILN_CONV_PS & 4u)                                                                \
            kiln_f32_conv_nchw16c_ukernel__avx512(t, o, a->in_ps, a->cbi, 0, a, f);                \
        else                                                                                       \
            kiln_conv_tile_slow(t, o, 16, a);                                                      \
    }
#define KILN_CONV_DEF256(t, o, n)                                                                  \
    static KILN_KNOINLINE void kiln_f32_conv_nchw8c_##t##x##n##__avx2(const kiln_conv_tile_args *a,   \
                                                                      const kiln_conv_far *f)      \
    {                                                                                              \
        if ((KILN_CONV_PS & 1u) && a->in_ps == 8 && a->cbi == 8)                                   \
            kiln_f32_conv_nchw8c_ukernel__avx2(t, o, 8, 8, 1, a, f);                               \
        else if (KILN_CONV_PS & 4u)                                                                \
            kiln_f32_conv_nchw8c_ukernel__avx2(t, o, a->in_ps, a->cbi, 0, a, f);                   \
        else                                                                                       \
            kiln_conv_tile_slow(t, o, 8, a);                                                       \
    }
#define KILN_CONV_CASE512(t, o, n)                                                                 \
    case t:                                                                                        \
        if ((KILN_CONV_TILES_T >> t) & (KILN_CONV_TILES_O >> o) & 1u)                              \
            kiln_f32_conv_nchw16c_##t##x##n##__avx512(a, f);                                        \
        else                                                                                       \
            kiln_conv_tile_slow(t, o, 16, a);                                                      \
        return;
#define KILN_CONV_CASE256(t, o, n)                                                                 \
    case t:                                                                                        \
        if ((KILN_CONV_TILES_T >> t) & (KILN_CONV_TILES_O >> o) & 1u)                              \
            kiln_f32_conv_nchw8c_##t##x##n##__avx2(a, f);                                           \
        else                                                                                       \
            kiln_conv_tile_slow(t, o, 8, a);                                                       \
        return;
#define KILN_CONV_T2(M, o, n) M(1, o, n) M(2, o, n)
#define KILN_CONV_T4(M, o, n) KILN_CONV_T2(M, o, n) M(3, o, n) M(4, o, n)
#define KILN_CONV_T6(M, o, n) KILN_CONV_T4(M, o, n) M(5, o, n) M(6, o, n)
#define KILN_CONV_T7(M, o, n) KILN_CONV_T6(M, o, n) M(7, o, n)
#define KILN_CONV_T9(M, o, n) KILN_CONV_T7(M, o, n) M(8, o, n) M(9, o, n)
#define KILN_CONV_T12(M, o, n) KILN_CONV_T9(M, o, n) M(10, o, n) M(11, o, n) M(12, o, n)
#define KILN_CONV_T14(M, o, n) KILN_CONV_T12(M, o, n) M(13, o, n) M(14, o, n)
#define KILN_CONV_T16(M, o, n) KILN_CONV_T14(M, o, n) M(15, o, n) M(16, o, n)

#ifdef KILN_KERNELS_AVX512
KILN_CONV_T16(KILN_CONV_DEF512, 1, 16)
KILN_CONV_T14(KILN_CONV_DEF512, 2, 32)
KILN_CONV_T9(KILN_CONV_DEF512, 3, 48)
KILN_CONV_T7(KILN_CONV_DEF512, 4, 64)
static KILN_KINLINE void kiln_conv_dispatch__avx512(int T, int O, const kiln_conv_tile_args *a,
                                                       const kiln_conv_far *f)
{
    switch (O) {
    case 1:
        switch (T) { KILN_CONV_T16(KILN_CONV_CASE512, 1, 16) }
        break;
    case 2:
        switch (T) { KILN_CONV_T14(KILN_CONV_CASE512, 2, 32) }
        break;
    case 3:
        switch (T) { KILN_CONV_T9(KILN_CONV_CASE512, 3, 48) }
        break;
    case 4:
        switch (T) { KILN_CONV_T7(KILN_CONV_CASE512, 4, 64) }
        break;
    }
}
#endif
#ifdef KILN_KERNELS_AVX2
KILN_CONV_T12(KILN_CONV_DEF256, 1, 8)
KILN_CONV_T6(KILN_CONV_DEF256, 2, 16)
KILN_CONV_T4(KILN_CONV_DEF256, 3, 24)
KILN_CONV_T2(KILN_CONV_DEF256, 4, 32)
static KILN_KINLINE void kiln_conv_dispatch__avx2(int T, int O, const kiln_conv_tile_args *a,
                                                     const kiln_conv_far *f)
{
    switch (O) {
    case 1:
        switch (T) { KILN_CONV_T12(KILN_CONV_CASE256, 1, 8) }
        break;
    case 2:
        switch (T) { KILN_CONV_T6(KILN_CONV_CASE256, 2, 16) }
        break;
    case 3:
        switch (T) { KILN_CONV_T4(KILN_CONV_CASE256, 3, 24) }
        break;
    case 4:
        switch (T) { KILN_CONV_T2(KILN_CONV_CASE256, 4, 32) }
        break;
    }
}
#endif

/* One T x O tile with the far prefetch f (the portable kernel ignores it). */
static KILN_KDISPATCH void kiln_conv_tile_far(const kiln_conv_plan *q, int T, int O,
                                            const kiln_conv_tile_args *a, const kiln_conv_far *f)
{
#ifdef KILN_KERNELS_AVX512
    if (q->isa == KILN_ISA_AVX512) {
        kiln_conv_dispatch__avx512(T, O, a, f);
        return;
    }
#endif
#ifdef KILN_KERNELS_AVX2
    if (q->isa == KILN_ISA_AVX2) {
        kiln_conv_dispatch__avx2(T, O, a, f);
        return;
    }
#endif
    (void)f;
    kiln_f32_conv_nchwc_ukernel__scalar(T, O, q->cbo, a);
}

/* One T x O tile without a far prefetch. */
static KILN_KINLINE void kiln_conv_tile(const kiln_conv_plan *q, int T, int O,
                                        const kiln_conv_tile_args *a)
{
    static const kiln_conv_far none = {0, 0, 0};
    kiln_conv_tile_far(q, T, O, a, &none);
}

/* Sets up and runs the tile of T pixels from (oh, ow0) at oc block ob whose
 * filter columns start at col (a->nkw of them). */
static KILN_KINLINE void kiln_conv_tile_cols(const kiln_conv_params *p, const kiln_conv_plan *q,
                                             kiln_conv_tile_args *a, const float *src,
                                             int64_t src_rs, int64_t row0, int64_t colpad,
                                             const float *w, const float *bias, const float *res,
                                             float *out, int64_t n, int64_t oh, int64_t ow0, int T,
                                             int col, int64_t ob, int O, const kiln_conv_far *f)
{
    const int64_t OW = p->ow, cbo = q->cbo;
    const int64_t out_off = n * q->cob * p->oh * OW * cbo + ob * a->out_os + (oh * OW + ow0) * cbo;
    /* filter rows inside the image */
    int64_t ih0 = oh * p->sh - p->pad_t;
    int64_t r_lo = ih0 >= 0 ? 0 : kiln_k_cdiv(-ih0, p->dh);
    int64_t r_hi = kiln_k_min64(p->kh, kiln_k_fdiv(p->h - 1 - ih0, p->dh) + 1);
    if (r_hi <= r_lo)
        r_lo = r_hi = 0;
    a->nkh = (int)(r_hi - r_lo);
    a->in = src + (ih0 + r_lo * p->dh - row0) * src_rs +
            (ow0 * p->sw - p->pad_l + colpad + (int64_t)col * p->dw) * q->cbi;
    a->w = w + ob * a->w_os + r_lo * a->w_rs + (int64_t)col * q->cbi * cbo;
    a->out = out + out_off;
    a->res = res ? res + out_off : NULL;
    a->bias = bias ? bias + ob * cbo : NULL;
    kiln_conv_tile_far(q, T, O, a, f);
}

/* Sets up and runs the tile at output row oh, pixel tile t, oc block ob. */
static KILN_KINLINE void kiln_conv_tile_at(const kiln_conv_params *p, const kiln_conv_plan *q,
                                           kiln_conv_tile_args *a, const float *src,
                                           int64_t src_rs, int64_t row0, int64_t colpad,
                                           const float *w, const float *bias, const float *res,
                                           float *out, int64_t n, int64_t oh, int64_t t,
                                           int64_t ob, int O, int64_t nfull, const kiln_conv_far *f)
{
    const int T = t < nfull ? q->T : (int)(p->ow % q->T);
    kiln_conv_tile_cols(p, q, a, src, src_rs, row0, colpad, w, bias, res, out, n, oh, t * q->T, T,
                        0, ob, O, f);
}

/* ---- the input prologue ------------------------------------------------------ */

/* A per-input-channel affine map and clamp applied to the input as the conv
 * reads it: x -> clamp(x * scale[c] + shift[c], pro_lo, pro_hi) (each part
 * optional; Relu is a clamp to [0, FLT_MAX]), a pre-activation
 * BatchNorm-Relu before the conv (densenet's) without its own pass over the
 * tensor. A conv with a prologue stages its input through it, so the cost
 * is one operation per input element per task, not per FMA: an unpadded
 * 1x1 conv in loop order 0 (q.stage_tile), per ic pass, output row and
 * pixel tile, just before the oc tiles read it, [nicb][T][cbi] in the
 * workspace, read from the L1; any other (q.copy) per task, its band of
 * input rows, with the padding columns, as the padded convs copy (whole
 * bands go through the L2: for densenet's 1x1s that was no faster than the
 * separate elementwise kernel). The zero padding is written after the
 * prologue (the pad of the activated tensor, not the prologue of a zero);
 * padded rows are skipped as without one.
 * scale and shift hold ceil(c_in / cb_in) * cb_in floats, in channel order
 * (zeros in the padding channels keep those zero). */
#define KILN_CONV_PRO_SCALE 1
#define KILN_CONV_PRO_SHIFT 2
#define KILN_CONV_PRO_CLAMP 4

/* Stages `rows` input rows of every input channel block of one group into
 * the workspace band ws ([cib_g][band_rows][wpad][cbi]): pad_l zero columns,
 * the row (through the prologue when p->pro), zero columns up to wpad. src:
 * the group's first block at the band's first row (blocks src_cs apart,
 * rows src_rs apart); scale/shift at the group's first channel. */
static KILN_KINLINE void kiln_conv_stage_band(const kiln_conv_params *p, const kiln_conv_plan *q,
                                              const float *src, int64_t src_cs, int64_t src_rs,
                                              int64_t rows, const float *scale,
                                              const float *shift, float *ws)
{
    const int cbi = q->cbi, pro = p->pro;
    const int64_t W = p->w, rs = q->wpad * cbi, cs = q->band_rows * rs;
    const float lo = p->pro_lo, hi = p->pro_hi;
    for (int64_t ib = 0; ib < q->cib_g; ib++) {
        const float *sc = (pro & KILN_CONV_PRO_SCALE) ? scale + ib * cbi : NULL;
        const float *sh = (pro & KILN_CONV_PRO_SHIFT) ? shift + ib * cbi : NULL;
        for (int64_t r = 0; r < rows; r++) {
            float *d = ws + ib * cs + r * rs;
            const float *x = src + ib * src_cs + r * src_rs;
            memset(d, 0, sizeof(float) * (size_t)(p->pad_l * cbi));
            float *restrict dr = d + p->pad_l * cbi;
            const float *restrict xr = x;
            if (!pro) {
                memcpy(dr, xr, sizeof(float) * (size_t)(W * cbi));
            } else {
                for (int64_t j = 0; j < W; j++)
                    for (int l = 0; l < cbi; l++) {
                        float v = xr[j * cbi + l];
                        if (pro & KILN_CONV_PRO_SCALE)
                            v *= sc[l];
                        if (pro & KILN_CONV_PRO_SHIFT)
                            v += sh[l];
                        if (pro & KILN_CONV_PRO_CLAMP) {
                            v = v < lo ? lo : v;
                            v = v > hi ? hi : v;
                        }
                        dr[j * cbi + l] = v;
                    }
            }
            memset(d + (p->pad_l + W) * cbi, 0, sizeof(float) * (size_t)((q->wpad - p->pad_l - W) * cbi));
        }
    }
}

/* ---- the driver -------------------------------------------------------------- */

/* The tile arguments of the ic pass starting at input channel block ic0. */
static KILN_KINLINE void kiln_conv_pass(const kiln_conv_plan *q, kiln_conv_tile_args *a, int64_t ic0)
{
    a->nicb = (int)kiln_k_min64(q->ict, q->cib_g - ic0);
    a->first = ic0 == 0;
    a->last = ic0 + q->ict >= q->cib_g;
}

/* A task's loops with column segments (see "column segments"): those of
 * kiln_conv_run_pro, each row's pixel tiles taken segment by segment, each
 * with the segment's filter columns. */
static KILN_KINLINE void kiln_conv_task_colseg(const kiln_conv_params *p, const kiln_conv_plan *q,
                                               kiln_conv_tile_args *a, const float *src,
                                               int64_t src_cs, int64_t src_rs, int64_t row0,
                                               int64_t colpad, const float *w_packed,
                                               const float *bias, const float *res, float *out,
                                               int64_t n, int64_t oh0, int64_t oh1, int64_t ob0,
                                               int64_t ob1)
{
    kiln_conv_seg sg[KILN_CONV_MAXSEG];
    const int ns = kiln_conv_col_segs(p, sg);
    const int64_t w_cs = a->w_cs;
    int64_t ntiles = 0;
    for (int k = 0; k < ns; k++)
        ntiles += kiln_k_cdiv(sg[k].ow1 - sg[k].ow0, q->T);
    kiln_conv_far far = {0, 0, 0};
    if (q->order == 0) {
        for (int64_t ic0 = 0; ic0 < q->cib_g; ic0 += q->ict) {
            kiln_conv_pass(q, a, ic0);
            const float *src_ic = src + ic0 * src_cs;
            const float *w_ic = w_packed + ic0 * w_cs;
            for (int64_t oh = oh0; oh < oh1; oh++)
                for (int k = 0; k < ns; k++) {
                    a->nkw = sg[k].hi - sg[k].lo;
                    for (int64_t ow0 = sg[k].ow0; ow0 < sg[k].ow1; ow0 += q->T) {
                        const int T = (int)kiln_k_min64(q->T, sg[k].ow1 - ow0);
                        for (int64_t ob = ob0; ob < ob1; ob += q->O)
                            kiln_conv_tile_cols(p, q, a, src_ic, src_rs, row0, colpad, w_ic, bias,
                                                res, out, n, oh, ow0, T, sg[k].lo, ob,
                                                (int)kiln_k_min64(q->O, ob1 - ob), &far);
                    }
                }
        }
        return;
    }
    /* oc tiles outermost, the next chunk's weights prefetched as in
     * kiln_conv_run_pro (a tile's walk is shorter than the full window's,
     * so part of the chunk is left to demand loads) */
    const int64_t ncalls = (oh1 - oh0) * ntiles;
    for (int64_t ob = ob0; ob < ob1; ob += q->O)
        for (int64_t ic0 = 0; ic0 < q->cib_g; ic0 += q->ict) {
            kiln_conv_pass(q, a, ic0);
            const int64_t ntaps = (int64_t)a->nicb * p->kh * p->kw;
            far.off = ic0 + q->ict < q->cib_g ? q->ict * w_cs
                      : ob + q->O < q->cob    ? q->O * a->w_os - ic0 * w_cs
                                              : 0;
            const float *src_ic = src + ic0 * src_cs;
            const float *w_ic = w_packed + ic0 * w_cs;
            int64_t call = 0;
            for (int64_t oh = oh0; oh < oh1; oh++)
                for (int k = 0; k < ns; k++) {
                    a->nkw = sg[k].hi - sg[k].lo;
                    for (int64_t ow0 = sg[k].ow0; ow0 < sg[k].ow1; ow0 += q->T, call++) {
                        const int T = (int)kiln_k_min64(q->T, sg[k].ow1 - ow0);
                        far.lo = far.off ? (int)(call * ntaps / ncalls) : 0;
                        far.hi = far.off ? (int)((call + 1) * ntaps / ncalls) : 0;
                        kiln_conv_tile_cols(p, q, a, src_ic, src_rs, row0, colpad, w_ic, bias, res,
                                            out, n, oh, ow0, T, sg[k].lo, ob,
                                            (int)kiln_k_min64(q->O, ob1 - ob), &far);
                    }
                }
        }
}

/* Loop order 0 of an unpadded 1x1 conv with a prologue (q->stage_tile):
 * per ic pass, output row and pixel tile, the tile's input (T pixels of the
 * pass's input blocks) goes through the prologue into ws as [nicb][T][cbi]
 * right before the oc tiles read it from the L1. src: the image's and
 * group's first input block; scale/shift at the group's first channel; w
 * the packed weights; a: the task's tile arguments. */
static KILN_KINLINE void kiln_conv_order0_staged(const kiln_conv_params *p, const kiln_conv_plan *q,
                                                 kiln_conv_tile_args *a, const float *src,
                                                 int64_t src_cs, const float *scale,
                                                 const float *shift, const float *w,
                                                 const float *bias, const float *res, float *out,
                                                 int64_t n, int64_t oh0, int64_t oh1, int64_t ob0,
                                                 int64_t ob1, float *ws)
{
    const int cbi = q->cbi, pro = p->pro;
    const float lo = p->pro_lo, hi = p->pro_hi;
    const int64_t OW = p->ow, cbo = q->cbo, nfull = OW / q->T, ntiles = nfull + (OW % q->T != 0);
    const int64_t xps = (int64_t)p->sw * cbi;
    a->in_ps = cbi;
    a->in_rs = a->in_ss = 0;
    a->nkh = a->nkw = 1;
    a->in = ws;
    for (int64_t ic0 = 0; ic0 < q->cib_g; ic0 += q->ict) {
        kiln_conv_pass(q, a, ic0);
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t t = 0; t < ntiles; t++) {
                const int T = t < nfull ? q->T : (int)(OW % q->T);
                const int64_t ow0 = t * q->T;
                a->in_cs = (int64_t)T * cbi;
                for (int icb = 0; icb < a->nicb; icb++) {
                    const int64_t c = (ic0 + icb) * cbi;
                    const float *restrict x = src + (ic0 + icb) * src_cs +
                                              (oh * p->sh * p->w + ow0 * p->sw) * cbi;
                    float *restrict d = ws + (int64_t)icb * T * cbi;
                    for (int j = 0; j < T; j++)
                        for (int l = 0; l < cbi; l++) {
                            float v = x[j * xps + l];
                            if (pro & KILN_CONV_PRO_SCALE)
                                v *= scale[c + l];
                            if (pro & KILN_CONV_PRO_SHIFT)
                                v += shift[c + l];
                            if (pro & KILN_CONV_PRO_CLAMP) {
                                v = v < lo ? lo : v;
                                v = v > hi ? hi : v;
                            }
                            d[j * cbi + l] = v;
                        }
                }
                for (int64_t ob = ob0; ob < ob1; ob += q->O) {
                    const int64_t off = n * q->cob * p->oh * OW * cbo + ob * a->out_os +
                                        (oh * OW + ow0) * cbo;
                    a->w = w + ob * a->w_os + ic0 * a->w_cs;
                    a->out = out + off;
                    a->res = res ? res + off : NULL;
                    a->bias = bias ? bias + ob * cbo : NULL;
                    kiln_conv_tile(q, T, (int)kiln_k_min64(q->O, ob1 - ob), a);
                }
            }
    }
}

/* Runs tasks [task_begin, task_end) with the input prologue p->pro (see
 * "the input prologue"; scale/shift may be NULL when p->pro lacks them).
 * workspace: kiln_conv_workspace_bytes(p) bytes for this thread (may be
 * NULL when that is 0). bias/residual may be NULL when the epilogue lacks
 * them. */
static KILN_KINLINE void kiln_conv_run_pro(const kiln_conv_params *p, const float *in,
                                           const float *scale, const float *shift,
                                           const float *w_packed, const float *bias,
                                           const float *residual, float *out, int64_t task_begin,
                                           int64_t task_end, void *workspace)
{
    const kiln_conv_plan q = kiln_conv_plan_of(p);
    const int64_t H = p->h, W = p->w, OH = p->oh, OW = p->ow;
    const int cbi = q.cbi, cbo = q.cbo;
    const int64_t in_img = q.cib * H * W * cbi;
    const int64_t out_os = OH * OW * cbo;
    const int64_t w_rs = (int64_t)p->kw * cbi * cbo, w_cs = p->kh * w_rs, w_os = q.cib_g * w_cs;
    const int64_t ocg_per_group = q.n_ocg / p->groups;
    float *ws = (float *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    const float *bias_p = (p->epilogue & KILN_EPI_BIAS) ? bias : NULL;
    const float *res_p = (p->epilogue & KILN_EPI_RESIDUAL) ? residual : NULL;

    for (int64_t task = task_begin; task < task_end; task++) {
        int64_t b, gi, n;
        kiln_conv_task_of(&q, task, &n, &gi, &b);
        int64_t grp = gi / ocg_per_group, gsub = gi % ocg_per_group;
        int64_t oh0 = b * q.oh_tile, oh1 = kiln_k_min64(OH, oh0 + q.oh_tile);
        int64_t ob0 = grp * q.cob_g + gsub * q.oc_group;
        int64_t ob1 = kiln_k_min64((grp + 1) * q.cob_g, ob0 + q.oc_group);
        /* the input view: rows [row0, ...) of this image and group */
        const float *src = in + n * in_img + grp * q.cib_g * H * W * cbi;
        int64_t src_cs = H * W * cbi, src_rs = W * cbi, row0 = 0, colpad = 0;
        if (q.copy) {
            int64_t r0 = kiln_k_max64(0, oh0 * p->sh - p->pad_t);
            int64_t r1 = kiln_k_min64(H, (oh1 - 1) * p->sh - p->pad_t + (int64_t)(p->kh - 1) * p->dh + 1);
            int64_t rows = r1 > r0 ? r1 - r0 : 0;
            int64_t rs = q.wpad * cbi, cs = q.band_rows * rs, c0 = grp * q.cib_g * cbi;
            kiln_conv_stage_band(p, &q, src + r0 * src_rs, src_cs, src_rs, rows,
                                 scale ? scale + c0 : NULL, shift ? shift + c0 : NULL, ws);
            src = ws;
            src_cs = cs;
            src_rs = rs;
            row0 = r0;
            colpad = p->pad_l;
        }
        kiln_conv_tile_args a;
        a.in_cs = src_cs;
        a.in_rs = src_rs * p->dh;
        a.in_ss = (int64_t)p->dw * cbi;
        a.in_ps = (int64_t)p->sw * cbi;
        a.nkw = p->kw;
        a.cbi = cbi;
        a.w_os = w_os;
        a.w_cs = w_cs;
        a.w_rs = w_rs;
        a.out_os = out_os;
        a.epi = p->epilogue;
        a.lo = p->clip_min;
        a.hi = p->clip_max;
        kiln_conv_far far = {0, 0, 0};
        const int64_t nfull = OW / q.T, trem = OW % q.T, ntiles = nfull + (trem != 0);
        if (q.colseg) {
            kiln_conv_task_colseg(p, &q, &a, src, src_cs, src_rs, row0, colpad, w_packed, bias_p,
                                  res_p, out, n, oh0, oh1, ob0, ob1);
            continue;
        }
        if (q.stage_tile) {
            const int64_t c0 = grp * q.cib_g * cbi;
            kiln_conv_order0_staged(p, &q, &a, src, src_cs, scale ? scale + c0 : NULL,
                                    shift ? shift + c0 : NULL, w_packed, bias_p, res_p, out, n,
                                    oh0, oh1, ob0, ob1, ws);
            continue;
        }
        if (q.order == 0) {
            for (int64_t ic0 = 0; ic0 < q.cib_g; ic0 += q.ict) {
                kiln_conv_pass(&q, &a, ic0);
                const float *src_ic = src + ic0 * src_cs;
                const float *w_ic = w_packed + ic0 * w_cs;
                for (int64_t oh = oh0; oh < oh1; oh++)
                    for (int64_t t = 0; t < ntiles; t++)
                        for (int64_t ob = ob0; ob < ob1; ob += q.O)
                            kiln_conv_tile_at(p, &q, &a, src_ic, src_rs, row0, colpad, w_ic, bias_p,
                                              res_p, out, n, oh, t, ob,
                                              (int)kiln_k_min64(q.O, ob1 - ob), nfull, &far);
            }
            continue;
        }
        /* oc tiles outermost: each chunk of an oc tile's weights (its ic pass)
         * serves every row and pixel tile of the band, and those tile calls
         * share out the far prefetch of the next chunk (the next ic pass, or
         * the next oc tile's first), so the weights stream from memory while
         * the current chunk computes from L1/L2 */
        const int64_t ncalls = (oh1 - oh0) * ntiles;
        for (int64_t ob = ob0; ob < ob1; ob += q.O)
            for (int64_t ic0 = 0; ic0 < q.cib_g; ic0 += q.ict) {
                kiln_conv_pass(&q, &a, ic0);
                const int64_t ntaps = (int64_t)a.nicb * p->kh * p->kw;
                far.off = ic0 + q.ict < q.cib_g ? q.ict * w_cs
                           : ob + q.O < q.cob ? q.O * w_os - ic0 * w_cs
                                              : 0;
                const float *src_ic = src + ic0 * src_cs;
                const float *w_ic = w_packed + ic0 * w_cs;
                for (int64_t oh = oh0; oh < oh1; oh++)
                    for (int64_t t = 0; t < ntiles; t++) {
                        int64_t call = (oh - oh0) * ntiles + t;
                        far.lo = far.off ? (int)(call * ntaps / ncalls) : 0;
                        far.hi = far.off ? (int)((call + 1) * ntaps / ncalls) : 0;
                        kiln_conv_tile_at(p, &q, &a, src_ic, src_rs, row0, colpad, w_ic, bias_p,
                                          res_p, out, n, oh, t, ob,
                                          (int)kiln_k_min64(q.O, ob1 - ob), nfull, &far);
                    }
            }
    }
}

/* Runs tasks [task_begin, task_end) of a conv without a prologue (see
 * kiln_conv_run_pro). */
static KILN_KINLINE void kiln_conv_run(const kiln_conv_params *p, const float *in,
                                       const float *w_packed, const float *bias,
                                       const float *residual, float *out, int64_t task_begin,
                                       int64_t task_end, void *workspace)
{
    kiln_conv_run_pro(p, in, NULL, NULL, w_packed, bias, residual, out, task_begin, task_end,
                      workspace);
}

#endif /* KILN_KERNELS_CONV_H */
