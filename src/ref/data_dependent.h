/* ref/data_dependent.h: the kernels of ops whose output extent depends on
 * input values (NonZero, Compress, NonMaxSuppression), written once for both
 * of their callers:
 *  - the ONNX importer, which computes them at conversion when their inputs
 *    are constants (import/onnx/convert_data.c), and
 *  - the VM, which runs them on run-time tensors (vm/vm_kernels.c).
 * They live in src/ref because both may include it: src/vm builds on
 * src/import, src/import on src/ref, and src/ref on neither (it is part of
 * libkiln_runtime too, where a runtime VM would find them).
 *
 * None of them allocates or names a node: each op is a plan (checks, the
 * output shape and the scratch it needs, from the inputs' shapes or values)
 * and a fill into the caller's memory; errors are messages without a node,
 * which the caller prefixes. Semantics (docs/VM.md):
 * - NonZero: int64 [rank, nnz], coordinates in row-major order; a scalar
 *   gives [0, 0 or 1] (numpy's argwhere of a 0-d array).
 * - Compress: the slices along `axis` (or of the flattened input) whose
 *   condition entry is nonzero; the condition may be shorter than the axis.
 * - NonMaxSuppression: per batch and class, the boxes whose score exceeds
 *   score_threshold (when given) in descending score order (ties in box
 *   order, NaN above every number), each kept unless its IoU with a kept box
 *   exceeds iou_threshold, at most max_output_boxes_per_class; int64
 *   [selected, 3] rows (batch, class, box). Boxes are corners in either
 *   order, or centers (center_point_box). */
#ifndef KILN_REF_DATA_DEPENDENT_H
#define KILN_REF_DATA_DEPENDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/types.h"

/* Whether element i of t (any numeric or bool dtype) is not zero. */
bool kiln_dd_nonzero_at(const kiln_tensor *t, int64_t i);

/* Sorts idx[0..n) stably by key[idx[.]] (descending when `desc`; NaN above
 * every number either way), through tmp[0..n): a merge sort, O(n log n). */
void kiln_dd_sort_by_key(int64_t *idx, int64_t *tmp, int64_t n, const double *key, bool desc);

/* ---- NonZero ---- */

/* The output shape of NonZero(x): [rank, nnz] (int64). */
kiln_shape kiln_dd_nonzero_shape(const kiln_tensor *x);
/* Writes the coordinates into out ([rank, nnz] as given by the shape). */
void kiln_dd_nonzero(const kiln_tensor *x, int64_t nnz, int64_t *out);

/* ---- Compress ---- */

typedef struct kiln_dd_compress_plan {
    kiln_shape shape;          /* the output's (x's dtype) */
    int64_t outer, len, inner; /* x as [outer, len, inner] along the axis */
    int64_t n_cond;            /* condition entries */
} kiln_dd_compress_plan;

/* Checks the condition (1-D, at most the axis long) and the axis (has_axis:
 * in [-rank, rank)) and fills the plan. */
kiln_status kiln_dd_compress_plan_make(const kiln_tensor *x, const kiln_tensor *cond,
                                       bool has_axis, int64_t axis, kiln_dd_compress_plan *p,
                                       kiln_error *err);
/* Copies the kept slices into dst (the plan's shape, x's dtype). */
void kiln_dd_compress(const kiln_tensor *x, const kiln_tensor *cond,
                      const kiln_dd_compress_plan *p, void *dst);

/* ---- NonMaxSuppression ---- */

typedef struct kiln_dd_nms_params {
    double max_output_boxes_per_class; /* 0 when absent */
    double iou_threshold;              /* 0 when absent */
    double score_threshold;            /* used when has_score_threshold */
    bool has_score_threshold;
    bool center_point_box;
} kiln_dd_nms_params;

typedef struct kiln_dd_nms_plan {
    int64_t batches, boxes, classes;
    int64_t limit;         /* kept boxes per batch and class, at most */
    int64_t max_selected;  /* batches * classes * limit */
    size_t workspace;      /* bytes of scratch kiln_dd_nms needs */
} kiln_dd_nms_plan;

/* Checks boxes [B, N, 4] and scores [B, C, N] and fills the plan. */
kiln_status kiln_dd_nms_plan_make(const kiln_tensor *boxes, const kiln_tensor *scores,
                                  const kiln_dd_nms_params *prm, kiln_dd_nms_plan *p,
                                  kiln_error *err);
/* Runs the suppression in `workspace` (p->workspace bytes, aligned for
 * doubles); returns the number of selected rows, *sel pointing at them (3
 * int64 each: batch, class, box) inside the workspace.
 *
 * The kept boxes are indexed for the suppression test by a grid of buckets
 * along x: a positive IoU needs overlapping x ranges, which share a bucket,
 * so a candidate meets only the kept boxes of the buckets it covers, which
 * gives the greedy result in far fewer tests when the boxes spread out (a
 * batched NMS offsets each class's boxes apart). Non-finite coordinates, a
 * negative threshold or few boxes test every kept box. */
int64_t kiln_dd_nms(const kiln_tensor *boxes, const kiln_tensor *scores,
                    const kiln_dd_nms_params *prm, const kiln_dd_nms_plan *p, void *workspace,
                    const int64_t **sel);

#endif
