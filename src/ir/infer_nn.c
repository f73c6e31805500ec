/* ir/infer_nn.c: shape inference for Conv, ConvTranspose, pooling (MaxPool
 * with its int64 Indices output, AveragePool, LpPool, the global pools) and
 * Gemm/MatMul.
 *
 * Each function checks everything its reference kernel relies on (dtypes,
 * static shapes, ranks, channel counts, attribute types, lengths and ranges)
 * and writes the output dtype and shape. Window ops (Conv, MaxPool,
 * AveragePool) share kiln_window_resolve, which turns auto_pad/pads/strides/
 * dilations/ceil_mode into explicit per-dimension pads and output extents:
 *   out = floor((in + pad_begin + pad_end - dilation*(k-1) - 1) / stride) + 1
 * (ceil instead of floor with ceil_mode, dropping the last window when it
 * would start past the input and its left padding); SAME_* makes
 * out = ceil(in / stride) and splits the needed padding, the odd cell going
 * to the end (SAME_UPPER) or the beginning (SAME_LOWER). ConvTranspose runs
 * the other way (kiln_convt_resolve):
 *   out = stride*(in-1) + output_padding + dilation*(k-1) + 1 - pad_begin - pad_end
 * unless output_shape or SAME_* (out = in*stride) fixes `out`, in which case
 * the total padding is split as ONNX says (the odd cell at the beginning,
 * or at the end for SAME_UPPER); an output_shape larger than the full result
 * (negative total) gets its extra cells, which only the bias reaches, at the
 * end, as onnxruntime does and the conformance suite expects. Messages name the
 * input or attribute and the shapes; the driver prefixes the node. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_nn.h"
#include "ir/infer_util.h"
#include "util/error.h"

#define ATTR_LIMIT ((int64_t)1 << 30) /* bound on strides, dilations, pads, kernels */

/* Reads an optional INTS attribute of `count` entries in [lo, hi] into dst,
 * or fills `def` when absent. */
static kiln_status read_ints(const kiln_node *n, const char *name, int count, int64_t lo,
                             int64_t hi, int64_t def, int64_t *dst, const kiln_shape *x,
                             kiln_error *err)
{
    const int64_t *v = NULL;
    int len = kiln_attr_ints(n, name, &v);
    kiln_shape_buf b;
    if (len < 0) {
        for (int i = 0; i < count; i++)
            dst[i] = def;
        return KILN_OK;
    }
    if (len != count)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute '%s' has %d entries, expected %d for X of shape %s", name,
                           len, count, kiln_shape_fmt(x, &b));
    for (int i = 0; i < count; i++) {
        if (v[i] < lo || v[i] > hi)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute '%s'[%d] is %lld, expected %lld to %lld", name, i,
                               (long long)v[i], (long long)lo, (long long)hi);
        dst[i] = v[i];
    }
    return KILN_OK;
}

enum { PAD_NOTSET, PAD_VALID, PAD_SAME_UPPER, PAD_SAME_LOWER };

