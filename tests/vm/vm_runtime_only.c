/* tests/vm/vm_runtime_only.c: a VM model run with the runtime library alone.
 *
 * Linked against libkiln_runtime only (tests/CMakeLists.txt): no compiler,
 * no libkiln; tests/vm/runtime_only.sh checks that the binary holds no
 * compiler symbol. Usage:
 *
 *   vm_runtime_only MODEL.so MODEL.onnx INPUT.pb... -- OUTPUT.pb...
 *
 * 1. MODEL.so (written by `kiln compile MODEL.onnx`, a VM section inside)
 *    opened with kiln_vm_open_so and no compiler: run twice on the inputs,
 *    outputs within rtol 1e-4, atol 1e-5 of the expected ones, the same
 *    both times; the profile's words say heavy classes run on reference
 *    kernels (kiln_vm_heavy_on_reference).
 * 2. MODEL.onnx opened with kiln_vm_open and no compiler: a model with a
 *    static part is refused with a message that says so; one without runs.
 * 3. MODEL.onnx on reference kernels (`reference`): runs and matches.
 * Exit status 0 when all hold; each failure is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"
#include "kiln/vm.h" /* the public header: nothing of src/ */

#include "tensor_value.h"

static int failures;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "vm_runtime_only: " __VA_ARGS__);                                     \
            fputc('\n', stderr);                                                                  \
            failures++;                                                                           \
        }                                                                                         \
    } while (0)

/* Runs vm on the inputs; compares with want. first: the run's outputs are
 * copied there (NULL: not kept); each later run must equal them. */
static void run_and_compare(kiln_vm *vm, const char *what, kiln_tensor *in, int n_in,
                            kiln_tensor *want, int n_out)
{
    kiln_error err = {0};
    CHECK(kiln_vm_num_inputs(vm) == n_in, "%s: %d inputs, %d given", what, kiln_vm_num_inputs(vm),
          n_in);
    CHECK(kiln_vm_num_outputs(vm) == n_out, "%s: %d outputs, %d expected", what,
          kiln_vm_num_outputs(vm), n_out);
    if (failures)
        return;
    for (int i = 0; i < n_in; i++)
        if (kiln_vm_set_input(vm, i, &in[i], &err) != KILN_OK) {
            CHECK(0, "%s: input %d: %s", what, i, err.msg);
            return;
        }
    double *first[8] = {0};
    for (int r = 0; r < 2; r++) {
        if (kiln_vm_run(vm, &err) != KILN_OK) {
            CHECK(0, "%s: run %d: %s", what, r, err.msg);
            return;
        }
        for (int o = 0; o < n_out && o < 8; o++) {
            const kiln_tensor *y = kiln_vm_output(vm, o);
            int64_t n = kiln_shape_numel(&want[o].shape);
            CHECK(y && kiln_shape_equal(&y->shape, &want[o].shape), "%s: output %d shape", what,
                  o);
            if (!y || !kiln_shape_equal(&y->shape, &want[o].shape))
                continue;
            if (r == 0)
                first[o] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
            for (int64_t i = 0; i < n; i++) {
                double a = kt_tensor_value(y, i), e = kt_tensor_value(&want[o], i);
                if (r == 0 && first[o])
                    first[o][i] = a;
                else if (first[o] && first[o][i] != a) {
                    CHECK(0, "%s: output %d element %lld differs between runs", what, o,
                          (long long)i);
                    break;
                }
                if (!(fabs(a - e) <= 1e-5 + 1e-4 * fabs(e))) {
                    CHECK(0, "%s: output %d element %lld: %.7g, expected %.7g", what, o,
                          (long long)i, a, e);
                    break;
                }
            }
        }
    }
    for (int o = 0; o < 8; o++)
        free(first[o]);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: vm_runtime_only MODEL.so MODEL.onnx INPUT.pb... -- OUTPUT.pb...\n");
        return 2;
    }
    kiln_tensor in[8], want[8];
    int n_in = 0, n_out = 0, a = 3;
    kiln_error err = {0};
    for (; a < argc && strcmp(argv[a], "--") != 0 && n_in < 8; a++)
        if (kiln_tensor_read(argv[a], &in[n_in++], NULL, &err) != KILN_OK) {
            fprintf(stderr, "%s: %s\n", argv[a], err.msg);
            return 2;
        }
    for (a++; a < argc && n_out < 8; a++)
        if (kiln_tensor_read(argv[a], &want[n_out++], NULL, &err) != KILN_OK) {
            fprintf(stderr, "%s: %s\n", argv[a], err.msg);
            return 2;
        }

    /* 1. the .so, no compiler */
    kiln_vm_options none = {.num_threads = 2};
    kiln_vm *vm = NULL;
    if (kiln_vm_open_so(argv[1], &none, &vm, &err) != KILN_OK) {
        CHECK(0, "%s: %s", argv[1], err.msg);
    } else {
        CHECK(kiln_vm_from_so(vm), ".so: not from the .so");
        CHECK(!kiln_vm_compiles(vm), ".so: says it compiles");
        CHECK(kiln_vm_heavy_on_reference(vm), ".so: heavy classes not on reference kernels");
        run_and_compare(vm, argv[1], in, n_in, want, n_out);
        kiln_vm_destroy(vm);
    }

    /* 2. the .onnx, no compiler: refused when a static part needs compiling */
    vm = NULL;
    kiln_status s = kiln_vm_open(argv[2], &none, &vm, &err);
    if (s == KILN_OK) {
        CHECK(!kiln_vm_static_compiled(vm), ".onnx: a static part compiled without a compiler");
        run_and_compare(vm, "the .onnx without a compiler", in, n_in, want, n_out);
        kiln_vm_destroy(vm);
    } else {
        CHECK(s == KILN_ERR_UNSUPPORTED && strstr(err.msg, "needs compiling") &&
                  strstr(err.msg, "reference"),
              ".onnx without a compiler: %s", err.msg);
    }

    /* 3. the .onnx on reference kernels */
    kiln_vm_options ref = {.reference = true};
    vm = NULL;
    if (kiln_vm_open(argv[2], &ref, &vm, &err) != KILN_OK) {
        CHECK(0, "%s (reference): %s", argv[2], err.msg);
    } else {
        run_and_compare(vm, "the .onnx on reference kernels", in, n_in, want, n_out);
        kiln_vm_destroy(vm);
    }
    for (int i = 0; i < n_in; i++)
        kiln_tensor_release(&in[i]);
    for (int i = 0; i < n_out; i++)
        kiln_tensor_release(&want[i]);
    if (failures == 0)
        printf("vm_runtime_only: %s: OK (.so without a compiler, .onnx refused or run, .onnx on "
               "reference kernels)\n",
               argv[1]);
    return failures ? 1 : 0;
}
