/* ref/elemwise.c: reference unary and broadcasting binary ops.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_ref_relu(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_relu");
}

kiln_status kiln_ref_clip(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_clip");
}

kiln_status kiln_ref_sigmoid(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_sigmoid");
}

kiln_status kiln_ref_hardsigmoid(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_hardsigmoid");
}

kiln_status kiln_ref_hardswish(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_hardswish");
}

kiln_status kiln_ref_erf(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_erf");
}

kiln_status kiln_ref_sqrt(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_sqrt");
}

kiln_status kiln_ref_add(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_add");
}

kiln_status kiln_ref_sub(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_sub");
}

kiln_status kiln_ref_mul(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_mul");
}

kiln_status kiln_ref_div(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_div");
}

kiln_status kiln_ref_pow(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_pow");
}