kiln_status kiln_window_resolve(const kiln_node *n, const char *op, const kiln_shape *x,
                                const int64_t *kernel, bool pool, kiln_window *w,
                                kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"auto_pad", KILN_ATTR_STRING},
                                      {"strides", KILN_ATTR_INTS},
                                      {"dilations", KILN_ATTR_INTS},
                                      {"pads", KILN_ATTR_INTS},
                                      {"ceil_mode", KILN_ATTR_INT}};
    kiln_shape_buf b;
    kiln_window g;
    memset(&g, 0, sizeof g);
    g.nsp = x->rank - 2;
    if (g.nsp < 1 || g.nsp > KILN_WINDOW_MAX_SPATIAL)
        return kiln_errorf(err, g.nsp < 1 ? KILN_ERR_SHAPE_MISMATCH : KILN_ERR_UNSUPPORTED,
                           "%s: X has shape %s: expected rank 3 to 5 (N, C, 1 to 3 spatial dims)",
                           op, kiln_shape_fmt(x, &b));
    kiln_status s = kiln_node_attrs_check(n, specs, pool ? 5 : 4, err);
    if (s != KILN_OK)
        return s;
    const char *ap = kiln_attr_string(n, "auto_pad", "NOTSET");
    int mode;
    if (strcmp(ap, "NOTSET") == 0)
        mode = PAD_NOTSET;
    else if (strcmp(ap, "VALID") == 0)
        mode = PAD_VALID;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        mode = PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        mode = PAD_SAME_LOWER;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
    int64_t pads[2 * KILN_WINDOW_MAX_SPATIAL];
    if ((s = read_ints(n, "strides", g.nsp, 1, ATTR_LIMIT, 1, g.stride, x, err)) != KILN_OK ||
        (s = read_ints(n, "dilations", g.nsp, 1, ATTR_LIMIT, 1, g.dilation, x, err)) != KILN_OK ||
        (s = read_ints(n, "pads", 2 * g.nsp, 0, ATTR_LIMIT, 0, pads, x, err)) != KILN_OK)
        return s;
    if (pool && (s = kiln_infer_check_flag(n, "ceil_mode", err)) != KILN_OK)
        return s;
    bool ceil_mode = pool && kiln_attr_int(n, "ceil_mode", 0) == 1;
    for (int i = 0; i < 2 * g.nsp; i++)
        if (mode != PAD_NOTSET && pads[i] != 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "explicit pads cannot be combined with auto_pad '%s'", ap);
    for (int i = 0; i < g.nsp; i++) {
        int64_t in = x->dims[2 + i], k = kernel[i];
        if (in < 1)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s: X has shape %s: empty spatial dim",
                               op, kiln_shape_fmt(x, &b));
        if (k < 1 || k > ATTR_LIMIT)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "%s: kernel extent %lld in spatial dim %d is out of range", op,
                               (long long)k, i);
        int64_t stride = g.stride[i], keff = g.dilation[i] * (k - 1) + 1;
        int64_t pb = 0, pe = 0, out;
        if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
            out = (in + stride - 1) / stride;
            int64_t total = (out - 1) * stride + keff - in;
            if (total < 0)
                total = 0;
            pb = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe = total - pb;
        } else {
            if (mode == PAD_NOTSET) {
                pb = pads[i];
                pe = pads[g.nsp + i];
            }
            if (pool && (pb >= keff || pe >= keff))
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "%s: pads %lld+%lld in spatial dim %d must be smaller than the "
                                   "kernel extent %lld",
                                   op, (long long)pb, (long long)pe, i, (long long)keff);
            int64_t span = in + pb + pe - keff;
            if (span < 0)
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "%s: kernel extent %lld (kernel %lld, dilation %lld) in spatial "
                                   "dim %d is larger than the padded input %lld (X %s, pads "
                                   "%lld+%lld)",
                                   op, (long long)keff, (long long)k, (long long)g.dilation[i], i,
                                   (long long)(in + pb + pe), kiln_shape_fmt(x, &b),
                                   (long long)pb, (long long)pe);
            if (ceil_mode) {
                out = (span + stride - 1) / stride + 1;
                if ((out - 1) * stride >= in + pb)
                    out--;
            } else {
                out = span / stride + 1;
            }
        }
        g.in[i] = in;
        g.kernel[i] = k;
        g.pad_begin[i] = pb;
        g.pad_end[i] = pe;
        g.out[i] = out;
    }
    *w = g;
    return KILN_OK;
}

/* ---- Conv ----------------------------------------------------------------- */

