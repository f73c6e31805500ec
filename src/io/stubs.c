/* io/stubs.c: STUB placeholders; to be replaced. */
#include "kiln/kiln.h"
#include "util/error.h"

kiln_status kiln_tensor_read(const char *path, kiln_tensor *out, char **name_out, kiln_error *err)
{
    (void)path; (void)out; (void)name_out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented");
}

kiln_status kiln_tensor_read_pb_buffer(const void *buf, size_t size, kiln_tensor *out, char **name_out, kiln_error *err)
{
    (void)buf; (void)size; (void)out; (void)name_out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented");
}

kiln_status kiln_tensor_read_npy_buffer(const void *buf, size_t size, kiln_tensor *out, kiln_error *err)
{
    (void)buf; (void)size; (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented");
}

kiln_status kiln_tensor_write_pb(const char *path, const kiln_tensor *t, const char *name, kiln_error *err)
{
    (void)path; (void)t; (void)name;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented");
}

kiln_status kiln_tensor_write_npy(const char *path, const kiln_tensor *t, kiln_error *err)
{
    (void)path; (void)t;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented");
}
