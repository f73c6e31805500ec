/* kiln/types.h: types shared by the compiler API (kiln.h) and the runtime API.
 *
 * Everything here is plain data: status codes, the error record every fallible
 * call fills, element types, static shapes and the tensor descriptor.
 */
#ifndef KILN_TYPES_H
#define KILN_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible function returns one of these. KILN_OK is zero. */
typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_INVALID_ARGUMENT, /* a caller passed something unusable */
    KILN_ERR_INVALID_GRAPH,    /* dangling edge, cycle, bad arity */
    KILN_ERR_SHAPE_MISMATCH,   /* shapes that cannot go together */
    KILN_ERR_TYPE_MISMATCH,    /* element types that cannot go together */
    KILN_ERR_UNSUPPORTED,      /* valid input kiln does not handle (yet) */
    KILN_ERR_PARSE,            /* a malformed file */
    KILN_ERR_IO,               /* open/read/write failed */
    KILN_ERR_OUT_OF_MEMORY,
    KILN_ERR_NOT_FOUND,        /* unknown name (zoo network, input, ...) */
    KILN_ERR_MISMATCH,         /* a comparison of results failed */
    KILN_ERR_INTERNAL,         /* a kiln bug: please report */
    KILN_STATUS_COUNT
} kiln_status;

/* Human-readable name of a status ("shape mismatch"). Never NULL. */
const char *kiln_status_str(kiln_status s);

/* The error record. Fallible calls take a `kiln_error *` (which may be NULL
 * when the caller does not want the message) and, on failure, store the status
 * and a message that names what was wrong and where. */
typedef struct kiln_error {
    kiln_status status;
    char msg[1024];
} kiln_error;

/* Element types. The numbering is kiln's own (see kiln_dtype_from_onnx in the
 * importer for the ONNX mapping). */
typedef enum kiln_dtype {
    KILN_DTYPE_UNDEFINED = 0,
    KILN_DTYPE_FLOAT32,
    KILN_DTYPE_FLOAT16,
    KILN_DTYPE_FLOAT64,
    KILN_DTYPE_INT8,
    KILN_DTYPE_UINT8,
    KILN_DTYPE_INT16,
    KILN_DTYPE_UINT16,
    KILN_DTYPE_INT32,
    KILN_DTYPE_UINT32,
    KILN_DTYPE_INT64,
    KILN_DTYPE_UINT64,
    KILN_DTYPE_BOOL,
    KILN_DTYPE_COUNT
} kiln_dtype;

/* Name ("float32") and size in bytes (0 for UNDEFINED). */
const char *kiln_dtype_name(kiln_dtype t);
size_t kiln_dtype_size(kiln_dtype t);

/* A static shape. dims[i] >= 0 is a known extent; a negative extent is
 * reserved for symbolic dimensions (not produced yet). rank 0 is a scalar. */
#define KILN_MAX_RANK 8
typedef struct kiln_shape {
    int32_t rank;
    int64_t dims[KILN_MAX_RANK];
} kiln_shape;

/* Number of elements (1 for a scalar), or -1 if a dimension is symbolic or the
 * product overflows int64. */
int64_t kiln_shape_numel(const kiln_shape *s);
bool kiln_shape_equal(const kiln_shape *a, const kiln_shape *b);
/* Writes "[1, 3, 224, 224]" into buf (always NUL-terminated); returns buf. */
char *kiln_shape_str(const kiln_shape *s, char *buf, size_t size);

/* A dense row-major tensor. `data` is owned by whoever filled the struct; the
 * functions that allocate it (tensor files, kiln_tensor_alloc) say so and
 * release it with kiln_tensor_release. */
typedef struct kiln_tensor {
    kiln_dtype dtype;
    kiln_shape shape;
    void *data;
} kiln_tensor;

/* Size of the tensor's data in bytes, or -1 on a symbolic shape/overflow. */
int64_t kiln_tensor_nbytes(const kiln_tensor *t);
/* Allocates zeroed data for `dtype`/`shape` into *t. */
kiln_status kiln_tensor_alloc(kiln_tensor *t, kiln_dtype dtype, const kiln_shape *shape,
                              kiln_error *err);
/* Frees data allocated by kiln (tensor files, kiln_tensor_alloc); NULL-safe. */
void kiln_tensor_release(kiln_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TYPES_H */