kiln_status kiln_infer_conv(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"group", KILN_ATTR_INT}, {"kernel_shape", KILN_ATTR_INTS}};
    const kiln_value *x = in[0], *w = in[1], *bias = kiln_infer_input_at(n, in, 2);
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_infer_check_float(x, 0, "X", err)) != KILN_OK || (s = kiln_infer_check_float(w, 1, "W", err)) != KILN_OK ||
        (bias && (s = kiln_infer_check_float(bias, 2, "B", err)) != KILN_OK) ||
        (s = kiln_node_attrs_check(n, specs, 2, err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &x->shape, *ws = &w->shape;
    int r = xs->rank;
    if (r < 3 || r > 2 + KILN_WINDOW_MAX_SPATIAL)
        return kiln_errorf(err, r < 3 ? KILN_ERR_SHAPE_MISMATCH : KILN_ERR_UNSUPPORTED,
                           "X has shape %s: expected rank 3 to 5 (N, C, 1 to 3 spatial dims)",
                           kiln_shape_fmt(xs, &b1));
    if (ws->rank != r)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "W has shape %s but X has shape %s: expected W of rank %d (M, C/group, "
                           "kernel...)",
                           kiln_shape_fmt(ws, &b1), kiln_shape_fmt(xs, &b2), r);
    int64_t group = kiln_attr_int(n, "group", 1);
    if (group < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'group' is %lld, expected >= 1",
                           (long long)group);
    int64_t c = xs->dims[1], m = ws->dims[0];
    if (ws->dims[1] < 1 || ws->dims[1] * group != c)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "X %s has %lld channels but W %s with group %lld expects %lld "
                           "(W.shape[1] * group)",
                           kiln_shape_fmt(xs, &b1), (long long)c, kiln_shape_fmt(ws, &b2),
                           (long long)group, (long long)(ws->dims[1] * group));
    if (m < 1 || m % group != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "W %s has %lld output channels, not a positive multiple of group %lld",
                           kiln_shape_fmt(ws, &b1), (long long)m, (long long)group);
    const int64_t *ksv = NULL;
    int klen = kiln_attr_ints(n, "kernel_shape", &ksv);
    if (klen >= 0) {
        bool ok = klen == r - 2;
        for (int i = 0; ok && i < klen; i++)
            ok = ksv[i] == ws->dims[2 + i];
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "attribute 'kernel_shape' (%d entries) does not match W %s", klen,
                               kiln_shape_fmt(ws, &b1));
    }
    if (bias && (bias->shape.rank != 1 || bias->shape.dims[0] != m))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "B has shape %s, expected [%lld] (W %s)",
                           kiln_shape_fmt(&bias->shape, &b1), (long long)m, kiln_shape_fmt(ws, &b2));
    kiln_window g;
    if ((s = kiln_window_resolve(n, "Conv", xs, ws->dims + 2, false, &g, err)) != KILN_OK)
        return s;
    kiln_shape o = *xs;
    o.dims[1] = m;
    for (int i = 0; i < g.nsp; i++)
        o.dims[2 + i] = g.out[i];
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}

/* ---- pooling --------------------------------------------------------------- */

/* MaxPool takes float32, float64, int8 and uint8; the other window pools
 * float32 and float64. */
static kiln_status check_pool_dtype(const kiln_value *x, bool ints_ok, const char *op,
                                    kiln_error *err)
{
    kiln_shape_buf b;
    kiln_dtype t = x->dtype;
    bool ok = t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 ||
              (ints_ok && (t == KILN_DTYPE_INT8 || t == KILN_DTYPE_UINT8));
    if (!ok)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "%s: input 0 (X) is %s, expected %s", op,
                           kiln_dtype_name(t),
                           ints_ok ? "float32, float64, int8 or uint8" : "float32 or float64");
    if (kiln_shape_numel(&x->shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input 0 (X) has shape %s: symbolic or too large",
                           kiln_shape_fmt(&x->shape, &b));
    return KILN_OK;
}

kiln_status kiln_infer_pool(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"kernel_shape", KILN_ATTR_INTS},
                                           {"count_include_pad", KILN_ATTR_INT},
                                           {"storage_order", KILN_ATTR_INT},
                                           {"p", KILN_ATTR_INT}};
    bool is_max = n->op == KILN_OP_MAXPOOL;
    const char *op = is_max ? "MaxPool" : n->op == KILN_OP_LPPOOL ? "LpPool" : "AveragePool";
    kiln_shape_buf b1;
    kiln_status s;
    if ((s = check_pool_dtype(in[0], is_max, op, err)) != KILN_OK ||
        (s = kiln_node_attrs_check(n, specs, 4, err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "count_include_pad", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "storage_order", err)) != KILN_OK)
        return s;
    if (n->op == KILN_OP_LPPOOL) {
        int64_t p = kiln_attr_int(n, "p", 2);
        if (p < 1 || p > 64)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "attribute 'p' is %lld, expected 1 to 64", (long long)p);
    }
    const kiln_shape *xs = &in[0]->shape;
    const int64_t *ksv = NULL;
    int klen = kiln_attr_ints(n, "kernel_shape", &ksv);
    if (klen < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
    if (klen != xs->rank - 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'kernel_shape' has %d entries, expected %d for X of shape %s",
                           klen, xs->rank - 2, kiln_shape_fmt(xs, &b1));
    kiln_window g;
    if ((s = kiln_window_resolve(n, op, xs, ksv, true, &g, err)) != KILN_OK)
        return s;
    kiln_shape o = *xs;
    for (int i = 0; i < g.nsp; i++)
        o.dims[2 + i] = g.out[i];
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = o;
    if (is_max && n->n_outputs > 1) { /* MaxPool's Indices (arity checked by the driver) */
        out[1]->dtype = KILN_DTYPE_INT64;
        out[1]->shape = o;
    }
    return KILN_OK;
}

