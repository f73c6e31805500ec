/* tests/vm/test_vm_chunks.c: a heavy convolution over a data-dependent
 * batch runs in chunks of 8, 4, 2 and 1 items (src/vm/vm.c, "heavy
 * convolutions over a data-dependent batch"), each chunk size compiled
 * once, so a new batch size compiles nothing new.
 *
 * The model: y = Conv(Reshape(Slice(x, 0, e), s), W, B) (64 -> 64
 * channels, 3x3, pad 1, 32x32: 75 Mflop per item, heavy even for one item),
 * e and s graph inputs, so the Conv runs on the VM with a batch the data
 * sets (x keeps its shape: one input-shape class). For batches 11 (8 + 2 +
 * 1), 3, 13 (8 + 4 + 1), 8 (whole) and 9, the output must equal the
 * reference kernels' (the same model on the VM with --executor ref, which
 * never compiles nor chunks); the Conv's conversions must stop at four (one
 * per chunk size; the Slice converts once per batch); the step must read
 * "vm compiled" with the batch's flops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "test_support.h"
#include "vm/vm.h"

#include "onnx_build.h"
#include "vm_helpers.h"

enum { C = 64, H = 32, W = 32, MAXN = 13 };

static void write_model(const char *path)
{
    static float w[C * C * 9], b[C];
    kt_fill_random(w, C * C * 9, 11, -0.1f, 0.1f);
    kt_fill_random(b, C, 12, -1, 1);
    vi_store s[5];
    int64_t xd[1] = {(int64_t)MAXN * C * H * W}, one[1] = {1}, four[1] = {4}, wd[4] = {C, C, 3, 3},
            bd[1] = {C};
    Onnx__ValueInfoProto *ins[4] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 1, xd),
                                    kt_onnx_vi(&s[1], "zero", KILN_DTYPE_INT64, 1, one),
                                    kt_onnx_vi(&s[2], "e", KILN_DTYPE_INT64, 1, one),
                                    kt_onnx_vi(&s[3], "s", KILN_DTYPE_INT64, 1, four)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[4], "y", KILN_DTYPE_FLOAT32, -1, NULL)};
    char *sl_in[] = {"x", "zero", "e"}, *sl_out[] = {"p"}, *rs_in[] = {"p", "s"}, *rs_out[] = {"r"},
         *cv_in[] = {"r", "W", "B"}, *cv_out[] = {"y"};
    Onnx__NodeProto n[3];
    kt_onnx_node(&n[0], "Slice", sl_in, 3, sl_out, 1);
    kt_onnx_node(&n[1], "Reshape", rs_in, 2, rs_out, 1);
    kt_onnx_node(&n[2], "Conv", cv_in, 3, cv_out, 1);
    n[2].name = "conv";
    static const int64_t pads[4] = {1, 1, 1, 1};
    Onnx__AttributeProto pa;
    Onnx__AttributeProto *pap[1] = {kt_onnx_attr_ints(&pa, "pads", pads, 4)};
    n[2].n_attribute = 1;
    n[2].attribute = pap;
    Onnx__NodeProto *np[3] = {&n[0], &n[1], &n[2]};
    Onnx__TensorProto t[2];
    Onnx__TensorProto *inits[2] = {kt_onnx_init_f32(&t[0], "W", 4, wd, w, C * C * 9),
                                   kt_onnx_init_f32(&t[1], "B", 1, bd, b, C)};
    Onnx__GraphProto g;
    kt_onnx_graph(&g, "chunks", np, 3, ins, 4, outs, 1);
    g.n_initializer = 2;
    g.initializer = inits;
    kt_onnx_write(path, &g, 13);
}

static kiln_vm *open_vm(const char *path, bool reference)
{
    return kt_vm_open(path, reference, 2);
}

static const kiln_tensor *run(kiln_vm *vm, const float *x, int64_t n)
{
    kiln_error err = {0};
    int64_t shape[4] = {n, C, H, W}, zero = 0, end = n * C * H * W;
    kiln_tensor tx = {
        .dtype = KILN_DTYPE_FLOAT32, .shape = ks(1, (int64_t)MAXN * C * H * W), .data = (void *)x};
    kiln_tensor tz = {.dtype = KILN_DTYPE_INT64, .shape = ks(1, 1), .data = &zero};
    kiln_tensor te = {.dtype = KILN_DTYPE_INT64, .shape = ks(1, 1), .data = &end};
    kiln_tensor ts = {.dtype = KILN_DTYPE_INT64, .shape = ks(1, 4), .data = shape};
    if (kiln_vm_set_input(vm, 0, &tx, &err) != KILN_OK ||
        kiln_vm_set_input(vm, 1, &tz, &err) != KILN_OK ||
        kiln_vm_set_input(vm, 2, &te, &err) != KILN_OK ||
        kiln_vm_set_input(vm, 3, &ts, &err) != KILN_OK || kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("batch %lld: %s", (long long)n, err.msg);
    return kiln_vm_output(vm, 0);
}

static void test_chunks(void **state)
{
    (void)state;
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "chunks.onnx");
    write_model(path);
    kiln_vm *vm = open_vm(path, false), *ref = open_vm(path, true);
    float *x = malloc(sizeof(float) * MAXN * C * H * W);
    assert_non_null(x);
    kt_fill_random(x, (int64_t)MAXN * C * H * W, 13, -1, 1);
    static const int64_t batches[] = {11, 3, 13, 8, 9};
    for (int i = 0; i < 5; i++) {
        int64_t n = batches[i];
        const kiln_tensor *y = run(vm, x, n), *want = run(ref, x, n);
        assert_int_equal(y->shape.rank, 4);
        assert_int_equal(y->shape.dims[0], n);
        assert_int_equal(kiln_shape_numel(&y->shape), kiln_shape_numel(&want->shape));
        assert_allclose(y->data, want->data, kiln_shape_numel(&y->shape), 1e-4, 1e-4);
        /* the Slice: one class per batch; the Conv: one per chunk size
         * seen (8, 2, 1, then 4 with 13) */
        assert_int_equal(kiln_vm_num_conversions(vm), (i + 1) + (i < 2 ? 3 : 4));
        for (int k = 0; k < kiln_vm_num_steps(vm); k++) {
            kiln_vm_step_desc d;
            if (kiln_vm_step_info(vm, k, &d, NULL, 0) != KILN_OK || strcmp(d.name, "conv"))
                continue;
            assert_string_equal(d.kind, "vm compiled");
            assert_true(fabs(d.flops - 2.0 * (double)n * C * C * 9 * H * W) < 1);
        }
    }
    free(x);
    kiln_vm_destroy(vm);
    kiln_vm_destroy(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
