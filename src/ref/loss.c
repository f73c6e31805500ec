/* ref/loss.c: reference NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (float32/float64 data, int32/int64 targets).
 *
 * Input (N, C, d1..dk) is viewed as (N, C, D) with D = d1 * ... * dk, the
 * target as (N, D). For each (n, d) with target t:
 *   w = 0 if t == ignore_index (when the attribute is present), else
 *       weight[t] (1 without weights);
 *   loss = -w * input[n, t, d]   (0 when ignored);
 * a target outside [0, C) that is not ignored is an error. reduction "none"
 * returns the (N, d1..dk) losses, "sum" their sum, "mean" their sum divided
 * by the sum of w (numpy's mean when there are neither weights nor ignored
 * targets). SoftmaxCrossEntropyLoss applies the above to
 * log_prob = LogSoftmax(scores) along dim 1, computed per (n, d) line as
 * x - max - log(sum(exp(x - max))), and returns log_prob as its optional
 * second output. Sums are in double.
 */
#include <math.h>
#include <string.h>

#include "ref/real.h"
#include "ref/ref.h"

typedef struct loss_geom {
    int64_t batch, classes, inner;
    bool has_ii;
    int64_t ii;
    int red; /* 0 none, 1 sum, 2 mean */
} loss_geom;

static kiln_status loss_setup(const kiln_node *n, const kiln_tensor *const *in, loss_geom *g,
                              kiln_error *err)
{
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s: input has rank %d, expected >= 2",
                           kiln_op_name(n->op), xs->rank);
    g->batch = xs->dims[0];
    g->classes = xs->dims[1];
    g->inner = kiln_ref_prod(xs, 2, xs->rank);
    if (kiln_shape_numel(&in[1]->shape) != g->batch * g->inner)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s: input and target shapes disagree",
                           kiln_op_name(n->op));
    g->has_ii = kiln_node_attr(n, "ignore_index") != NULL;
    g->ii = kiln_attr_int(n, "ignore_index", 0);
    const char *red = kiln_attr_string(n, "reduction", "mean");
    g->red = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1 : 2;
    const kiln_tensor *w = n->n_inputs > 2 ? in[2] : NULL;
    if (w && kiln_shape_numel(&w->shape) != g->classes)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "%s: weights need %lld entries",
                           kiln_op_name(n->op), (long long)g->classes);
    return KILN_OK;
}

/* The loss over log-probabilities `lp` (an (N, C, D) tensor, or NULL with
 * `x` given: then log_prob is computed from the scores x on the fly). */
static kiln_status loss_reduce(const kiln_node *n, const kiln_tensor *lp, const kiln_tensor *x,
                               const kiln_tensor *target, const kiln_tensor *w,
                               const loss_geom *g, kiln_tensor *out, kiln_error *err)
{
    double total = 0.0, wsum = 0.0;
    for (int64_t b = 0; b < g->batch; b++)
        for (int64_t d = 0; d < g->inner; d++) {
            int64_t at = b * g->inner + d, t = kiln_index_ld(target, at);
            double loss = 0.0, wt = 0.0;
            if (!(g->has_ii && t == g->ii)) {
                if (t < 0 || t >= g->classes)
                    return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                       "%s: target %lld at element %lld is outside [0, %lld)",
                                       kiln_op_name(n->op), (long long)t, (long long)at,
                                       (long long)g->classes);
                int64_t base = b * g->classes * g->inner + d;
                double v;
                if (lp)
                    v = kiln_real_ld(lp, base + t * g->inner);
                else {
                    double mx = kiln_real_ld(x, base), sum = 0.0;
                    for (int64_t c = 1; c < g->classes; c++)
                        mx = fmax(mx, kiln_real_ld(x, base + c * g->inner));
                    for (int64_t c = 0; c < g->classes; c++)
                        sum += exp(kiln_real_ld(x, base + c * g->inner) - mx);
                    v = kiln_real_ld(x, base + t * g->inner) - mx - log(sum);
                }
                wt = w ? kiln_real_ld(w, t) : 1.0;
                loss = -wt * v;
            }
            if (g->red == 0)
                kiln_real_st(out, at, loss);
            total += loss;
            wsum += wt;
        }
    if (g->red == 1)
        kiln_real_st(out, 0, total);
    else if (g->red == 2)
        kiln_real_st(out, 0, total / wsum);
    return KILN_OK;
}

kiln_status kiln_ref_nllloss(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    loss_geom g;
    kiln_status s = loss_setup(n, in, &g, err);
    if (s != KILN_OK)
        return s;
    return loss_reduce(n, in[0], NULL, in[1], n->n_inputs > 2 ? in[2] : NULL, &g, out[0], err);
}

kiln_status kiln_ref_sceloss(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    loss_geom g;
    kiln_status s = loss_setup(n, in, &g, err);
    if (s != KILN_OK)
        return s;
    kiln_tensor *lp = n->n_outputs > 1 ? out[1] : NULL;
    if (lp && g.classes > 0) {
        const kiln_tensor *x = in[0];
        for (int64_t b = 0; b < g.batch; b++)
            for (int64_t d = 0; d < g.inner; d++) {
                int64_t base = b * g.classes * g.inner + d;
                double mx = kiln_real_ld(x, base), sum = 0.0;
                for (int64_t c = 1; c < g.classes; c++)
                    mx = fmax(mx, kiln_real_ld(x, base + c * g.inner));
                for (int64_t c = 0; c < g.classes; c++)
                    sum += exp(kiln_real_ld(x, base + c * g.inner) - mx);
                double lse = mx + log(sum);
                for (int64_t c = 0; c < g.classes; c++)
                    kiln_real_st(lp, base + c * g.inner, kiln_real_ld(x, base + c * g.inner) - lse);
            }
    }
    return loss_reduce(n, lp, in[0], in[1], n->n_inputs > 2 ? in[2] : NULL, &g, out[0], err);
}
