/* pass/lower_shuffle.c: DepthToSpace and SpaceToDepth as Reshape ->
 * Transpose -> Reshape, the ONNX spec's own definition, so the copy and
 * transpose templates run them (super-resolution nets' PixelShuffle, which
 * PyTorch exports as DepthToSpace CRD, ran on the reference kernel: 18% of
 * an ESPCN). With X [N, C, H, W] and blocksize b:
 *   DepthToSpace DCR: [N, b, b, C/b^2, H, W], perm (0, 3, 4, 1, 5, 2)
 *   DepthToSpace CRD: [N, C/b^2, b, b, H, W], perm (0, 1, 4, 2, 5, 3)
 *     -> [N, C/b^2, H*b, W*b]
 *   SpaceToDepth:     [N, C, H/b, b, W/b, b], perm (0, 3, 5, 1, 2, 4)
 *     -> [N, C*b^2, H/b, W/b]
 * The Reshapes are views; the Transpose is the one copy the op makes. */
#include <string.h>

#include "pass/pass.h"
#include "util/error.h"

static bool plan(const kiln_graph *g, const kiln_node *n)
{
    if ((n->op != KILN_OP_DEPTHTOSPACE && n->op != KILN_OP_SPACETODEPTH) || n->n_inputs != 1 ||
        n->inputs[0] < 0 || n->n_outputs != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    /* shapes inferred (infer-shapes checked blocksize, mode and divisibility) */
    return x->shape.rank == 4 && y->shape.rank == 4 && kiln_attr_int(n, "blocksize", 0) >= 1 &&
           kiln_shape_numel(&x->shape) > 0;
}

static bool lower(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    const int64_t *d = x->shape.dims;
    int64_t N = d[0], C = d[1], H = d[2], W = d[3], b = kiln_attr_int(n, "blocksize", 1);
    kiln_shape split = {.rank = 6}, moved = {.rank = 6};
    int64_t perm[6];
    if (n->op == KILN_OP_SPACETODEPTH) {
        split.dims[0] = N, split.dims[1] = C, split.dims[2] = H / b, split.dims[3] = b;
        split.dims[4] = W / b, split.dims[5] = b;
        static const int64_t p[6] = {0, 3, 5, 1, 2, 4};
        memcpy(perm, p, sizeof perm);
    } else if (strcmp(kiln_attr_string(n, "mode", "DCR"), "CRD") == 0) {
        split.dims[0] = N, split.dims[1] = C / (b * b), split.dims[2] = b, split.dims[3] = b;
        split.dims[4] = H, split.dims[5] = W;
        static const int64_t p[6] = {0, 1, 4, 2, 5, 3};
        memcpy(perm, p, sizeof perm);
    } else {
        split.dims[0] = N, split.dims[1] = b, split.dims[2] = b, split.dims[3] = C / (b * b);
        split.dims[4] = H, split.dims[5] = W;
        static const int64_t p[6] = {0, 3, 4, 1, 5, 2};
        memcpy(perm, p, sizeof perm);
    }
    for (int k = 0; k < 6; k++)
        moved.dims[k] = split.dims[perm[k]];
    int cur = kiln_rewrite_value(rw, n->inputs[0]);
    cur = kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, ".split", cur, &split, split.dims, false);
    cur = kiln_rewrite_move(rw, n, KILN_OP_TRANSPOSE, ".move", cur, &moved, perm, false);
    return kiln_rewrite_move(rw, n, KILN_OP_RESHAPE, "", cur, &y->shape, y->shape.dims, true) >= 0;
}

kiln_status kiln_pass_lower_shuffle(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, plan, lower, err);
}
