/* import/onnx/convert_rtparams.c: parameter inputs that are run-time data
 * and do not decide an output shape (docs/ONNX.md, "Parameter inputs").
 *
 * kiln's ops take these parameters as attributes. When the ONNX input is a
 * constant, or a chain that folds to one, the converters keep doing that.
 * When it is data (a graph input, or computed from one), the node is written
 * as a small graph of ops that take the parameter as a tensor, so the value
 * is read at run time by the reference kernels and by the compiled kernels
 * alike, with no special step in the runtime:
 *
 *   Clip(x, min, max)  -> Min(Max(x, min), max)    (either bound may be absent)
 *   Trilu(x, k)        -> Where(D >= k, x, 0)      upper; D <= k for lower, with
 *                         D[i][j] = j - i a constant of x's last two extents
 *   CumSum(x, axis)    -> one CumSum per axis a, selected by
 *                         Where(Mod(axis, rank) == a, ..., ...)
 *
 * The CumSum form computes rank cumulative sums to keep one: a graph input
 * as CumSum's axis is rare (the conformance tests), so correctness wins over
 * speed. An axis outside [-rank, rank) is not reported at run time (the Mod
 * wraps it), where a constant one is refused at import. */
#include "import/onnx/convert_rtparams.h"

#include <stdio.h>
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "ir/graph.h"
#include "util/error.h"

/* Emits op on ins and returns its output 0's value id, or -1 (err set). */
static int emit_val(onnx_ctx *c, kiln_op op, const char *suffix, const int *ins, int n,
                    kiln_error *err)
{
    int node = onnx_emit(c, op, suffix, ins, n, 1, err);
    return node < 0 ? -1 : kiln_graph_node_output(c->g, node, 0);
}

/* A rank-0 constant of dtype dt holding v (integers, floats, float16, bool). */
static int scalar_const(onnx_ctx *c, const char *suffix, kiln_dtype dt, double v,
                        kiln_error *err)
{
    unsigned char buf[16] = {0};
    switch (dt) {
    case KILN_DTYPE_FLOAT32: { float f = (float)v; memcpy(buf, &f, 4); } break;
    case KILN_DTYPE_FLOAT64: memcpy(buf, &v, 8); break;
    case KILN_DTYPE_INT64: { int64_t i = (int64_t)v; memcpy(buf, &i, 8); } break;
    case KILN_DTYPE_INT32: { int32_t i = (int32_t)v; memcpy(buf, &i, 4); } break;
    default:
        /* every other dtype: only zero is asked for */
        if (v != 0)
            return onnx_node_error(c, KILN_ERR_INTERNAL, err, "constant %g of %s", v,
                                   kiln_dtype_name(dt)), -1;
        break;
    }
    char name[600];
    snprintf(name, sizeof name, "%s/%s", c->node_name, suffix);
    kiln_tensor t = {.dtype = dt, .shape = {.rank = 0}, .data = buf};
    return onnx_add_const(c, name, &t, err);
}

bool onnx_rt_is_data(onnx_ctx *c, int k, const char *what, kiln_error *err, kiln_status *s)
{
    bool before = c->data_param;
    c->data_param = false;
    bool is_const = onnx_in_const_eval(c, k, what, err, s);
    bool computed = *s != KILN_OK && c->data_param; /* computed from a graph input */
    c->data_param = before;
    if (computed) {
        *s = KILN_OK;
        if (err)
            kiln_error_clear(err);
        return true;
    }
    return *s == KILN_OK && !is_const;
}

kiln_status onnx_rt_clip(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_in_value(c, 0);
    int cur = x->id;
    static const char *const what[] = {NULL, "min", "max"};
    for (int k = 1; k <= 2; k++) {
        const kiln_value *b = onnx_in_value(c, k);
        if (!b)
            continue;
        if (b->dtype != x->dtype)
            return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err, "input %d (%s) is %s but input is %s",
                                   k, what[k], kiln_dtype_name(b->dtype),
                                   kiln_dtype_name(x->dtype));
        if (kiln_shape_numel(&b->shape) != 1)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "input %d (%s) must have one element", k, what[k]);
        int ins[2] = {cur, b->id};
        bool last = k == 2 || !onnx_in_value(c, 2);
        if (last)
            return onnx_emit_bind(c, k == 1 ? KILN_OP_MAX : KILN_OP_MIN, ins, 2, NULL, 0, NULL, 1,
                                  err);
        if ((cur = emit_val(c, KILN_OP_MAX, "min", ins, 2, err)) < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    }
    return onnx_node_error(c, KILN_ERR_INTERNAL, err, "no run-time bound");
}

