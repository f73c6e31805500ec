/* ir/infer_transform.c: shape inference for the data-movement ops (Flatten,
 * Reshape, Transpose, Concat, Split, Slice, Gather, Pad). All are
 * dtype-generic: the output has the data input's dtype. Each function checks
 * the types of the attributes it reads, then derives the output shape by the
 * ONNX rules (latest opset, with the constant-input parameters as attributes:
 * Reshape shape, Split split, Slice starts/ends/axes/steps, Pad pads/value).
 * The input checks (kiln_infer_check_inputs) and kiln_axis_resolve here serve
 * ir/infer_movement.c too. */
#include "ir/infer_transform.h"

#include <limits.h>
#include <string.h>

#include "util/error.h"

/* Input k present; `what`, when not NULL, names it in the message. */
static kiln_status need(const kiln_node *n, const kiln_value *const *in, int k, const char *what,
                        kiln_error *err)
{
    if (k < n->n_inputs && in[k])
        return KILN_OK;
    if (!what)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "input %d is missing", k);
    return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "input %d (%s) is missing", k, what);
}

/* A data input: typed and with a static shape. */
static kiln_status check_data(const kiln_value *v, int k, const char *what, kiln_error *err)
{
    kiln_shape_buf b;
    if (kiln_dtype_size(v->dtype) == 0)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s, '%s') has no type", k, what,
                           v->name ? v->name : "");
    if (kiln_shape_numel(&v->shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input %d (%s, '%s') has shape %s: symbolic or too large", k, what,
                           v->name ? v->name : "", kiln_shape_fmt(&v->shape, &b));
    return KILN_OK;
}

/* An index input: int32 or int64 with a static shape. */
static kiln_status check_index(const kiln_value *v, int k, const char *what, kiln_error *err)
{
    kiln_status s = check_data(v, k, what, err);
    if (s != KILN_OK)
        return s;
    if (v->dtype != KILN_DTYPE_INT32 && v->dtype != KILN_DTYPE_INT64)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s, '%s') is %s, expected "
                           "int32 or int64", k, what, v->name ? v->name : "",
                           kiln_dtype_name(v->dtype));
    return KILN_OK;
}

kiln_status kiln_infer_check_inputs(const kiln_node *n, const kiln_value *const *in,
                                    const kiln_infer_input *ins, int n_ins,
                                    const kiln_attr_spec *specs, int n_specs, kiln_error *err)
{
    kiln_status s = KILN_OK;
    for (int k = 0; k < n_ins && s == KILN_OK; k++)
        s = need(n, in, k, ins[k].what, err);
    for (int k = 0; k < n_ins && s == KILN_OK; k++) {
        if (ins[k].type == KILN_INFER_DATA)
            s = check_data(in[k], k, ins[k].what, err);
        else if (ins[k].type == KILN_INFER_INDEX)
            s = check_index(in[k], k, ins[k].what, err);
    }
    if (s == KILN_OK)
        s = kiln_node_attrs_check(n, specs, n_specs, err);
    return s;
}

/* The ops here check only the presence of their inputs (named by number):
 * the data input, and Gather's indices. */
static const kiln_infer_input any_inputs[] = {{NULL, KILN_INFER_ANY}, {NULL, KILN_INFER_ANY}};

kiln_status kiln_axis_resolve(int64_t axis, int rank, bool allow_end, const char *attr,
                              int *out, kiln_error *err)
{
    int64_t hi = allow_end ? rank : rank - 1;
    if (axis < -(int64_t)rank || axis > hi)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute '%s' = %lld is out of range [%d, %lld] for rank %d", attr,
                           (long long)axis, -rank, (long long)hi, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return KILN_OK;
}

