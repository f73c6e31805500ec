/* vm/vm_kernels.c: the VM's own kernels for ops whose output shape depends
 * on input values: NonZero, Compress, NonMaxSuppression and TopK (k an
 * input). The VM runs them directly on the run-time tensors, with no
 * conversion and no shape class: the output extent is computed from the
 * values, and the result lands in the node's own buffers (grown when a run
 * needs more, reused across runs), so a detection network's new image
 * converts nothing here.
 *
 * - NonZero, Compress, NonMaxSuppression: the kernels of ref/data_dependent.c
 *   (the header states their semantics), which the importer also runs when
 *   the inputs are constants (import/onnx/convert_data.c); here, the inputs'
 *   parameters are read, the output reserved and the node named in errors.
 * - TopK: the k best along `axis` (largest or smallest), sorted, ties to the
 *   lower index, NaN above every number: a stable merge sort of the lane's
 *   indices (kiln_dd_sort_by_key), O(n log n) per lane where the reference
 *   kernel (ref/topk.c, the importer's TopK with a constant k) is O(n k).
 *   Keys are doubles: 64-bit integers beyond 2^53 compare rounded.
 * - RoiAlign: not data-dependent in shape, but detection heads run it on a
 *   data-dependent number of rois: the reference kernel's rules, with each
 *   roi's bilinear taps computed once for all channels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/data_dependent.h"
#include "ref/elemwise_common.h"
#include "ref/red_num.h"
#include "util/error.h"
#include "vm/vm_internal.h"

bool kiln_vm_kernel_op(const char *op)
{
    return op && (!strcmp(op, "NonZero") || !strcmp(op, "Compress") ||
                  !strcmp(op, "NonMaxSuppression") || !strcmp(op, "TopK") ||
                  !strcmp(op, "RoiAlign"));
}

/* ---- helpers ------------------------------------------------------------------ */

static const Onnx__AttributeProto *attr(const vm_node *n, const char *name)
{
    for (size_t a = 0; a < n->np->n_attribute; a++)
        if (n->np->attribute[a]->name && !strcmp(n->np->attribute[a]->name, name))
            return n->np->attribute[a];
    return NULL;
}

static int64_t attr_int(const vm_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->i : def;
}

/* The node's scratch memory, at least `bytes` (grown, never shrunk). */
static void *scratch(vm_node *n, size_t bytes)
{
    if (bytes > n->scratch_cap || !n->scratch) {
        void *p = realloc(n->scratch, bytes ? bytes : 1);
        if (!p)
            return NULL;
        n->scratch = p;
        n->scratch_cap = bytes ? bytes : 1;
    }
    return n->scratch;
}

/* Output k as (dtype, shape), its data reserved. */
static kiln_status set_out(vm_node *n, int k, kiln_dtype dt, const kiln_shape *sh,
                           kiln_error *err)
{
    int64_t nb = kiln_shape_numel(sh) * (int64_t)kiln_dtype_size(dt);
    if (nb < 0 || !kiln_vm_reserve(n, k, (size_t)nb))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    n->own[k].dtype = dt;
    n->own[k].shape = *sh;
    return KILN_OK;
}

/* One element of a scalar-ish parameter input as a double; def if absent. */
static kiln_status param(const vm_node *n, const kiln_tensor *t, int k, const char *what,
                         double def, double *v, kiln_error *err)
{
    *v = def;
    if (!t)
        return KILN_OK;
    if (kiln_shape_numel(&t->shape) != 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (%s): input %d (%s) must have one element", n->name,
                           n->np->op_type, k, what);
    *v = kiln_red_is_float(t->dtype) ? kiln_red_ldf(t->dtype, t->data, 0)
                                     : (double)kiln_red_ldi(t->dtype, t->data, 0);
    return KILN_OK;
}

/* ---- NonZero, Compress --------------------------------------------------------- */

/* Prefixes a message of the shared kernels (ref/data_dependent.c) with the node. */
static kiln_status node_error(const vm_node *n, kiln_status s, kiln_error *err)
{
    return kiln_error_prefix(err, s, "node '%s' (%s): ", n->name, n->np->op_type);
}

static kiln_status run_nonzero(vm_node *n, const kiln_tensor *x, kiln_error *err)
{
    kiln_shape sh = kiln_dd_nonzero_shape(x);
    kiln_status s = set_out(n, 0, KILN_DTYPE_INT64, &sh, err);
    if (s == KILN_OK)
        kiln_dd_nonzero(x, sh.dims[1], n->own[0].data);
    return s;
}

