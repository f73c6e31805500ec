/* tests/vm/vm_check_sets.c: runs one .onnx on the VM, in one process, on
 * several test data sets in the order given (e.g. A B A B: alternating input
 * shapes) and compares every output with the set's expected tensors:
 *     |got - expected| <= atol + rtol * |expected|
 *
 *   vm_check_sets [--reference] [--rtol R] [--atol A] [--specializations N]
 *                 [--chunked | --not-chunked] MODEL.onnx SETDIR...
 *
 * SETDIR holds input_K.pb and output_K.pb (the ONNX conformance layout).
 * --specializations N: after the runs, the VM must have imported the model
 * exactly N times (one per input-shape class: a class seen before is not
 * imported again). --chunked: every run must run its batch in chunks
 * (kiln_vm_batch_chunks > 0); --not-chunked: none may. Used by
 * tests/models/dynamic_shapes.sh. Exit 0 when all
 * match, 1 on a mismatch, 2 on an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "vm/vm.h"

#include "tensor_value.h"

int main(int argc, char **argv)
{
    double rtol = 1e-3, atol = 1e-4;
    long want_spec = -1;
    bool reference = false;
    int chunked = -1; /* 1: every run in chunks, 0: none, -1: either */
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--reference"))
            reference = true;
        else if (!strcmp(argv[a], "--rtol") && a + 1 < argc)
            rtol = atof(argv[++a]);
        else if (!strcmp(argv[a], "--atol") && a + 1 < argc)
            atol = atof(argv[++a]);
        else if (!strcmp(argv[a], "--specializations") && a + 1 < argc)
            want_spec = strtol(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--chunked") || !strcmp(argv[a], "--not-chunked"))
            chunked = !strcmp(argv[a], "--chunked");
        else {
            fprintf(stderr, "vm_check_sets: unknown option '%s'\n", argv[a]);
            return 2;
        }
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: vm_check_sets [--reference] [--rtol R] [--atol A] "
                        "[--specializations N] [--chunked | --not-chunked] MODEL.onnx "
                        "SETDIR...\n");
        return 2;
    }
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = reference};
    if (kiln_vm_create(argv[a], &o, &vm, &err) != KILN_OK) {
        fprintf(stderr, "vm_check_sets: %s\n", err.msg);
        return 2;
    }
    int rc = 0, n_in = kiln_vm_num_inputs(vm), n_out = kiln_vm_num_outputs(vm);
    for (int s = a + 1; s < argc && rc != 2; s++) {
        char path[4096];
        kiln_tensor t;
        for (int i = 0; i < n_in && rc != 2; i++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", argv[s], i);
            if (kiln_tensor_read(path, &t, NULL, &err) != KILN_OK ||
                kiln_vm_set_input(vm, i, &t, &err) != KILN_OK) {
                fprintf(stderr, "vm_check_sets: %s: %s\n", path, err.msg);
                rc = 2;
            }
            kiln_tensor_release(&t);
        }
        if (rc != 2 && kiln_vm_run(vm, &err) != KILN_OK) {
            fprintf(stderr, "vm_check_sets: %s: run: %s\n", argv[s], err.msg);
            rc = 2;
        }
        const char *why = "";
        int nc = kiln_vm_batch_chunks(vm, &why);
        printf("%s: %d chunk%s%s%s\n", argv[s], nc, nc == 1 ? "" : "s", *why ? ": " : "", why);
        if (rc != 2 && chunked >= 0 && (nc > 0) != chunked) {
            printf("FAILED: %s in chunks\n", chunked ? "not run" : "run");
            rc = 1;
        }
        for (int k = 0; k < n_out && rc != 2; k++) {
            snprintf(path, sizeof path, "%s/output_%d.pb", argv[s], k);
            if (access(path, R_OK) != 0)
                continue;
            if (kiln_tensor_read(path, &t, NULL, &err) != KILN_OK) {
                fprintf(stderr, "vm_check_sets: %s: %s\n", path, err.msg);
                rc = 2;
                break;
            }
            const kiln_tensor *got = kiln_vm_output(vm, k);
            int64_t n = kiln_shape_numel(&t.shape), bad = 0;
            double max_abs = 0;
            if (!got || got->dtype != t.dtype || !kiln_shape_equal(&got->shape, &t.shape)) {
                printf("%s output %d: MISMATCH (dtype or shape)\n", argv[s], k);
                rc = 1;
            } else {
                for (int64_t i = 0; i < n; i++) {
                    double g = kt_tensor_value(got, i), e = kt_tensor_value(&t, i), d = fabs(g - e);
                    if (!(d <= atol + rtol * fabs(e)) && !(isnan(g) && isnan(e)))
                        bad++;
                    max_abs = d > max_abs ? d : max_abs;
                }
                printf("%s output %d: %s  %lld elements, max abs error %.3g\n", argv[s], k,
                       bad ? "MISMATCH" : "OK", (long long)n, max_abs);
                rc = bad ? 1 : rc;
            }
            kiln_tensor_release(&t);
        }
    }
    long made = (long)kiln_vm_num_specializations(vm);
    printf("specializations: %ld\n", made);
    if (rc == 0 && want_spec >= 0 && made != want_spec) {
        printf("FAILED: %ld specializations, expected %ld\n", made, want_spec);
        rc = 1;
    }
    kiln_vm_destroy(vm);
    return rc;
}