kiln_status kiln_infer_flatten(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 1, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    int axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", 1), x->rank, true, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    kiln_shape r = {.rank = 2, .dims = {1, 1}};
    for (int i = 0; i < x->rank; i++) {
        int64_t d = x->dims[i];
        int64_t *p = &r.dims[i < axis ? 0 : 1];
        if (d < 0 || *p < 0) {
            *p = -1; /* symbolic */
            continue;
        }
        if (d != 0 && *p > INT64_MAX / d)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "flattened size overflows");
        *p *= d;
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_reshape(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"shape", KILN_ATTR_INTS}, {"allowzero", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 1, specs, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    const int64_t *sh = NULL;
    int len = kiln_attr_ints(n, "shape", &sh);
    bool allowzero = kiln_attr_int(n, "allowzero", 0) != 0;
    kiln_shape_buf b;
    if (len < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'shape'");
    if (len > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "attribute 'shape' has rank %d (max %d)",
                           len, KILN_MAX_RANK);
    int64_t numel = kiln_shape_numel(x);
    if (numel < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "input shape %s is not static",
                           kiln_shape_fmt(x, &b));
    kiln_shape r = {.rank = len};
    int infer_at = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (int i = 0; i < len; i++) {
        int64_t d = sh[i];
        if (d == -1) {
            if (infer_at >= 0)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "attribute 'shape' has more than one -1 (entries %d and %d)",
                                   infer_at, i);
            infer_at = i;
            r.dims[i] = -1;
            continue;
        }
        if (d < -1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'shape' entry %d is %lld (negative)", i, (long long)d);
        if (d == 0 && !allowzero) {
            if (i >= x->rank)
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "attribute 'shape' entry %d is 0 (copy) but the input %s has "
                                   "rank %d",
                                   i, kiln_shape_fmt(x, &b), x->rank);
            d = x->dims[i];
        }
        if (d == 0)
            has_zero = true;
        r.dims[i] = d;
        if (d != 0 && known > INT64_MAX / d)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "attribute 'shape' overflows");
        known *= d;
    }
    if (infer_at >= 0) {
        if (allowzero && has_zero)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'shape' has both -1 and 0 with allowzero = 1");
        if (known == 0 || numel % known != 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "cannot reshape %s (%lld elements) with -1 at entry %d: the other "
                               "entries multiply to %lld",
                               kiln_shape_fmt(x, &b), (long long)numel, infer_at,
                               (long long)known);
        r.dims[infer_at] = numel / known;
        known = numel;
    }
    if (known != numel) {
        kiln_shape_buf c;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "cannot reshape %s (%lld elements) to %s (%lld elements)",
                           kiln_shape_fmt(x, &b), (long long)numel, kiln_shape_fmt(&r, &c),
                           (long long)known);
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_transpose(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"perm", KILN_ATTR_INTS}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 1, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    const int64_t *perm = NULL;
    int len = kiln_attr_ints(n, "perm", &perm);
    kiln_shape r = {.rank = x->rank};
    if (len < 0) {
        for (int i = 0; i < x->rank; i++)
            r.dims[i] = x->dims[x->rank - 1 - i];
    } else {
        if (len != x->rank)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'perm' has %d entries for an input of rank %d", len,
                               x->rank);
        bool seen[KILN_MAX_RANK] = {false};
        for (int i = 0; i < len; i++) {
            if (perm[i] < 0 || perm[i] >= x->rank || seen[perm[i]])
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "attribute 'perm' is not a permutation of 0..%d (entry %d is "
                                   "%lld)",
                                   x->rank - 1, i, (long long)perm[i]);
            seen[perm[i]] = true;
            r.dims[i] = x->dims[perm[i]];
        }
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_concat(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}};
    kiln_status s = kiln_node_attrs_check(n, specs, 1, err);
    if (s != KILN_OK)
        return s;
    if (n->n_inputs < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "no inputs");
    for (int i = 0; i < n->n_inputs && s == KILN_OK; i++)
        s = need(n, in, i, NULL, err);
    if (s != KILN_OK)
        return s;
    if (!kiln_node_attr(n, "axis"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'axis'");
    const kiln_shape *x0 = &in[0]->shape;
    if (x0->rank == 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "cannot concatenate scalars");
    int axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), x0->rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    kiln_shape r = *x0;
    kiln_shape_buf a, b;
    for (int i = 1; i < n->n_inputs; i++) {
        const kiln_shape *xi = &in[i]->shape;
        if (in[i]->dtype != in[0]->dtype)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "input %d ('%s') is %s but input 0 ('%s') is %s", i, in[i]->name,
                               kiln_dtype_name(in[i]->dtype), in[0]->name,
                               kiln_dtype_name(in[0]->dtype));
        bool ok = xi->rank == x0->rank;
        for (int d = 0; d < x0->rank && ok; d++)
            if (d != axis && xi->dims[d] != x0->dims[d])
                ok = false;
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input %d ('%s') has shape %s, incompatible with input 0 %s "
                               "(concatenating on axis %d)",
                               i, in[i]->name, kiln_shape_fmt(xi, &a), kiln_shape_fmt(x0, &b),
                               axis);
        if (r.dims[axis] < 0 || xi->dims[axis] < 0)
            r.dims[axis] = -1;
        else
            r.dims[axis] += xi->dims[axis];
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_split(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}, {"split", KILN_ATTR_INTS}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 1, specs, 2, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    int n_out = n->n_outputs;
    int axis;
    if (x->rank == 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "cannot split a scalar");
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), x->rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    int64_t dim = x->dims[axis];
    if (dim < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "split dimension %d is not static", axis);
    if (n_out < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "no outputs");
    const int64_t *split = NULL;
    int len = kiln_attr_ints(n, "split", &split);
    if (len >= 0) {
        if (len != n_out)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'split' has %d entries for %d outputs", len, n_out);
        int64_t sum = 0;
        for (int k = 0; k < len; k++) {
            if (split[k] < 0 || split[k] > dim)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "attribute 'split' entry %d is %lld (dimension %d is %lld)", k,
                                   (long long)split[k], axis, (long long)dim);
            sum += split[k];
        }
        if (sum != dim)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "attribute 'split' sums to %lld but dimension %d is %lld",
                               (long long)sum, axis, (long long)dim);
    } else {
        /* ONNX 18: n_out parts of ceil(dim / n_out), the last one smaller */
        int64_t chunk = (dim + n_out - 1) / n_out;
        if (chunk * (n_out - 1) > dim)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "cannot split dimension %d (%lld) into %d parts of %lld", axis,
                               (long long)dim, n_out, (long long)chunk);
    }
    int64_t chunk = (dim + n_out - 1) / n_out;
    for (int k = 0; k < n_out; k++) {
        if (!out[k])
            continue;
        kiln_shape r = *x;
        if (len >= 0)
            r.dims[axis] = split[k];
        else
            r.dims[axis] = k < n_out - 1 ? chunk : dim - chunk * (n_out - 1);
        kiln_infer_set_out(out[k], in[0]->dtype, &r);
    }
    return KILN_OK;
}

