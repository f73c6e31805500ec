/* ir/infer_util.h: helpers shared by the shape inference of the nn,
 * normalization and reduction families (ir/infer_nn.c, infer_norm.c,
 * infer_reduce.c) and their reference kernels (ref/conv.c, ref/pool.c,
 * ref/reduce.c): sliding-window geometry (explicit pads from auto_pad, output
 * extents) and ReduceMean's axes, so that inference and kernels agree. */
#ifndef KILN_IR_INFER_UTIL_H
#define KILN_IR_INFER_UTIL_H

#include <stdbool.h>

#include "ir/graph.h"

#define KILN_WINDOW_MAX_SPATIAL 3

/* Geometry of a window op over the spatial dims of X (dims 2..rank-1). */
typedef struct kiln_window {
    int nsp; /* spatial rank, 1..KILN_WINDOW_MAX_SPATIAL */
    int64_t in[KILN_WINDOW_MAX_SPATIAL];
    int64_t kernel[KILN_WINDOW_MAX_SPATIAL];
    int64_t stride[KILN_WINDOW_MAX_SPATIAL];
    int64_t dilation[KILN_WINDOW_MAX_SPATIAL];
    int64_t pad_begin[KILN_WINDOW_MAX_SPATIAL];
    int64_t pad_end[KILN_WINDOW_MAX_SPATIAL];
    int64_t out[KILN_WINDOW_MAX_SPATIAL];
} kiln_window;

/* Reads auto_pad, strides, dilations and pads (and ceil_mode when `pool`) of
 * node `n`, checks their types, lengths and ranges against X's shape `x` and
 * the kernel extents `kernel` (x->rank - 2 entries), and fills `w` with
 * explicit pads and output extents (each >= 1). `op` names the op in messages. */
kiln_status kiln_window_resolve(const kiln_node *n, const char *op, const kiln_shape *x,
                                const int64_t *kernel, bool pool, kiln_window *w,
                                kiln_error *err);

/* ReduceMean's axes: reads axes, keepdims and noop_with_empty_axes of `n`,
 * checks them against an input of rank `rank`, and sets reduced[d] for every
 * reduced dim (axes absent or empty => all dims, unless noop_with_empty_axes;
 * negative axes count from the end; a duplicate is an error). *keepdims gets
 * the keepdims flag. */
kiln_status kiln_reduce_axes(const kiln_node *n, int rank, bool reduced[KILN_MAX_RANK],
                             bool *keepdims, kiln_error *err);

/* ---- shared checks (ir/infer_util.c) ------------------------------------ */
/* in[k] when the node has that many inputs (absent optional inputs are NULL). */
const kiln_value *kiln_infer_input_at(const kiln_node *n, const kiln_value *const *in, int k);
/* A present input must be float32 with a static shape; `label` names it. */
kiln_status kiln_infer_check_float(const kiln_value *v, int k, const char *label, kiln_error *err);
/* Output `o` becomes float32 of shape `s`. */
void kiln_infer_set_output(kiln_value *o, const kiln_shape *s);
/* An INT attribute that must be 0 or 1 (absent reads as 0). */
kiln_status kiln_infer_check_flag(const kiln_node *n, const char *name, kiln_error *err);
/* Normalizes an axis against `rank` into [0, rank); `what` names it, `x` is
 * the shape quoted in the message. */
kiln_status kiln_infer_norm_axis(int64_t axis, int rank, const char *what, const kiln_shape *x,
                                 int *out, kiln_error *err);

#endif
