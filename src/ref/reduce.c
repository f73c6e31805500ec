/* ref/reduce.c: reference reductions (ReduceSum, Mean, Max, Min, Prod, L1,
 * L2, LogSum, LogSumExp, SumSquare) and arg-reductions (ArgMax, ArgMin).
 *
 * Reductions: the input dims split into kept dims (the output cells, in
 * order) and reduced dims (a sub-box walked with an odometer from each output
 * cell's base offset); no scratch. Float inputs accumulate in double; integer
 * inputs accumulate Sum/SumSquare/L1/Prod/Max/Min in 64-bit integers
 * (wrapping like the element type) and L2/LogSum/LogSumExp in double,
 * truncated toward zero on the way out. An empty reduction yields the
 * identity of the operation (Sum 0, Prod 1, Max -inf or the type's minimum,
 * Min +inf or its maximum, LogSum/LogSumExp -inf). LogSumExp subtracts the
 * maximum before exponentiating. With noop_with_empty_axes and no axes the
 * output is a copy of the input.
 *
 * Arg-reductions walk the axis for every (outer, inner) position and keep the
 * first (or, with select_last_index, the last) extreme index; a NaN wins. */
#include <math.h>
#include <string.h>

#include "ir/infer_util.h"
#include "ref/red_num.h"
#include "ref/ref.h"

typedef enum red_kind {
    RED_SUM,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_L1,
    RED_L2,
    RED_LOGSUM,
    RED_LOGSUMEXP,
    RED_SUMSQ,
} red_kind;

/* kept and reduced dims with their extents and input strides */
typedef struct red_plan {
    int nk, nr;
    int64_t kdim[KILN_MAX_RANK], kstr[KILN_MAX_RANK];
    int64_t rdim[KILN_MAX_RANK], rstr[KILN_MAX_RANK];
    int64_t n_out, n_red;
} red_plan;

/* Advances the reduced-dims odometer `idx`; returns the new offset (relative
 * to the cell's base) from the current one `cur`. */
static inline int64_t box_next(const red_plan *p, int64_t *idx, int64_t cur)
{
    for (int i = p->nr - 1; i >= 0; i--) {
        cur += p->rstr[i];
        if (++idx[i] < p->rdim[i])
            return cur;
        cur -= p->rstr[i] * p->rdim[i];
        idx[i] = 0;
    }
    return cur;
}

static double reduce_cell_f(red_kind kind, kiln_dtype t, const void *x, int64_t base,
                            const red_plan *p)
{
    int64_t idx[KILN_MAX_RANK] = {0}, cur = 0;
    double acc = kind == RED_PROD ? 1.0 : kind == RED_MAX ? -INFINITY
                                      : kind == RED_MIN   ? INFINITY
                                                          : 0.0;
    if (kind == RED_LOGSUMEXP) {
        double m = -INFINITY;
        for (int64_t r = 0; r < p->n_red; r++, cur = box_next(p, idx, cur)) {
            double v = kiln_red_ldf(t, x, base + cur);
            if (v > m || isnan(v))
                m = v;
        }
        if (isinf(m) || isnan(m))
            return m; /* empty, all -inf, some +inf, or a NaN */
        memset(idx, 0, sizeof idx);
        cur = 0;
        for (int64_t r = 0; r < p->n_red; r++, cur = box_next(p, idx, cur))
            acc += exp(kiln_red_ldf(t, x, base + cur) - m);
        return m + log(acc);
    }
    for (int64_t r = 0; r < p->n_red; r++, cur = box_next(p, idx, cur)) {
        double v = kiln_red_ldf(t, x, base + cur);
        switch (kind) {
        case RED_SUM:
        case RED_MEAN:
        case RED_LOGSUM: acc += v; break;
        case RED_SUMSQ:
        case RED_L2: acc += v * v; break;
        case RED_L1: acc += fabs(v); break;
        case RED_PROD: acc *= v; break;
        case RED_MAX:
            if (v > acc || isnan(v))
                acc = isnan(acc) ? acc : v;
            break;
        case RED_MIN:
            if (v < acc || isnan(v))
                acc = isnan(acc) ? acc : v;
            break;
        default: break;
        }
    }
    switch (kind) {
    case RED_MEAN: return acc / (double)p->n_red;
    case RED_L2: return sqrt(acc);
    case RED_LOGSUM: return log(acc);
    default: return acc;
    }
}

