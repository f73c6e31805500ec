/* ir/infer_norm.c: shape inference for the normalization family
 * (BatchNormalization, LayerNormalization, InstanceNormalization, LRN,
 * MeanVarianceNormalization, LpNormalization), the softmax family (Softmax,
 * LogSoftmax, Hardmax) and the losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss). Each checks what its reference kernel relies on:
 * dtypes (float32/float64 data, the same dtype for every float input; int32/
 * int64 loss targets), ranks, parameter shapes against X's channels or
 * normalized dims, attribute types and ranges. Messages name the input or
 * attribute and the shapes; the driver prefixes the node. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_norm.h"
#include "ir/infer_util.h"
#include "util/error.h"

/* A present input must be float32 or float64 with a static shape; `like`
 * (may be NULL) is a value whose dtype it must share. */
static kiln_status check_real(const kiln_value *v, int k, const char *label,
                              const kiln_value *like, kiln_error *err)
{
    kiln_shape_buf b;
    if (v->dtype != KILN_DTYPE_FLOAT32 && v->dtype != KILN_DTYPE_FLOAT64)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input %d (%s) is %s, expected float32 or float64", k, label,
                           kiln_dtype_name(v->dtype));
    if (like && v->dtype != like->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s) is %s, expected %s like X",
                           k, label, kiln_dtype_name(v->dtype), kiln_dtype_name(like->dtype));
    if (kiln_shape_numel(&v->shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input %d (%s) has shape %s: symbolic or too large", k, label,
                           kiln_shape_fmt(&v->shape, &b));
    return KILN_OK;
}
static kiln_status check_min_rank(const kiln_shape *xs, int min, const char *what,
                                  kiln_error *err)
{
    kiln_shape_buf b;
    if (xs->rank < min)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: expected rank >= %d%s",
                           kiln_shape_fmt(xs, &b), min, what);
    return KILN_OK;
}
static void set_out(kiln_value *o, kiln_dtype t, const kiln_shape *s)
{
    o->dtype = t;
    o->shape = *s;
}

kiln_status kiln_infer_batchnorm(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"epsilon", KILN_ATTR_FLOAT},
                                      {"momentum", KILN_ATTR_FLOAT},
                                      {"training_mode", KILN_ATTR_INT}};
    static const char *const labels[] = {"X", "scale", "B", "input_mean", "input_var"};
    kiln_shape_buf b1, b2;
    kiln_status s = kiln_node_attrs_check(n, specs, 3, err);
    if (s != KILN_OK)
        return s;
    if (kiln_attr_int(n, "training_mode", 0) != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "training_mode=1 is not supported (inference only)");
    for (int k = 0; k < 5; k++)
        if ((s = kiln_infer_check_float(in[k], k, labels[k], err)) != KILN_OK)
            return s;
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: expected rank >= 2 (N, C, ...)",
                           kiln_shape_fmt(xs, &b1));
    for (int k = 1; k < 5; k++) {
        const kiln_shape *ps = &in[k]->shape;
        if (ps->rank != 1 || ps->dims[0] != xs->dims[1])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input %d (%s) has shape %s, expected [%lld] (the channels of X %s)",
                               k, labels[k], kiln_shape_fmt(ps, &b1), (long long)xs->dims[1],
                               kiln_shape_fmt(xs, &b2));
    }
    kiln_infer_set_output(out[0], xs);
    return KILN_OK;
}
kiln_status kiln_infer_softmax(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    kiln_shape_buf b1;
    kiln_status s;
    if ((s = check_real(in[0], 0, "X", NULL, err)) != KILN_OK ||
        (s = kiln_node_attr_check(n, "axis", KILN_ATTR_INT, err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: expected rank >= 1",
                           kiln_shape_fmt(xs, &b1));
    int axis = 0;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", -1), xs->rank, "axis", xs, &axis, err)) != KILN_OK)
        return s;
    set_out(out[0], in[0]->dtype, xs);
    return KILN_OK;
}
/* Shape without its leading 1s (so (1, 1, D) and (D) compare equal). */
static kiln_shape strip_ones(const kiln_shape *s, int from)
{
    kiln_shape r = {.rank = 0};
    int i = from;
    while (i < s->rank && s->dims[i] == 1)
        i++;
    for (; i < s->rank; i++)
        r.dims[r.rank++] = s->dims[i];
    return r;
}
kiln_status kiln_infer_layernorm(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT},
                                      {"epsilon", KILN_ATTR_FLOAT},
                                      {"stash_type", KILN_ATTR_INT}};
    static const char *const labels[] = {"X", "Scale", "B"};
    kiln_shape_buf b1, b2;
    kiln_status s = kiln_node_attrs_check(n, specs, 3, err);
    if (s != KILN_OK)
        return s;
    if (kiln_attr_int(n, "stash_type", 1) != 1)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "stash_type %lld is not supported (statistics are float32, 1)",
                           (long long)kiln_attr_int(n, "stash_type", 1));
    for (int k = 0; k < 3; k++) {
        const kiln_value *v = kiln_infer_input_at(n, in, k);
        if (v && (s = check_real(v, k, labels[k], k ? in[0] : NULL, err)) != KILN_OK)
            return s;
    }
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: expected rank >= 1",
                           kiln_shape_fmt(xs, &b1));
    int axis = 0;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", -1), xs->rank, "axis", xs, &axis, err)) != KILN_OK)
        return s;
    kiln_shape want = strip_ones(xs, axis);
    for (int k = 1; k < 3; k++) {
        const kiln_value *v = kiln_infer_input_at(n, in, k);
        if (!v)
            continue;
        kiln_shape got = strip_ones(&v->shape, 0);
        if (!kiln_shape_equal(&got, &want)) {
            kiln_shape norm = {.rank = xs->rank - axis};
            memcpy(norm.dims, xs->dims + axis, sizeof(int64_t) * (size_t)norm.rank);
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input %d (%s) has shape %s, expected the normalized dims %s of X "
                               "(axis %d)",
                               k, labels[k], kiln_shape_fmt(&v->shape, &b1),
                               kiln_shape_fmt(&norm, &b2), axis);
        }
    }
    set_out(out[0], in[0]->dtype, xs);
    /* Mean and InvStdDev (float32, stash_type 1): X.shape[:axis] + [1] * (rank - axis) */
    kiln_shape stat = *xs;
    for (int d = axis; d < xs->rank; d++)
        stat.dims[d] = 1;
    for (int k = 1; k < n->n_outputs && k < 3; k++)
        set_out(out[k], KILN_DTYPE_FLOAT32, &stat);
    return KILN_OK;
}

