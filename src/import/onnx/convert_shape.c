/* import/onnx/convert_shape.c: converters for data-movement and shape ops.
 *
 * kiln takes shape parameters as attributes (ops.def's rule), so the
 * parameters newer opsets pass as inputs (Reshape's shape, Slice's starts and
 * ends, Split's split, Pad's pads, Squeeze/Unsqueeze axes) must be constants
 * by the time the node is converted: fold.c has usually made them so. Shape
 * and ConstantOfShape are computed at import time; Expand (shape as an
 * attribute) is folded when its input is constant; a Squeeze or Unsqueeze of
 * a run-time value becomes a Reshape to the static result. The table at the
 * end also lists the converters of convert_movement.c. */
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "import/onnx/fold_op.h"
#include "import/onnx/onnx.h"
#include "ir/broadcast.h"
#include "io/tensor_io.h"
#include "util/error.h"

static kiln_status fold_error(onnx_ctx *c, kiln_status s, kiln_error *err)
{
    return kiln_error_prefix(err, s, "node '%s' (%s, opset %lld): ", c->node_name,
                             c->node->op_type, (long long)c->opset);
}

static kiln_status bind_folded(onnx_ctx *c, kiln_status s, kiln_tensor *t, kiln_error *err)
{
    if (s != KILN_OK)
        return fold_error(c, s, err);
    s = onnx_bind_const(c, 0, t, err);
    kiln_tensor_release(t);
    return s;
}

/* Emits kiln Reshape of value `in` to the static shape `to` and binds it. */
static kiln_status emit_reshape(onnx_ctx *c, int in, const kiln_shape *to, kiln_error *err)
{
    int node = onnx_emit(c, KILN_OP_RESHAPE, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = kiln_node_set_ints(c->g, node, "shape", to->dims, to->rank);
    bool has_zero = false;
    for (int d = 0; d < to->rank; d++)
        has_zero |= to->dims[d] == 0;
    if (s == KILN_OK && has_zero)
        s = kiln_node_set_int(c->g, node, "allowzero", 1);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

/* Reshapes value x to `to`: folded when x is constant. */
static kiln_status reshape_to(onnx_ctx *c, const kiln_value *x, const kiln_shape *to,
                              kiln_error *err)
{
    if (x->kind == KILN_VALUE_CONST && x->data) {
        kiln_tensor t = onnx_value_tensor(x), r;
        kiln_status s = onnx_fold_reshape(&t, to, &r, err);
        return bind_folded(c, s, &r, err);
    }
    if (kiln_shape_equal(&x->shape, to))
        return onnx_bind(c, 0, x->id, err);
    return emit_reshape(c, x->id, to, err);
}

/* ---- Reshape ---------------------------------------------------------------- */

/* kiln's Reshape has ONNX's target-shape rules (0 copies the input extent
 * unless allowzero, one -1 is inferred); folded when the data is constant. */
static kiln_status reshape_common(onnx_ctx *c, const int64_t *shape, int n, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    kiln_attr a[2] = {onnx_attr_is("shape", shape, n), onnx_attr_i("allowzero", 0)};
    int na = 1;
    if (onnx_attr_int(c, "allowzero", 0) != 0)
        a[na++] = onnx_attr_i("allowzero", 1);
    int in = x->id;
    return onnx_emit_or_fold(c, KILN_OP_RESHAPE, &in, 1, a, na, 1, err);
}

static kiln_status conv_reshape1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *shape = NULL;
    int n = onnx_attr_ints(c, "shape", &shape);
    if (n < 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'shape' is missing");
    return reshape_common(c, shape, n, err);
}

static kiln_status conv_reshape5(onnx_ctx *c, kiln_error *err)
{
    const int64_t *shape = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, "shape", &shape, &n, err);
    if (s != KILN_OK)
        return s;
    return reshape_common(c, shape, n, err);
}

/* ---- Squeeze / Unsqueeze ----------------------------------------------------- */

static kiln_status squeeze_common(onnx_ctx *c, const int64_t *axes, int n, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int rank = x->shape.rank;
    bool drop[KILN_MAX_RANK] = {false};
    if (n < 0) { /* no axes: every extent-1 dimension */
        for (int d = 0; d < rank; d++)
            drop[d] = x->shape.dims[d] == 1;
    }
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i];
        if (a < -rank || a >= rank)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "axis %lld is out of range for rank %d", (long long)a, rank);
        if (a < 0)
            a += rank;
        if (x->shape.dims[a] != 1)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "cannot squeeze axis %lld of extent %lld", (long long)a,
                                   (long long)x->shape.dims[a]);
        drop[a] = true;
    }
    kiln_shape to = {.rank = 0};
    for (int d = 0; d < rank; d++)
        if (!drop[d])
            to.dims[to.rank++] = x->shape.dims[d];
    return reshape_to(c, x, &to, err);
}

