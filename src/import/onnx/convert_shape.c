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

/* Reshapes value x to `to`: folded when x is constant. */
static kiln_status reshape_to(onnx_ctx *c, const kiln_value *x, const kiln_shape *to,
                              kiln_error *err)
{
    if (x->kind == KILN_VALUE_CONST && x->data) {
        kiln_tensor t = onnx_value_tensor(x), r;
        kiln_status s = onnx_fold_reshape(&t, to, &r, err);
        return onnx_bind_folded(c, s, &r, err);
    }
    if (kiln_shape_equal(&x->shape, to))
        return onnx_bind(c, 0, x->id, err);
    return onnx_emit_reshape(c, x->id, to, err);
}

/* axes[i] of a rank-`rank` shape, negative ones counted from the end: in
 * 0..rank-1, or -1 with the standard message (KILN_ERR_SHAPE_MISMATCH). */
static int64_t axis_at(const onnx_ctx *c, const int64_t *axes, int i, int rank, kiln_error *err)
{
    int64_t a = axes[i];
    if (a < -rank || a >= rank) {
        onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err, "axis %lld is out of range for rank %d",
                        (long long)a, rank);
        return -1;
    }
    return a < 0 ? a + rank : a;
}

/* ---- ops with a list of integers as attribute or input -------------------------
 * Reshape's shape, Squeeze's and Unsqueeze's axes and Split's split are an
 * INTS attribute in early opsets and input 1 (constant, or computed at import
 * time) in later ones. */

typedef enum list_from {
    FROM_ATTR,
    FROM_INPUT,
    FROM_ATTR_OR_INPUT, /* the attribute, else input 1 (Split-1 took either) */
} list_from;

typedef kiln_status (*list_fn)(onnx_ctx *c, const int64_t *v, int n, kiln_error *err);

/* Reads the list `name` from where `from` says and converts with fn: n is -1
 * when the list is absent, an error when it is `required` (with the message
 * of the place it is missing from). */
static kiln_status with_list(onnx_ctx *c, list_from from, const char *name, bool required,
                             list_fn fn, kiln_error *err)
{
    const int64_t *v = NULL;
    int n = -1;
    if (from != FROM_INPUT)
        n = onnx_attr_ints(c, name, &v);
    if (from == FROM_ATTR && n < 0 && required)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute '%s' is missing", name);
    if (from != FROM_ATTR && n < 0 && (required || onnx_in(c, 1) >= 0)) {
        kiln_status s = onnx_in_ints_eval(c, 1, name, &v, &n, err);
        if (s != KILN_OK)
            return s;
    }
    return fn(c, v, n, err);
}

/* conv_OP_attr and conv_OP_input, the two forms' converters, over OP_common. */
#define LIST_FORMS(OP, ATTR_FROM, LIST, REQUIRED)                                                 \
    static kiln_status conv_##OP##_attr(onnx_ctx *c, kiln_error *err)                             \
    {                                                                                             \
        return with_list(c, ATTR_FROM, LIST, REQUIRED, OP##_common, err);                         \
    }                                                                                             \
    static kiln_status conv_##OP##_input(onnx_ctx *c, kiln_error *err)                            \
    {                                                                                             \
        return with_list(c, FROM_INPUT, LIST, REQUIRED, OP##_common, err);                        \
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

LIST_FORMS(reshape, FROM_ATTR, "shape", true)

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
        int64_t a = axis_at(c, axes, i, rank, err);
        if (a < 0)
            return KILN_ERR_SHAPE_MISMATCH;
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

LIST_FORMS(squeeze, FROM_ATTR, "axes", false)

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
        int64_t a = axis_at(c, axes, i, orank, err);
        if (a < 0)
            return KILN_ERR_SHAPE_MISMATCH;
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

LIST_FORMS(unsqueeze, FROM_ATTR, "axes", true)

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
    return onnx_bind_folded(c, KILN_OK, &t, err);
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
            return onnx_node_prefix(c, s, err);
        value = loaded;
    }
    kiln_tensor r;
    s = onnx_fold_fill(&sh, &value, &r, err);
    kiln_tensor_release(&loaded);
    return onnx_bind_folded(c, s, &r, err);
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

CONV_SIMPLE(conv_transpose, KILN_OP_TRANSPOSE, "perm")

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
            return onnx_bind_folded(c, s, &r, err);
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
            return onnx_bind_folded(c, s, &r, err);
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
            return onnx_bind_folded(c, s, &r, err);
    }
    int64_t def_axes[KILN_MAX_RANK], def_steps[KILN_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        def_axes[i] = i;
        def_steps[i] = 1;
    }
    int in = x->id;
    kiln_attr a[4] = {onnx_attr_is("starts", starts, ns), onnx_attr_is("ends", ends, ne),
                      onnx_attr_is("axes", axes ? axes : def_axes, ns),
                      onnx_attr_is("steps", steps ? steps : def_steps, ns)};
    return onnx_emit_bind(c, KILN_OP_SLICE, &in, 1, a, 4, NULL, 1, err);
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

/* split: NULL (n = -1) when absent */
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
    kiln_attr a[2] = {onnx_attr_i("axis", onnx_attr_int(c, "axis", 0)),
                      onnx_attr_is("split", split, n)};
    return onnx_emit_bind(c, KILN_OP_SPLIT, &in, 1, a, split ? 2 : 1, NULL, nout, err);
}

LIST_FORMS(split, FROM_ATTR_OR_INPUT, "split", false)

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
    kiln_attr a[3] = {onnx_attr_is("pads", pads, n), onnx_attr_f("value", (float)value),
                      onnx_attr_s("mode", onnx_attr_string(c, "mode", "constant"))};
    return onnx_emit_bind(c, KILN_OP_PAD, &in, 1, a, 3, NULL, 1, err);
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
        int64_t a = axis_at(c, axes, i, rank, err);
        if (a < 0)
            return KILN_ERR_SHAPE_MISMATCH;
        full[a] = pads[i];
        full[a + rank] = pads[i + na];
    }
    return emit_pad(c, full, 2 * rank, value, err);
}

const onnx_converter onnx_shape_converters[] = {
    {"Reshape", 1, conv_reshape_attr, "shape:ints consumed_inputs:ints"},
    {"Reshape", 5, conv_reshape_input, ""},
    {"Reshape", 14, conv_reshape_input, "allowzero:int"},
    {"Squeeze", 1, conv_squeeze_attr, "axes:ints"},
    {"Squeeze", 13, conv_squeeze_input, ""},
    {"Unsqueeze", 1, conv_unsqueeze_attr, "axes:ints"},
    {"Unsqueeze", 13, conv_unsqueeze_input, ""},
    {"Shape", 1, conv_shape, ""},
    {"Shape", 15, conv_shape, "start:int end:int"},
    {"ConstantOfShape", 9, conv_constant_of_shape, "value:tensor"},
    {"Expand", 8, conv_expand, ""},
    {"Transpose", 1, conv_transpose, "perm:ints"},
    {"Concat", 1, conv_concat, "axis:int"},
    {"Gather", 1, conv_gather, "axis:int"},
    {"Slice", 1, conv_slice1, "axes:ints ends:ints starts:ints"},
    {"Slice", 10, conv_slice10, ""},
    {"Split", 1, conv_split_attr, "axis:int split:ints"},
    {"Split", 13, conv_split_input, "axis:int"},
    {"Split", 18, conv_split_input, "axis:int num_outputs:int"},
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