/* Sum, SumSquare, L1, Prod, Max, Min of an integer type (wrapping). */
static int64_t reduce_cell_i(red_kind kind, kiln_dtype t, const void *x, int64_t base,
                             const red_plan *p)
{
    int64_t idx[KILN_MAX_RANK] = {0}, cur = 0;
    bool uns = kiln_red_is_unsigned(t);
    uint64_t acc = kind == RED_PROD  ? 1u
                   : kind == RED_MAX ? (uint64_t)kiln_red_int_min(t)
                   : kind == RED_MIN ? (uint64_t)kiln_red_int_max(t)
                                     : 0u;
    for (int64_t r = 0; r < p->n_red; r++, cur = box_next(p, idx, cur)) {
        int64_t v = kiln_red_ldi(t, x, base + cur);
        uint64_t u = (uint64_t)v;
        switch (kind) {
        case RED_SUM: acc += u; break;
        case RED_SUMSQ: acc += u * u; break;
        case RED_L1: acc += (!uns && v < 0) ? 0u - u : u; break;
        case RED_PROD: acc *= u; break;
        case RED_MAX:
            if (kiln_red_int_less(t, (int64_t)acc, v))
                acc = u;
            break;
        case RED_MIN:
            if (kiln_red_int_less(t, v, (int64_t)acc))
                acc = u;
            break;
        default: break;
        }
    }
    return (int64_t)acc;
}

static kiln_status reduce(red_kind kind, const char *op, const kiln_node *n,
                          const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    kiln_dtype t = xt->dtype;
    bool reduced[KILN_MAX_RANK], keep;
    kiln_status s = kiln_reduce_axes(n, xs->rank, reduced, &keep, err);
    if (s != KILN_OK)
        return s;
    if (out[0]->dtype != t)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: output dtype %s, input %s", op,
                           kiln_dtype_name(out[0]->dtype), kiln_dtype_name(t));
    int64_t strides[KILN_MAX_RANK];
    kiln_ref_strides(xs, strides);
    red_plan p = {.n_out = 1, .n_red = 1};
    for (int d = 0; d < xs->rank; d++) {
        if (reduced[d]) {
            p.rdim[p.nr] = xs->dims[d];
            p.rstr[p.nr++] = strides[d];
            p.n_red *= xs->dims[d];
        } else {
            p.kdim[p.nk] = xs->dims[d];
            p.kstr[p.nk++] = strides[d];
            p.n_out *= xs->dims[d];
        }
    }
    if (kiln_shape_numel(&out[0]->shape) != p.n_out)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: output has the wrong size", op);
    if (kind == RED_MEAN && p.n_red < 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: empty reduction", op);
    const kiln_attr *axes = kiln_node_attr(n, "axes");
    if (p.nr == 0 && kiln_attr_int(n, "noop_with_empty_axes", 0) == 1 && (!axes || axes->n == 0)) {
        if (p.n_out > 0)
            memcpy(out[0]->data, xt->data, (size_t)p.n_out * kiln_dtype_size(t));
        return KILN_OK;
    }
    bool int_path = !kiln_red_is_float(t) && kind != RED_L2 && kind != RED_LOGSUM &&
                    kind != RED_LOGSUMEXP && kind != RED_MEAN;
    int64_t kidx[KILN_MAX_RANK] = {0}, base = 0;
    for (int64_t o = 0; o < p.n_out; o++) {
        if (int_path)
            kiln_red_sti(t, out[0]->data, o, reduce_cell_i(kind, t, xt->data, base, &p));
        else
            kiln_red_stf(t, out[0]->data, o, reduce_cell_f(kind, t, xt->data, base, &p));
        for (int i = p.nk - 1; i >= 0; i--) {
            base += p.kstr[i];
            if (++kidx[i] < p.kdim[i])
                break;
            base -= p.kstr[i] * p.kdim[i];
            kidx[i] = 0;
        }
    }
    return KILN_OK;
}