static kiln_status unsqueeze_common(onnx_ctx *c, const int64_t *axes, int n, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int orank = x->shape.rank + n;
    if (n < 0 || orank > KILN_MAX_RANK)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "the result's rank %d is above kiln's maximum %d", orank,
                               KILN_MAX_RANK);
    bool ins[KILN_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i];
        if (a < -orank || a >= orank)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "axis %lld is out of range for rank %d", (long long)a, orank);
        if (a < 0)
            a += orank;
        if (ins[a])
            return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "axis %lld appears twice",
                                   (long long)a);
        ins[a] = true;
    }
    kiln_shape to = {.rank = orank};
    for (int d = 0, k = 0; d < orank; d++)
        to.dims[d] = ins[d] ? 1 : x->shape.dims[k++];
    return reshape_to(c, x, &to, err);
}

static kiln_status conv_squeeze1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = onnx_attr_ints(c, "axes", &axes);
    return squeeze_common(c, axes, n, err);
}

static kiln_status conv_squeeze13(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = -1;
    if (onnx_in(c, 1) >= 0) {
        kiln_status s = onnx_in_ints_eval(c, 1, "axes", &axes, &n, err);
        if (s != KILN_OK)
            return s;
    }
    return squeeze_common(c, axes, n, err);
}

static kiln_status conv_unsqueeze1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = onnx_attr_ints(c, "axes", &axes);
    if (n < 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'axes' is missing");
    return unsqueeze_common(c, axes, n, err);
}

static kiln_status conv_unsqueeze13(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, "axes", &axes, &n, err);
    if (s != KILN_OK)
        return s;
    return unsqueeze_common(c, axes, n, err);
}

/* ---- Shape, ConstantOfShape, Expand -------------------------------------------- */

static kiln_status conv_shape(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int64_t rank = x->shape.rank;
    int64_t start = onnx_attr_int(c, "start", 0), end = onnx_attr_int(c, "end", rank);
    if (start < 0)
        start += rank;
    if (end < 0)
        end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    kiln_shape sh = {.rank = 1, .dims = {end > start ? end - start : 0}};
    kiln_tensor t;
    kiln_status s = kiln_tensor_alloc(&t, KILN_DTYPE_INT64, &sh, err);
    if (s != KILN_OK)
        return s;
    for (int64_t d = start; d < end; d++)
        ((int64_t *)t.data)[d - start] = x->shape.dims[d];
    return bind_folded(c, KILN_OK, &t, err);
}

static kiln_status conv_constant_of_shape(onnx_ctx *c, kiln_error *err)
{
    const int64_t *dims = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints_eval(c, 0, "shape", &dims, &n, err);
    if (s != KILN_OK)
        return s;
    if (n > KILN_MAX_RANK)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "rank %d is above kiln's maximum",
                               n);
    kiln_shape sh = {.rank = n};
    memcpy(sh.dims, dims, sizeof(int64_t) * (size_t)n);
    float zero = 0.0f;
    kiln_tensor value = {.dtype = KILN_DTYPE_FLOAT32, .shape = {.rank = 1, .dims = {1}},
                         .data = &zero};
    kiln_tensor loaded = {0};
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    if (a) {
        if (!a->t)
            return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'value' holds no tensor");
        s = onnx_tensor_load(c, a->t, &loaded, err);
        if (s != KILN_OK)
            return fold_error(c, s, err);
        value = loaded;
    }
    kiln_tensor r;
    s = onnx_fold_fill(&sh, &value, &r, err);
    kiln_tensor_release(&loaded);
    return bind_folded(c, s, &r, err);
}

