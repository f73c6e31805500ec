/* docs/examples/run_model.c: run a compiled model with the runtime-only library.
 *
 *   cc run_model.c -Iinclude -Lbuild -lkiln_runtime -lpthread -ldl -lm -o run_model
 *   ./run_model model.so
 *
 * Loads the .so, fills every float32 input with 0.5 (other types with zeros),
 * runs it once and prints the first elements of every output. Built and run by
 * the test suite (tests/CMakeLists.txt, "runtime test models").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.so\n", argv[0]);
        return 2;
    }
    kiln_error err = {0};
    kiln_module *m = NULL;
    kiln_module_options opts = {.num_threads = 0, .bind_threads = -1}; /* defaults */
    if (kiln_module_load(argv[1], &opts, &m, &err) != KILN_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 2;
    }
    printf("model %s, %d threads\n", kiln_module_name(m), kiln_module_num_threads(m));

    for (int i = 0; i < kiln_module_num_inputs(m); i++) {
        const char *name;
        kiln_tensor t = {0};
        kiln_module_input_info(m, i, &name, &t.dtype, &t.shape);
        if (kiln_tensor_alloc(&t, t.dtype, &t.shape, &err) != KILN_OK)
            goto fail;
        if (t.dtype == KILN_DTYPE_FLOAT32)
            for (int64_t k = 0; k < kiln_shape_numel(&t.shape); k++)
                ((float *)t.data)[k] = 0.5f;
        kiln_status st = kiln_module_set_input(m, i, &t, &err); /* copies the data */
        kiln_tensor_release(&t);
        if (st != KILN_OK)
            goto fail;
    }

    if (kiln_module_run(m, &err) != KILN_OK)
        goto fail;

    for (int i = 0; i < kiln_module_num_outputs(m); i++) {
        const char *name;
        char shape[128];
        kiln_module_output_info(m, i, &name, NULL, NULL);
        const kiln_tensor *out = kiln_module_output(m, i); /* owned by the module */
        printf("%s %s %s:", name, kiln_dtype_name(out->dtype),
               kiln_shape_str(&out->shape, shape, sizeof shape));
        int64_t n = kiln_shape_numel(&out->shape);
        for (int64_t k = 0; k < n && k < 8 && out->dtype == KILN_DTYPE_FLOAT32; k++)
            printf(" %g", ((const float *)out->data)[k]);
        printf("\n");
    }
    kiln_module_destroy(m);
    return 0;

fail:
    fprintf(stderr, "error: %s\n", err.msg);
    kiln_module_destroy(m);
    return 2;
}
