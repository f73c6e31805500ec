/* tests/vm/test_vm_measure.c: the VM API a binding needs beyond running
 * (src/vm/vm.h: kiln_vm_create_buffer, kiln_vm_needed, kiln_vm_num_threads, kiln_vm_bench,
 * kiln_vm_profile; the Python package's VM path uses them).
 *
 * The model, built here: x [6] float
 *   r = Relu(x)            (the static part, on the reference executor)
 *   nz = NonZero(r)        [1, k] int64, k data-dependent (a VM kernel)
 * - kiln_vm_needed: the static import's failure on this model is the VM's,
 *   an unknown op or another status is not;
 * - from bytes: the same outputs as from the file, at two k; garbage bytes
 *   and an empty buffer are errors with a message, out untouched;
 * - bench: TVM's time evaluator over the VM's run (number, repeat, threads
 *   and positive times);
 * - profile: the report has the VM's executor, its own step (step 0), the
 *   static part's node and the NonZero VM kernel, Sum and Total; a run that
 *   fails (an input not set) fails the profile and the bench, no handle out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "test_support.h"
#include "util/file.h"
#include "vm/vm.h"

#include "onnx_build.h"

static const char *build_model(void)
{
    static char path[4200];
    kt_onnx_temp_path(path, sizeof path, "%s", "nonzero.onnx");
    vi_store s[3];
    const int64_t xd[1] = {6}, nd[2] = {1, -1};
    Onnx__ValueInfoProto *ins[1] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 1, xd)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi(&s[1], "r", KILN_DTYPE_FLOAT32, 1, xd),
                                     kt_onnx_vi(&s[2], "nz", KILN_DTYPE_INT64, 2, nd)};
    char *relu_in[] = {"x"}, *relu_out[] = {"r"};
    char *nz_in[] = {"r"}, *nz_out[] = {"nz"};
    Onnx__NodeProto nodes[2];
    kt_onnx_node(&nodes[0], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&nodes[1], "NonZero", nz_in, 1, nz_out, 1);
    Onnx__NodeProto *np[2] = {&nodes[0], &nodes[1]};
    kt_onnx_write_graph(path, "nonzero", np, 2, ins, 1, outs, 2, 13);
    return path;
}

static kiln_vm *open_buffer(const char *path)
{
    void *data = NULL;
    size_t size = 0;
    kiln_error err = {0};
    assert_int_equal(kiln_file_read(path, 1 << 20, &data, &size, &err), KILN_OK);
    kiln_vm_options o = {.reference = true};
    kiln_vm *vm = NULL;
    kiln_status st = kiln_vm_create_buffer(data, size, NULL, &o, &vm, &err);
    free(data);
    if (st != KILN_OK)
        fail_msg("kiln_vm_create_buffer: %s", err.msg);
    return vm;
}

/* Sets x, runs, checks nz against the positive entries of x. */
static void run_check(kiln_vm *vm, const float *x)
{
    kiln_error err = {0};
    kiln_tensor t = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(1, 6), .data = (void *)x};
    assert_int_equal(kiln_vm_set_input(vm, 0, &t, &err), KILN_OK);
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
    const kiln_tensor *nz = kiln_vm_output(vm, 1);
    assert_non_null(nz);
    int64_t want[6], k = 0;
    for (int i = 0; i < 6; i++)
        if (x[i] > 0)
            want[k++] = i;
    assert_int_equal(nz->dtype, KILN_DTYPE_INT64);
    assert_int_equal(nz->shape.rank, 2);
    assert_int_equal(nz->shape.dims[0], 1);
    assert_int_equal(nz->shape.dims[1], k);
    assert_memory_equal(nz->data, want, (size_t)k * sizeof *want);
}

static void test_needed(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    kiln_status st = kiln_onnx_load(build_model(), &g, &err);
    assert_int_not_equal(st, KILN_OK);
    assert_null(g);
    if (!kiln_vm_needed(st, err.msg))
        fail_msg("not for the VM: %s", err.msg);
    assert_true(kiln_vm_needed(KILN_ERR_UNSUPPORTED, "x.onnx: node 3 ('c'): unsupported op 'If'"));
    assert_false(kiln_vm_needed(KILN_ERR_UNSUPPORTED, "x.onnx: unsupported op 'Foo'"));
    assert_false(kiln_vm_needed(KILN_ERR_PARSE, "input 1 (shape) must be a constant"));
    assert_false(kiln_vm_needed(KILN_ERR_UNSUPPORTED, NULL));
}