kiln_status kiln_infer_global_pool(const kiln_node *n, const kiln_value *const *in,
                                   kiln_value *const *out, kiln_error *err)
{
    bool is_max = n->op == KILN_OP_GLOBALMAXPOOL;
    kiln_shape_buf b1;
    kiln_status s = check_pool_dtype(in[0], false, is_max ? "GlobalMaxPool" : "GlobalAveragePool",
                                     err);
    if (s != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 3)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "X has shape %s: expected rank >= 3 (N, C, spatial...)",
                           kiln_shape_fmt(xs, &b1));
    kiln_shape o = *xs;
    for (int i = 2; i < xs->rank; i++) {
        if (xs->dims[i] < 1)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: empty spatial dim",
                               kiln_shape_fmt(xs, &b1));
        o.dims[i] = 1;
    }
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = o;
    return KILN_OK;
}

/* ---- Gemm / MatMul ----------------------------------------------------------- */

kiln_status kiln_infer_gemm(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"alpha", KILN_ATTR_FLOAT},
                                      {"beta", KILN_ATTR_FLOAT},
                                      {"transA", KILN_ATTR_INT},
                                      {"transB", KILN_ATTR_INT}};
    const kiln_value *a = in[0], *bv = in[1], *cv = kiln_infer_input_at(n, in, 2);
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_infer_check_float(a, 0, "A", err)) != KILN_OK || (s = kiln_infer_check_float(bv, 1, "B", err)) != KILN_OK ||
        (cv && (s = kiln_infer_check_float(cv, 2, "C", err)) != KILN_OK) ||
        (s = kiln_node_attrs_check(n, specs, 4, err)) != KILN_OK || (s = kiln_infer_check_flag(n, "transA", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "transB", err)) != KILN_OK)
        return s;
    if (a->shape.rank != 2 || bv->shape.rank != 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "A %s and B %s must both have rank 2",
                           kiln_shape_fmt(&a->shape, &b1), kiln_shape_fmt(&bv->shape, &b2));
    int ta = (int)kiln_attr_int(n, "transA", 0), tb = (int)kiln_attr_int(n, "transB", 0);
    int64_t m = a->shape.dims[ta ? 1 : 0], k = a->shape.dims[ta ? 0 : 1];
    int64_t kb = bv->shape.dims[tb ? 1 : 0], nn = bv->shape.dims[tb ? 0 : 1];
    if (k != kb)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "A %s (transA=%d) has K=%lld but B %s (transB=%d) has K=%lld",
                           kiln_shape_fmt(&a->shape, &b1), ta, (long long)k,
                           kiln_shape_fmt(&bv->shape, &b2), tb, (long long)kb);
    kiln_shape o = {.rank = 2, .dims = {m, nn}};
    if (cv) {
        const kiln_shape *cs = &cv->shape;
        bool ok = cs->rank <= 2;
        for (int i = 0; ok && i < cs->rank; i++) {
            int64_t want = o.dims[2 - cs->rank + i];
            ok = cs->dims[i] == 1 || cs->dims[i] == want;
        }
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "C has shape %s, not broadcastable to the output %s",
                               kiln_shape_fmt(cs, &b1), kiln_shape_fmt(&o, &b2));
    }
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}

