/* import/onnx/convert_reduce.c: converters for the reductions. Axes that ONNX
 * 18 passes as an input become kiln's `axes` attribute. */
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

static kiln_status emit_reducemean(onnx_ctx *c, const int64_t *axes, int n_axes, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_REDUCEMEAN, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    if (n_axes >= 0)
        s = kiln_node_set_ints(c->g, node, "axes", axes, n_axes);
    if (s == KILN_OK)
        s = onnx_copy_attrs(c, node, "keepdims noop_with_empty_axes", err);
    if (s != KILN_OK)
        return s;
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}
static kiln_status conv_reducemean1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = onnx_attr_ints(c, "axes", &axes);
    return emit_reducemean(c, axes, n, err);
}
/* ReduceMean 18: axes is an optional input; empty with noop_with_empty_axes
 * is the identity. */
static kiln_status conv_reducemean18(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = -1;
    if (onnx_in(c, 1) >= 0) {
        kiln_status s = onnx_in_ints(c, 1, "axes", &axes, &n, err);
        if (s != KILN_OK)
            return s;
    }
    if (n <= 0 && onnx_attr_int(c, "noop_with_empty_axes", 0)) {
        const kiln_value *x = onnx_need(c, 0, "data", err);
        if (!x)
            return err ? err->status : KILN_ERR_INVALID_GRAPH;
        return onnx_bind(c, 0, x->id, err);
    }
    return emit_reducemean(c, axes, n > 0 ? n : -1, err);
}
const onnx_converter onnx_reduce_converters[] = {
    {"ReduceMean", 1, conv_reducemean1, "axes:ints keepdims:int"},
    {"ReduceMean", 18, conv_reducemean18, "keepdims:int noop_with_empty_axes:int"},
    {NULL, 0, NULL, NULL},
};
