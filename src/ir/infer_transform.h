/* ir/infer_transform.h: attribute resolution shared by the shape inference
 * of the data-movement ops (ir/infer_transform.c) and their reference kernels
 * (ref/transform.c), so both read an op's attributes the same way; and the
 * opening checks shared by the two data-movement inference files
 * (ir/infer_transform.c, ir/infer_movement.c). */
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

/* What kiln_infer_check_inputs checks of one input beyond its presence. */
typedef enum kiln_infer_input_type {
    KILN_INFER_ANY,   /* nothing more */
    KILN_INFER_DATA,  /* typed, with a static shape */
    KILN_INFER_INDEX, /* int32 or int64, with a static shape */
} kiln_infer_input_type;

/* One input an op reads: `what` names it in messages ("input 1 (indices)
 * ..."); NULL names it by number only. */
typedef struct kiln_infer_input {
    const char *what;
    kiln_infer_input_type type;
} kiln_infer_input;

/* The opening checks of a data-movement op's inference, in this order:
 * inputs 0..n_ins-1 present, then each of the type checks `ins` asks for,
 * then the types of the attributes in `specs`. */
kiln_status kiln_infer_check_inputs(const kiln_node *n, const kiln_value *const *in,
                                    const kiln_infer_input *ins, int n_ins,
                                    const kiln_attr_spec *specs, int n_specs, kiln_error *err);

/* The ops are dtype-generic: output `o` takes dtype `dt` and shape `s`. */
static inline void kiln_infer_set_out(kiln_value *o, kiln_dtype dt, const kiln_shape *s)
{
    o->dtype = dt;
    o->shape = *s;
}

#endif
