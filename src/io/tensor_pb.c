/* io/tensor_pb.c: ONNX TensorProto <-> kiln_tensor.
 *
 * Reading trusts nothing in the message: the rank is capped at KILN_MAX_RANK,
 * dims must be non-negative and their product must not overflow, and the
 * element count implied by the dims must equal the number of elements actually
 * present (raw_data bytes / element size, or the typed field's count) before
 * anything is allocated, so a file can never make kiln allocate more than it
 * carries. protobuf-c itself only allocates what the bytes encode.
 *
 * Writing always uses raw_data (little-endian), as onnx.numpy_helper does. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "io/tensor_io.h"
#include "kiln/kiln.h"
#include "util/bigmem.h"
#include "util/error.h"
#include "util/file.h"

/* ---- dtype mapping --------------------------------------------------------- */

kiln_dtype kiln_dtype_from_onnx(int32_t onnx_type)
{
    switch (onnx_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return KILN_DTYPE_FLOAT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return KILN_DTYPE_UINT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return KILN_DTYPE_INT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return KILN_DTYPE_UINT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return KILN_DTYPE_INT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return KILN_DTYPE_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return KILN_DTYPE_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return KILN_DTYPE_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return KILN_DTYPE_FLOAT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return KILN_DTYPE_FLOAT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return KILN_DTYPE_UINT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return KILN_DTYPE_UINT64;
    default: return KILN_DTYPE_UNDEFINED;
    }
}

int32_t kiln_dtype_to_onnx(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case KILN_DTYPE_FLOAT16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case KILN_DTYPE_FLOAT64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case KILN_DTYPE_INT8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    case KILN_DTYPE_UINT8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case KILN_DTYPE_INT16: return ONNX__TENSOR_PROTO__DATA_TYPE__INT16;
    case KILN_DTYPE_UINT16: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT16;
    case KILN_DTYPE_INT32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case KILN_DTYPE_UINT32: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT32;
    case KILN_DTYPE_INT64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case KILN_DTYPE_UINT64: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
    case KILN_DTYPE_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

/* Name of an ONNX data type for messages. */
static const char *onnx_type_name(int32_t t)
{
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",   "INT16",
        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16",  "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1",
    };
    if (t < 0 || (size_t)t >= sizeof names / sizeof names[0])
        return "unknown";
    return names[t];
}

/* ---- TensorProto -> kiln_tensor ------------------------------------------- */

/* Which typed field the ONNX spec assigns to a kiln dtype. */
enum typed_field { F_FLOAT, F_INT32, F_INT64, F_DOUBLE, F_UINT64 };

static enum typed_field typed_field_of(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return F_FLOAT;
    case KILN_DTYPE_INT64: return F_INT64;
    case KILN_DTYPE_FLOAT64: return F_DOUBLE;
    case KILN_DTYPE_UINT32:
    case KILN_DTYPE_UINT64: return F_UINT64;
    default: return F_INT32; /* INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16 */
    }
}

static const char *const typed_field_names[] = {"float_data", "int32_data", "int64_data",
                                                "double_data", "uint64_data"};

/* Decodes int32_data into the narrower types, checking every value's range. */
static kiln_status decode_int32_field(const Onnx__TensorProto *tp, kiln_dtype dt, void *dst,
                                      size_t n, kiln_error *err)
{
    int64_t lo = INT32_MIN, hi = INT32_MAX;
    switch (dt) {
    case KILN_DTYPE_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case KILN_DTYPE_UINT8: lo = 0; hi = UINT8_MAX; break;
    case KILN_DTYPE_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case KILN_DTYPE_UINT16:
    case KILN_DTYPE_FLOAT16: lo = 0; hi = UINT16_MAX; break; /* FLOAT16: the bits */
    case KILN_DTYPE_BOOL: lo = 0; hi = 1; break;
    default: break;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t v = tp->int32_data[i];
        if (v < lo || v > hi)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "int32_data[%zu] = %d is out of range for %s", i, (int)v,
                               kiln_dtype_name(dt));
        switch (dt) {
        case KILN_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)v; break;
        case KILN_DTYPE_UINT8:
        case KILN_DTYPE_BOOL: ((uint8_t *)dst)[i] = (uint8_t)v; break;
        case KILN_DTYPE_INT16: ((int16_t *)dst)[i] = (int16_t)v; break;
        case KILN_DTYPE_UINT16:
        case KILN_DTYPE_FLOAT16: ((uint16_t *)dst)[i] = (uint16_t)v; break;
        default: ((int32_t *)dst)[i] = v; break;
        }
    }
    return KILN_OK;
}

