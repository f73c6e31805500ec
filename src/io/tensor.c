/* io/tensor.c: reading a tensor file of either format, and the helpers the two
 * formats share (byte order, checks on tensors handed to writers). */
#include <stdlib.h>
#include <string.h>

#include "io/tensor_io.h"
#include "kiln/kiln.h"
#include "util/error.h"
#include "util/file.h"

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void kiln_io_copy_le(void *dst, const void *src, size_t n, size_t esize)
{
    if (n == 0)
        return;
    if (esize == 1 || host_is_little_endian()) {
        memcpy(dst, src, n * esize);
        return;
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < esize; b++)
            d[i * esize + b] = s[i * esize + esize - 1 - b];
}

kiln_status kiln_io_check_tensor(const kiln_tensor *t, size_t *nbytes, kiln_error *err)
{
    if (!t)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "NULL tensor");
    if ((unsigned)t->dtype >= KILN_DTYPE_COUNT || t->dtype == KILN_DTYPE_UNDEFINED)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "tensor has no valid dtype (%d)",
                           (int)t->dtype);
    if (t->shape.rank < 0 || t->shape.rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "tensor rank %d out of range",
                           (int)t->shape.rank);
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb < 0 || (uint64_t)nb > SIZE_MAX / 2)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "tensor shape has a symbolic dimension or no finite size");
    if (nb > 0 && !t->data)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "tensor has no data");
    *nbytes = (size_t)nb;
    return KILN_OK;
}

kiln_status kiln_tensor_read(const char *path, kiln_tensor *out, char **name_out,
                             kiln_error *err)
{
    if (!path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_read: NULL argument");
    void *buf;
    size_t size;
    kiln_status st = kiln_file_read(path, KILN_TENSOR_FILE_MAX, &buf, &size, err);
    if (st != KILN_OK)
        return st; /* the message names the path already */
    static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
    if (size >= sizeof npy_magic && memcmp(buf, npy_magic, sizeof npy_magic) == 0) {
        st = kiln_tensor_read_npy_buffer(buf, size, out, err);
        if (st == KILN_OK && name_out)
            *name_out = NULL;
        if (st != KILN_OK)
            kiln_error_prefix(err, st, "%s: NumPy file: ", path);
    } else {
        st = kiln_tensor_read_pb_buffer(buf, size, out, name_out, err);
        if (st != KILN_OK)
            kiln_error_prefix(err, st, "%s: TensorProto: ", path);
    }
    free(buf);
    return st;
}
