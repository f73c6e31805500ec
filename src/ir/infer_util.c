/* ir/infer_util.c: small checks shared by the shape-inference functions of the
 * nn, normalization and reduction families (see ir/infer_util.h). */
#include "ir/infer_util.h"
#include "util/error.h"

/* in[k] when the node has that many inputs (absent optional inputs are NULL). */
const kiln_value *kiln_infer_input_at(const kiln_node *n, const kiln_value *const *in, int k)
{
    return k < n->n_inputs ? in[k] : NULL;
}
/* A present input must be float32 with a static shape. */
kiln_status kiln_infer_check_float(const kiln_value *v, int k, const char *label, kiln_error *err)
{
    kiln_shape_buf b;
    if (v->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s) is %s, expected float32", k,
                           label, kiln_dtype_name(v->dtype));
    if (kiln_shape_numel(&v->shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input %d (%s) has shape %s: symbolic or too large", k, label,
                           kiln_shape_fmt(&v->shape, &b));
    return KILN_OK;
}
void kiln_infer_set_output(kiln_value *o, const kiln_shape *s)
{
    o->dtype = KILN_DTYPE_FLOAT32;
    o->shape = *s;
}
/* An INT attribute that must be 0 or 1. */
kiln_status kiln_infer_check_flag(const kiln_node *n, const char *name, kiln_error *err)
{
    int64_t v = kiln_attr_int(n, name, 0);
    if (v != 0 && v != 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute '%s' is %lld, expected 0 or 1",
                           name, (long long)v);
    return KILN_OK;
}
/* Normalizes an axis attribute against `rank` into [0, rank). */
kiln_status kiln_infer_norm_axis(int64_t axis, int rank, const char *what, const kiln_shape *x,
                             int *outp, kiln_error *err)
{
    kiln_shape_buf b;
    if (axis < -rank || axis >= rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%s %lld is out of range for X of shape %s (rank %d)", what,
                           (long long)axis, kiln_shape_fmt(x, &b), rank);
    *outp = (int)(axis < 0 ? axis + rank : axis);
    return KILN_OK;
}
