/* vm/vm_kernels.c: the VM's own kernels for ops whose output shape depends
 * on input values: NonZero, Compress, NonMaxSuppression and TopK (k an
 * input). The VM runs them directly on the run-time tensors, with no
 * conversion and no shape class: the output extent is computed from the
 * values, and the result lands in the node's own buffers (grown when a run
 * needs more, reused across runs), so a detection network's new image
 * converts nothing here. Their semantics are the importer's, which computes
 * the same ops at conversion when the inputs are constants
 * (import/onnx/convert_data.c, convert_reduce.c):
 *
 * - NonZero: int64 [rank, nnz], coordinates in row-major order; a scalar
 *   gives [0, 0 or 1] (numpy's argwhere of a 0-d array).
 * - Compress: the slices along `axis` (or the flattened input) whose
 *   condition entry is true; the condition may be shorter than the axis.
 * - NonMaxSuppression: per batch and class, the boxes whose score exceeds
 *   score_threshold (when given) in descending score order (ties in box
 *   order), each kept unless its IoU with a kept box exceeds iou_threshold,
 *   at most max_output_boxes_per_class; int64 [selected, 3] rows (batch,
 *   class, box). Boxes are corners in either order, or centers
 *   (center_point_box).
 * - TopK: the k best along `axis` (largest or smallest), sorted, ties to the
 *   lower index, NaN above every number: a stable merge sort of the lane's
 *   indices, O(n log n) per lane where the reference kernel is O(n k).
 *   Keys are doubles: 64-bit integers beyond 2^53 compare rounded.
 * - RoiAlign: not data-dependent in shape, but detection heads run it on a
 *   data-dependent number of rois: the reference kernel's rules, with each
 *   roi's bilinear taps computed once for all channels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static bool nonzero_at(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_DTYPE_BOOL:
    case KILN_DTYPE_UINT8:
    case KILN_DTYPE_INT8: return ((const uint8_t *)t->data)[i] != 0;
    case KILN_DTYPE_FLOAT32: return ((const float *)t->data)[i] != 0;
    case KILN_DTYPE_INT64: return ((const int64_t *)t->data)[i] != 0;
    case KILN_DTYPE_INT32: return ((const int32_t *)t->data)[i] != 0;
    default:
        return kiln_red_is_float(t->dtype) ? kiln_red_ldf(t->dtype, t->data, i) != 0
                                           : kiln_red_ldi(t->dtype, t->data, i) != 0;
    }
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

/* Sorts idx[0..n) stably by key (descending when `desc`; NaN greatest),
 * through tmp[0..n). */
static void sort_desc(int64_t *idx, int64_t *tmp, int64_t n, const double *key, bool desc)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    sort_desc(idx, tmp, h, key, desc);
    sort_desc(idx + h, tmp, n - h, key, desc);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        double a = key[idx[j]], b = key[idx[i]];
        bool an = isnan(a), bn = isnan(b);
        /* does the right one strictly precede the left one? */
        bool before = (an || bn) ? (desc ? an && !bn : bn && !an) : desc ? a > b : a < b;
        tmp[k++] = before ? idx[j++] : idx[i++];
    }
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
}

/* ---- NonZero, Compress --------------------------------------------------------- */

static kiln_status run_nonzero(vm_node *n, const kiln_tensor *x, kiln_error *err)
{
    int64_t total = kiln_shape_numel(&x->shape), nnz = 0;
    for (int64_t i = 0; i < total; i++)
        nnz += nonzero_at(x, i);
    kiln_shape sh = {.rank = 2, .dims = {x->shape.rank, nnz}};
    kiln_status s = set_out(n, 0, KILN_DTYPE_INT64, &sh, err);
    if (s != KILN_OK)
        return s;
    int64_t *o = n->own[0].data, col = 0;
    for (int64_t i = 0; i < total; i++) {
        if (!nonzero_at(x, i))
            continue;
        int64_t r = i;
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            o[d * nnz + col] = r % x->shape.dims[d];
            r /= x->shape.dims[d];
        }
        col++;
    }
    return KILN_OK;
}

