/* toolchain/stubs.c: STUB placeholders so the project links; to be replaced. */
#include "kiln/kiln.h"
#include "util/error.h"

kiln_status kiln_compile(const kiln_graph *g, const kiln_compile_options *opts,
                         const char *out_path, kiln_error *err)
{
    (void)g;
    (void)opts;
    (void)out_path;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "the compiler is not implemented yet");
}

kiln_status kiln_compile_cached(const char *model, uint64_t seed,
                                const kiln_compile_options *opts, char **so_path,
                                kiln_error *err)
{
    (void)model;
    (void)seed;
    (void)opts;
    (void)so_path;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "the compiler is not implemented yet");
}