static kiln_status run_compress(vm_node *n, const kiln_tensor *x, const kiln_tensor *cond,
                                kiln_error *err)
{
    kiln_dd_compress_plan p;
    kiln_status s = kiln_dd_compress_plan_make(x, cond, attr(n, "axis") != NULL,
                                               attr_int(n, "axis", 0), &p, err);
    if (s != KILN_OK)
        return node_error(n, s, err);
    if ((s = set_out(n, 0, x->dtype, &p.shape, err)) == KILN_OK)
        kiln_dd_compress(x, cond, &p, n->own[0].data);
    return s;
}

/* ---- NonMaxSuppression ----------------------------------------------------------- */

static kiln_status run_nms(vm_node *n, const kiln_tensor *const *in, kiln_error *err)
{
    const kiln_tensor *boxes = in[0], *scores = in[1];
    if (!boxes || !scores)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "node '%s' (NonMaxSuppression): boxes and scores are required", n->name);
    kiln_dd_nms_params prm = {.has_score_threshold = n->n_in > 4 && in[4],
                              .center_point_box = attr_int(n, "center_point_box", 0) != 0};
    kiln_status s = param(n, n->n_in > 2 ? in[2] : NULL, 2, "max_output_boxes_per_class", 0,
                          &prm.max_output_boxes_per_class, err);
    if (s == KILN_OK)
        s = param(n, n->n_in > 3 ? in[3] : NULL, 3, "iou_threshold", 0, &prm.iou_threshold, err);
    if (s == KILN_OK)
        s = param(n, n->n_in > 4 ? in[4] : NULL, 4, "score_threshold", -INFINITY,
                  &prm.score_threshold, err);
    if (s != KILN_OK)
        return s;
    kiln_dd_nms_plan p;
    if ((s = kiln_dd_nms_plan_make(boxes, scores, &prm, &p, err)) != KILN_OK)
        return node_error(n, s, err);
    void *w = scratch(n, p.workspace);
    if (!w)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    const int64_t *sel;
    int64_t n_sel = kiln_dd_nms(boxes, scores, &prm, &p, w, &sel);
    kiln_shape sh = {.rank = 2, .dims = {n_sel, 3}};
    if ((s = set_out(n, 0, KILN_DTYPE_INT64, &sh, err)) != KILN_OK)
        return s;
    if (n_sel)
        memcpy(n->own[0].data, sel, sizeof(int64_t) * (size_t)(3 * n_sel));
    return KILN_OK;
}

/* ---- TopK ------------------------------------------------------------------------ */

static kiln_status run_topk(vm_node *n, const kiln_tensor *const *in, kiln_error *err)
{
    const kiln_tensor *x = in[0];
    int64_t k = attr_int(n, "k", -1);
    if (n->n_in > 1 && in[1]) {
        if (kiln_shape_numel(&in[1]->shape) != 1 || kiln_red_is_float(in[1]->dtype))
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "node '%s' (TopK): K must be one integer", n->name);
        k = kiln_red_ldi(in[1]->dtype, in[1]->data, 0);
    }
    int rank = x->shape.rank;
    int64_t a = attr_int(n, "axis", -1);
    if (rank == 0 || a < -rank || a >= rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s' (TopK): axis %lld of rank %d",
                           n->name, (long long)a, rank);
    int axis = (int)(a < 0 ? a + rank : a);
    int64_t len = x->shape.dims[axis], outer = 1, inner = 1;
    if (k < 0 || k > len)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s' (TopK): k %lld outside [0, %lld]", n->name, (long long)k,
                           (long long)len);
    for (int d = 0; d < axis; d++)
        outer *= x->shape.dims[d];
    for (int d = axis + 1; d < rank; d++)
        inner *= x->shape.dims[d];
    bool largest = attr_int(n, "largest", 1) != 0;
    kiln_shape sh = x->shape;
    sh.dims[axis] = k;
    kiln_status s = set_out(n, 0, x->dtype, &sh, err);
    if (s == KILN_OK && n->n_out > 1)
        s = set_out(n, 1, KILN_DTYPE_INT64, &sh, err);
    if (s != KILN_OK)
        return s;
    bool fl = kiln_red_is_float(x->dtype), u64 = x->dtype == KILN_DTYPE_UINT64;
    double *key = scratch(n, (sizeof(double) + 2 * sizeof(int64_t)) * (size_t)(len + 1));
    if (!key)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    int64_t *idx = (int64_t *)(key + len + 1), *tmp = idx + len;
    size_t es = kiln_dtype_size(x->dtype);
    char *vals = n->own[0].data;
    int64_t *oidx = n->n_out > 1 ? n->own[1].data : NULL;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            for (int64_t j = 0; j < len; j++) {
                int64_t at = base + j * inner;
                idx[j] = j;
                if (x->dtype == KILN_DTYPE_FLOAT32)
                    key[j] = ((const float *)x->data)[at];
                else if (fl)
                    key[j] = kiln_red_ldf(x->dtype, x->data, at);
                else if (u64)
                    key[j] = (double)(uint64_t)kiln_red_ldi(x->dtype, x->data, at);
                else
                    key[j] = (double)kiln_red_ldi(x->dtype, x->data, at);
            }
            kiln_dd_sort_by_key(idx, tmp, len, key, largest);
            for (int64_t j = 0; j < k; j++) {
                int64_t dst = o * k * inner + j * inner + i;
                memcpy(vals + (size_t)dst * es, (const char *)x->data + (size_t)(base + idx[j] * inner) * es, es);
                if (oidx)
                    oidx[dst] = idx[j];
            }
        }
    return KILN_OK;
}

