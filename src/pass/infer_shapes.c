/* pass/infer_shapes.c: shape inference as a pass. Runs every node's inference
 * function in topological order (kiln_graph_infer_shapes), so that every later
 * pass can rely on each value's dtype and static shape. A symbolic dimension
 * left after inference is reported: the code generator needs static shapes. */
#include "pass/pass.h"
#include "util/error.h"

kiln_status kiln_pass_infer_shapes(kiln_pass_ctx *ctx, kiln_error *err)
{
    kiln_graph *g = ctx->g;
    kiln_status s = kiln_graph_infer_shapes(g, err);
    if (s != KILN_OK)
        return s;
    for (int i = 0; i < g->n_values; i++) {
        const kiln_value *v = g->values[i];
        if (v->dtype == KILN_DTYPE_UNDEFINED)
            continue; /* an unused output of a multi-output node may stay untyped */
        if (kiln_shape_numel(&v->shape) < 0) {
            kiln_shape_buf b;
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "value '%s' has a symbolic or too large shape %s: the compiler "
                               "needs static shapes",
                               v->name, kiln_shape_fmt(&v->shape, &b));
        }
    }
    return KILN_OK;
}
