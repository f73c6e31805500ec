/* import/onnx/convert_movement.c: converters for the index-driven
 * data-movement ops (Tile, GatherElements, GatherND, ScatterElements and the
 * deprecated Scatter, ScatterND, DepthToSpace, SpaceToDepth, Trilu, OneHot,
 * ReverseSequence) and for the ops kiln computes at import time only (Range,
 * Size, EyeLike), plus onnx_emit_or_fold (fold_op.h).
 *
 * Each converter gathers the node's inputs and attributes into kiln form
 * (constant parameter inputs become attributes: Tile repeats, Trilu k,
 * OneHot depth; a non-constant one is reported with the standard "must be a
 * constant" message so that the conformance runner can bind it) and calls
 * onnx_emit_or_fold, which folds the node through the op's reference kernel
 * when every input is a constant. Range, Size and EyeLike produce constants:
 * Range from its constant inputs, Size and EyeLike from the static shape of
 * their input. The converter table that lists these functions is
 * onnx_shape_converters (convert_shape.c). */
#include "import/onnx/convert_movement.h"

#include <math.h>
#include <string.h>

#include "import/onnx/convert_rtparams.h"
#include "import/onnx/fold_op.h"
#include "io/tensor_io.h"
#include "util/error.h"

kiln_status onnx_emit_or_fold(onnx_ctx *c, kiln_op op, const int *ins, int n_in,
                              const kiln_attr *attrs, int n_attrs, int n_out, kiln_error *err)
{
    if (n_in > ONNX_FOLD_MAX_IO || n_out > ONNX_FOLD_MAX_IO)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "%d inputs, %d outputs", n_in,
                               n_out);
    kiln_status s = onnx_no_outputs_from(c, n_out, err);
    if (s != KILN_OK)
        return s;
    kiln_tensor views[ONNX_FOLD_MAX_IO];
    const kiln_tensor *pv[ONNX_FOLD_MAX_IO];
    bool all_const = true;
    for (int i = 0; i < n_in; i++) {
        const kiln_value *v = kiln_graph_value(c->g, ins[i]);
        pv[i] = NULL;
        if (!v)
            continue;
        if (v->kind == KILN_VALUE_CONST && v->data) {
            views[i] = onnx_value_tensor(v);
            pv[i] = &views[i];
        } else {
            all_const = false;
        }
    }
    if (all_const) {
        kiln_tensor res[ONNX_FOLD_MAX_IO];
        s = onnx_fold_op(op, attrs, n_attrs, pv, n_in, res, n_out, err);
        if (s == KILN_OK) {
            for (int k = 0; k < n_out; k++) {
                if (s == KILN_OK)
                    s = onnx_bind_const(c, k, &res[k], err);
                kiln_tensor_release(&res[k]);
            }
            return s;
        }
        if (s != KILN_ERR_UNSUPPORTED)
            return onnx_node_prefix(c, s, err);
        /* too large to fold: computed at run time */
    }
    return onnx_emit_bind(c, op, ins, n_in, attrs, n_attrs, NULL, n_out, err);
}

/* ---- parameter inputs computed from constants --------------------------------
 * A parameter input (a Reshape's shape, a Range's limit) is often computed by
 * earlier nodes that kiln emitted because one of their inputs was not constant
 * when they were converted, or by ops whose converters do not fold (Neg of a
 * constant). eval_value evaluates such a value by running, recursively, the
 * reference kernels of the nodes that produce it, as long as every leaf is a
 * constant; a leaf that is a graph input is reported, so that the "must be a
 * constant" message can name the graph input to bind. */

#define EVAL_MAX_DEPTH 32
#define EVAL_MAX_NODES 256

typedef struct eval_state {
    int budget;       /* nodes still allowed to be evaluated */
    const char *dep;  /* first graph input met, or NULL */
} eval_state;

/* *t receives value `id` (owned, release it, when *owned). UNSUPPORTED when it
 * cannot be computed at import time. */
