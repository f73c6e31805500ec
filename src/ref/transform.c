/* ref/transform.c: reference data-movement ops.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_ref_copy(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_copy");
}

kiln_status kiln_ref_transpose(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_transpose");
}

kiln_status kiln_ref_concat(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_concat");
}

kiln_status kiln_ref_split(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_split");
}

kiln_status kiln_ref_slice(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_slice");
}

kiln_status kiln_ref_gather(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_gather");
}

kiln_status kiln_ref_pad(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_pad");
}
