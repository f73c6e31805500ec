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
 *   indices (kiln_dd_sort_by_key), O(n log n) per lane; for k < n/4 a heap
 *   of k selects them first (O(n log k)) and only those are sorted. The
 *   reference kernel (ref/topk.c, the importer's TopK with a constant k) is
 *   an insertion of each element into the k kept.
 *   Keys are doubles: 64-bit integers beyond 2^53 compare rounded.
 * - RoiAlign: not data-dependent in shape, but detection heads run it on a
 *   data-dependent number of rois: vm_roialign.c.
 * - ScatterElements and ConstantOfShape: vm_scatter.c (in place, and through
 *   a fused Expand). */
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
                  !strcmp(op, "RoiAlign") || !strcmp(op, "ScatterElements") ||
                  !strcmp(op, "ConstantOfShape"));
}

/* ---- helpers ------------------------------------------------------------------ */

const Onnx__AttributeProto *kiln_vm_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a]->name && !strcmp(np->attribute[a]->name, name))
            return np->attribute[a];
    return NULL;
}

int64_t kiln_vm_opset(const kiln_vm *vm)
{
    for (size_t i = 0; i < vm->m->n_opset_import; i++) {
        const char *d = vm->m->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx"))
            return vm->m->opset_import[i]->version;
    }
    return 1;
}

static const Onnx__AttributeProto *attr(const vm_node *n, const char *name)
{
    return kiln_vm_attr(n->np, name);
}

static int64_t attr_int(const vm_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->i : def;
}

/* The node's scratch memory, at least `bytes` (grown, never shrunk). */
void *kiln_vm_scratch(vm_node *n, size_t bytes)
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
kiln_status kiln_vm_set_out(vm_node *n, int k, kiln_dtype dt, const kiln_shape *sh,
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
    kiln_status s = kiln_vm_set_out(n, 0, KILN_DTYPE_INT64, &sh, err);
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
    if ((s = kiln_vm_set_out(n, 0, x->dtype, &p.shape, err)) == KILN_OK)
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
    void *w = kiln_vm_scratch(n, p.workspace);
    if (!w)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    const int64_t *sel;
    int64_t n_sel = kiln_dd_nms(boxes, scores, &prm, &p, w, &sel);
    kiln_shape sh = {.rank = 2, .dims = {n_sel, 3}};
    if ((s = kiln_vm_set_out(n, 0, KILN_DTYPE_INT64, &sh, err)) != KILN_OK)
        return s;
    if (n_sel)
        memcpy(n->own[0].data, sel, sizeof(int64_t) * (size_t)(3 * n_sel));
    return KILN_OK;
}

/* ---- TopK ------------------------------------------------------------------------ */

/* Whether key a strictly precedes key b (kiln_dd_sort_by_key's order). */
static inline bool key_precedes(double a, double b, bool desc)
{
    bool an = isnan(a), bn = isnan(b);
    if (an || bn)
        return desc ? an && !bn : bn && !an;
    return desc ? a > b : a < b;
}

/* The total order of the sorted lane: by key, ties to the lower index. */
static inline bool elem_before(const double *key, int64_t i, int64_t j, bool desc)
{
    return key_precedes(key[i], key[j], desc) || (!key_precedes(key[j], key[i], desc) && i < j);
}

/* Heap of k indices whose root is the last of them in the lane's order. */
static void sift_down(int64_t *h, int64_t k, int64_t pos, const double *key, bool desc)
{
    for (;;) {
        int64_t l = 2 * pos + 1, r = l + 1, worst = l;
        if (l >= k)
            return;
        if (r < k && elem_before(key, h[l], h[r], desc))
            worst = r;
        if (!elem_before(key, h[pos], h[worst], desc))
            return;
        int64_t t = h[pos];
        h[pos] = h[worst];
        h[worst] = t;
        pos = worst;
    }
}

static int cmp_index(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The first k of the lane's len elements in its order into idx[0..k), by a
 * heap of k (O(len log k)): an element enters when it precedes the heap's
 * last (it comes after every kept index, so a tie never enters), then the k
 * are sorted as the whole lane would be (by index, then stably by key). */
static void select_topk(int64_t *idx, int64_t *tmp, int64_t len, int64_t k, const double *key,
                        bool desc)
{
    for (int64_t j = 0; j < k; j++)
        idx[j] = j;
    for (int64_t p = k / 2 - 1; p >= 0; p--)
        sift_down(idx, k, p, key, desc);
    for (int64_t j = k; j < len; j++)
        if (key_precedes(key[j], key[idx[0]], desc)) {
            idx[0] = j;
            sift_down(idx, k, 0, key, desc);
        }
    qsort(idx, (size_t)k, sizeof *idx, cmp_index);
    kiln_dd_sort_by_key(idx, tmp, k, key, desc);
}

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
    kiln_status s = kiln_vm_set_out(n, 0, x->dtype, &sh, err);
    if (s == KILN_OK && n->n_out > 1)
        s = kiln_vm_set_out(n, 1, KILN_DTYPE_INT64, &sh, err);
    if (s != KILN_OK)
        return s;
    bool fl = kiln_red_is_float(x->dtype), u64 = x->dtype == KILN_DTYPE_UINT64;
    double *key = kiln_vm_scratch(n, (sizeof(double) + 2 * sizeof(int64_t)) * (size_t)(len + 1));
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
            if (k > 0 && k < len / 4) /* FCOS/RetinaNet: 1,000 of 10^5 scores */
                select_topk(idx, tmp, len, k, key, largest);
            else
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
        s = kiln_vm_roialign_run(vm, n, n->in, err);
    else if (!strcmp(op, "ScatterElements"))
        s = kiln_vm_scatter_run(vm, n, err);
    else if (!strcmp(op, "ConstantOfShape"))
        s = kiln_vm_fill_run(n, n->in[0], err);
    else
        s = run_topk(n, n->in, err);
    if (s != KILN_OK)
        return s;
    for (int k = 0; k < n->n_out; k++)
        n->out[k] = &n->own[k];
    return KILN_OK;
}
