/* import/model.c: a model by name: a zoo network or an .onnx path. */
#include <string.h>

#include "kiln/kiln.h"
#include "util/error.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

kiln_status kiln_model_load(const char *model, uint64_t seed, kiln_graph **out,
                            kiln_error *err)
{
    if (!model || !*model)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no model given");
    if (ends_with(model, ".onnx"))
        return kiln_onnx_load(model, out, err);
    if (ends_with(model, ".so"))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: compiled models (.so) are not supported yet", model);
    if (!kiln_zoo_find(model))
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "'%s' is neither a zoo network (see `kiln zoo`) nor an .onnx file",
                           model);
    return kiln_zoo_build(model, seed, 0, out, err);
}
