/* vm/vm_roialign.c: RoiAlign as the VM's own kernel.
 *
 * Detection heads run RoiAlign on a data-dependent number of rois (Faster
 * R-CNN's box head: 150 rois x 256 channels x 7x7 bins x 4 samples x 4
 * bilinear taps, 30M multiply-adds per image), so it is a VM kernel like
 * NonZero (vm_kernels.c dispatches here) rather than a node converted per
 * shape class. The rules are the reference kernel's (ref/misc.c, ONNX
 * Runtime's): the same sample grid, the same clamping at the borders, a
 * sample outside [-1, H] x [-1, W] contributes 0, avg divides by the
 * samples per bin, max takes the largest weighted tap (0 for an outside
 * sample).
 *
 * How it runs:
 *  - Taps once per roi: for every bin, its samples' four pixel offsets and
 *    bilinear weights (computed in double exactly as the reference does;
 *    float32's avg folds 1 / count into them), shared by every channel.
 *  - float32 data: float arithmetic, as torchvision and ONNX Runtime
 *    compute it (the reference accumulates in double: results differ by
 *    float rounding, ~1e-7 relative). Other dtypes keep the double path.
 *  - Channels last when the rois' work outweighs a transpose of the
 *    feature map (C >= 8 and taps x channels >= 4 x the map's size): the
 *    map is transposed once per run to [N, H, W, C], and every tap becomes
 *    a multiply-add over C contiguous floats (vectorized), accumulated per
 *    bin in a [bins, C] buffer that is then written out as [C, bins].
 *    Otherwise each channel plane is read in place (gathers).
 *  - Rois are split over the static part's thread pool (the compiled
 *    module's, idle while the dynamic nodes run); each roi is computed by
 *    one thread whatever the count, so results do not depend on threads.
 * Working memory is the node's scratch, grown, never shrunk: a run on
 * as many rois as before allocates nothing. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ref/elemwise_common.h"
#include "ref/red_num.h"
#include "runtime/module_internal.h"
#include "util/error.h"
#include "vm/vm_internal.h"

/* One sample of a bin: its four taps (offsets into an H x W plane, counted
 * in pixels; o[0] < 0 marks a sample outside the map) and their weights
 * (double, as the reference computes them; the float32 paths round them). */
typedef struct ra_sample {
    int32_t o[4];
    double w[4];
} ra_sample;

typedef struct ra_job {
    const kiln_tensor *x, *rois, *bi;
    float *y;          /* float32 output */
    bool avg, half;
    double scale, off;
    int64_t ratio, oh, ow, ch, h, w;
    int64_t cap;       /* samples per roi at most */
    const float *xt;   /* channels-last copy of x, or NULL */
    char *per_thread;  /* thread t: taps, then (channels last) the [bins, C] accumulator */
    size_t thread_bytes;
} ra_job;

static int64_t attr_int(const vm_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = kiln_vm_attr(n->np, name);
    return a ? a->i : def;
}

/* Roi r's corners in input pixels (c4: x1, y1, x2, y2, each * scale - off)
 * and its width and height (*rw, *rh: at least 1 unless half_pixel). */
static void roi_corners(const ra_job *j, int64_t r, double c4[4], double *rw, double *rh)
{
    for (int k = 0; k < 4; k++)
        c4[k] = kiln_red_ldf(j->rois->dtype, j->rois->data, r * 4 + k) * j->scale - j->off;
    *rw = c4[2] - c4[0], *rh = c4[3] - c4[1];
    if (!j->half)
        *rw = *rw > 1 ? *rw : 1, *rh = *rh > 1 ? *rh : 1;
}

/* Roi's sample grid per bin (gh x gw, at least 0; NaN for a NaN roi), as
 * doubles: the run's checks bound it before the taps cast it. */
static void roi_grid(const ra_job *j, double rw, double rh, double *gh, double *gw)
{
    *gh = j->ratio > 0 ? (double)j->ratio : ceil(rh / (double)j->oh);
    *gw = j->ratio > 0 ? (double)j->ratio : ceil(rw / (double)j->ow);
    if (*gh < 0) /* a NaN stays NaN: the checks refuse it */
        *gh = 0;
    if (*gw < 0)
        *gw = 0;
}

/* Roi r's samples, bin by bin (per = gh * gw each) into tap; *count: the
 * divisor of avg, folded into the weights when fold_count. */
