/* import/onnx/stubs.c: STUB placeholders so the project links; to be replaced. */
#include "kiln/kiln.h"
#include "util/error.h"

kiln_status kiln_onnx_load(const char *path, kiln_graph **out, kiln_error *err)
{
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%s: ONNX import is not implemented yet", path);
}

kiln_status kiln_onnx_load_buffer(const void *buf, size_t size, const char *base_dir,
                                  kiln_graph **out, kiln_error *err)
{
    (void)buf;
    (void)size;
    (void)base_dir;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "ONNX import is not implemented yet");
}
