/* docs/examples/profile_model.c: compile a zoo network and profile it, with
 * the compiler library (kiln/kiln.h, kiln/profile.h) found by pkg-config.
 *
 *   cc profile_model.c $(pkg-config --cflags --libs kiln) -o profile_model
 *   ./profile_model mlp
 *
 * Compiles MODEL (a zoo name or an .onnx file) through kiln's cache, loads
 * it, fills every float32 input with 0.5, runs it once, times it (TVM
 * time_evaluator semantics) and prints the per-kernel profile table. Built
 * against an installed prefix by the test suite (tests/install).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kiln/kiln.h"
#include "kiln/profile.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }
    kiln_error err = {0};
    kiln_module *m = NULL;
    kiln_profile *p = NULL;
    kiln_tensor in = {0};
    char *so = NULL, *table = NULL;
    kiln_bench_result *b = calloc(1, sizeof *b); /* 80 KiB: not on the stack */
    kiln_bench_options bo = {.number = 10, .repeat = 3};
    kiln_profile_options po = {.runs = 10, .no_bench = 1, .peak_gflops = 100};
    int rc = 1;
    if (!b || kiln_compile_cached(argv[1], 0, NULL, &so, &err) != KILN_OK ||
        kiln_module_load(so, NULL, &m, &err) != KILN_OK)
        goto done;
    for (int i = 0; i < kiln_module_num_inputs(m); i++) {
        kiln_dtype dt;
        kiln_shape shape;
        kiln_tensor_release(&in);
        if (kiln_module_input_info(m, i, NULL, &dt, &shape) != KILN_OK ||
            kiln_tensor_alloc(&in, dt, &shape, &err) != KILN_OK)
            goto done;
        if (dt == KILN_DTYPE_FLOAT32)
            for (int64_t k = 0; k < kiln_shape_numel(&shape); k++)
                ((float *)in.data)[k] = 0.5f;
        if (kiln_module_set_input(m, i, &in, &err) != KILN_OK)
            goto done;
    }
    if (kiln_module_run(m, &err) != KILN_OK || kiln_module_bench(m, &bo, b, &err) != KILN_OK ||
        kiln_profile_module(m, &po, &p, &err) != KILN_OK ||
        kiln_profile_format(p, "table", "none", "time", 5, &table, &err) != KILN_OK)
        goto done;
    const kiln_tensor *out = kiln_module_output(m, 0);
    printf("model %s: first output element %g\n", argv[1],
           out->dtype == KILN_DTYPE_FLOAT32 ? ((const float *)out->data)[0] : 0.0);
    printf("mean %.4f ms, median %.4f ms over %d x %d runs\n", b->mean * 1e3, b->median * 1e3,
           b->repeat, b->number);
    fputs(table, stdout);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "error: %s\n", err.msg);
    kiln_free(table);
    kiln_profile_destroy(p);
    kiln_tensor_release(&in);
    kiln_module_destroy(m);
    free(so);
    free(b);
    return rc;
}