/* Channel parameters (scale, B of InstanceNormalization): shape [C]. */
static kiln_status check_channel_param(const kiln_value *v, int k, const char *label,
                                       const kiln_value *x, kiln_error *err)
{
    kiln_shape_buf b1, b2;
    kiln_status s = check_real(v, k, label, x, err);
    if (s != KILN_OK)
        return s;
    if (v->shape.rank != 1 || v->shape.dims[0] != x->shape.dims[1])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input %d (%s) has shape %s, expected [%lld] (the channels of X %s)", k,
                           label, kiln_shape_fmt(&v->shape, &b1), (long long)x->shape.dims[1],
                           kiln_shape_fmt(&x->shape, &b2));
    return KILN_OK;
}

kiln_status kiln_infer_instancenorm(const kiln_node *n, const kiln_value *const *in,
                                    kiln_value *const *out, kiln_error *err)
{
    kiln_status s;
    if ((s = kiln_node_attr_check(n, "epsilon", KILN_ATTR_FLOAT, err)) != KILN_OK ||
        (s = check_real(in[0], 0, "X", NULL, err)) != KILN_OK ||
        (s = check_min_rank(&in[0]->shape, 2, " (N, C, D1, ...)", err)) != KILN_OK ||
        (s = check_channel_param(in[1], 1, "scale", in[0], err)) != KILN_OK ||
        (s = check_channel_param(in[2], 2, "B", in[0], err)) != KILN_OK)
        return s;
    set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_lrn(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"alpha", KILN_ATTR_FLOAT},
                                           {"beta", KILN_ATTR_FLOAT},
                                           {"bias", KILN_ATTR_FLOAT},
                                           {"size", KILN_ATTR_INT}};
    kiln_status s;
    if ((s = kiln_node_attrs_check(n, specs, 4, err)) != KILN_OK ||
        (s = check_real(in[0], 0, "X", NULL, err)) != KILN_OK ||
        (s = check_min_rank(&in[0]->shape, 2, " (N, C, D1, ...)", err)) != KILN_OK)
        return s;
    if (!kiln_node_attr(n, "size"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'size' is required");
    int64_t size = kiln_attr_int(n, "size", 0);
    if (size < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'size' is %lld, expected >= 1", (long long)size);
    set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}

/* MeanVarianceNormalization's axes (default [0, 2, 3]) into a mask. */
kiln_status kiln_mvn_axes(const kiln_node *n, const kiln_shape *xs, bool reduced[KILN_MAX_RANK],
                          kiln_error *err)
{
    static const int64_t def[3] = {0, 2, 3};
    const int64_t *axes = def;
    int na = kiln_attr_ints(n, "axes", &axes);
    if (na < 0) {
        axes = def;
        na = 3;
    }
    for (int d = 0; d < KILN_MAX_RANK; d++)
        reduced[d] = false;
    for (int i = 0; i < na; i++) {
        int ax = 0;
        kiln_status s = kiln_infer_norm_axis(axes[i], xs->rank, "axes entry", xs, &ax, err);
        if (s != KILN_OK)
            return s;
        if (reduced[ax])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "axes lists dim %d twice", ax);
        reduced[ax] = true;
    }
    return KILN_OK;
}

kiln_status kiln_infer_mvn(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    bool reduced[KILN_MAX_RANK];
    kiln_status s;
    if ((s = kiln_node_attr_check(n, "axes", KILN_ATTR_INTS, err)) != KILN_OK ||
        (s = check_real(in[0], 0, "X", NULL, err)) != KILN_OK ||
        (s = kiln_mvn_axes(n, &in[0]->shape, reduced, err)) != KILN_OK)
        return s;
    set_out(out[0], in[0]->dtype, &in[0]->shape);
    return KILN_OK;
}

kiln_status kiln_infer_lpnorm(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT}, {"p", KILN_ATTR_INT}};
    kiln_status s;
    if ((s = kiln_node_attrs_check(n, specs, 2, err)) != KILN_OK ||
        (s = check_real(in[0], 0, "X", NULL, err)) != KILN_OK ||
        (s = check_min_rank(&in[0]->shape, 1, "", err)) != KILN_OK)
        return s;
    int axis = 0;
    const kiln_shape *xs = &in[0]->shape;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", -1), xs->rank, "axis", xs, &axis,
                                  err)) != KILN_OK)
        return s;
    int64_t p = kiln_attr_int(n, "p", 2);
    if (p != 1 && p != 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'p' is %lld, expected 1 or 2",
                           (long long)p);
    set_out(out[0], in[0]->dtype, xs);
    return KILN_OK;
}

