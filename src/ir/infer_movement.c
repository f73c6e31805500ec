/* ir/infer_movement.c: shape inference for the data-movement ops that pick,
 * place or rearrange elements by index (Tile, Expand, GatherElements,
 * GatherND, ScatterElements, ScatterND, DepthToSpace, SpaceToDepth, Trilu,
 * OneHot, ReverseSequence). Each is dtype-generic over the data input (any
 * dtype with a size; index inputs are int32 or int64). Each function checks
 * the types of the attributes it reads, then the ranks and extents the
 * reference kernel (ref/movement.c) relies on, so that the kernel can index
 * without further checks; only the values of index tensors (known at run
 * time) are checked by the kernel. ONNX parameters that newer opsets pass as
 * constant inputs are attributes here: Tile repeats, Expand shape, Trilu k,
 * OneHot depth. */
#include <limits.h>
#include <string.h>

#include "ir/broadcast.h"
#include "ir/graph.h"
#include "ir/infer_transform.h"
#include "util/error.h"

/* ---- inputs ---------------------------------------------------------------- */

/* The data input of the single-input ops, and the inputs of the gathers
 * (the first two) and the scatters. */
static const kiln_infer_input input_only[] = {{"input", KILN_INFER_DATA}};
static const kiln_infer_input data_indices_updates[] = {
    {"data", KILN_INFER_DATA}, {"indices", KILN_INFER_INDEX}, {"updates", KILN_INFER_DATA}};

/* ---- Tile, Expand ------------------------------------------------------------ */

