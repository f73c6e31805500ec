/* ir/infer_norm.h: helpers the normalization family's shape inference
 * (ir/infer_norm.c) shares with its reference kernels (ref/norm.c), so that
 * both read attributes the same way. */
#ifndef KILN_IR_INFER_NORM_H
#define KILN_IR_INFER_NORM_H

#include <stdbool.h>

#include "ir/graph.h"

/* MeanVarianceNormalization's axes (attribute "axes", default [0, 2, 3];
 * negative entries count from the end) checked against X's shape `xs` and
 * turned into a mask: reduced[d] for every normalized dim. A duplicate or
 * out-of-range entry is INVALID_ARGUMENT. */
kiln_status kiln_mvn_axes(const kiln_node *n, const kiln_shape *xs, bool reduced[KILN_MAX_RANK],
                          kiln_error *err);

#endif