static void roi_taps(const ra_job *j, int64_t r, ra_sample *tap, int64_t *per, double *count,
                     bool fold_count)
{
    double c4[4], rw, rh;
    roi_corners(j, r, c4, &rw, &rh);
    double bh = rh / (double)j->oh, bw = rw / (double)j->ow;
    double ghd, gwd;
    roi_grid(j, rw, rh, &ghd, &gwd);
    int64_t gh = (int64_t)ghd, gw = (int64_t)gwd, h = j->h, w = j->w, t = 0;
    *count = gh * gw > 1 ? (double)(gh * gw) : 1;
    *per = gh * gw;
    double ws = fold_count ? 1.0 / *count : 1.0;
    for (int64_t ph = 0; ph < j->oh; ph++)
        for (int64_t pw = 0; pw < j->ow; pw++)
            for (int64_t iy = 0; iy < gh; iy++)
                for (int64_t ix = 0; ix < gw; ix++, t++) {
                    double yy = c4[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    double xx = c4[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                    ra_sample *p = &tap[t];
                    memset(p, 0, sizeof *p);
                    p->o[0] = -1;
                    if (yy < -1.0 || yy > (double)h || xx < -1.0 || xx > (double)w)
                        continue; /* outside: the four terms are 0 */
                    yy = yy < 0 ? 0 : yy;
                    xx = xx < 0 ? 0 : xx;
                    int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
                    if (y0 >= h - 1)
                        y0 = y1 = h - 1, yy = (double)y0;
                    else
                        y1 = y0 + 1;
                    if (x0 >= w - 1)
                        x0 = x1 = w - 1, xx = (double)x0;
                    else
                        x1 = x0 + 1;
                    double ly = yy - (double)y0, lx = xx - (double)x0, hy = 1 - ly, hx = 1 - lx;
                    p->o[0] = (int32_t)(y0 * w + x0), p->o[1] = (int32_t)(y0 * w + x1);
                    p->o[2] = (int32_t)(y1 * w + x0), p->o[3] = (int32_t)(y1 * w + x1);
                    p->w[0] = hy * hx * ws, p->w[1] = hy * lx * ws;
                    p->w[2] = ly * hx * ws, p->w[3] = ly * lx * ws;
                }
}

/* float32, one channel plane read in place per channel. */
static void roi_planes(const ra_job *j, int64_t r, int64_t b, const ra_sample *tap, int64_t per)
{
    int64_t q_n = j->oh * j->ow, hw = j->h * j->w;
    for (int64_t c = 0; c < j->ch; c++) {
        const float *xf = (const float *)j->x->data + (b * j->ch + c) * hw;
        float *yo = j->y + (r * j->ch + c) * q_n;
        const ra_sample *p = tap;
        for (int64_t q = 0; q < q_n; q++) {
            float acc = j->avg ? 0.0f : -INFINITY;
            for (int64_t i = 0; i < per; i++, p++) {
                if (p->o[0] < 0) {
                    if (!j->avg)
                        acc = fmaxf(acc, 0.0f);
                    continue;
                }
                float v0 = (float)p->w[0] * xf[p->o[0]], v1 = (float)p->w[1] * xf[p->o[1]];
                float v2 = (float)p->w[2] * xf[p->o[2]], v3 = (float)p->w[3] * xf[p->o[3]];
                if (j->avg)
                    acc += v0 + v1 + v2 + v3;
                else
                    acc = fmaxf(acc, fmaxf(fmaxf(v0, v1), fmaxf(v2, v3)));
            }
            yo[q] = j->avg || per > 0 ? acc : 0.0f;
        }
    }
}

/* The channels-last inner loops over c < n: a sample's four weighted taps
 * added to a[c] (avg), or each one max'ed into it (max). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
/* one clone per vector width, picked at load (the runtime is built for the
 * baseline ISA; this loop is most of the kernel's time) */
#define RA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RA_CLONES
#endif

RA_CLONES static void axpy4(float *restrict a, const float *restrict s0, const float *restrict s1,
                  const float *restrict s2, const float *restrict s3, const float w[4], int64_t n)
{
    float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (int64_t c = 0; c < n; c++)
        a[c] += w0 * s0[c] + w1 * s1[c] + w2 * s2[c] + w3 * s3[c];
}

RA_CLONES static void axmax(float *restrict a, const float *restrict s, float w, int64_t n)
{
    for (int64_t c = 0; c < n; c++) {
        float v = w * s[c];
        a[c] = v > a[c] ? v : a[c];
    }
}

/* float32, channels last: every tap is a multiply-add over C contiguous
 * floats of the transposed map, per bin into acc ([bins, C]). */
static void roi_channels_last(const ra_job *j, int64_t r, int64_t b, const ra_sample *tap,
                              int64_t per, float *acc)
{
    int64_t q_n = j->oh * j->ow, ch = j->ch;
    const float *xt = j->xt + b * j->h * j->w * ch;
    const ra_sample *p = tap;
    for (int64_t q = 0; q < q_n; q++) {
        float *a = acc + q * ch;
        float init = j->avg || per == 0 ? 0.0f : -INFINITY;
        for (int64_t c = 0; c < ch; c++)
            a[c] = init;
        for (int64_t i = 0; i < per; i++, p++) {
            if (p->o[0] < 0) {
                if (!j->avg)
                    for (int64_t c = 0; c < ch; c++)
                        a[c] = a[c] > 0.0f ? a[c] : 0.0f;
                continue;
            }
            if (j->avg) {
                float w[4] = {(float)p->w[0], (float)p->w[1], (float)p->w[2], (float)p->w[3]};
                axpy4(a, xt + (int64_t)p->o[0] * ch, xt + (int64_t)p->o[1] * ch,
                      xt + (int64_t)p->o[2] * ch, xt + (int64_t)p->o[3] * ch, w, ch);
                continue;
            }
            for (int k = 0; k < 4; k++)
                axmax(a, xt + (int64_t)p->o[k] * ch, (float)p->w[k], ch);
        }
    }
    float *y = j->y + r * ch * q_n;
    for (int64_t c = 0; c < ch; c++)
        for (int64_t q = 0; q < q_n; q++)
            y[c * q_n + q] = acc[q * ch + c];
}

/* Rois [begin, end) on pool thread `thread`. */
static void ra_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const ra_job *j = ctx;
    char *mine = j->per_thread + (size_t)thread * j->thread_bytes;
    ra_sample *tap = (ra_sample *)mine;
    float *acc = (float *)(mine + (((size_t)j->cap + 1) * sizeof(ra_sample) + 63) / 64 * 64);
    for (int64_t r = begin; r < end; r++) {
        int64_t b = kiln_red_ldi(j->bi->dtype, j->bi->data, r), per;
        double count;
        roi_taps(j, r, tap, &per, &count, j->avg);
        if (j->xt)
            roi_channels_last(j, r, b, tap, per, acc);
        else
            roi_planes(j, r, b, tap, per);
    }
}

/* x [N, C, H, W] -> xt [N, H, W, C], pixel rows [begin, end) of N*H*W. */
typedef struct ra_tr {
    const float *x;
    float *xt;
    int64_t ch, hw;
} ra_tr;

static void transpose_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const ra_tr *t = ctx;
    enum { CB = 16 };
    for (int64_t p0 = begin; p0 < end; p0 += CB) {
        int64_t p1 = p0 + CB < end ? p0 + CB : end;
        for (int64_t c = 0; c < t->ch; c++)
            for (int64_t p = p0; p < p1; p++) {
                int64_t b = p / t->hw, px = p % t->hw;
                t->xt[p * t->ch + c] = t->x[(b * t->ch + c) * t->hw + px];
            }
    }
}