/* The checks NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss share:
 * input (N, C, d1..dk) float, target (N, d1..dk) int32/int64, weight? (C) of
 * the input's dtype, reduction none/sum/mean. Sets the loss output. */
static kiln_status infer_loss(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, const char *xlabel, const char *tlabel,
                              kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"reduction", KILN_ATTR_STRING},
                                           {"ignore_index", KILN_ATTR_INT}};
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_node_attrs_check(n, specs, 2, err)) != KILN_OK ||
        (s = check_real(in[0], 0, xlabel, NULL, err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape, *ts = &in[1]->shape;
    if (xs->rank < 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input 0 (%s) has shape %s: expected rank >= 2 (N, C, d1, ...)", xlabel,
                           kiln_shape_fmt(xs, &b1));
    if (in[1]->dtype != KILN_DTYPE_INT32 && in[1]->dtype != KILN_DTYPE_INT64)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input 1 (%s) is %s, expected int32 or int64", tlabel,
                           kiln_dtype_name(in[1]->dtype));
    bool ok = ts->rank == xs->rank - 1 && ts->dims[0] == xs->dims[0];
    for (int d = 1; ok && d < ts->rank; d++)
        ok = ts->dims[d] == xs->dims[d + 1];
    if (!ok)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input 1 (%s) has shape %s, expected the shape of input 0 %s without "
                           "its dim 1 (C)",
                           tlabel, kiln_shape_fmt(ts, &b1), kiln_shape_fmt(xs, &b2));
    const kiln_value *w = kiln_infer_input_at(n, in, 2);
    if (w) {
        if ((s = check_real(w, 2, "weights", in[0], err)) != KILN_OK)
            return s;
        if (w->shape.rank != 1 || w->shape.dims[0] != xs->dims[1])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input 2 (weights) has shape %s, expected [%lld] (C of input 0 %s)",
                               kiln_shape_fmt(&w->shape, &b1), (long long)xs->dims[1],
                               kiln_shape_fmt(xs, &b2));
    }
    const char *red = kiln_attr_string(n, "reduction", "mean");
    if (strcmp(red, "none") == 0)
        set_out(out[0], in[0]->dtype, ts);
    else if (strcmp(red, "sum") == 0 || strcmp(red, "mean") == 0) {
        kiln_shape scalar = {.rank = 0};
        set_out(out[0], in[0]->dtype, &scalar);
    } else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'reduction' is '%s', expected none, sum or mean", red);
    return KILN_OK;
}

kiln_status kiln_infer_nllloss(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    return infer_loss(n, in, out, "input", "target", err);
}

kiln_status kiln_infer_sceloss(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    kiln_status s = infer_loss(n, in, out, "scores", "labels", err);
    if (s == KILN_OK && n->n_outputs > 1) /* log_prob */
        set_out(out[1], in[0]->dtype, &in[0]->shape);
    return s;
}
