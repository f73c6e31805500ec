/* driver/reuse.c: a build run from the kernels of a .so already loaded
 * (driver.h, kiln_build_load_reusing).
 *
 * A VM builds a module per input-shape class. When the kernels take their
 * extents at run time, the next class's kernels are the earlier class's,
 * by name (a name is its source's hash), and only the tables differ: the
 * tensors' shapes and arena offsets, the steps' extents. Those become a
 * descriptor in memory, its steps pointing at the functions of the loaded
 * .so, so the class costs its passes and code generation, not $CC on
 * model.c and weights.S and a link (about half of a small decoder's step at
 * a new past length). The class is not in the model cache: another process
 * builds it the usual way. */
#include <dlfcn.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "driver/driver.h"
#include "runtime/module_internal.h"
#include "util/error.h"

static kiln_kernel_fn resolve(void *dl, const char *name)
{
    void *p = dlsym(dl, name);
    kiln_kernel_fn f = NULL;
    if (p)
        memcpy(&f, &p, sizeof f); /* object pointer -> function pointer (POSIX) */
    return f;
}

static void free_arena(void *a)
{
    kiln_arena_destroy(a);
}

kiln_status kiln_build_load_reusing(kiln_build *b, const char *kernels_so,
                                    const kiln_module_options *mo, kiln_module **out,
                                    kiln_error *err)
{
    *out = NULL;
    if (!b->share_weights || !kernels_so)
        return KILN_OK;
    kiln_status s = kiln_build_codegen(b, err);
    if (s != KILN_OK)
        return s;
    char *path = kiln_tc_model_path(b->tc, b->build_id, err);
    if (!path)
        return KILN_ERR_IO;
    /* only a .so this process has loaded: nothing read from disk */
    void *dl = kiln_tc_have(path) ? NULL : dlopen(kernels_so, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    kiln_arena *a = dl ? kiln_arena_create() : NULL;
    kiln_abi_model *d = NULL;
    if (dl && !a)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (a)
        s = kiln_codegen_model_desc(b->low, b->g->name ? b->g->name : "model", b->target.name,
                                    b->build_id, b->meta, resolve, dl, a, &d, err);
    if (s == KILN_OK && d)
        s = kiln_driver_weight_files(b, path, err);
    if (s == KILN_OK && d) {
        s = kiln_module_load_desc(d, path, kernels_so, a, free_arena, mo, out, err);
        a = NULL; /* the module's (or released on failure) */
    }
    kiln_arena_destroy(a);
    if (dl)
        dlclose(dl);
    free(path);
    return s;
}
