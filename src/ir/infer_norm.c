/* ir/infer_norm.c: shape inference for BatchNormalization, Softmax and
 * LayerNormalization. Messages name the input or attribute and the shapes; the
 * driver prefixes the node. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_util.h"
#include "util/error.h"

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
    if ((s = kiln_infer_check_float(in[0], 0, "X", err)) != KILN_OK ||
        (s = kiln_node_attr_check(n, "axis", KILN_ATTR_INT, err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape;
    if (xs->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: expected rank >= 1",
                           kiln_shape_fmt(xs, &b1));
    int axis = 0;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", -1), xs->rank, "axis", xs, &axis, err)) != KILN_OK)
        return s;
    kiln_infer_set_output(out[0], xs);
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
    for (int k = 0; k < 3; k++) {
        const kiln_value *v = kiln_infer_input_at(n, in, k);
        if (v && (s = kiln_infer_check_float(v, k, labels[k], err)) != KILN_OK)
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
    kiln_infer_set_output(out[0], xs);
    return KILN_OK;
}

/* STUB */
kiln_status kiln_infer_instancenorm(const kiln_node *n, const kiln_value *const *in,
                                    kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_lrn(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_mvn(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_lpnorm(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_nllloss(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_sceloss(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

