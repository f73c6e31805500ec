/* import/onnx/convert_composite.h: converters of convert_composite.c that
 * other converters call. */
#ifndef KILN_IMPORT_ONNX_CONVERT_COMPOSITE_H
#define KILN_IMPORT_ONNX_CONVERT_COMPOSITE_H

#include "import/onnx/onnx.h"

/* BatchNormalization with training_mode=1: batch statistics (population
 * variance) and the updated running mean and variance, as kiln ops. */
kiln_status onnx_convert_batchnorm_training(onnx_ctx *c, kiln_error *err);

#endif