static kiln_status eval_value(onnx_ctx *c, int id, int depth, eval_state *st, kiln_tensor *t,
                              bool *owned, kiln_error *err)
{
    const kiln_value *v = kiln_graph_value(c->g, id);
    if (!v)
        return KILN_ERR_UNSUPPORTED;
    if (v->kind == KILN_VALUE_CONST) {
        if (!v->data)
            return KILN_ERR_UNSUPPORTED;
        *t = onnx_value_tensor(v);
        *owned = false;
        return KILN_OK;
    }
    if (v->kind == KILN_VALUE_INPUT) {
        if (!st->dep)
            st->dep = v->name;
        return KILN_ERR_UNSUPPORTED;
    }
    const kiln_node *n = kiln_graph_node(c->g, v->producer);
    if (!n || depth >= EVAL_MAX_DEPTH || --st->budget < 0 || n->n_inputs > ONNX_FOLD_MAX_IO ||
        n->n_outputs > ONNX_FOLD_MAX_IO || v->output_index >= n->n_outputs)
        return KILN_ERR_UNSUPPORTED;
    kiln_tensor ins[ONNX_FOLD_MAX_IO], outs[ONNX_FOLD_MAX_IO];
    const kiln_tensor *pin[ONNX_FOLD_MAX_IO] = {NULL};
    bool own[ONNX_FOLD_MAX_IO] = {false};
    kiln_status s = KILN_OK;
    int i = 0;
    for (; i < n->n_inputs && s == KILN_OK; i++) {
        pin[i] = NULL;
        if (n->inputs[i] < 0)
            continue;
        s = eval_value(c, n->inputs[i], depth + 1, st, &ins[i], &own[i], err);
        pin[i] = &ins[i];
    }
    if (s == KILN_OK)
        s = onnx_fold_op(n->op, n->attrs, n->n_attrs, pin, n->n_inputs, outs, n->n_outputs,
                         err);
    for (int j = 0; j < i; j++)
        if (own[j])
            kiln_tensor_release(&ins[j]);
    if (s != KILN_OK)
        return KILN_ERR_UNSUPPORTED;
    for (int k = 0; k < n->n_outputs; k++)
        if (k != v->output_index)
            kiln_tensor_release(&outs[k]);
    *t = outs[v->output_index];
    *owned = true;
    return KILN_OK;
}

/* Makes ONNX input k a constant when it can be computed at import time
 * (rebinding its name to the new constant). When it depends on a graph input
 * instead, the error names that graph input. Otherwise leaves it alone: the
 * caller's onnx_in_ints/onnx_in_scalar report it. */
static kiln_status materialize(onnx_ctx *c, int k, const char *what, kiln_error *err)
{
    const kiln_value *v = onnx_in_value(c, k);
    if (!v || v->kind != KILN_VALUE_NODE)
        return KILN_OK;
    eval_state st = {.budget = EVAL_MAX_NODES};
    kiln_tensor t;
    bool owned = false;
    kiln_error scratch;
    if (eval_value(c, v->id, 0, &st, &t, &owned, &scratch) != KILN_OK) {
        if (!st.dep)
            return KILN_OK;
        c->data_param = true;
        c->data_input = k;
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "input %d (%s, computed from graph input '%s') must be a "
                               "constant: kiln takes it as an attribute and cannot compute it "
                               "at run time",
                               k, what, st.dep);
    }
    const char *name = c->node->input[k];
    int id = onnx_add_const(c, name, &t, err);
    if (owned)
        kiln_tensor_release(&t);
    if (id < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    if (!onnx_map_put(&c->names, name, id))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return KILN_OK;
}

kiln_status onnx_in_ints_eval(onnx_ctx *c, int k, const char *what, const int64_t **v, int *n,
                              kiln_error *err)
{
    kiln_status s = materialize(c, k, what, err);
    return s != KILN_OK ? s : onnx_in_ints(c, k, what, v, n, err);
}

kiln_status onnx_in_scalar_eval(onnx_ctx *c, int k, const char *what, double *v,
                                kiln_error *err)
{
    kiln_status s = materialize(c, k, what, err);
    return s != KILN_OK ? s : onnx_in_scalar(c, k, what, v, err);
}

bool onnx_in_const_eval(onnx_ctx *c, int k, const char *what, kiln_error *err,
                        kiln_status *status)
{
    *status = materialize(c, k, what, err);
    return *status == KILN_OK && onnx_in_const(c, k);
}

