/* tests/vm/test_vm_batch.c: a symbolic batch runs in chunks (src/vm/vm_batch.c,
 * docs/VM.md "Symbolic batch: chunks").
 *
 * The models, built here, x [batch, 4] with the batch symbolic:
 * - apart:  y = Relu(MatMul(x, W) + B), z = Softmax(y): each item on its own.
 *   Batches 13 (8 + 4 + 1), 3 (2 + 1), 8, 5 (4 + 1), 13, 1: outputs against
 *   values computed here; four specializations in all (one per chunk
 *   extent), none after the first runs; the runs' chunk counts; the steps
 *   (each chunk's, then its join) run one by one give the same outputs, on
 *   compiled and on reference kernels; a run of a batch seen before
 *   allocates nothing (malloc counted).
 * - meet:   y = x - ReduceMean(x, axes [0]): the items meet, so no chunks
 *   (each batch its own specialization), the reason names the node, and the
 *   outputs are right (chunks would get them wrong).
 * - two:    x [batch, n]: a symbolic dim besides axis 0, no chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "import/onnx/onnx.h"
#include "test_support.h"
#include "vm/vm.h"

#include "onnx_build.h"
#include "vm_helpers.h"

enum { K = 4, N = 3, MAXB = 13 };

static float w_data[K * N], b_data[N];

static const char *path_of(const char *file)
{
    static char path[4200];
    return kt_onnx_temp_path(path, sizeof path, "%s", file);
}

/* apart: y = Relu(MatMul(x, W) + B), z = Softmax(y, -1). */
static const char *write_apart(void)
{
    const char *path = path_of("batch_apart.onnx");
    kt_fill_random(w_data, K * N, 31, -1, 1);
    kt_fill_random(b_data, N, 32, -0.5f, 0.5f);
    vi_store s[3];
    const int64_t xd[2] = {-1, K}, yd[2] = {-1, N};
    const char *bp[2] = {"batch", NULL};
    Onnx__ValueInfoProto *ins[1] = {kt_onnx_vi_sym(&s[0], "x", KILN_DTYPE_FLOAT32, 2, xd, bp)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi_sym(&s[1], "y", KILN_DTYPE_FLOAT32, 2, yd, bp),
                                     kt_onnx_vi_sym(&s[2], "z", KILN_DTYPE_FLOAT32, 2, yd, bp)};
    char *mm_in[] = {"x", "W"}, *mm_out[] = {"m"}, *add_in[] = {"m", "B"}, *add_out[] = {"a"},
         *relu_in[] = {"a"}, *relu_out[] = {"y"}, *sm_in[] = {"y"}, *sm_out[] = {"z"};
    Onnx__NodeProto n[4];
    kt_onnx_node(&n[0], "MatMul", mm_in, 2, mm_out, 1);
    kt_onnx_node(&n[1], "Add", add_in, 2, add_out, 1);
    kt_onnx_node(&n[2], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&n[3], "Softmax", sm_in, 1, sm_out, 1);
    Onnx__NodeProto *np[4] = {&n[0], &n[1], &n[2], &n[3]};
    int64_t wd[2] = {K, N}, bd[1] = {N};
    Onnx__TensorProto t[2];
    Onnx__TensorProto *inits[2] = {kt_onnx_init_f32(&t[0], "W", 2, wd, w_data, K * N),
                                   kt_onnx_init_f32(&t[1], "B", 1, bd, b_data, N)};
    Onnx__GraphProto g;
    kt_onnx_graph(&g, "apart", np, 4, ins, 1, outs, 2);
    g.n_initializer = 2;
    g.initializer = inits;
    kt_onnx_write(path, &g, 17);
    return path;
}