/* Clamps v into [lo, hi]. */
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

kiln_status kiln_slice_resolve(const kiln_node *n, const kiln_shape *x, int64_t *start,
                               int64_t *step, kiln_shape *out_shape, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"starts", KILN_ATTR_INTS},
                                      {"ends", KILN_ATTR_INTS},
                                      {"axes", KILN_ATTR_INTS},
                                      {"steps", KILN_ATTR_INTS}};
    kiln_status s = kiln_node_attrs_check(n, specs, 4, err);
    if (s != KILN_OK)
        return s;
    const int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL;
    int ns = kiln_attr_ints(n, "starts", &starts);
    int ne = kiln_attr_ints(n, "ends", &ends);
    int na = kiln_attr_ints(n, "axes", &axes);
    int nst = kiln_attr_ints(n, "steps", &steps);
    if (ns < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'starts'");
    if (ne < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'ends'");
    if (ne != ns)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attributes 'starts' (%d entries) and 'ends' (%d) differ in length",
                           ns, ne);
    if (na >= 0 && na != ns)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'axes' has %d entries, 'starts' %d", na, ns);
    if (nst >= 0 && nst != ns)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'steps' has %d entries, 'starts' %d", nst, ns);
    if (ns > x->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "%d slices for an input of rank %d", ns, x->rank);
    kiln_shape r = *x;
    int64_t st0[KILN_MAX_RANK], sp0[KILN_MAX_RANK];
    bool seen[KILN_MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) {
        st0[d] = 0;
        sp0[d] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int axis = i;
        if (na >= 0) {
            s = kiln_axis_resolve(axes[i], x->rank, false, "axes", &axis, err);
            if (s != KILN_OK)
                return s;
        }
        if (seen[axis])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'axes' names axis %d twice", axis);
        seen[axis] = true;
        int64_t d = x->dims[axis];
        if (d < 0)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "sliced dimension %d is not static",
                               axis);
        int64_t stp = nst >= 0 ? steps[i] : 1;
        if (stp == 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'steps' entry %d is 0",
                               i);
        int64_t b = starts[i], e = ends[i];
        if (b < 0)
            b += d; /* no overflow: b < 0 <= d */
        if (e < 0)
            e += d;
        int64_t count;
        if (stp > 0) {
            b = clamp64(b, 0, d);
            e = clamp64(e, 0, d);
            count = e > b ? 1 + (e - b - 1) / stp : 0;
        } else {
            b = clamp64(b, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            int64_t mag = stp == INT64_MIN ? INT64_MAX : -stp;
            count = b > e ? 1 + (b - e - 1) / mag : 0;
        }
        st0[axis] = count > 0 ? b : 0;
        sp0[axis] = stp;
        r.dims[axis] = count;
    }
    for (int d = 0; d < x->rank; d++) {
        start[d] = st0[d];
        step[d] = sp0[d];
    }
    *out_shape = r;
    return KILN_OK;
}

