/* ir/infer_elemwise.c: shape inference for unary and broadcasting binary ops.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_infer_unary_float(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_unary_float");
}

kiln_status kiln_infer_broadcast(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_broadcast");
}

kiln_status kiln_infer_identity(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_identity");
}