#define REDUCE_KERNEL(fn, kind, name)                                                              \
    kiln_status fn(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out,      \
                   kiln_error *err)                                                                \
    {                                                                                              \
        return reduce(kind, name, n, in, out, err);                                                \
    }

REDUCE_KERNEL(kiln_ref_reducemean, RED_MEAN, "ReduceMean")
REDUCE_KERNEL(kiln_ref_reducesum, RED_SUM, "ReduceSum")
REDUCE_KERNEL(kiln_ref_reducemax, RED_MAX, "ReduceMax")
REDUCE_KERNEL(kiln_ref_reducemin, RED_MIN, "ReduceMin")
REDUCE_KERNEL(kiln_ref_reduceprod, RED_PROD, "ReduceProd")
REDUCE_KERNEL(kiln_ref_reducel1, RED_L1, "ReduceL1")
REDUCE_KERNEL(kiln_ref_reducel2, RED_L2, "ReduceL2")
REDUCE_KERNEL(kiln_ref_reducelogsum, RED_LOGSUM, "ReduceLogSum")
REDUCE_KERNEL(kiln_ref_reducelogsumexp, RED_LOGSUMEXP, "ReduceLogSumExp")
REDUCE_KERNEL(kiln_ref_reducesumsquare, RED_SUMSQ, "ReduceSumSquare")

/* ---- ArgMax / ArgMin ---------------------------------------------------- */

/* Whether candidate `v` replaces the current best `b` (float types). */
static inline bool arg_better_f(bool is_max, bool last, double v, double b)
{
    if (isnan(b))
        return last && isnan(v);
    if (isnan(v))
        return true;
    if (is_max)
        return last ? v >= b : v > b;
    return last ? v <= b : v < b;
}

static kiln_status argreduce(bool is_max, const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    int rank = xs->rank;
    int64_t a = kiln_attr_int(n, "axis", 0);
    if (a < -rank || a >= rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "axis %lld out of range", (long long)a);
    int axis = (int)(a < 0 ? a + rank : a);
    bool last = kiln_attr_int(n, "select_last_index", 0) == 1;
    int64_t outer = kiln_ref_prod(xs, 0, axis), len = xs->dims[axis];
    int64_t inner = kiln_ref_prod(xs, axis + 1, rank);
    if (len < 1 || out[0]->dtype != KILN_DTYPE_INT64 ||
        kiln_shape_numel(&out[0]->shape) != outer * inner)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: bad output or empty axis",
                           is_max ? "ArgMax" : "ArgMin");
    kiln_dtype t = xt->dtype;
    bool fl = kiln_red_is_float(t);
    int64_t *y = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i, best = 0;
            if (fl) {
                double b = kiln_red_ldf(t, xt->data, base);
                for (int64_t j = 1; j < len; j++) {
                    double v = kiln_red_ldf(t, xt->data, base + j * inner);
                    if (arg_better_f(is_max, last, v, b)) {
                        b = v;
                        best = j;
                    }
                }
            } else {
                int64_t b = kiln_red_ldi(t, xt->data, base);
                for (int64_t j = 1; j < len; j++) {
                    int64_t v = kiln_red_ldi(t, xt->data, base + j * inner);
                    bool better = is_max ? (last ? !kiln_red_int_less(t, v, b)
                                                 : kiln_red_int_less(t, b, v))
                                         : (last ? !kiln_red_int_less(t, b, v)
                                                 : kiln_red_int_less(t, v, b));
                    if (better) {
                        b = v;
                        best = j;
                    }
                }
            }
            y[o * inner + i] = best;
        }
    return KILN_OK;
}

kiln_status kiln_ref_argmax(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    return argreduce(true, n, in, out, err);
}

kiln_status kiln_ref_argmin(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    return argreduce(false, n, in, out, err);
}
