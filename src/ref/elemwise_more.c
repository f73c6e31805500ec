/* ref/elemwise_more.c: STUB file: to be written. */
#include "ir/graph.h"
#include "util/error.h"

/* STUB */
kiln_status kiln_ref_abs(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_neg(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_sign(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_exp(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_log(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_tanh(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_sin(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_cos(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_tan(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_asin(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_acos(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_atan(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_sinh(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_cosh(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_asinh(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_acosh(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_atanh(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_softplus(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_softsign(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_elu(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_selu(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_celu(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_leakyrelu(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_thresholdedrelu(const kiln_node *n, const kiln_tensor *const *in,
                                     kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_shrink(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_mish(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_ceil(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_floor(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_round(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reciprocal(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_gelu(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_isnan(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_isinf(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_not(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_mod(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_min(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_max(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_sum(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_mean(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_prelu(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_equal(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_greater(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_less(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_greaterorequal(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_lessorequal(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_and(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_or(const kiln_node *n, const kiln_tensor *const *in,
                        kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_xor(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_bitshift(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_where(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_cast(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

