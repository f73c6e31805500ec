/* ref/pool.c: reference pooling.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_ref_maxpool(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_maxpool");
}

kiln_status kiln_ref_averagepool(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_averagepool");
}

kiln_status kiln_ref_global_averagepool(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_global_averagepool");
}
