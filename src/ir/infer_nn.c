/* ir/infer_nn.c: shape inference for Conv, pooling, normalization, Gemm/MatMul, Softmax, reductions.
 * STUB: placeholder so the project links; to be replaced. */
#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_infer_conv(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_conv");
}

kiln_status kiln_infer_batchnorm(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_batchnorm");
}

kiln_status kiln_infer_pool(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_pool");
}

kiln_status kiln_infer_global_pool(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_global_pool");
}

kiln_status kiln_infer_gemm(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_gemm");
}

kiln_status kiln_infer_matmul(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_matmul");
}

kiln_status kiln_infer_softmax(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_softmax");
}

kiln_status kiln_infer_layernorm(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_layernorm");
}

kiln_status kiln_infer_reduce(const kiln_node *n, const kiln_value *const *in, kiln_value *const *out, kiln_error *err)
{
    (void)n; (void)in; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "kiln_%s: not implemented", "infer_reduce");
}