/* The ONNX node's inputs 0..n-1 as value ids (-1 for absent ones); the
 * required first `need` must be present. */
static kiln_status gather_inputs(onnx_ctx *c, int n, int need, const char *const *what, int *ids,
                                 kiln_error *err)
{
    for (int k = 0; k < n; k++) {
        ids[k] = onnx_in(c, k);
        if (k < need && ids[k] < 0 && !onnx_need(c, k, what[k], err))
            return err ? err->status : KILN_ERR_INVALID_GRAPH;
    }
    return KILN_OK;
}

/* Appends ONNX attribute `name` (when present) to attrs: an INT or a STRING,
 * the registry having checked its type against the converter's list. */
static void pass_attr(onnx_ctx *c, const char *name, kiln_attr *attrs, int *na)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    if (!a)
        return;
    if (onnx_attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        attrs[(*na)++] = onnx_attr_s(name, onnx_attr_string(c, name, ""));
    else
        attrs[(*na)++] = onnx_attr_i(name, onnx_attr_int(c, name, 0));
}

/* The converters that only pass things on: inputs 0..n-1 (n <= 3), all
 * required, named by `what` in messages; the attributes `attrs` (at most two,
 * NULL-terminated) passed on when present; one output. */
static kiln_status convert_passing(onnx_ctx *c, kiln_op op, int n, const char *const *what,
                                   const char *const *attrs, kiln_error *err)
{
    int ins[3];
    kiln_attr a[2];
    int na = 0;
    kiln_status s = gather_inputs(c, n, n, what, ins, err);
    if (s != KILN_OK)
        return s;
    for (; *attrs; attrs++)
        pass_attr(c, *attrs, a, &na);
    return onnx_emit_or_fold(c, op, ins, n, a, na, 1, err);
}

static const char *const scatter_in[] = {"data", "indices", "updates"};
static const char *const scatter_attrs[] = {"axis", "reduction", NULL};
static const char *const block_in[] = {"input"};
static const char *const block_attrs[] = {"blocksize", "mode", NULL};

/* ---- kiln ops ----------------------------------------------------------------- */

kiln_status onnx_convert_tile(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"input"};
    int in;
    kiln_status s = gather_inputs(c, 1, 1, what, &in, err);
    const int64_t *rep = NULL;
    int n = 0;
    if (s == KILN_OK)
        s = onnx_in_ints_eval(c, 1, "repeats", &rep, &n, err);
    if (s != KILN_OK)
        return s;
    kiln_attr a = onnx_attr_is("repeats", rep, n);
    return onnx_emit_or_fold(c, KILN_OP_TILE, &in, 1, &a, 1, 1, err);
}

kiln_status onnx_convert_gather_elements(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"data", "indices"}, *const attrs[] = {"axis", NULL};
    return convert_passing(c, KILN_OP_GATHERELEMENTS, 2, what, attrs, err);
}

kiln_status onnx_convert_gather_nd(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"data", "indices"}, *const attrs[] = {"batch_dims", NULL};
    return convert_passing(c, KILN_OP_GATHERND, 2, what, attrs, err);
}

kiln_status onnx_convert_scatter_elements(onnx_ctx *c, kiln_error *err)
{
    return convert_passing(c, KILN_OP_SCATTERELEMENTS, 3, scatter_in, scatter_attrs, err);
}

kiln_status onnx_convert_scatter_nd(onnx_ctx *c, kiln_error *err)
{
    return convert_passing(c, KILN_OP_SCATTERND, 3, scatter_in, scatter_attrs, err);
}

kiln_status onnx_convert_depth_to_space(onnx_ctx *c, kiln_error *err)
{
    return convert_passing(c, KILN_OP_DEPTHTOSPACE, 1, block_in, block_attrs, err);
}

kiln_status onnx_convert_space_to_depth(onnx_ctx *c, kiln_error *err)
{
    return convert_passing(c, KILN_OP_SPACETODEPTH, 1, block_in, block_attrs, err);
}