static kiln_status run_compress(vm_node *n, const kiln_tensor *x, const kiln_tensor *cond,
                                kiln_error *err)
{
    if (cond->shape.rank != 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (Compress): condition must be 1-D", n->name);
    bool has_axis = attr(n, "axis") != NULL;
    int64_t axis = attr_int(n, "axis", 0);
    int rank = x->shape.rank;
    if (has_axis && axis < 0)
        axis += rank;
    if (has_axis && (axis < 0 || axis >= rank))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s' (Compress): axis %lld",
                           n->name, (long long)attr_int(n, "axis", 0));
    int64_t outer = 1, len = kiln_shape_numel(&x->shape), inner = 1;
    if (has_axis) {
        len = x->shape.dims[axis];
        for (int d = 0; d < axis; d++)
            outer *= x->shape.dims[d];
        for (int d = (int)axis + 1; d < rank; d++)
            inner *= x->shape.dims[d];
    }
    int64_t nc = cond->shape.dims[0], kept = 0;
    if (nc > len)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (Compress): condition has %lld entries, the axis %lld",
                           n->name, (long long)nc, (long long)len);
    for (int64_t i = 0; i < nc; i++)
        kept += nonzero_at(cond, i);
    kiln_shape sh = x->shape;
    if (has_axis)
        sh.dims[axis] = kept;
    else
        sh = (kiln_shape){.rank = 1, .dims = {kept}};
    kiln_status s = set_out(n, 0, x->dtype, &sh, err);
    if (s != KILN_OK)
        return s;
    size_t row = kiln_dtype_size(x->dtype) * (size_t)inner;
    char *dst = n->own[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < nc; i++)
            if (nonzero_at(cond, i)) {
                memcpy(dst, (const char *)x->data + (size_t)(o * len + i) * row, row);
                dst += row;
            }
    return KILN_OK;
}

/* ---- NonMaxSuppression ----------------------------------------------------------- */

typedef struct nms_box {
    double y1, x1, y2, x2, area;
} nms_box;

static nms_box get_box(const kiln_tensor *b, int64_t at, bool center)
{
    double v[4];
    for (int k = 0; k < 4; k++)
        v[k] = b->dtype == KILN_DTYPE_FLOAT32 ? ((const float *)b->data)[at + k]
                                              : kiln_red_ldf(b->dtype, b->data, at + k);
    nms_box r;
    if (center) {
        r.x1 = v[0] - v[2] / 2;
        r.x2 = v[0] + v[2] / 2;
        r.y1 = v[1] - v[3] / 2;
        r.y2 = v[1] + v[3] / 2;
    } else {
        r.y1 = fmin(v[0], v[2]);
        r.y2 = fmax(v[0], v[2]);
        r.x1 = fmin(v[1], v[3]);
        r.x2 = fmax(v[1], v[3]);
    }
    r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
    return r;
}

static inline double iou(const nms_box *a, const nms_box *b)
{
    if (a->area <= 0 || b->area <= 0)
        return 0;
    double h = (a->y2 < b->y2 ? a->y2 : b->y2) - (a->y1 > b->y1 ? a->y1 : b->y1);
    double w = (a->x2 < b->x2 ? a->x2 : b->x2) - (a->x1 > b->x1 ? a->x1 : b->x1);
    if (h <= 0 || w <= 0)
        return 0;
    double inter = h * w;
    return inter / (a->area + b->area - inter);
}

/* Kept boxes, indexed for the suppression test by a grid of NMS_GRID
 * buckets along x: a kept box is listed in every bucket its [x1, x2] covers
 * (in a list checked by everyone when it covers more than NMS_SPAN). A
 * positive IoU needs overlapping x ranges, which share a bucket, so with
 * iou_threshold >= 0 a candidate need only meet the kept boxes of the buckets
 * it covers: the same result as testing every kept box, in far fewer tests
 * when the boxes spread out (a batched NMS offsets each class's boxes apart).
 * Non-finite coordinates or a negative threshold test every kept box. */
