/* import/onnx/convert_movement.h: the converters of convert_movement.c,
 * listed in onnx_shape_converters (convert_shape.c). */
#ifndef KILN_IMPORT_ONNX_CONVERT_MOVEMENT_H
#define KILN_IMPORT_ONNX_CONVERT_MOVEMENT_H

#include "import/onnx/onnx.h"

/* onnx_in_ints / onnx_in_scalar (onnx.h) for parameter inputs that kiln can
 * compute at import time: when input k is the output of kiln nodes whose
 * leaves are all constants, those nodes are evaluated by their reference
 * kernels and input k is rebound to the resulting constant first. When it
 * depends on a graph input, the "must be a constant" error names that graph
 * input (so that the conformance runner can bind it). */
kiln_status onnx_in_ints_eval(onnx_ctx *c, int k, const char *what, const int64_t **v, int *n,
                              kiln_error *err);
kiln_status onnx_in_scalar_eval(onnx_ctx *c, int k, const char *what, double *v,
                                kiln_error *err);
/* Whether input k is (now) a constant; *status is set on an error. */
bool onnx_in_const_eval(onnx_ctx *c, int k, const char *what, kiln_error *err,
                        kiln_status *status);

kiln_status onnx_convert_tile(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_gather_elements(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_gather_nd(onnx_ctx *c, kiln_error *err);
/* ScatterElements, and the deprecated Scatter (opset 9-10), its alias */
kiln_status onnx_convert_scatter_elements(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_scatter_nd(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_depth_to_space(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_space_to_depth(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_trilu(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_onehot(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_reverse_sequence(onnx_ctx *c, kiln_error *err);
/* import-time constants: Range from constant inputs, Size and EyeLike from
 * the input's static shape */
kiln_status onnx_convert_range(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_size(onnx_ctx *c, kiln_error *err);
kiln_status onnx_convert_eyelike(onnx_ctx *c, kiln_error *err);

#endif