/* Other dtypes: the reference's double arithmetic, serially. */
static void roi_generic(const ra_job *j, vm_node *n, int64_t r, int64_t b, ra_sample *tap)
{
    int64_t per, q_n = j->oh * j->ow, hw = j->h * j->w;
    double count;
    roi_taps(j, r, tap, &per, &count, false);
    for (int64_t c = 0; c < j->ch; c++) {
        int64_t plane = (b * j->ch + c) * hw, dst = (r * j->ch + c) * q_n;
        const ra_sample *p = tap;
        for (int64_t q = 0; q < q_n; q++) {
            double acc = j->avg ? 0 : -INFINITY;
            for (int64_t i = 0; i < per; i++, p++) {
                double v[4] = {0, 0, 0, 0};
                for (int k = 0; k < 4 && p->o[0] >= 0; k++)
                    v[k] = p->w[k] * kiln_red_ldf(j->x->dtype, j->x->data, plane + p->o[k]);
                if (j->avg)
                    acc += v[0] + v[1] + v[2] + v[3];
                else
                    acc = fmax(acc, fmax(fmax(v[0], v[1]), fmax(v[2], v[3])));
            }
            kiln_ew_store_f64(j->x->dtype, n->own[0].data, dst + q,
                              j->avg ? acc / count : (per > 0 ? acc : 0));
        }
    }
}