kiln_status kiln_tensor_from_onnx(const Onnx__TensorProto *tp, kiln_tensor *out,
                                  kiln_error *err)
{
    return kiln_tensor_from_onnx_into(tp, NULL, NULL, out, err);
}

static void drop(kiln_tensor_alloc_fn alloc, void *data)
{
    if (!alloc)
        free(data);
}

kiln_status kiln_tensor_from_onnx_into(const Onnx__TensorProto *tp, kiln_tensor_alloc_fn alloc,
                                       void *ctx, kiln_tensor *out, kiln_error *err)
{
    if (!tp || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_from_onnx: NULL argument");
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "tensor data is stored externally (data_location EXTERNAL); only "
                           "the ONNX model loader resolves external data");
    if (tp->segment)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "segmented tensors are not supported");

    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    if (ot == ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED)
        return kiln_errorf(err, KILN_ERR_PARSE, "data_type is missing or UNDEFINED");
    kiln_dtype dt = kiln_dtype_from_onnx(ot);
    if (dt == KILN_DTYPE_UNDEFINED)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "data_type %d (%s) is not supported",
                           (int)ot, onnx_type_name(ot));

    kiln_tensor t = {.dtype = dt, .shape = {.rank = 0}, .data = NULL};
    if (tp->n_dims > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "rank %zu exceeds kiln's limit of %d",
                           tp->n_dims, KILN_MAX_RANK);
    t.shape.rank = (int32_t)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "dims[%zu] = %lld is negative", i,
                               (long long)tp->dims[i]);
        t.shape.dims[i] = tp->dims[i];
    }
    char sbuf[256];
    int64_t numel = kiln_shape_numel(&t.shape);
    int64_t nbytes = kiln_tensor_nbytes(&t);
    if (numel < 0 || nbytes < 0 || (uint64_t)nbytes > SIZE_MAX)
        return kiln_errorf(err, KILN_ERR_PARSE, "dims %s: element count overflows",
                           kiln_shape_str(&t.shape, sbuf, sizeof sbuf));
    size_t esize = kiln_dtype_size(dt);

    enum typed_field tf = typed_field_of(dt);
    size_t counts[5] = {tp->n_float_data, tp->n_int32_data, tp->n_int64_data, tp->n_double_data,
                        tp->n_uint64_data};
    for (int f = 0; f < 5; f++) {
        if (counts[f] == 0)
            continue;
        if ((enum typed_field)f != tf)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s is present but data_type is %s",
                               typed_field_names[f], onnx_type_name(ot));
        if (tp->has_raw_data)
            return kiln_errorf(err, KILN_ERR_PARSE, "both raw_data and %s are present",
                               typed_field_names[f]);
    }
    if (tp->n_string_data)
        return kiln_errorf(err, KILN_ERR_PARSE, "string_data is present but data_type is %s",
                           onnx_type_name(ot));

    if (tp->has_raw_data) {
        if (tp->raw_data.len != (size_t)nbytes)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "raw_data has %zu bytes but dims %s of %s need %lld",
                               tp->raw_data.len, kiln_shape_str(&t.shape, sbuf, sizeof sbuf),
                               kiln_dtype_name(dt), (long long)nbytes);
    } else if ((int64_t)counts[tf] != numel) {
        if (counts[tf] == 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "no data: dims %s need %lld elements",
                               kiln_shape_str(&t.shape, sbuf, sizeof sbuf), (long long)numel);
        return kiln_errorf(err, KILN_ERR_PARSE, "%s has %zu elements but dims %s need %lld",
                           typed_field_names[tf], counts[tf],
                           kiln_shape_str(&t.shape, sbuf, sizeof sbuf), (long long)numel);
    }

    /* Every size is now backed by bytes present in the message. */
    t.data = alloc ? alloc(ctx, &t) : kiln_big_malloc((size_t)nbytes, NULL);
    if (!t.data)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                           (long long)nbytes);
    size_t n = (size_t)numel;
    if (tp->has_raw_data) {
        if (t.data != tp->raw_data.data) /* else alloc lent the bytes in place */
            kiln_io_copy_le(t.data, tp->raw_data.data, n, esize);
        if (dt == KILN_DTYPE_BOOL)
            for (size_t i = 0; i < n; i++)
                ((uint8_t *)t.data)[i] = ((uint8_t *)t.data)[i] != 0;
    } else {
        switch (tf) {
        case F_FLOAT: if (n) memcpy(t.data, tp->float_data, n * sizeof(float)); break;
        case F_INT64: if (n) memcpy(t.data, tp->int64_data, n * sizeof(int64_t)); break;
        case F_DOUBLE: if (n) memcpy(t.data, tp->double_data, n * sizeof(double)); break;
        case F_UINT64:
            if (dt == KILN_DTYPE_UINT64) {
                if (n)
                    memcpy(t.data, tp->uint64_data, n * sizeof(uint64_t));
                break;
            }
            for (size_t i = 0; i < n; i++) {
                if (tp->uint64_data[i] > UINT32_MAX) {
                    drop(alloc, t.data);
                    return kiln_errorf(err, KILN_ERR_PARSE,
                                       "uint64_data[%zu] = %llu is out of range for uint32", i,
                                       (unsigned long long)tp->uint64_data[i]);
                }
                ((uint32_t *)t.data)[i] = (uint32_t)tp->uint64_data[i];
            }
            break;
        case F_INT32:
            if (decode_int32_field(tp, dt, t.data, n, err) != KILN_OK) {
                drop(alloc, t.data);
                return KILN_ERR_PARSE;
            }
            break;
        }
    }
    *out = t;
    return KILN_OK;
}