kiln_status onnx_convert_trilu(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"input"};
    int in;
    kiln_attr a[2];
    int na = 0;
    kiln_status s = gather_inputs(c, 1, 1, what, &in, err);
    if (s != KILN_OK)
        return s;
    pass_attr(c, "upper", a, &na);
    if (onnx_in(c, 1) >= 0 && onnx_rt_is_data(c, 1, "k", err, &s))
        return s != KILN_OK ? s : onnx_rt_trilu(c, err); /* k is data */
    if (onnx_in(c, 1) >= 0) {
        const int64_t *k = NULL;
        int n = 0;
        s = onnx_in_ints_eval(c, 1, "k", &k, &n, err);
        if (s != KILN_OK)
            return s;
        if (n != 1)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "input 1 (k) has %d elements, expected 1", n);
        a[na++] = onnx_attr_i("k", k[0]);
    }
    return onnx_emit_or_fold(c, KILN_OP_TRILU, &in, 1, a, na, 1, err);
}

kiln_status onnx_convert_onehot(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"indices", "depth", "values"};
    int ins[3];
    kiln_status s = gather_inputs(c, 3, 3, what, ins, err);
    double depth = 0;
    if (s == KILN_OK)
        s = onnx_in_scalar_eval(c, 1, "depth", &depth, err);
    if (s != KILN_OK)
        return s;
    if (!(depth >= 1 && depth <= 1e12))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "input 1 (depth) is %g, expected a positive count", depth);
    kiln_attr a[2] = {onnx_attr_i("depth", (int64_t)depth)};
    int na = 1;
    pass_attr(c, "axis", a, &na);
    int kins[2] = {ins[0], ins[2]};
    return onnx_emit_or_fold(c, KILN_OP_ONEHOT, kins, 2, a, na, 1, err);
}

kiln_status onnx_convert_reverse_sequence(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"input", "sequence_lens"},
                            *const attrs[] = {"batch_axis", "time_axis", NULL};
    return convert_passing(c, KILN_OP_REVERSESEQUENCE, 2, what, attrs, err);
}

/* ---- import-time constants ------------------------------------------------------- */

/* Stores v (an integral or floating value) as element i of a numeric tensor. */
static void store_num(kiln_dtype t, void *data, int64_t i, int64_t iv, double fv, bool is_int)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: ((float *)data)[i] = (float)(is_int ? (double)iv : fv); break;
    case KILN_DTYPE_FLOAT64: ((double *)data)[i] = is_int ? (double)iv : fv; break;
    case KILN_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)iv; break;
    case KILN_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)iv; break;
    case KILN_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)iv; break;
    case KILN_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)iv; break;
    case KILN_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)iv; break;
    case KILN_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)iv; break;
    case KILN_DTYPE_INT64: ((int64_t *)data)[i] = iv; break;
    case KILN_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)iv; break;
    case KILN_DTYPE_BOOL: ((uint8_t *)data)[i] = iv != 0; break;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = 0x3c00; break; /* only ever 1.0 */
    default: break;
    }
}