kiln_status kiln_vm_roialign_run(const kiln_vm *vm, vm_node *n, const kiln_tensor *const *in,
                                 kiln_error *err)
{
    const kiln_tensor *x = in[0], *rois = in[1], *bi = n->n_in > 2 ? in[2] : NULL;
    if (!rois || !bi || x->shape.rank != 4 || rois->shape.rank != 2 || rois->shape.dims[1] != 4 ||
        bi->shape.rank != 1 || bi->shape.dims[0] != rois->shape.dims[0] ||
        !kiln_red_is_float(x->dtype) || !kiln_red_is_float(rois->dtype))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (RoiAlign): X must be [N, C, H, W] (float), rois [R, 4] "
                           "and batch_indices [R]",
                           n->name);
    char b1[32], b2[32];
    const char *ct = kiln_vm_opset(vm) < 16
                         ? "output_half_pixel"
                         : kiln_vm_attr_str(n, "coordinate_transformation_mode", "half_pixel",
                                            b1, sizeof b1);
    ra_job j = {.x = x, .rois = rois, .bi = bi};
    j.half = !strcmp(ct, "half_pixel");
    j.avg = !strcmp(kiln_vm_attr_str(n, "mode", "avg", b2, sizeof b2), "avg");
    const Onnx__AttributeProto *sa = kiln_vm_attr(n->np, "spatial_scale");
    j.scale = sa ? (double)sa->f : 1.0, j.off = j.half ? 0.5 : 0;
    j.ratio = attr_int(n, "sampling_ratio", 0);
    j.oh = attr_int(n, "output_height", 1), j.ow = attr_int(n, "output_width", 1);
    int64_t nb = x->shape.dims[0];
    j.ch = x->shape.dims[1], j.h = x->shape.dims[2], j.w = x->shape.dims[3];
    int64_t nr = rois->shape.dims[0];
    if (j.oh < 1 || j.ow < 1 || j.ratio < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s' (RoiAlign): output %lldx%lld, sampling_ratio %lld", n->name,
                           (long long)j.oh, (long long)j.ow, (long long)j.ratio);
    if (j.h * j.w > INT32_MAX || j.oh * j.ow > (1 << 20))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s' (RoiAlign): a %lldx%lld map into %lldx%lld bins", n->name,
                           (long long)j.h, (long long)j.w, (long long)j.oh, (long long)j.ow);
    kiln_shape sh = {.rank = 4, .dims = {nr, j.ch, j.oh, j.ow}};
    kiln_status s = kiln_vm_set_out(n, 0, x->dtype, &sh, err);
    if (s != KILN_OK)
        return s;
    /* checks, the largest sample grid and the taps in all, before any work */
    double taps = 0;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = kiln_red_ldi(bi->dtype, bi->data, r);
        if (b < 0 || b >= nb)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "node '%s' (RoiAlign): batch_indices[%lld] = %lld, the batch has "
                               "%lld",
                               n->name, (long long)r, (long long)b, (long long)nb);
        double c4[4], rw, rh;
        roi_corners(&j, r, c4, &rw, &rh);
        double gh, gw;
        roi_grid(&j, rw, rh, &gh, &gw);
        if (!(gh * gw <= 1 << 20))
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s' (RoiAlign): roi %lld has a "
                               "%g x %g sample grid", n->name, (long long)r, gh, gw);
        int64_t need = j.oh * j.ow * (int64_t)gh * (int64_t)gw;
        j.cap = need > j.cap ? need : j.cap;
        taps += (double)need * 4;
    }
    const kiln_vm *root = kiln_vm_root(vm);
    const kiln_rt *rt = root->smod ? &root->smod->rt : NULL;
    int threads = rt && rt->num_threads > 1 ? rt->num_threads : 1;
    bool f32 = x->dtype == KILN_DTYPE_FLOAT32;
    bool last = f32 && j.ch >= 8 && taps * (double)j.ch >= 4.0 * (double)(nb * j.ch * j.h * j.w);
    size_t tap_bytes = ((size_t)j.cap + 1) * sizeof(ra_sample);
    j.thread_bytes = (tap_bytes + 63) / 64 * 64;
    if (last)
        j.thread_bytes += ((size_t)(j.oh * j.ow * j.ch) * sizeof(float) + 63) / 64 * 64;
    size_t xt_bytes = last ? (size_t)(nb * j.h * j.w * j.ch) * sizeof(float) : 0;
    char *mem = kiln_vm_scratch(n, 64 + xt_bytes + j.thread_bytes * (size_t)(f32 ? threads : 1));
    if (!mem)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    mem += (64 - (uintptr_t)mem % 64) % 64;
    if (!f32) {
        j.per_thread = mem;
        for (int64_t r = 0; r < nr; r++)
            roi_generic(&j, n, r, kiln_red_ldi(bi->dtype, bi->data, r), (ra_sample *)mem);
        return KILN_OK;
    }
    j.y = n->own[0].data;
    if (last) {
        ra_tr t = {x->data, (float *)mem, j.ch, j.h * j.w};
        j.xt = t.xt;
        if (threads > 1)
            rt->parallel_for(rt->pool, nb * j.h * j.w, 64, transpose_task, &t);
        else
            transpose_task(&t, 0, nb * j.h * j.w, 0);
    }
    j.per_thread = mem + xt_bytes;
    if (threads > 1)
        rt->parallel_for(rt->pool, nr, 1, ra_task, &j);
    else
        ra_task(&j, 0, nr, 0);
    return KILN_OK;
}