/* meet: y = x - ReduceMean(x, axes [0], keepdims 1). */
static const char *write_meet(void)
{
    const char *path = path_of("batch_meet.onnx");
    vi_store s[2];
    const int64_t xd[2] = {-1, K};
    const char *bp[2] = {"batch", NULL};
    Onnx__ValueInfoProto *ins[1] = {kt_onnx_vi_sym(&s[0], "x", KILN_DTYPE_FLOAT32, 2, xd, bp)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi_sym(&s[1], "y", KILN_DTYPE_FLOAT32, 2, xd, bp)};
    char *rm_in[] = {"x"}, *rm_out[] = {"mean"}, *sub_in[] = {"x", "mean"}, *sub_out[] = {"y"};
    Onnx__NodeProto n[2];
    kt_onnx_node(&n[0], "ReduceMean", rm_in, 1, rm_out, 1);
    n[0].name = "batch_mean";
    static const int64_t axes[1] = {0};
    Onnx__AttributeProto a;
    Onnx__AttributeProto *ap[1] = {kt_onnx_attr_ints(&a, "axes", axes, 1)};
    n[0].n_attribute = 1;
    n[0].attribute = ap;
    kt_onnx_node(&n[1], "Sub", sub_in, 2, sub_out, 1);
    Onnx__NodeProto *np[2] = {&n[0], &n[1]};
    kt_onnx_write_graph(path, "meet", np, 2, ins, 1, outs, 1, 17);
    return path;
}

/* two: y = Relu(x), x [batch, n]. */
static const char *write_two(void)
{
    const char *path = path_of("batch_two.onnx");
    vi_store s[2];
    const int64_t xd[2] = {-1, -1};
    const char *xp[2] = {"batch", "n"};
    Onnx__ValueInfoProto *ins[1] = {kt_onnx_vi_sym(&s[0], "x", KILN_DTYPE_FLOAT32, 2, xd, xp)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi_sym(&s[1], "y", KILN_DTYPE_FLOAT32, 2, xd, xp)};
    char *in[] = {"x"}, *out[] = {"y"};
    Onnx__NodeProto n[1];
    kt_onnx_node(&n[0], "Relu", in, 1, out, 1);
    Onnx__NodeProto *np[1] = {&n[0]};
    kt_onnx_write_graph(path, "two", np, 1, ins, 1, outs, 1, 17);
    return path;
}

static kiln_vm *open_vm(const char *path, bool reference)
{
    return kt_vm_open(path, reference, 1);
}

/* apart's outputs for batch n against values computed here. */
static void check_apart(const kiln_vm *vm, const float *x, int n)
{
    const kiln_tensor *y = kiln_vm_output(vm, 0), *z = kiln_vm_output(vm, 1);
    assert_non_null(y);
    assert_non_null(z);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.dims[0], n);
    assert_int_equal(y->shape.dims[1], N);
    assert_int_equal(z->shape.dims[0], n);
    for (int i = 0; i < n; i++) {
        float e[N], sum = 0, mx = -INFINITY;
        for (int j = 0; j < N; j++) {
            float a = b_data[j];
            for (int k = 0; k < K; k++)
                a += x[i * K + k] * w_data[k * N + j];
            e[j] = a > 0 ? a : 0;
            mx = e[j] > mx ? e[j] : mx;
            if (fabsf(((const float *)y->data)[i * N + j] - e[j]) > 1e-5f)
                fail_msg("batch %d: y[%d][%d] = %g, expected %g", n, i, j,
                         ((const float *)y->data)[i * N + j], e[j]);
        }
        for (int j = 0; j < N; j++)
            sum += expf(e[j] - mx);
        for (int j = 0; j < N; j++)
            assert_float_equal(((const float *)z->data)[i * N + j], expf(e[j] - mx) / sum, 1e-5);
    }
}

