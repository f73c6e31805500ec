/* pass/remove_identity.c: drops nodes that pass their input through.
 *
 * Identity, and Reshape/Flatten whose output shape equals the input's, are
 * removed by redirecting every use of the output to the input (a graph output
 * keeps its name: kiln_rewrite_finish re-adds a copy where needed). Two
 * chained Reshape/Flatten collapse into one Reshape of the first's input:
 * row-major reshapes compose. (Dropout never reaches the IR: the ONNX importer
 * turns inference-mode Dropout into Identity.) A Resize whose every scale is
 * exactly 1 (given, or sizes equal to the input's extents) samples every
 * element at its own coordinate in the half_pixel, pytorch_half_pixel,
 * align_corners and asymmetric transforms, in every mode, so it goes too
 * (the detection networks' transform resizes a 320x320 image to 320x320);
 * the tf_* transforms shift or crop and are kept. */
#include <stdlib.h>

#include "ir/infer_nn.h"
#include "pass/pass.h"
#include "util/error.h"

static bool is_reshape(kiln_op op)
{
    return op == KILN_OP_RESHAPE || op == KILN_OP_FLATTEN;
}

static bool is_identity_resize(const kiln_node *n, const kiln_value *x)
{
    kiln_resize_params p;
    kiln_error e = {0};
    if (n->op != KILN_OP_RESIZE || kiln_resize_resolve(n, &x->shape, &p, &e) != KILN_OK)
        return false;
    if (p.coord != KILN_COORD_HALF_PIXEL && p.coord != KILN_COORD_PYTORCH_HALF_PIXEL &&
        p.coord != KILN_COORD_ALIGN_CORNERS && p.coord != KILN_COORD_ASYMMETRIC)
        return false;
    for (int d = 0; d < p.rank; d++)
        if (p.scale[d] != 1.0 || p.out[d] != x->shape.dims[d])
            return false;
    return true;
}

kiln_status kiln_pass_remove_identity(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    kiln_rewrite rw;
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    if (st != KILN_OK)
        return st;
    int removed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        const kiln_value *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? g->values[n->inputs[0]] : NULL;
        const kiln_value *y = n->n_outputs == 1 ? g->values[n->outputs[0]] : NULL;
        bool same_layout = x && y && kiln_layout_equal(x->layout, y->layout);
        if (x && y && same_layout &&
            (n->op == KILN_OP_IDENTITY || is_identity_resize(n, x) ||
             (is_reshape(n->op) && kiln_shape_equal(&x->shape, &y->shape)))) {
            rw.map[y->id] = kiln_rewrite_value(&rw, x->id);
            removed++;
            continue;
        }
        if (x && y && is_reshape(n->op) && x->kind == KILN_VALUE_NODE &&
            is_reshape(g->nodes[x->producer]->op) &&
            x->layout.kind == KILN_LAYOUT_ROW_MAJOR) {
            /* reshape of a reshape: reshape the original directly */
            const kiln_node *p = g->nodes[x->producer];
            int in = kiln_rewrite_value(&rw, p->inputs[0]);
            kiln_node tmp = *n;
            tmp.op = KILN_OP_RESHAPE;
            tmp.n_attrs = 0;
            int id = kiln_rewrite_node(&rw, &tmp, &in);
            if (id < 0)
                goto oom;
            int64_t dims[KILN_MAX_RANK];
            for (int d = 0; d < y->shape.rank; d++)
                dims[d] = y->shape.dims[d];
            if (kiln_node_set_ints(rw.dst, id, "shape", dims, y->shape.rank) != KILN_OK ||
                kiln_node_set_int(rw.dst, id, "allowzero", 1) != KILN_OK)
                goto oom;
            continue;
        }
        if (kiln_rewrite_node(&rw, n, NULL) < 0)
            goto oom;
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    ctx->stat_removed += removed;
    return kiln_pass_ctx_replace(ctx, ng, err);
oom:
    kiln_rewrite_abort(&rw);
    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
}