kiln_status kiln_infer_matmul(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_infer_check_float(in[0], 0, "A", err)) != KILN_OK ||
        (s = kiln_infer_check_float(in[1], 1, "B", err)) != KILN_OK)
        return s;
    const kiln_shape *as = &in[0]->shape, *bs = &in[1]->shape;
    if (as->rank < 1 || bs->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "A %s and B %s must have rank >= 1",
                           kiln_shape_fmt(as, &b1), kiln_shape_fmt(bs, &b2));
    /* promote 1-D operands: A (K) -> (1, K), B (K) -> (K, 1) */
    int64_t m = as->rank == 1 ? 1 : as->dims[as->rank - 2];
    int64_t k = as->dims[as->rank - 1];
    int64_t kb = bs->rank == 1 ? bs->dims[0] : bs->dims[bs->rank - 2];
    int64_t nn = bs->rank == 1 ? 1 : bs->dims[bs->rank - 1];
    if (k != kb)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "A %s has K=%lld but B %s has K=%lld", kiln_shape_fmt(as, &b1),
                           (long long)k, kiln_shape_fmt(bs, &b2), (long long)kb);
    int ba = as->rank > 2 ? as->rank - 2 : 0, bb = bs->rank > 2 ? bs->rank - 2 : 0;
    int nb = ba > bb ? ba : bb;
    kiln_shape o = {.rank = 0};
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - ba), ib = i - (nb - bb);
        int64_t da = ia >= 0 ? as->dims[ia] : 1, db = ib >= 0 ? bs->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "batch dims of A %s and B %s do not broadcast (%lld vs %lld)",
                               kiln_shape_fmt(as, &b1), kiln_shape_fmt(bs, &b2), (long long)da,
                               (long long)db);
        o.dims[o.rank++] = da == 1 ? db : da;
    }
    if (as->rank > 1)
        o.dims[o.rank++] = m;
    if (bs->rank > 1)
        o.dims[o.rank++] = nn;
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}


/* ---- ConvTranspose ------------------------------------------------------------- */