#define NMS_GRID 1024
#define NMS_SPAN 8

typedef struct nms_grid {
    bool all;            /* test every kept box (no grid) */
    double x0, scale;    /* bucket(x) = (x - x0) * scale */
    int32_t *head;       /* NMS_GRID list heads, -1: empty */
    int32_t *ent, *next; /* entries: kept box (index into bx), next entry */
    int32_t n_ent;
    int32_t *wide;       /* kept boxes covering more than NMS_SPAN buckets */
    int32_t n_wide;
} nms_grid;

static int bucket(const nms_grid *g, double x)
{
    double b = (x - g->x0) * g->scale;
    return b <= 0 ? 0 : b >= NMS_GRID - 1 ? NMS_GRID - 1 : (int)b;
}

/* Whether box i is suppressed by a kept box (kept[0..nk) when g->all). */
static bool suppressed(const nms_grid *g, const nms_box *bx, int64_t i, const int64_t *kept,
                       int64_t nk, double th)
{
    const nms_box *bi = &bx[i];
    if (g->all) {
        for (int64_t j = 0; j < nk; j++)
            if (iou(bi, &bx[kept[j]]) > th)
                return true;
        return false;
    }
    for (int32_t j = 0; j < g->n_wide; j++)
        if (iou(bi, &bx[g->wide[j]]) > th)
            return true;
    for (int b = bucket(g, bi->x1), e = bucket(g, bi->x2); b <= e; b++)
        for (int32_t q = g->head[b]; q >= 0; q = g->next[q])
            if (iou(bi, &bx[g->ent[q]]) > th)
                return true;
    return false;
}

static void grid_add(nms_grid *g, int32_t box, const nms_box *b)
{
    if (g->all)
        return;
    int lo = bucket(g, b->x1), hi = bucket(g, b->x2);
    if (hi - lo >= NMS_SPAN) {
        g->wide[g->n_wide++] = box;
        return;
    }
    for (int k = lo; k <= hi; k++) {
        g->ent[g->n_ent] = box;
        g->next[g->n_ent] = g->head[k];
        g->head[k] = g->n_ent++;
    }
}