static kiln_status conv_expand(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    const int64_t *shape = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, "shape", &shape, &n, err);
    if (s != KILN_OK)
        return s;
    /* an Expand of a run-time value that changes nothing is the identity */
    if (!onnx_in_const(c, 0) && n <= KILN_MAX_RANK) {
        kiln_shape target = {.rank = n};
        bool ok = true;
        for (int i = 0; i < n; i++) {
            target.dims[i] = shape[i];
            ok &= shape[i] >= 0;
        }
        kiln_shape os;
        if (ok && kiln_broadcast_shape(&x->shape, &target, &os, NULL) == KILN_OK &&
            kiln_shape_equal(&os, &x->shape))
            return onnx_bind(c, 0, x->id, err);
    }
    kiln_attr a = onnx_attr_is("shape", shape, n);
    int in = x->id;
    return onnx_emit_or_fold(c, KILN_OP_EXPAND, &in, 1, &a, 1, 1, err);
}

/* ---- Transpose, Concat, Gather ------------------------------------------------- */

static kiln_status conv_transpose(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_TRANSPOSE, "perm", err);
}

static kiln_status conv_concat(onnx_ctx *c, kiln_error *err)
{
    int n = onnx_n_in(c);
    bool all_const = n > 0;
    for (int k = 0; k < n; k++) {
        if (!onnx_need(c, k, "input", err))
            return err ? err->status : KILN_ERR_INVALID_GRAPH;
        all_const &= onnx_in_const(c, k);
    }
    if (c->opset >= 4 && !onnx_attr(c, "axis"))
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'axis' is missing");
    int64_t axis = onnx_attr_int(c, "axis", 1);
    if (all_const && n <= 64) {
        kiln_tensor views[64];
        const kiln_tensor *ptrs[64];
        for (int k = 0; k < n; k++) {
            views[k] = onnx_value_tensor(onnx_in_value(c, k));
            ptrs[k] = &views[k];
        }
        kiln_tensor r;
        kiln_status s = onnx_fold_concat(ptrs, n, axis, &r, err);
        if (s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
    }
    kiln_status s = onnx_convert_simple(c, KILN_OP_CONCAT, NULL, err);
    if (s != KILN_OK)
        return s;
    /* opset 1 leaves axis optional (default 1); kiln requires it */
    if (c->node->n_output < 1)
        return KILN_OK;
    const kiln_value *out = kiln_graph_value(c->g, onnx_map_get(&c->names, c->node->output[0]));
    if (!out || out->producer < 0)
        return KILN_OK;
    s = kiln_node_set_int(c->g, out->producer, "axis", axis);
    return s == KILN_OK ? KILN_OK : kiln_errorf(err, s, "out of memory");
}

static kiln_status conv_gather(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *d = onnx_need(c, 0, "data", err);
    if (!d)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    const kiln_value *i = onnx_need(c, 1, "indices", err);
    if (!i)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (onnx_in_const(c, 0) && onnx_in_const(c, 1)) {
        kiln_tensor dt = onnx_value_tensor(d), it = onnx_value_tensor(i), r;
        kiln_status s = onnx_fold_gather(&dt, &it, onnx_attr_int(c, "axis", 0), &r, err);
        if (s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
    }
    return onnx_convert_simple(c, KILN_OP_GATHER, "axis", err);
}

/* ---- Slice ------------------------------------------------------------------------ */

static kiln_status slice_common(onnx_ctx *c, const int64_t *starts, int ns, const int64_t *ends,
                                int ne, const int64_t *axes, int na, const int64_t *steps,
                                int nk, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (ns != ne || (axes && na != ns) || (steps && nk != ns))
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                               "starts, ends, axes and steps have different lengths (%d, %d, "
                               "%d, %d)",
                               ns, ne, axes ? na : ns, steps ? nk : ns);
    if (ns > KILN_MAX_RANK)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err, "%d axes sliced", ns);
    if (x->kind == KILN_VALUE_CONST && x->data) {
        kiln_tensor t = onnx_value_tensor(x), r;
        kiln_status s = onnx_fold_slice(&t, starts, ends, axes, steps, ns, &r, err);
        if (s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
    }
    int64_t def_axes[KILN_MAX_RANK], def_steps[KILN_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        def_axes[i] = i;
        def_steps[i] = 1;
    }
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_SLICE, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = kiln_node_set_ints(c->g, node, "starts", starts, ns);
    if (s == KILN_OK)
        s = kiln_node_set_ints(c->g, node, "ends", ends, ne);
    if (s == KILN_OK)
        s = kiln_node_set_ints(c->g, node, "axes", axes ? axes : def_axes, ns);
    if (s == KILN_OK)
        s = kiln_node_set_ints(c->g, node, "steps", steps ? steps : def_steps, ns);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

static kiln_status conv_slice1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *starts = NULL, *ends = NULL, *axes = NULL;
    int ns = onnx_attr_ints(c, "starts", &starts), ne = onnx_attr_ints(c, "ends", &ends);
    int na = onnx_attr_ints(c, "axes", &axes);
    if (ns < 0 || ne < 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attributes 'starts' and 'ends' are "
                                                       "required");
    return slice_common(c, starts, ns, ends, ne, na >= 0 ? axes : NULL, na, NULL, 0, err);
}

static kiln_status conv_slice10(onnx_ctx *c, kiln_error *err)
{
    const int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL;
    int ns = 0, ne = 0, na = 0, nk = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, "starts", &starts, &ns, err);
    if (s == KILN_OK)
        s = onnx_in_ints_eval(c, 2, "ends", &ends, &ne, err);
    if (s == KILN_OK && onnx_in(c, 3) >= 0)
        s = onnx_in_ints_eval(c, 3, "axes", &axes, &na, err);
    if (s == KILN_OK && onnx_in(c, 4) >= 0)
        s = onnx_in_ints_eval(c, 4, "steps", &steps, &nk, err);
    if (s != KILN_OK)
        return s;
    return slice_common(c, starts, ns, ends, ne, axes, na, steps, nk, err);
}

