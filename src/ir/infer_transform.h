/* ir/infer_transform.h: attribute resolution shared by the shape inference
 * of the data-movement ops (ir/infer_transform.c) and their reference kernels
 * (ref/transform.c), so both read an op's attributes the same way. */
#ifndef KILN_IR_INFER_TRANSFORM_H
#define KILN_IR_INFER_TRANSFORM_H

#include "ir/graph.h"

/* Slice: resolves starts/ends/axes/steps of node `n` against input shape `in`
 * with ONNX clamping semantics. For every dimension d of `in`: start[d] is the
 * first input index taken, step[d] the step (1 on unsliced dims), and
 * out_shape->dims[d] the number taken. Errors name the offending attribute. */
kiln_status kiln_slice_resolve(const kiln_node *n, const kiln_shape *in, int64_t *start,
                               int64_t *step, kiln_shape *out_shape, kiln_error *err);

/* Normalizes an axis attribute value against `rank`: accepts [-rank, rank)
 * (or [-rank, rank] with `allow_end`), adds rank to negatives. */
kiln_status kiln_axis_resolve(int64_t axis, int rank, bool allow_end, const char *attr,
                              int *out, kiln_error *err);

#endif
