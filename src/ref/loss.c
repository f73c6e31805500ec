/* ref/loss.c: STUB file: to be written. */
#include "ir/graph.h"
#include "util/error.h"

/* STUB */
kiln_status kiln_ref_logsoftmax(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_hardmax(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_instancenorm(const kiln_node *n, const kiln_tensor *const *in,
                                  kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_lrn(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_mvn(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_lpnorm(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_nllloss(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_sceloss(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