/* ---- Split ------------------------------------------------------------------------ */

static kiln_status split_common(onnx_ctx *c, const int64_t *split, int n, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int nout = onnx_n_out(c);
    if (nout < 1 || nout > 64)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "%d outputs", nout);
    if (split && n != nout)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                               "'split' has %d entries for %d outputs", n, nout);
    int64_t num = onnx_attr_int(c, "num_outputs", nout);
    if (num != nout)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                               "num_outputs is %lld but the node has %d outputs", (long long)num,
                               nout);
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_SPLIT, NULL, &in, 1, nout, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = kiln_node_set_int(c->g, node, "axis", onnx_attr_int(c, "axis", 0));
    if (s == KILN_OK && split)
        s = kiln_node_set_ints(c->g, node, "split", split, n);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    for (int k = 0; k < nout; k++) {
        s = onnx_bind(c, k, kiln_graph_node_output(c->g, node, k), err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

static kiln_status conv_split2(onnx_ctx *c, kiln_error *err)
{
    const int64_t *split = NULL;
    int n = onnx_attr_ints(c, "split", &split);
    if (n < 0 && onnx_in(c, 1) >= 0) { /* opset 1 also took split as an input */
        kiln_status s = onnx_in_ints_eval(c, 1, "split", &split, &n, err);
        if (s != KILN_OK)
            return s;
    }
    return split_common(c, n >= 0 ? split : NULL, n, err);
}

static kiln_status conv_split13(onnx_ctx *c, kiln_error *err)
{
    const int64_t *split = NULL;
    int n = -1;
    if (onnx_in(c, 1) >= 0) {
        kiln_status s = onnx_in_ints_eval(c, 1, "split", &split, &n, err);
        if (s != KILN_OK)
            return s;
    }
    return split_common(c, n >= 0 ? split : NULL, n, err);
}

/* ---- Pad ---------------------------------------------------------------------------- */

static kiln_status emit_pad(onnx_ctx *c, const int64_t *pads, int n, double value,
                            kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (n != 2 * x->shape.rank)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "'pads' has %d entries for an input of rank %d", n,
                               (int)x->shape.rank);
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_PAD, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = kiln_node_set_ints(c->g, node, "pads", pads, n);
    if (s == KILN_OK)
        s = kiln_node_set_float(c->g, node, "value", (float)value);
    if (s == KILN_OK)
        s = kiln_node_set_string(c->g, node, "mode", onnx_attr_string(c, "mode", "constant"));
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

static kiln_status conv_pad2(onnx_ctx *c, kiln_error *err)
{
    const int64_t *pads = NULL;
    int n = onnx_attr_ints(c, "pads", &pads);
    if (n < 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'pads' is missing");
    return emit_pad(c, pads, n, onnx_attr_float(c, "value", 0.0f), err);
}

static kiln_status conv_pad11(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    const int64_t *pads = NULL, *axes = NULL;
    int n = 0, na = -1;
    double value = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, "pads", &pads, &n, err);
    if (s == KILN_OK && onnx_in(c, 2) >= 0)
        s = onnx_in_scalar_eval(c, 2, "constant_value", &value, err);
    if (s == KILN_OK && onnx_in(c, 3) >= 0) /* opset 18 */
        s = onnx_in_ints_eval(c, 3, "axes", &axes, &na, err);
    if (s != KILN_OK)
        return s;
    if (na < 0)
        return emit_pad(c, pads, n, value, err);
    /* pads for the listed axes only: spread them over every dimension */
    int rank = x->shape.rank;
    if (n != 2 * na)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "'pads' has %d entries for %d axes", n, na);
    int64_t full[2 * KILN_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (a < -rank || a >= rank)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "axis %lld is out of range for rank %d", (long long)a, rank);
        if (a < 0)
            a += rank;
        full[a] = pads[i];
        full[a + rank] = pads[i + na];
    }
    return emit_pad(c, full, 2 * rank, value, err);
}

