/* ref/data_dependent.c: NonZero, Compress and NonMaxSuppression for the
 * importer's constant inputs and the VM's run-time tensors (the header says
 * why here and what they compute). */
#include "ref/data_dependent.h"

#include <math.h>
#include <string.h>

#include "ref/red_num.h"
#include "util/error.h"

bool kiln_dd_nonzero_at(const kiln_tensor *t, int64_t i)
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

void kiln_dd_sort_by_key(int64_t *idx, int64_t *tmp, int64_t n, const double *key, bool desc)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    kiln_dd_sort_by_key(idx, tmp, h, key, desc);
    kiln_dd_sort_by_key(idx + h, tmp, n - h, key, desc);
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

/* ---- NonZero ------------------------------------------------------------------- */

kiln_shape kiln_dd_nonzero_shape(const kiln_tensor *x)
{
    int64_t total = kiln_shape_numel(&x->shape), nnz = 0;
    for (int64_t i = 0; i < total; i++)
        nnz += kiln_dd_nonzero_at(x, i);
    return (kiln_shape){.rank = 2, .dims = {x->shape.rank, nnz}};
}

void kiln_dd_nonzero(const kiln_tensor *x, int64_t nnz, int64_t *out)
{
    int64_t total = kiln_shape_numel(&x->shape), col = 0;
    for (int64_t i = 0; i < total; i++) {
        if (!kiln_dd_nonzero_at(x, i))
            continue;
        int64_t r = i;
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            out[d * nnz + col] = r % x->shape.dims[d];
            r /= x->shape.dims[d];
        }
        col++;
    }
}

/* ---- Compress ------------------------------------------------------------------ */

kiln_status kiln_dd_compress_plan_make(const kiln_tensor *x, const kiln_tensor *cond,
                                       bool has_axis, int64_t axis, kiln_dd_compress_plan *p,
                                       kiln_error *err)
{
    if (cond->shape.rank != 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "condition must be 1-D");
    int rank = x->shape.rank;
    int64_t a = has_axis && axis < 0 ? axis + rank : axis;
    if (has_axis && (a < 0 || a >= rank))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "axis %lld out of range",
                           (long long)axis);
    /* as [outer, len, inner] with the kept entries of the middle dim */
    p->outer = 1, p->len = kiln_shape_numel(&x->shape), p->inner = 1;
    if (has_axis) {
        p->len = x->shape.dims[a];
        for (int d = 0; d < a; d++)
            p->outer *= x->shape.dims[d];
        for (int d = (int)a + 1; d < rank; d++)
            p->inner *= x->shape.dims[d];
    }
    int64_t nc = cond->shape.dims[0], kept = 0;
    if (nc > p->len)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "condition has %lld entries, the axis %lld",
                           (long long)nc, (long long)p->len);
    for (int64_t i = 0; i < nc; i++)
        kept += kiln_dd_nonzero_at(cond, i);
    p->n_cond = nc;
    p->shape = x->shape;
    if (has_axis)
        p->shape.dims[a] = kept;
    else
        p->shape = (kiln_shape){.rank = 1, .dims = {kept}};
    return KILN_OK;
}

void kiln_dd_compress(const kiln_tensor *x, const kiln_tensor *cond,
                      const kiln_dd_compress_plan *p, void *dst)
{
    size_t row = kiln_dtype_size(x->dtype) * (size_t)p->inner;
    char *d = dst;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->n_cond; i++)
            if (kiln_dd_nonzero_at(cond, i)) {
                memcpy(d, (const char *)x->data + (size_t)(o * p->len + i) * row, row);
                d += row;
            }
}

/* ---- NonMaxSuppression --------------------------------------------------------- */

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
 * (in a list checked by everyone when it covers more than NMS_SPAN). With
 * iou_threshold >= 0 a candidate need only meet the kept boxes of the
 * buckets it covers (the header says why). */
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

kiln_status kiln_dd_nms_plan_make(const kiln_tensor *boxes, const kiln_tensor *scores,
                                  const kiln_dd_nms_params *prm, kiln_dd_nms_plan *p,
                                  kiln_error *err)
{
    if (boxes->shape.rank != 3 || boxes->shape.dims[2] != 4 || scores->shape.rank != 3 ||
        scores->shape.dims[0] != boxes->shape.dims[0] ||
        scores->shape.dims[2] != boxes->shape.dims[1])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "boxes must be [B, N, 4] and scores [B, C, N]");
    int64_t nbox = boxes->shape.dims[1];
    if (nbox > INT32_MAX / (NMS_SPAN + 1))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%lld boxes", (long long)nbox);
    double max_out = prm->max_output_boxes_per_class;
    p->batches = boxes->shape.dims[0];
    p->boxes = nbox;
    p->classes = scores->shape.dims[1];
    p->limit = max_out > (double)nbox ? nbox : max_out < 0 ? 0 : (int64_t)max_out;
    p->max_selected = p->batches * p->classes * p->limit;
    /* per box a box, a score, order, sort buffer, kept and the grid's
     * entries; the grid heads; then the selection (3 per kept box) */
    size_t per = sizeof(nms_box) + sizeof(double) + 3 * sizeof(int64_t) +
                 (2 * NMS_SPAN + 1) * sizeof(int32_t);
    p->workspace = per * (size_t)(nbox + 1) + sizeof(int32_t) * NMS_GRID +
                   sizeof(int64_t) * (size_t)(3 * p->max_selected + 1);
    return KILN_OK;
}

int64_t kiln_dd_nms(const kiln_tensor *boxes, const kiln_tensor *scores,
                    const kiln_dd_nms_params *prm, const kiln_dd_nms_plan *p, void *workspace,
                    const int64_t **selected)
{
    int64_t nb = p->batches, nbox = p->boxes, ncls = p->classes, limit = p->limit;
    double iou_th = prm->iou_threshold, score_th = prm->score_threshold;
    bool has_score_th = prm->has_score_threshold, center = prm->center_point_box;
    nms_box *bx = workspace;
    double *sc = (double *)(bx + nbox + 1);
    int64_t *order = (int64_t *)(sc + nbox + 1), *tmp = order + nbox, *kept = tmp + nbox;
    int64_t *sel = kept + nbox, n_sel = 0;
    nms_grid g = {.head = (int32_t *)(sel + 3 * p->max_selected + 1)};
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
            kiln_dd_sort_by_key(order, tmp, cnt, sc, true);
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
    *selected = sel;
    return n_sel;
}