kiln_status kiln_infer_tile(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"repeats", KILN_ATTR_INTS}};
    kiln_status s = kiln_infer_check_inputs(n, in, input_only, 1, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    const int64_t *rep = NULL;
    int nr = kiln_attr_ints(n, "repeats", &rep);
    if (nr < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'repeats'");
    kiln_shape_buf b;
    if (nr != x->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'repeats' has %d entries for input of shape %s (rank %d)",
                           nr, kiln_shape_fmt(x, &b), x->rank);
    kiln_shape r = *x;
    for (int d = 0; d < x->rank; d++) {
        if (rep[d] < 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'repeats' entry %d is %lld (negative)", d,
                               (long long)rep[d]);
        if (rep[d] != 0 && x->dims[d] > INT64_MAX / 2 / rep[d])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "tiling dimension %d (%lld) by %lld overflows", d,
                               (long long)x->dims[d], (long long)rep[d]);
        r.dims[d] = x->dims[d] * rep[d];
    }
    if (kiln_shape_numel(&r) < 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "the tiled shape %s is too large",
                           kiln_shape_fmt(&r, &b));
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_expand(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"shape", KILN_ATTR_INTS}};
    kiln_status s = kiln_infer_check_inputs(n, in, input_only, 1, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const int64_t *sh = NULL;
    int len = kiln_attr_ints(n, "shape", &sh);
    if (len < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'shape'");
    if (len > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "attribute 'shape' has rank %d (max %d)",
                           len, KILN_MAX_RANK);
    kiln_shape target = {.rank = len};
    for (int i = 0; i < len; i++) {
        if (sh[i] < 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'shape' entry %d is %lld (negative)", i,
                               (long long)sh[i]);
        target.dims[i] = sh[i];
    }
    kiln_shape r;
    s = kiln_broadcast_shape(&in[0]->shape, &target, &r, err);
    if (s != KILN_OK)
        return s;
    kiln_shape_buf b;
    if (kiln_shape_numel(&r) < 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "the expanded shape %s is too large",
                           kiln_shape_fmt(&r, &b));
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

/* ---- GatherElements, GatherND -------------------------------------------------- */

/* The shape checks GatherElements and ScatterElements share (`u`, the
 * updates' shape, is NULL for the gather): non-scalar data `x`, indices `ix`
 * of its rank (and of the updates' shape), a valid `axis`, indices within
 * the data off the axis, and no index into an empty axis. */
static kiln_status check_elements(const kiln_node *n, const kiln_shape *x, const kiln_shape *ix,
                                  const kiln_shape *u, kiln_error *err)
{
    const char *verb = u ? "scatter" : "gather";
    kiln_shape_buf a, b, c;
    if (x->rank == 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input 0 (data) is a scalar");
    if (u && (!kiln_shape_equal(ix, u) || ix->rank != x->rank))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "indices %s and updates %s must have the same shape, of the rank "
                           "of data %s",
                           kiln_shape_fmt(ix, &a), kiln_shape_fmt(u, &b), kiln_shape_fmt(x, &c));
    if (!u && ix->rank != x->rank)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "indices %s and data %s must have the same rank",
                           kiln_shape_fmt(ix, &a), kiln_shape_fmt(x, &b));
    int axis;
    kiln_status s =
        kiln_axis_resolve(kiln_attr_int(n, "axis", 0), x->rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    for (int d = 0; d < x->rank; d++)
        if (d != axis && ix->dims[d] > x->dims[d])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "indices %s exceed data %s on dimension %d (not the %s axis %d)",
                               kiln_shape_fmt(ix, &a), kiln_shape_fmt(x, &b), d, verb, axis);
    if (x->dims[axis] == 0 && kiln_shape_numel(ix) > 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s the empty axis %d of data %s",
                           u ? "scattering into" : "gathering from", axis, kiln_shape_fmt(x, &b));
    return KILN_OK;
}

kiln_status kiln_infer_gather_elements(const kiln_node *n, const kiln_value *const *in,
                                       kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, data_indices_updates, 2, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *ix = &in[1]->shape;
    s = check_elements(n, &in[0]->shape, ix, NULL, err);
    if (s != KILN_OK)
        return s;
    kiln_infer_set_out(out[0], in[0]->dtype, ix);
    return KILN_OK;
}

kiln_status kiln_infer_gather_nd(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"batch_dims", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, data_indices_updates, 2, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape, *ix = &in[1]->shape;
    kiln_shape_buf a, b;
    int64_t bd = kiln_attr_int(n, "batch_dims", 0);
    if (x->rank < 1 || ix->rank < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "data %s and indices %s must both have rank >= 1",
                           kiln_shape_fmt(x, &a), kiln_shape_fmt(ix, &b));
    if (bd < 0 || bd >= x->rank || bd >= ix->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'batch_dims' = %lld must be in [0, min(rank(data) %d, "
                           "rank(indices) %d))",
                           (long long)bd, x->rank, ix->rank);
    for (int d = 0; d < bd; d++)
        if (x->dims[d] != ix->dims[d])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "batch dimension %d differs: data %s, indices %s", d,
                               kiln_shape_fmt(x, &a), kiln_shape_fmt(ix, &b));
    int64_t m = ix->dims[ix->rank - 1];
    if (m < 1 || m > x->rank - bd)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "indices %s: the last extent (%lld) must be in [1, %lld] for data %s "
                           "with batch_dims %lld",
                           kiln_shape_fmt(ix, &a), (long long)m, (long long)(x->rank - bd),
                           kiln_shape_fmt(x, &b), (long long)bd);
    int rank = ix->rank - 1 + x->rank - (int)bd - (int)m;
    if (rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                           KILN_MAX_RANK);
    kiln_shape r = {.rank = rank};
    int k = 0;
    for (int d = 0; d < ix->rank - 1; d++)
        r.dims[k++] = ix->dims[d];
    for (int d = (int)(bd + m); d < x->rank; d++)
        r.dims[k++] = x->dims[d];
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

/* ---- ScatterElements, ScatterND ------------------------------------------------ */

kiln_status kiln_infer_scatter(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT},
                                           {"reduction", KILN_ATTR_STRING}};
    kiln_status s = kiln_infer_check_inputs(n, in, data_indices_updates, 3, specs, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *xv = in[0], *uv = in[2];
    const kiln_shape *x = &xv->shape, *ix = &in[1]->shape, *u = &uv->shape;
    kiln_shape_buf a, b, c;
    if (uv->dtype != xv->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "updates are %s but data is %s",
                           kiln_dtype_name(uv->dtype), kiln_dtype_name(xv->dtype));
    const char *red = kiln_attr_string(n, "reduction", "none");
    bool plain = strcmp(red, "none") == 0;
    if (!plain && strcmp(red, "add") != 0 && strcmp(red, "mul") != 0 &&
        strcmp(red, "max") != 0 && strcmp(red, "min") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'reduction' = '%s' (expected none, add, mul, max, min)",
                           red);
    if (!plain && xv->dtype == KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "reduction '%s' on bool data", red);
    if (n->op == KILN_OP_SCATTERELEMENTS) {
        s = check_elements(n, x, ix, u, err);
        if (s != KILN_OK)
            return s;
    } else {
        if (kiln_node_attr(n, "axis"))
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "ScatterND takes no attribute 'axis'");
        if (ix->rank < 1 || x->rank < 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "data %s and indices %s must both have rank >= 1",
                               kiln_shape_fmt(x, &a), kiln_shape_fmt(ix, &b));
        int64_t m = ix->dims[ix->rank - 1];
        if (m < 1 || m > x->rank)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "indices %s: the last extent (%lld) must be in [1, %d] for data "
                               "%s",
                               kiln_shape_fmt(ix, &a), (long long)m, x->rank,
                               kiln_shape_fmt(x, &b));
        /* updates = indices.shape[:-1] + data.shape[m:] */
        bool ok = u->rank == ix->rank - 1 + x->rank - (int)m;
        for (int d = 0; ok && d < ix->rank - 1; d++)
            ok = u->dims[d] == ix->dims[d];
        for (int d = (int)m; ok && d < x->rank; d++)
            ok = u->dims[ix->rank - 1 + d - (int)m] == x->dims[d];
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "updates %s must be indices.shape[:-1] + data.shape[%lld:] for "
                               "indices %s and data %s",
                               kiln_shape_fmt(u, &c), (long long)m, kiln_shape_fmt(ix, &a),
                               kiln_shape_fmt(x, &b));
    }
    kiln_infer_set_out(out[0], xv->dtype, x);
    return KILN_OK;
}