static kiln_status run_nms(vm_node *n, const kiln_tensor *const *in, kiln_error *err)
{
    const kiln_tensor *boxes = in[0], *scores = in[1];
    if (!boxes || !scores)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "node '%s' (NonMaxSuppression): boxes and scores are required", n->name);
    if (boxes->shape.rank != 3 || boxes->shape.dims[2] != 4 || scores->shape.rank != 3 ||
        scores->shape.dims[0] != boxes->shape.dims[0] ||
        scores->shape.dims[2] != boxes->shape.dims[1])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (NonMaxSuppression): boxes must be [B, N, 4] and scores "
                           "[B, C, N]",
                           n->name);
    double max_out, iou_th, score_th;
    kiln_status s = param(n, n->n_in > 2 ? in[2] : NULL, 2, "max_output_boxes_per_class", 0,
                          &max_out, err);
    if (s == KILN_OK)
        s = param(n, n->n_in > 3 ? in[3] : NULL, 3, "iou_threshold", 0, &iou_th, err);
    if (s == KILN_OK)
        s = param(n, n->n_in > 4 ? in[4] : NULL, 4, "score_threshold", -INFINITY, &score_th,
                  err);
    if (s != KILN_OK)
        return s;
    bool has_score_th = n->n_in > 4 && in[4];
    bool center = attr_int(n, "center_point_box", 0) != 0;
    int64_t nb = boxes->shape.dims[0], nbox = boxes->shape.dims[1], ncls = scores->shape.dims[1];
    if (nbox > INT32_MAX / (NMS_SPAN + 1))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "node '%s' (NonMaxSuppression): %lld boxes", n->name, (long long)nbox);
    int64_t limit = max_out > (double)nbox ? nbox : max_out < 0 ? 0 : (int64_t)max_out;
    /* scratch: per box a box, a score, order, sort buffer, kept and the
     * grid's entries; the grid heads; then the selection (3 per kept box,
     * at most nb * ncls * limit of them) */
    size_t per = sizeof(nms_box) + sizeof(double) + 3 * sizeof(int64_t) +
                 (2 * NMS_SPAN + 1) * sizeof(int32_t);
    int64_t cap = nb * ncls * limit;
    char *w = scratch(n, per * (size_t)(nbox + 1) + sizeof(int32_t) * NMS_GRID +
                             sizeof(int64_t) * (size_t)(3 * cap + 1));
    if (!w)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    nms_box *bx = (nms_box *)w;
    double *sc = (double *)(bx + nbox + 1);
    int64_t *order = (int64_t *)(sc + nbox + 1), *tmp = order + nbox, *kept = tmp + nbox;
    int64_t *sel = kept + nbox, n_sel = 0;
    nms_grid g = {.head = (int32_t *)(sel + 3 * cap + 1)};
    g.ent = g.head + NMS_GRID;
    g.next = g.ent + (size_t)nbox * NMS_SPAN;
    g.wide = g.next + (size_t)nbox * NMS_SPAN;
    for (int64_t b = 0; b < nb; b++) {
        double lo = INFINITY, hi = -INFINITY, width = 0;
        bool finite = true;
        for (int64_t i = 0; i < nbox; i++) {
            bx[i] = get_box(boxes, (b * nbox + i) * 4, center);
            finite &= isfinite(bx[i].x1) && isfinite(bx[i].x2) && isfinite(bx[i].y1) &&
                      isfinite(bx[i].y2);
            lo = fmin(lo, bx[i].x1);
            hi = fmax(hi, bx[i].x2);
            width += bx[i].x2 - bx[i].x1;
        }
        g.all = !finite || !(iou_th >= 0) || nbox < 2 * NMS_SPAN;
        /* buckets of half the mean box width (a box covers about 3), at
         * least the range over NMS_GRID */
        double bw = fmax((hi - lo) / NMS_GRID, width / (double)(nbox ? nbox : 1) / 2);
        g.x0 = lo;
        g.scale = bw > 0 ? 1 / bw : 0;
        for (int64_t cl = 0; cl < ncls; cl++) {
            int64_t cnt = 0, nk = 0;
            for (int64_t i = 0; i < nbox; i++) {
                int64_t at = (b * ncls + cl) * nbox + i;
                sc[i] = scores->dtype == KILN_DTYPE_FLOAT32
                            ? ((const float *)scores->data)[at]
                            : kiln_red_ldf(scores->dtype, scores->data, at);
                if (!has_score_th || sc[i] > score_th)
                    order[cnt++] = i;
            }
            sort_desc(order, tmp, cnt, sc, true);
            if (!g.all)
                for (int k = 0; k < NMS_GRID; k++)
                    g.head[k] = -1;
            g.n_ent = g.n_wide = 0;
            for (int64_t i = 0; i < cnt && nk < limit; i++) {
                if (suppressed(&g, bx, order[i], kept, nk, iou_th))
                    continue;
                kept[nk++] = order[i];
                grid_add(&g, (int32_t)order[i], &bx[order[i]]);
                sel[3 * n_sel] = b;
                sel[3 * n_sel + 1] = cl;
                sel[3 * n_sel + 2] = order[i];
                n_sel++;
            }
        }
    }
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
            sort_desc(idx, tmp, len, key, largest);
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
        double c4[4];
        for (int k = 0; k < 4; k++)
            c4[k] = kiln_red_ldf(rois->dtype, rois->data, r * 4 + k) * scale - off;
        double rw = c4[2] - c4[0], rh = c4[3] - c4[1];
        if (!half)
            rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
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
        double c4[4];
        for (int k = 0; k < 4; k++)
            c4[k] = kiln_red_ldf(rois->dtype, rois->data, r * 4 + k) * scale - off;
        double rw = c4[2] - c4[0], rh = c4[3] - c4[1];
        if (!half)
            rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
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
