/* import/onnx/fold_op.h: constant folding through kiln's own ops, and the
 * converters' "emit a node, or fold it when every input is constant" helper.
 *
 * onnx_fold_op (fold.c) evaluates one kiln op at import time on constant
 * tensors: it builds a node with the given attributes, runs the op's shape
 * inference on the constants, allocates each output (bounded by
 * ONNX_FOLD_MAX_BYTES: a larger result is KILN_ERR_UNSUPPORTED, so that the
 * caller can emit the node instead) and runs the op's reference kernel. So the
 * folded value is computed by the same code as at run time.
 *
 * onnx_emit_or_fold (convert_movement.c) is what a converter calls: when
 * every present input is a constant with data it folds and binds the outputs
 * as constants, otherwise (or when the result is too large to fold) it emits
 * the kiln node with the attributes and binds its outputs. */
#ifndef KILN_IMPORT_ONNX_FOLD_OP_H
#define KILN_IMPORT_ONNX_FOLD_OP_H

#include "import/onnx/onnx.h"

#define ONNX_FOLD_MAX_IO 64

/* ins[i] may be NULL for an absent optional input. On success outs[0..n_out)
 * hold malloc'ed results (kiln_tensor_release each); on failure nothing is
 * left allocated. Messages name no node: the caller prefixes it. */
kiln_status onnx_fold_op(kiln_op op, const kiln_attr *attrs, int n_attrs,
                         const kiln_tensor *const *ins, int n_in, kiln_tensor *outs, int n_out,
                         kiln_error *err);

/* ins[i] are kiln value ids (-1: absent); the ONNX node's outputs 0..n_out-1
 * are bound. */
kiln_status onnx_emit_or_fold(onnx_ctx *c, kiln_op op, const int *ins, int n_in,
                              const kiln_attr *attrs, int n_attrs, int n_out, kiln_error *err);

#endif