/* ---- RoiAlign ---------------------------------------------------------------------- */

/* The reference kernel's rules (ref/misc.c, ONNX Runtime's), reorganized as
 * ONNX Runtime does: per roi, the bilinear taps of every sample (4 offsets,
 * 4 weights) are computed once, then applied to every channel. */
typedef struct roi_tap {
    int64_t o[4];
    double w[4];
} roi_tap;

static const char *attr_str(const vm_node *n, const char *name, const char *def, char *buf,
                            size_t cap)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a || !a->s.data)
        return def;
    size_t len = a->s.len < cap - 1 ? a->s.len : cap - 1;
    memcpy(buf, a->s.data, len);
    buf[len] = '\0';
    return buf;
}

static int64_t model_opset(const kiln_vm *vm)
{
    for (size_t i = 0; i < vm->m->n_opset_import; i++) {
        const char *d = vm->m->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx"))
            return vm->m->opset_import[i]->version;
    }
    return 1;
}

/* Roi r's corners in input pixels (c4: x1, y1, x2, y2, each * scale - off)
 * and its width and height (*rw, *rh: at least 1 unless half_pixel). */
static void roi_corners(const kiln_tensor *rois, int64_t r, double scale, double off, bool half,
                        double c4[4], double *rw, double *rh)
{
    for (int k = 0; k < 4; k++)
        c4[k] = kiln_red_ldf(rois->dtype, rois->data, r * 4 + k) * scale - off;
    *rw = c4[2] - c4[0], *rh = c4[3] - c4[1];
    if (!half)
        *rw = *rw > 1 ? *rw : 1, *rh = *rh > 1 ? *rh : 1;
}