/* Batches of several extents: chunks, specializations, values, steps. */
static void run_apart(bool reference)
{
    kiln_vm *vm = open_vm(write_apart(), reference);
    static float x[MAXB * K];
    kt_fill_random(x, MAXB * K, 33, -1, 1);
    const int batches[] = {13, 3, 8, 5, 13, 1}, chunks[] = {3, 2, 1, 2, 3, 1},
              made[] = {3, 4, 4, 4, 4, 4};
    for (int r = 0; r < 6; r++) {
        int n = batches[r];
        kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, (int64_t)n, K), x);
        kt_vm_run(vm);
        const char *why = NULL;
        assert_int_equal(kiln_vm_batch_chunks(vm, &why), chunks[r]);
        assert_string_equal(why, "");
        assert_int_equal(kiln_vm_num_specializations(vm), made[r]);
        check_apart(vm, x, n);
    }
    /* step by step (as the profiler runs it): each chunk's steps, then its
     * join; batch 7 = 4 + 2 + 1 */
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 7, K), x + K);
    kiln_error err = {0};
    assert_int_equal(kiln_vm_run_step(vm, 0, &err), KILN_OK);
    int steps = kiln_vm_num_steps(vm), joins = 0;
    for (int i = 1; i < steps; i++)
        assert_int_equal(kiln_vm_run_step(vm, i, &err), KILN_OK);
    for (int i = 0; i < steps; i++) {
        kiln_vm_step_desc d;
        assert_int_equal(kiln_vm_step_info(vm, i, &d, NULL, 0), KILN_OK);
        joins += strcmp(d.name, "vm: a chunk's outputs joined") == 0;
    }
    assert_int_equal(joins, 3);
    assert_int_equal(kiln_vm_batch_chunks(vm, NULL), 3);
    check_apart(vm, x + K, 7);
    assert_int_equal(kiln_vm_num_specializations(vm), 4);
#ifdef KT_COUNT_ALLOCS
    /* a batch seen before: set_input and run allocate nothing */
    for (int r = 0; r < 2; r++) {
        int n = r ? 13 : 5;
        kiln_tensor t = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(2, (int64_t)n, K), .data = x};
        kt_alloc_count_start();
        kiln_status s = kiln_vm_set_input(vm, 0, &t, &err);
        if (s == KILN_OK)
            s = kiln_vm_run(vm, &err);
        long allocs = kt_alloc_count_stop();
        assert_int_equal(s, KILN_OK);
        if (allocs)
            fail_msg("batch %d, seen before: %ld allocations", n, allocs);
        check_apart(vm, x, n);
    }
#endif
    kiln_vm_destroy(vm);
}

static void test_apart_compiled(void **state)
{
    (void)state;
    run_apart(false);
}

static void test_apart_reference(void **state)
{
    (void)state;
    run_apart(true);
}

/* The items meet: no chunks, one specialization per batch, values right. */
static void test_meet(void **state)
{
    (void)state;
    kiln_vm *vm = open_vm(write_meet(), false);
    static float x[5 * K];
    kt_fill_random(x, 5 * K, 34, -1, 1);
    const int batches[] = {5, 3, 5};
    for (int r = 0; r < 3; r++) {
        int n = batches[r];
        kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, (int64_t)n, K), x);
        kt_vm_run(vm);
        const char *why = NULL;
        assert_int_equal(kiln_vm_batch_chunks(vm, &why), 0);
        assert_non_null(strstr(why, "ReduceMean 'batch_mean': reduces the batch axis"));
        const kiln_tensor *y = kiln_vm_output(vm, 0);
        assert_int_equal(y->shape.dims[0], n);
        for (int k = 0; k < K; k++) {
            float mean = 0;
            for (int i = 0; i < n; i++)
                mean += x[i * K + k] / (float)n;
            for (int i = 0; i < n; i++)
                assert_float_equal(((const float *)y->data)[i * K + k], x[i * K + k] - mean, 1e-5);
        }
    }
    assert_int_equal(kiln_vm_num_specializations(vm), 2);
    kiln_vm_destroy(vm);
}

/* A symbolic dim besides the batch: one specialization per class. */
static void test_two_symbolic_dims(void **state)
{
    (void)state;
    kiln_vm *vm = open_vm(write_two(), true);
    static const float x[6] = {-1, 2, -3, 4, -5, 6};
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 3, 2), x);
    kt_vm_run(vm);
    const char *why = NULL;
    assert_int_equal(kiln_vm_batch_chunks(vm, &why), 0);
    assert_non_null(strstr(why, "input 'x' has a symbolic dim other than axis 0"));
    const float *y = kiln_vm_output(vm, 0)->data;
    for (int i = 0; i < 6; i++)
        assert_float_equal(y[i], x[i] > 0 ? x[i] : 0, 0);
    kiln_vm_destroy(vm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apart_compiled),
        cmocka_unit_test(test_apart_reference),
        cmocka_unit_test(test_meet),
        cmocka_unit_test(test_two_symbolic_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
