/* ref/matmul.c: reference Gemm and MatMul.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_ref_gemm(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_gemm");
}

kiln_status kiln_ref_matmul(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "ref_matmul");
}
