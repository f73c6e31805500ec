/* io/tensor_io.h: ONNX TensorProto <-> kiln_tensor, shared by the tensor files
 * (io/tensor_pb.c) and the ONNX importer (initializers, Constant nodes). */
#ifndef KILN_IO_TENSOR_IO_H
#define KILN_IO_TENSOR_IO_H

#include <stdint.h>

#include "kiln/types.h"
#include "onnx.pb-c.h"

/* ONNX TensorProto.DataType -> kiln_dtype; KILN_DTYPE_UNDEFINED for types kiln
 * does not handle (STRING, BFLOAT16, complex, float8, ...) or unknown values. */
kiln_dtype kiln_dtype_from_onnx(int32_t onnx_type);

/* kiln_dtype -> ONNX TensorProto.DataType; 0 (UNDEFINED) for
 * KILN_DTYPE_UNDEFINED or an out-of-range value. */
int32_t kiln_dtype_to_onnx(kiln_dtype t);

/* Converts an unpacked TensorProto into *out (dtype, shape, malloc'ed data that
 * the caller releases with kiln_tensor_release). Reads raw_data (little-endian)
 * or the typed field the ONNX spec assigns to the data type (float_data,
 * int32_data, int64_data, double_data, uint64_data). Checks rank <= 
 * KILN_MAX_RANK, non-negative dims, no overflow, and that the data holds exactly
 * the product of the dims. Errors (messages do not name a file; callers prefix
 * one with kiln_error_prefix):
 *   KILN_ERR_PARSE        malformed (bad dims, size/count mismatch)
 *   KILN_ERR_UNSUPPORTED  a data type kiln does not handle, or
 *                         data_location == EXTERNAL (the importer resolves it)
 * On failure *out is untouched. */
kiln_status kiln_tensor_from_onnx(const Onnx__TensorProto *tp, kiln_tensor *out,
                                  kiln_error *err);

/* kiln_tensor_from_onnx with the data written straight into a buffer that
 * alloc(ctx, t) returns for t's dtype and shape (NULL: out of memory), so a
 * caller that keeps the tensor elsewhere (the importer: the graph's
 * constant) copies it once. The buffer is the caller's: it is not freed when
 * the decode then fails. alloc may return tp->raw_data.data itself when the
 * caller uses the raw bytes in place (little-endian, not BOOL): nothing is
 * copied then. alloc NULL: kiln_tensor_from_onnx. */
typedef void *(*kiln_tensor_alloc_fn)(void *ctx, const kiln_tensor *t);
kiln_status kiln_tensor_from_onnx_into(const Onnx__TensorProto *tp, kiln_tensor_alloc_fn alloc,
                                       void *ctx, kiln_tensor *out, kiln_error *err);

/* ---- internal to src/io ------------------------------------------------ */

/* Copies n elements of esize bytes between little-endian file order and host
 * order (a plain copy on little-endian hosts; the same call converts both
 * ways). dst and src must not overlap. */
void kiln_io_copy_le(void *dst, const void *src, size_t n, size_t esize);

/* Checks a tensor handed to a writer (known dtype, rank 0..KILN_MAX_RANK,
 * non-negative dims, finite size, data present unless empty) and stores its
 * byte size in *nbytes. KILN_ERR_INVALID_ARGUMENT otherwise. */
kiln_status kiln_io_check_tensor(const kiln_tensor *t, size_t *nbytes, kiln_error *err);

/* Limit on a whole tensor file read by kiln_tensor_read. */
#define KILN_TENSOR_FILE_MAX (SIZE_MAX / 2)

#endif