kiln_status onnx_convert_range(onnx_ctx *c, kiln_error *err)
{
    static const char *const what[] = {"start", "limit", "delta"};
    const kiln_value *v[3];
    for (int k = 0; k < 3; k++) {
        double dummy;
        kiln_status s;
        if (!onnx_in_const_eval(c, k, what[k], err, &s)) /* "must be a constant" */
            return s != KILN_OK ? s : onnx_in_scalar(c, k, what[k], &dummy, err);
        v[k] = onnx_in_value(c, k);
        if (kiln_shape_numel(&v[k]->shape) != 1)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "input %d (%s) must be a scalar", k, what[k]);
        if (v[k]->dtype != v[0]->dtype)
            return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err,
                                   "input %d (%s) is %s but start is %s", k, what[k],
                                   kiln_dtype_name(v[k]->dtype), kiln_dtype_name(v[0]->dtype));
    }
    kiln_dtype dt = v[0]->dtype;
    bool is_int = onnx_dtype_is_int(dt);
    if (dt == KILN_DTYPE_BOOL || dt == KILN_DTYPE_FLOAT16 || kiln_dtype_size(dt) == 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "Range of %s",
                               kiln_dtype_name(dt));
    int64_t count, is = 0, id = 0;
    double fs = 0, fd = 0;
    if (is_int) {
        is = onnx_load_i64(dt, v[0]->data, 0);
        int64_t il = onnx_load_i64(dt, v[1]->data, 0);
        id = onnx_load_i64(dt, v[2]->data, 0);
        if (id == 0)
            return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err, "delta is 0");
        /* ceil((limit - start) / delta), at least 0, in unsigned arithmetic */
        double span = ((double)il - (double)is) / (double)id;
        if (span > 1e12)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "Range of %g elements", span);
        uint64_t mag = id > 0 ? (uint64_t)id : (uint64_t)0 - (uint64_t)id;
        if (id > 0)
            count = il > is ? (int64_t)(((uint64_t)il - (uint64_t)is - 1) / mag) + 1 : 0;
        else
            count = is > il ? (int64_t)(((uint64_t)is - (uint64_t)il - 1) / mag) + 1 : 0;
    } else {
        fs = onnx_load_f64(dt, v[0]->data, 0);
        double fl = onnx_load_f64(dt, v[1]->data, 0);
        fd = onnx_load_f64(dt, v[2]->data, 0);
        double span = ceil((fl - fs) / fd);
        if (fd == 0 || !(span == span) || span > 1e12)
            return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                                   "Range(%g, %g, %g) has no finite element count", fs, fl, fd);
        count = span > 0 ? (int64_t)span : 0;
    }
    kiln_shape sh = {.rank = 1, .dims = {count}};
    if (count * (int64_t)kiln_dtype_size(dt) > ONNX_FOLD_MAX_BYTES)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "Range of %lld elements is too large to compute at import time",
                               (long long)count);
    kiln_tensor t;
    kiln_status s = kiln_tensor_alloc(&t, dt, &sh, err);
    if (s != KILN_OK)
        return s;
    for (int64_t i = 0; i < count; i++)
        store_num(dt, t.data, i, (int64_t)((uint64_t)is + (uint64_t)i * (uint64_t)id),
                  fs + (double)i * fd, is_int);
    return onnx_bind_folded(c, KILN_OK, &t, err);
}

/* The input's shape, which must be static. */
static kiln_status static_shape(onnx_ctx *c, const kiln_value **x, kiln_error *err)
{
    *x = onnx_need(c, 0, "input", err);
    if (!*x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    kiln_shape_buf b;
    if (kiln_shape_numel(&(*x)->shape) < 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "input 0 has shape %s: symbolic or too large",
                               kiln_shape_fmt(&(*x)->shape, &b));
    return KILN_OK;
}

kiln_status onnx_convert_size(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = static_shape(c, &x, err);
    if (s != KILN_OK)
        return s;
    kiln_shape sh = {.rank = 0};
    kiln_tensor t;
    s = kiln_tensor_alloc(&t, KILN_DTYPE_INT64, &sh, err);
    if (s != KILN_OK)
        return s;
    *(int64_t *)t.data = kiln_shape_numel(&x->shape);
    return onnx_bind_folded(c, KILN_OK, &t, err);
}

kiln_status onnx_convert_eyelike(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = static_shape(c, &x, err);
    if (s != KILN_OK)
        return s;
    kiln_shape_buf b;
    if (x->shape.rank != 2)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "input 0 has shape %s, expected rank 2",
                               kiln_shape_fmt(&x->shape, &b));
    kiln_dtype dt = x->dtype;
    if (onnx_attr(c, "dtype")) {
        int64_t o = onnx_attr_int(c, "dtype", 0);
        dt = (o > 0 && o < 64) ? kiln_dtype_from_onnx((int32_t)o) : KILN_DTYPE_UNDEFINED;
    }
    if (dt == KILN_DTYPE_UNDEFINED || kiln_dtype_size(dt) == 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "EyeLike to an unsupported dtype");
    int64_t k = onnx_attr_int(c, "k", 0), rows = x->shape.dims[0], cols = x->shape.dims[1];
    kiln_tensor t;
    s = kiln_tensor_alloc(&t, dt, &x->shape, err);
    if (s != KILN_OK)
        return s;
    for (int64_t i = 0; i < rows; i++) {
        if (k >= cols || k <= -rows) /* the diagonal is outside: all zeros */
            break;
        int64_t j = i + k;
        if (j >= 0 && j < cols)
            store_num(dt, t.data, i * cols + j, 1, 1.0, true);
    }
    return onnx_bind_folded(c, KILN_OK, &t, err);
}