kiln_status onnx_rt_trilu(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_in_value(c, 0), *k = onnx_in_value(c, 1);
    if (x->shape.rank < 2)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err, "input has rank %d, expected >= 2",
                               (int)x->shape.rank);
    if (k->dtype != KILN_DTYPE_INT64 || kiln_shape_numel(&k->shape) != 1)
        return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err,
                               "input 1 (k) must be one int64, is %s of %lld elements",
                               kiln_dtype_name(k->dtype),
                               (long long)kiln_shape_numel(&k->shape));
    int64_t n = x->shape.dims[x->shape.rank - 2], m = x->shape.dims[x->shape.rank - 1];
    kiln_shape ds = {.rank = 2, .dims = {n, m}};
    char name[600];
    snprintf(name, sizeof name, "%s/diagonal", c->node_name);
    void *data = NULL;
    int d = kiln_graph_add_const_uninit(c->g, name, KILN_DTYPE_INT64, &ds, true, &data);
    if (d < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++)
            ((int64_t *)data)[i * m + j] = j - i;
    bool upper = onnx_attr_int(c, "upper", 1) != 0;
    int cmp_in[2] = {d, k->id};
    int mask = emit_val(c, upper ? KILN_OP_GREATEROREQUAL : KILN_OP_LESSOREQUAL, "mask", cmp_in,
                        2, err);
    int zero = mask < 0 ? -1 : scalar_const(c, "zero", x->dtype, 0, err);
    if (zero < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    int ins[3] = {mask, x->id, zero};
    return onnx_emit_bind(c, KILN_OP_WHERE, ins, 3, NULL, 0, NULL, 1, err);
}

kiln_status onnx_rt_cumsum(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_in_value(c, 0), *axis = onnx_in_value(c, 1);
    if (axis->dtype != KILN_DTYPE_INT64 && axis->dtype != KILN_DTYPE_INT32)
        return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err,
                               "input 1 (axis) is %s, expected int32 or int64",
                               kiln_dtype_name(axis->dtype));
    if (kiln_shape_numel(&axis->shape) != 1)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "input 1 (axis) must have one element");
    int rank = x->shape.rank;
    if (rank < 1)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err, "CumSum of a scalar");
    kiln_attr a[3];
    int na = 1;
    a[1] = onnx_attr_i("exclusive", onnx_attr_int(c, "exclusive", 0));
    a[2] = onnx_attr_i("reverse", onnx_attr_int(c, "reverse", 0));
    na = 3;
    int wrapped = -1;
    if (rank > 1) {
        int r = scalar_const(c, "rank", axis->dtype, rank, err);
        int ins[2] = {axis->id, r};
        if (r < 0 || (wrapped = emit_val(c, KILN_OP_MOD, "axis", ins, 2, err)) < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    }
    int res = -1;
    for (int ax = rank - 1; ax >= 0; ax--) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "axis%d", ax);
        a[0] = onnx_attr_i("axis", ax);
        int in = x->id;
        bool bind = rank == 1;
        int node = bind ? -1 : onnx_emit(c, KILN_OP_CUMSUM, suffix, &in, 1, 1, err);
        if (bind)
            return onnx_emit_bind(c, KILN_OP_CUMSUM, &in, 1, a, na, NULL, 1, err);
        if (node < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < na; i++)
            if (kiln_node_set_int(c->g, node, a[i].name, a[i].i) != KILN_OK)
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        int cs = kiln_graph_node_output(c->g, node, 0);
        if (res < 0) {
            res = cs;
            continue;
        }
        snprintf(suffix, sizeof suffix, "is%d", ax);
        int av = scalar_const(c, suffix, axis->dtype, ax, err);
        int eq_in[2] = {wrapped, av};
        int eq = av < 0 ? -1 : emit_val(c, KILN_OP_EQUAL, suffix, eq_in, 2, err);
        if (eq < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
        int w_in[3] = {eq, cs, res};
        if (ax == 0)
            return onnx_emit_bind(c, KILN_OP_WHERE, w_in, 3, NULL, 0, NULL, 1, err);
        snprintf(suffix, sizeof suffix, "pick%d", ax);
        if ((res = emit_val(c, KILN_OP_WHERE, suffix, w_in, 3, err)) < 0)
            return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    }
    return onnx_node_error(c, KILN_ERR_INTERNAL, err, "CumSum: no axis");
}
