/* ir/infer_reduce.c: shape inference for the reductions (ReduceMean), and the
 * axes resolution their kernels share. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_util.h"
#include "util/error.h"

kiln_status kiln_reduce_axes(const kiln_node *n, int rank, bool reduced[KILN_MAX_RANK],
                             bool *keepdims, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axes", KILN_ATTR_INTS},
                                      {"keepdims", KILN_ATTR_INT},
                                      {"noop_with_empty_axes", KILN_ATTR_INT}};
    kiln_status s = kiln_node_attrs_check(n, specs, 3, err);
    if (s != KILN_OK || (s = kiln_infer_check_flag(n, "keepdims", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "noop_with_empty_axes", err)) != KILN_OK)
        return s;
    const int64_t *axes = NULL;
    int len = kiln_attr_ints(n, "axes", &axes);
    bool mask[KILN_MAX_RANK] = {false};
    if (len <= 0) {
        bool noop = kiln_attr_int(n, "noop_with_empty_axes", 0) == 1;
        for (int d = 0; d < rank; d++)
            mask[d] = !noop;
    }
    for (int i = 0; i < len; i++) {
        if (axes[i] < -rank || axes[i] >= rank)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "axes[%d] = %lld is out of range for an input of rank %d", i,
                               (long long)axes[i], rank);
        int d = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
        if (mask[d])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "axes[%d] = %lld repeats axis %d", i, (long long)axes[i], d);
        mask[d] = true;
    }
    memcpy(reduced, mask, sizeof mask);
    *keepdims = kiln_attr_int(n, "keepdims", 1) == 1;
    return KILN_OK;
}
kiln_status kiln_infer_reduce(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    kiln_status s = kiln_infer_check_float(in[0], 0, "X", err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape;
    bool reduced[KILN_MAX_RANK], keep;
    if ((s = kiln_reduce_axes(n, xs->rank, reduced, &keep, err)) != KILN_OK)
        return s;
    kiln_shape o = {.rank = 0};
    for (int d = 0; d < xs->rank; d++) {
        if (reduced[d] && xs->dims[d] == 0) {
            kiln_shape_buf b1;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "X has shape %s: cannot take the mean over empty axis %d",
                               kiln_shape_fmt(xs, &b1), d);
        }
        if (!reduced[d])
            o.dims[o.rank++] = xs->dims[d];
        else if (keep)
            o.dims[o.rank++] = 1;
    }
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}

/* STUB */
kiln_status kiln_infer_argreduce(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_cumsum(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_topk(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_einsum(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