const onnx_converter onnx_shape_converters[] = {
    {"Reshape", 1, conv_reshape1, "shape:ints consumed_inputs:ints"},
    {"Reshape", 5, conv_reshape5, ""},
    {"Reshape", 14, conv_reshape5, "allowzero:int"},
    {"Squeeze", 1, conv_squeeze1, "axes:ints"},
    {"Squeeze", 13, conv_squeeze13, ""},
    {"Unsqueeze", 1, conv_unsqueeze1, "axes:ints"},
    {"Unsqueeze", 13, conv_unsqueeze13, ""},
    {"Shape", 1, conv_shape, ""},
    {"Shape", 15, conv_shape, "start:int end:int"},
    {"ConstantOfShape", 9, conv_constant_of_shape, "value:tensor"},
    {"Expand", 8, conv_expand, ""},
    {"Transpose", 1, conv_transpose, "perm:ints"},
    {"Concat", 1, conv_concat, "axis:int"},
    {"Gather", 1, conv_gather, "axis:int"},
    {"Slice", 1, conv_slice1, "axes:ints ends:ints starts:ints"},
    {"Slice", 10, conv_slice10, ""},
    {"Split", 1, conv_split2, "axis:int split:ints"},
    {"Split", 13, conv_split13, "axis:int"},
    {"Split", 18, conv_split13, "axis:int num_outputs:int"},
    {"Pad", 2, conv_pad2, "mode:string pads:ints value:float"},
    {"Pad", 11, conv_pad11, "mode:string"},
    /* convert_movement.c */
    {"Tile", 6, onnx_convert_tile, ""},
    {"GatherElements", 11, onnx_convert_gather_elements, "axis:int"},
    {"GatherND", 11, onnx_convert_gather_nd, ""},
    {"GatherND", 12, onnx_convert_gather_nd, "batch_dims:int"},
    {"Scatter", 9, onnx_convert_scatter_elements, "axis:int"},
    {"ScatterElements", 11, onnx_convert_scatter_elements, "axis:int"},
    {"ScatterElements", 16, onnx_convert_scatter_elements, "axis:int reduction:string"},
    {"ScatterND", 11, onnx_convert_scatter_nd, ""},
    {"ScatterND", 16, onnx_convert_scatter_nd, "reduction:string"},
    {"DepthToSpace", 1, onnx_convert_depth_to_space, "blocksize:int"},
    {"DepthToSpace", 11, onnx_convert_depth_to_space, "blocksize:int mode:string"},
    {"SpaceToDepth", 1, onnx_convert_space_to_depth, "blocksize:int"},
    {"Trilu", 14, onnx_convert_trilu, "upper:int"},
    {"OneHot", 9, onnx_convert_onehot, "axis:int"},
    {"ReverseSequence", 10, onnx_convert_reverse_sequence, "batch_axis:int time_axis:int"},
    {"Range", 11, onnx_convert_range, ""},
    {"Size", 1, onnx_convert_size, ""},
    {"EyeLike", 9, onnx_convert_eyelike, "dtype:int k:int"},
    {NULL, 0, NULL, NULL},
};
