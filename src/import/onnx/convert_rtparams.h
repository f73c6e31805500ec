/* import/onnx/convert_rtparams.h: converters' paths for parameter inputs that
 * are run-time data and decide no output shape (convert_rtparams.c). Each is
 * called by the op's converter once onnx_rt_is_data said the parameter is
 * data; inputs were checked present. */
#ifndef KILN_IMPORT_ONNX_CONVERT_RTPARAMS_H
#define KILN_IMPORT_ONNX_CONVERT_RTPARAMS_H

#include "import/onnx/onnx.h"

/* Whether input k (present) is run-time data: neither a constant nor a chain
 * that folds to one (a graph input, or computed from one). *s: an error
 * other than "must be a constant". */
bool onnx_rt_is_data(onnx_ctx *c, int k, const char *what, kiln_error *err, kiln_status *s);
/* Clip (opset 11+) with min and/or max as data: Min(Max(x, min), max). */
kiln_status onnx_rt_clip(onnx_ctx *c, kiln_error *err);
/* Trilu with k as data: Where(j - i >= k (upper) / <= k (lower), x, 0). */
kiln_status onnx_rt_trilu(onnx_ctx *c, kiln_error *err);
/* CumSum with axis as data: one CumSum per axis, picked by Where. */
kiln_status onnx_rt_cumsum(onnx_ctx *c, kiln_error *err);

#endif
