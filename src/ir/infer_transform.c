/* ir/infer_transform.c: shape inference for data-movement ops.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_infer_flatten(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_flatten");
}

kiln_status kiln_infer_reshape(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_reshape");
}

kiln_status kiln_infer_transpose(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_transpose");
}

kiln_status kiln_infer_concat(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_concat");
}

kiln_status kiln_infer_split(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_split");
}

kiln_status kiln_infer_slice(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_slice");
}

kiln_status kiln_infer_gather(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_gather");
}

kiln_status kiln_infer_pad(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_pad");
}