/* ---- DepthToSpace, SpaceToDepth ------------------------------------------------ */

/* Common checks: rank-4 data and a positive blocksize; *bs receives it. */
static kiln_status block_common(const kiln_node *n, const kiln_value *const *in, int64_t *bs,
                                kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"blocksize", KILN_ATTR_INT},
                                           {"mode", KILN_ATTR_STRING}};
    kiln_status s = kiln_infer_check_inputs(n, in, input_only, 1, specs, 2, err);
    if (s != KILN_OK)
        return s;
    kiln_shape_buf b;
    if (in[0]->shape.rank != 4)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %s must have rank 4 (N, C, H, W)",
                           kiln_shape_fmt(&in[0]->shape, &b));
    if (!kiln_node_attr(n, "blocksize"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'blocksize'");
    *bs = kiln_attr_int(n, "blocksize", 0);
    if (*bs < 1 || *bs > (1 << 20))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'blocksize' = %lld must be in [1, 2^20]", (long long)*bs);
    return KILN_OK;
}

kiln_status kiln_infer_depth_to_space(const kiln_node *n, const kiln_value *const *in,
                                      kiln_value *const *out, kiln_error *err)
{
    int64_t bs = 1;
    kiln_status s = block_common(n, in, &bs, err);
    if (s != KILN_OK)
        return s;
    const char *mode = kiln_attr_string(n, "mode", "DCR");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'mode' = '%s' (expected DCR or CRD)", mode);
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (x->dims[1] % (bs * bs) != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input %s: channels are not a multiple of blocksize^2 = %lld",
                           kiln_shape_fmt(x, &b), (long long)(bs * bs));
    if (x->dims[2] > INT64_MAX / 4 / bs || x->dims[3] > INT64_MAX / 4 / bs)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output extent overflows");
    kiln_shape r = {.rank = 4,
                    .dims = {x->dims[0], x->dims[1] / (bs * bs), x->dims[2] * bs,
                             x->dims[3] * bs}};
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_space_to_depth(const kiln_node *n, const kiln_value *const *in,
                                      kiln_value *const *out, kiln_error *err)
{
    int64_t bs = 1;
    kiln_status s = block_common(n, in, &bs, err);
    if (s != KILN_OK)
        return s;
    if (kiln_node_attr(n, "mode"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "SpaceToDepth takes no attribute "
                                                            "'mode'");
    const kiln_shape *x = &in[0]->shape;
    kiln_shape_buf b;
    if (x->dims[2] % bs != 0 || x->dims[3] % bs != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input %s: height and width must be multiples of blocksize %lld",
                           kiln_shape_fmt(x, &b), (long long)bs);
    if (x->dims[1] > INT64_MAX / 4 / (bs * bs))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output channels overflow");
    kiln_shape r = {.rank = 4,
                    .dims = {x->dims[0], x->dims[1] * bs * bs, x->dims[2] / bs,
                             x->dims[3] / bs}};
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

/* ---- Trilu ------------------------------------------------------------------ */

kiln_status kiln_infer_trilu(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"upper", KILN_ATTR_INT}, {"k", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, input_only, 1, specs, 2, err);
    if (s != KILN_OK)
        return s;
    int64_t up = kiln_attr_int(n, "upper", 1);
    if (up != 0 && up != 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'upper' is %lld, expected "
                           "0 or 1", (long long)up);
    kiln_shape_buf b;
    if (in[0]->shape.rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %s must have rank >= 2",
                           kiln_shape_fmt(&in[0]->shape, &b));
    kiln_infer_set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}

/* ---- OneHot ----------------------------------------------------------------- */

/* Whether `t` is a numeric dtype whose values can be read as indices. */
static bool numeric(kiln_dtype t)
{
    return t != KILN_DTYPE_UNDEFINED && t != KILN_DTYPE_BOOL && kiln_dtype_size(t) > 0;
}

kiln_status kiln_infer_onehot(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_infer_input ins[] = {{"indices", KILN_INFER_DATA},
                                           {"values", KILN_INFER_DATA}};
    static const kiln_attr_spec specs[] = {{"depth", KILN_ATTR_INT}, {"axis", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, ins, 2, specs, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *ix = &in[0]->shape;
    kiln_shape_buf b;
    if (!numeric(in[0]->dtype))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input 0 (indices) is %s, expected a "
                           "numeric type", kiln_dtype_name(in[0]->dtype));
    if (kiln_shape_numel(&in[1]->shape) != 2 || in[1]->shape.rank != 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input 1 (values) has shape %s, expected [2] (off, on)",
                           kiln_shape_fmt(&in[1]->shape, &b));
    if (!kiln_node_attr(n, "depth"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'depth'");
    int64_t depth = kiln_attr_int(n, "depth", 0);
    if (depth < 1 || depth > ((int64_t)1 << 40))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'depth' = %lld must be positive", (long long)depth);
    int rank = ix->rank + 1;
    if (rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                           KILN_MAX_RANK);
    int axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", -1), rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    kiln_shape r = {.rank = rank};
    for (int d = 0, k = 0; d < rank; d++)
        r.dims[d] = d == axis ? depth : ix->dims[k++];
    if (kiln_shape_numel(&r) < 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output shape %s is too large",
                           kiln_shape_fmt(&r, &b));
    kiln_infer_set_out(out[0], in[1]->dtype, &r);
    return KILN_OK;
}

/* ---- ReverseSequence ------------------------------------------------------------ */

kiln_status kiln_infer_reverse_sequence(const kiln_node *n, const kiln_value *const *in,
                                        kiln_value *const *out, kiln_error *err)
{
    static const kiln_infer_input ins[] = {{"input", KILN_INFER_DATA},
                                           {"sequence_lens", KILN_INFER_INDEX}};
    static const kiln_attr_spec specs[] = {{"batch_axis", KILN_ATTR_INT},
                                           {"time_axis", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, ins, 2, specs, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape, *sl = &in[1]->shape;
    kiln_shape_buf a, b;
    int64_t ba = kiln_attr_int(n, "batch_axis", 1), ta = kiln_attr_int(n, "time_axis", 0);
    if (x->rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %s must have rank >= 2",
                           kiln_shape_fmt(x, &a));
    if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attributes 'batch_axis' (%lld) and 'time_axis' (%lld) must be 0 and "
                           "1 in some order",
                           (long long)ba, (long long)ta);
    if (sl->rank != 1 || sl->dims[0] != x->dims[ba])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "sequence_lens %s must be [%lld] (the batch extent of input %s)",
                           kiln_shape_fmt(sl, &b), (long long)x->dims[ba], kiln_shape_fmt(x, &a));
    kiln_infer_set_out(out[0], in[0]->dtype, x);
    return KILN_OK;
}