kiln_status kiln_infer_slice(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    kiln_status s = need(n, in, 0, NULL, err);
    if (s != KILN_OK)
        return s;
    int64_t start[KILN_MAX_RANK], step[KILN_MAX_RANK];
    kiln_shape r;
    s = kiln_slice_resolve(n, &in[0]->shape, start, step, &r, err);
    if (s != KILN_OK)
        return s;
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_gather(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 2, specs, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape, *ix = &in[1]->shape;
    if (in[1]->dtype != KILN_DTYPE_INT32 && in[1]->dtype != KILN_DTYPE_INT64)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input 1 (indices, '%s') is %s, expected int32 or int64", in[1]->name,
                           kiln_dtype_name(in[1]->dtype));
    if (x->rank == 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input 0 (data) is a scalar");
    int axis;
    s = kiln_axis_resolve(kiln_attr_int(n, "axis", 0), x->rank, false, "axis", &axis, err);
    if (s != KILN_OK)
        return s;
    int rank = x->rank - 1 + ix->rank;
    if (rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                           KILN_MAX_RANK);
    kiln_shape r = {.rank = rank};
    int k = 0;
    for (int d = 0; d < axis; d++)
        r.dims[k++] = x->dims[d];
    for (int d = 0; d < ix->rank; d++)
        r.dims[k++] = ix->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        r.dims[k++] = x->dims[d];
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}

kiln_status kiln_infer_pad(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {
        {"pads", KILN_ATTR_INTS}, {"mode", KILN_ATTR_STRING}, {"value", KILN_ATTR_FLOAT}};
    kiln_status s = kiln_infer_check_inputs(n, in, any_inputs, 1, specs, 3, err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *x = &in[0]->shape;
    const int64_t *pads = NULL;
    int np = kiln_attr_ints(n, "pads", &pads);
    const char *mode = kiln_attr_string(n, "mode", "constant");
    if (np < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'pads'");
    if (np != 2 * x->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'pads' has %d entries, expected %d (2 x rank %d)", np,
                           2 * x->rank, x->rank);
    bool reflect = strcmp(mode, "reflect") == 0, edge = strcmp(mode, "edge") == 0;
    if (!reflect && !edge && strcmp(mode, "constant") != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "attribute 'mode' = '%s' (supported: constant, reflect, edge)", mode);
    if (!reflect && !edge && kiln_dtype_size(in[0]->dtype) == 0)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input 0 has no type");
    kiln_shape r = *x;
    for (int d = 0; d < x->rank; d++) {
        int64_t b = pads[d], e = pads[d + x->rank], dim = x->dims[d];
        if (dim < 0)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "padded dimension %d is not static", d);
        if (b > INT64_MAX / 4 || e > INT64_MAX / 4 || b < -dim || e < -dim ||
            dim + b + e < 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'pads' (%lld, %lld) on dimension %d of size %lld gives "
                               "a negative or absurd extent",
                               (long long)b, (long long)e, d, (long long)dim);
        int64_t eff = dim + (b < 0 ? b : 0) + (e < 0 ? e : 0); /* extent after cropping */
        if (reflect && ((b > 0 && b >= eff) || (e > 0 && e >= eff)))
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "reflect padding (%lld, %lld) on dimension %d needs the dimension "
                               "(%lld) to be larger than each pad",
                               (long long)b, (long long)e, d, (long long)eff);
        if (edge && (b > 0 || e > 0) && eff == 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "edge padding of the empty dimension %d", d);
        r.dims[d] = dim + b + e;
    }
    kiln_infer_set_out(out[0], in[0]->dtype, &r);
    return KILN_OK;
}