static void test_create_buffer(void **state)
{
    (void)state;
    const char *path = build_model();
    const float a[6] = {1, -2, 3, 0, 5, -1}, b[6] = {-1, -1, -1, -1, 0.5f, -1};
    kiln_vm *vm = open_buffer(path);
    kiln_vm *vf = NULL;
    kiln_error err = {0};
    kiln_vm_options o = {.reference = true};
    assert_int_equal(kiln_vm_create(path, &o, &vf, &err), KILN_OK);
    assert_int_equal(kiln_vm_num_inputs(vm), kiln_vm_num_inputs(vf));
    assert_int_equal(kiln_vm_num_outputs(vm), 2);
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), kiln_vm_num_dynamic_nodes(vf));
    assert_int_equal(kiln_vm_num_threads(vm), 1); /* reference */
    run_check(vm, a);
    run_check(vm, b);
    run_check(vf, b);
    kiln_vm_destroy(vf);
    kiln_vm_destroy(vm);

    /* bad bytes: an error with a message, *out untouched */
    kiln_vm *out = (kiln_vm *)&err; /* any non-NULL sentinel */
    const char junk[] = "this is not an ONNX model";
    memset(&err, 0, sizeof err);
    assert_int_not_equal(kiln_vm_create_buffer(junk, sizeof junk, NULL, NULL, &out, &err),
                         KILN_OK);
    assert_true(err.msg[0] != '\0');
    assert_ptr_equal(out, (kiln_vm *)&err);
    memset(&err, 0, sizeof err);
    assert_int_equal(kiln_vm_create_buffer(NULL, 8, NULL, NULL, &out, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_ptr_equal(out, (kiln_vm *)&err);
}

static void test_bench(void **state)
{
    (void)state;
    kiln_vm *vm = open_buffer(build_model());
    const float x[6] = {1, -2, 3, 0, 5, -1};
    kiln_error err = {0};
    kiln_bench_result *r = calloc(1, sizeof *r);
    assert_non_null(r);
    /* inputs not set: the warm-up run fails, the bench with it */
    assert_int_equal(kiln_vm_bench(vm, NULL, r, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "is not set"));
    run_check(vm, x);
    kiln_bench_options o = {.number = 2, .repeat = 3};
    if (kiln_vm_bench(vm, &o, r, &err) != KILN_OK)
        fail_msg("bench: %s", err.msg);
    assert_int_equal(r->number, 2);
    assert_int_equal(r->repeat, 3);
    assert_int_equal(r->threads, 1);
    for (int i = 0; i < 3; i++)
        assert_true(r->results[i] > 0);
    assert_true(r->min > 0 && r->min <= r->median && r->median <= r->max);
    run_check(vm, x); /* outputs still those of the inputs set */
    assert_int_equal(kiln_vm_bench(NULL, &o, r, &err), KILN_ERR_INVALID_ARGUMENT);
    free(r);
    kiln_vm_destroy(vm);
}

static void test_profile(void **state)
{
    (void)state;
    kiln_vm *vm = open_buffer(build_model());
    kiln_error err = {0};
    kiln_profile *p = NULL;
    kiln_profile_options o = {.runs = 4, .warmup = 1, .bench_number = 1, .bench_repeat = 2,
                              .peak_gflops = 10, .model = "nonzero.onnx"};
    /* inputs not set: no profile */
    assert_int_equal(kiln_vm_profile(vm, &o, &p, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_null(p);
    o.runs = -1;
    assert_int_equal(kiln_vm_profile(vm, &o, &p, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "kiln_vm_profile"));
    o.runs = 4;

    const float x[6] = {1, -2, 3, 0, 5, -1};
    run_check(vm, x);
    if (kiln_vm_profile(vm, &o, &p, &err) != KILN_OK)
        fail_msg("profile: %s", err.msg);
    char *json = NULL;
    assert_int_equal(kiln_profile_format(p, "json", NULL, "order", 0, &json, &err), KILN_OK);
    assert_non_null(strstr(json, "\"executor\":\t\"vm\""));
    assert_non_null(strstr(json, "nonzero.onnx"));
    assert_non_null(strstr(json, "NonZero"));
    assert_non_null(strstr(json, "vm kernel"));
    assert_non_null(strstr(json, "Relu"));
    assert_non_null(strstr(json, "\"layouts\":\t\"vm\"")); /* step 0, the VM's own */
    kiln_free(json);
    char *table = NULL;
    assert_int_equal(kiln_profile_format(p, "table", NULL, NULL, 0, &table, &err), KILN_OK);
    assert_non_null(strstr(table, "Total"));
    kiln_free(table);
    kiln_profile_destroy(p);
    run_check(vm, x);
    kiln_vm_destroy(vm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needed),
        cmocka_unit_test(test_create_buffer),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