kiln_status kiln_convt_resolve(const kiln_node *n, const kiln_shape *xs, const kiln_shape *ws,
                               kiln_convt_geom *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {
        {"auto_pad", KILN_ATTR_STRING}, {"strides", KILN_ATTR_INTS},
        {"dilations", KILN_ATTR_INTS},  {"pads", KILN_ATTR_INTS},
        {"group", KILN_ATTR_INT},       {"kernel_shape", KILN_ATTR_INTS},
        {"output_padding", KILN_ATTR_INTS}, {"output_shape", KILN_ATTR_INTS}};
    kiln_shape_buf b1, b2;
    kiln_convt_geom g;
    memset(&g, 0, sizeof g);
    kiln_status s = kiln_node_attrs_check(n, specs, 8, err);
    if (s != KILN_OK)
        return s;
    int r = xs->rank;
    g.nsp = r - 2;
    if (g.nsp < 1 || g.nsp > KILN_WINDOW_MAX_SPATIAL)
        return kiln_errorf(err, g.nsp < 1 ? KILN_ERR_SHAPE_MISMATCH : KILN_ERR_UNSUPPORTED,
                           "X has shape %s: expected rank 3 to 5 (N, C, 1 to 3 spatial dims)",
                           kiln_shape_fmt(xs, &b1));
    if (ws->rank != r)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "W has shape %s but X has shape %s: expected W of rank %d (C, M/group, "
                           "kernel...)",
                           kiln_shape_fmt(ws, &b1), kiln_shape_fmt(xs, &b2), r);
    g.group = kiln_attr_int(n, "group", 1);
    if (g.group < 1 || g.group > ATTR_LIMIT)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'group' is %lld, expected >= 1",
                           (long long)g.group);
    g.c_in = xs->dims[1];
    if (ws->dims[0] != g.c_in || g.c_in % g.group != 0 || ws->dims[1] < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "X %s has %lld channels but W %s (C, M/group, kernel...) with group "
                           "%lld expects W.shape[0] = C, a multiple of group",
                           kiln_shape_fmt(xs, &b1), (long long)g.c_in, kiln_shape_fmt(ws, &b2),
                           (long long)g.group);
    g.m_out = ws->dims[1] * g.group;
    const int64_t *ksv = NULL;
    int klen = kiln_attr_ints(n, "kernel_shape", &ksv);
    if (klen >= 0) {
        bool ok = klen == g.nsp;
        for (int i = 0; ok && i < klen; i++)
            ok = ksv[i] == ws->dims[2 + i];
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "attribute 'kernel_shape' (%d entries) does not match W %s", klen,
                               kiln_shape_fmt(ws, &b1));
    }
    const char *ap = kiln_attr_string(n, "auto_pad", "NOTSET");
    int mode;
    if (strcmp(ap, "NOTSET") == 0)
        mode = PAD_NOTSET;
    else if (strcmp(ap, "VALID") == 0)
        mode = PAD_VALID;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        mode = PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        mode = PAD_SAME_LOWER;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
    int64_t pads[2 * KILN_WINDOW_MAX_SPATIAL], opad[KILN_WINDOW_MAX_SPATIAL];
    if ((s = read_ints(n, "strides", g.nsp, 1, ATTR_LIMIT, 1, g.stride, xs, err)) != KILN_OK ||
        (s = read_ints(n, "dilations", g.nsp, 1, ATTR_LIMIT, 1, g.dilation, xs, err)) != KILN_OK ||
        (s = read_ints(n, "pads", 2 * g.nsp, 0, ATTR_LIMIT, 0, pads, xs, err)) != KILN_OK ||
        (s = read_ints(n, "output_padding", g.nsp, 0, ATTR_LIMIT, 0, opad, xs, err)) != KILN_OK)
        return s;
    const int64_t *osv = NULL;
    int olen = kiln_attr_ints(n, "output_shape", &osv);
    if (olen >= 0 && olen != g.nsp && olen != r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'output_shape' has %d entries, expected %d (spatial dims "
                           "of X %s)",
                           olen, g.nsp, kiln_shape_fmt(xs, &b1));
    for (int i = 0; i < g.nsp; i++) {
        int64_t in = xs->dims[2 + i], k = ws->dims[2 + i];
        if (in < 1 || k < 1 || k > ATTR_LIMIT)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "X %s and W %s: empty or oversized spatial dim %d",
                               kiln_shape_fmt(xs, &b1), kiln_shape_fmt(ws, &b2), i);
        if (opad[i] >= g.stride[i] && opad[i] >= g.dilation[i])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "output_padding[%d] = %lld must be smaller than the stride %lld or "
                               "the dilation %lld",
                               i, (long long)opad[i], (long long)g.stride[i],
                               (long long)g.dilation[i]);
        int64_t full = g.stride[i] * (in - 1) + opad[i] + g.dilation[i] * (k - 1) + 1;
        int64_t o, pb;
        if (olen >= 0 || mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
            o = olen >= 0 ? osv[olen - g.nsp + i] : in * g.stride[i];
            if (o < 1 || o > ATTR_LIMIT)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "output extent %lld in spatial dim %d is out of range",
                                   (long long)o, i);
            int64_t total = full - o < 0 ? 0 : full - o; /* extra cells go to the end */
            pb = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
        } else if (mode == PAD_VALID) {
            o = full;
            pb = 0;
        } else {
            pb = pads[i];
            o = full - pads[i] - pads[g.nsp + i];
            if (o < 1)
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "pads %lld+%lld in spatial dim %d leave no output (full "
                                   "extent %lld, X %s)",
                                   (long long)pads[i], (long long)pads[g.nsp + i], i,
                                   (long long)full, kiln_shape_fmt(xs, &b1));
        }
        g.in[i] = in;
        g.kernel[i] = k;
        g.pad_begin[i] = pb;
        g.out[i] = o;
    }
    *out = g;
    return KILN_OK;
}

kiln_status kiln_infer_conv_transpose(const kiln_node *n, const kiln_value *const *in,
                                      kiln_value *const *out, kiln_error *err)
{
    const kiln_value *x = in[0], *w = in[1], *bias = kiln_infer_input_at(n, in, 2);
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_infer_check_float(x, 0, "X", err)) != KILN_OK ||
        (s = kiln_infer_check_float(w, 1, "W", err)) != KILN_OK ||
        (bias && (s = kiln_infer_check_float(bias, 2, "B", err)) != KILN_OK))
        return s;
    kiln_convt_geom g;
    if ((s = kiln_convt_resolve(n, &x->shape, &w->shape, &g, err)) != KILN_OK)
        return s;
    if (bias && (bias->shape.rank != 1 || bias->shape.dims[0] != g.m_out))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "B has shape %s, expected [%lld] (W %s)",
                           kiln_shape_fmt(&bias->shape, &b1), (long long)g.m_out,
                           kiln_shape_fmt(&w->shape, &b2));
    kiln_shape o = x->shape;
    o.dims[1] = g.m_out;
    for (int i = 0; i < g.nsp; i++)
        o.dims[2 + i] = g.out[i];
    if (kiln_shape_numel(&o) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output shape %s is too large",
                           kiln_shape_fmt(&o, &b1));
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}