static kiln_status run_roialign(const kiln_vm *vm, vm_node *n, const kiln_tensor *const *in,
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
    const char *ct = model_opset(vm) < 16
                         ? "output_half_pixel"
                         : attr_str(n, "coordinate_transformation_mode", "half_pixel", b1, sizeof b1);
    bool half = !strcmp(ct, "half_pixel"), avg = !strcmp(attr_str(n, "mode", "avg", b2, sizeof b2), "avg");
    const Onnx__AttributeProto *sa = attr(n, "spatial_scale");
    double scale = sa ? (double)sa->f : 1.0, off = half ? 0.5 : 0;
    int64_t ratio = attr_int(n, "sampling_ratio", 0);
    int64_t oh = attr_int(n, "output_height", 1), ow = attr_int(n, "output_width", 1);
    int64_t nb = x->shape.dims[0], ch = x->shape.dims[1], h = x->shape.dims[2], w = x->shape.dims[3];
    int64_t nr = rois->shape.dims[0];
    if (oh < 1 || ow < 1 || ratio < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s' (RoiAlign): output %lldx%lld, sampling_ratio %lld", n->name,
                           (long long)oh, (long long)ow, (long long)ratio);
    kiln_shape sh = {.rank = 4, .dims = {nr, ch, oh, ow}};
    kiln_status s = set_out(n, 0, x->dtype, &sh, err);
    if (s != KILN_OK)
        return s;
    size_t cap = 0;
    for (int64_t r = 0; r < nr; r++) { /* the largest sample grid, for the scratch */
        double c4[4], rw, rh;
        roi_corners(rois, r, scale, off, half, c4, &rw, &rh);
        double gh = ratio > 0 ? (double)ratio : ceil(rh / (double)oh);
        double gw = ratio > 0 ? (double)ratio : ceil(rw / (double)ow);
        if (!(gh * gw <= 1 << 20))
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s' (RoiAlign): roi %lld has a "
                               "%g x %g sample grid", n->name, (long long)r, gh, gw);
        size_t need = (size_t)(oh * ow) * (size_t)(gh > 0 ? gh : 0) * (size_t)(gw > 0 ? gw : 0);
        cap = need > cap ? need : cap;
    }
    roi_tap *tap = scratch(n, sizeof(roi_tap) * (cap + 1));
    if (!tap)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    bool f32 = x->dtype == KILN_DTYPE_FLOAT32;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = kiln_red_ldi(bi->dtype, bi->data, r);
        if (b < 0 || b >= nb)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "node '%s' (RoiAlign): batch_indices[%lld] = %lld, the batch has "
                               "%lld",
                               n->name, (long long)r, (long long)b, (long long)nb);
        double c4[4], rw, rh;
        roi_corners(rois, r, scale, off, half, c4, &rw, &rh);
        double bh = rh / (double)oh, bw = rw / (double)ow;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)oh);
        int64_t gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)ow);
        gh = gh > 0 ? gh : 0, gw = gw > 0 ? gw : 0;
        double count = gh * gw > 1 ? (double)(gh * gw) : 1;
        int64_t per = gh * gw, t = 0;
        for (int64_t ph = 0; ph < oh; ph++)
            for (int64_t pw = 0; pw < ow; pw++)
                for (int64_t iy = 0; iy < gh; iy++)
                    for (int64_t ix = 0; ix < gw; ix++, t++) {
                        double yy = c4[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        double xx = c4[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                        roi_tap *p = &tap[t];
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
                        p->o[0] = y0 * w + x0, p->o[1] = y0 * w + x1;
                        p->o[2] = y1 * w + x0, p->o[3] = y1 * w + x1;
                        p->w[0] = hy * hx, p->w[1] = hy * lx, p->w[2] = ly * hx, p->w[3] = ly * lx;
                    }
        if (f32 && avg) { /* the common case: no dtype switch, no per-tap loop */
            for (int64_t cc = 0; cc < ch; cc++) {
                const float *xf = (const float *)x->data + (b * ch + cc) * h * w;
                float *yo = (float *)n->own[0].data + (r * ch + cc) * oh * ow;
                const roi_tap *p = tap;
                for (int64_t q = 0; q < oh * ow; q++) {
                    double acc = 0;
                    for (int64_t i = 0; i < per; i++, p++)
                        if (p->o[0] >= 0)
                            acc += p->w[0] * (double)xf[p->o[0]] + p->w[1] * (double)xf[p->o[1]] +
                                   p->w[2] * (double)xf[p->o[2]] + p->w[3] * (double)xf[p->o[3]];
                    yo[q] = (float)(acc / count);
                }
            }
            continue;
        }
        for (int64_t cc = 0; cc < ch; cc++) {
            int64_t plane = (b * ch + cc) * h * w, dst = (r * ch + cc) * oh * ow;
            const float *xf = (const float *)x->data + plane;
            const roi_tap *p = tap;
            for (int64_t q = 0; q < oh * ow; q++) {
                double acc = avg ? 0 : -INFINITY;
                for (int64_t i = 0; i < per; i++, p++) {
                    double v[4] = {0, 0, 0, 0};
                    for (int k = 0; k < 4 && p->o[0] >= 0; k++)
                        v[k] = p->w[k] * (f32 ? (double)xf[p->o[k]]
                                              : kiln_red_ldf(x->dtype, x->data, plane + p->o[k]));
                    if (avg)
                        acc += v[0] + v[1] + v[2] + v[3];
                    else
                        acc = fmax(acc, fmax(fmax(v[0], v[1]), fmax(v[2], v[3])));
                }
                double y = avg ? acc / count : (per > 0 ? acc : 0);
                if (f32)
                    ((float *)n->own[0].data)[dst + q] = (float)y;
                else
                    kiln_ew_store_f64(x->dtype, n->own[0].data, dst + q, y);
            }
        }
    }
    return KILN_OK;
}

/* ---- dispatch -------------------------------------------------------------------- */

kiln_status kiln_vm_kernel_run(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    for (int k = 0; k < n->n_in; k++)
        n->in[k] = kiln_vm_value(vm, n->src[k]);
    const char *op = n->np->op_type;
    kiln_status s;
    if (n->n_in < 1 || !n->in[0])
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s' (%s): input 0 is missing",
                           n->name, op);
    if (!strcmp(op, "NonZero"))
        s = run_nonzero(n, n->in[0], err);
    else if (!strcmp(op, "Compress"))
        s = n->n_in > 1 && n->in[1]
                ? run_compress(n, n->in[0], n->in[1], err)
                : kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                              "node '%s' (Compress): the condition is missing", n->name);
    else if (!strcmp(op, "NonMaxSuppression"))
        s = run_nms(n, n->in, err);
    else if (!strcmp(op, "RoiAlign"))
        s = run_roialign(vm, n, n->in, err);
    else
        s = run_topk(n, n->in, err);
    if (s != KILN_OK)
        return s;
    for (int k = 0; k < n->n_out; k++)
        n->out[k] = &n->own[k];
    return KILN_OK;
}