kiln_status kiln_tensor_read_pb_buffer(const void *buf, size_t size, kiln_tensor *out,
                                       char **name_out, kiln_error *err)
{
    if ((!buf && size) || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_tensor_read_pb_buffer: NULL argument");
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
    if (!tp)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "not a valid ONNX TensorProto (protobuf decoding failed)");
    char *name = NULL;
    if (name_out && tp->name && tp->name[0]) {
        name = strdup(tp->name);
        if (!name) {
            onnx__tensor_proto__free_unpacked(tp, NULL);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    kiln_tensor t;
    kiln_status st = kiln_tensor_from_onnx(tp, &t, err);
    if (st != KILN_OK && tp->name && tp->name[0])
        kiln_error_prefix(err, st, "tensor '%s': ", tp->name);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    if (st != KILN_OK) {
        free(name);
        return st;
    }
    *out = t;
    if (name_out)
        *name_out = name;
    return KILN_OK;
}

/* ---- kiln_tensor -> TensorProto ------------------------------------------- */

kiln_status kiln_tensor_write_pb(const char *path, const kiln_tensor *t, const char *name,
                                 kiln_error *err)
{
    size_t nbytes;
    if (!path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_write_pb: NULL path");
    if (kiln_io_check_tensor(t, &nbytes, err) != KILN_OK)
        return kiln_error_prefix(err, KILN_ERR_INVALID_ARGUMENT, "%s: ", path);

    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[KILN_MAX_RANK];
    for (int i = 0; i < t->shape.rank; i++)
        dims[i] = t->shape.dims[i];
    tp.n_dims = (size_t)t->shape.rank;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = kiln_dtype_to_onnx(t->dtype);
    tp.name = (char *)(name ? name : "");
    tp.has_raw_data = 1;
    tp.raw_data.len = nbytes;
    tp.raw_data.data = malloc(nbytes ? nbytes : 1);
    if (!tp.raw_data.data)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    size_t esize = kiln_dtype_size(t->dtype);
    kiln_io_copy_le(tp.raw_data.data, t->data, nbytes / esize, esize);

    size_t psize = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *packed = malloc(psize ? psize : 1);
    if (!packed) {
        free(tp.raw_data.data);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    size_t written = onnx__tensor_proto__pack(&tp, packed);
    free(tp.raw_data.data);
    kiln_status st = written == psize
                         ? kiln_file_write(path, packed, psize, err)
                         : kiln_errorf(err, KILN_ERR_INTERNAL, "%s: protobuf packing failed", path);
    free(packed);
    return st;
}
