/* ref/norm.c: reference BatchNormalization, Softmax, LayerNormalization, ReduceMean.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_ref_batchnorm(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_batchnorm");
}

kiln_status kiln_ref_softmax(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_softmax");
}

kiln_status kiln_ref_layernorm(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_layernorm");
}

kiln_status kiln_ref_reducemean(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_reducemean");
}
