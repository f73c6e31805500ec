/* tests/vm/test_vm_view.c: the VM's views (src/vm/vm_view.c): Identity,
 * Flatten, Reshape, Squeeze, Unsqueeze and a Cast to the same dtype rename
 * their input's data instead of copying it.
 *
 * The model: r = Reshape(x, s) with s a graph input (so everything after it
 * runs on the VM), f = Flatten(r), u = Unsqueeze(f, axes), q = Squeeze(u,
 * axes), c = Cast(q, float) (the same dtype), i = Identity(c), y = Add(i, i),
 * k = Cast(q, int64) (another dtype: converted), and u and y graph outputs.
 * Checked against values worked out here, for several target shapes:
 * - outputs and shapes (Reshape's -1 and 0, Flatten's axis, the axes);
 * - which steps are views ("vm view"), which converted (the int64 Cast, the
 *   Add), and that views convert nothing: the conversions grow only by the
 *   Add's and the int64 Cast's shape classes;
 * - that a graph output that is a view node's output is a copy: new input
 *   data set, before the next run, does not change it;
 * - a run of shapes seen before allocates nothing (malloc counted);
 * - a target shape that does not hold the data: an error naming the
 *   Reshape (the node falls back to conversion, which states it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "test_support.h"
#include "vm/vm.h"

#include "alloc_count.h"
#include "onnx_build.h"
#include "vm_helpers.h"

static kiln_vm *build(void)
{
    static vi_store s[8];
    const int64_t xd[3] = {2, 3, 4}, three[1] = {3}, ad[1] = {1};
    Onnx__ValueInfoProto *ins[3] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 3, xd),
                                    kt_onnx_vi(&s[1], "s", KILN_DTYPE_INT64, 1, three),
                                    kt_onnx_vi(&s[2], "axes", KILN_DTYPE_INT64, 1, ad)};
    Onnx__ValueInfoProto *outs[3] = {kt_onnx_vi(&s[3], "y", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[4], "u", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[5], "k", KILN_DTYPE_INT64, -1, NULL)};
    static char *io[8][2][2] = {
        {{"x", "s"}, {"r"}}, {{"r"}, {"f"}}, {{"f", "axes"}, {"u"}}, {{"u", "axes"}, {"q"}},
        {{"q"}, {"c"}},      {{"c"}, {"i"}}, {{"i", "i"}, {"y"}},    {{"q"}, {"k"}},
    };
    static const char *ops[8] = {"Reshape", "Flatten",  "Unsqueeze", "Squeeze",
                                 "Cast",    "Identity", "Add",       "Cast"};
    static const char *names[8] = {"reshape",   "flatten",  "unsqueeze", "squeeze",
                                   "cast_same", "identity", "add",       "cast_int"};
    static const int n_in[8] = {2, 1, 2, 2, 1, 1, 2, 1};
    static Onnx__NodeProto nd[8];
    static Onnx__NodeProto *np[8];
    static Onnx__AttributeProto at[8], *ap[8];
    for (int k = 0; k < 8; k++) {
        kt_onnx_node(&nd[k], ops[k], io[k][0], n_in[k], io[k][1], 1);
        nd[k].name = (char *)names[k];
        np[k] = &nd[k];
    }
    ap[1] = kt_onnx_attr_int(&at[1], "axis", 2);
    nd[1].n_attribute = 1, nd[1].attribute = &ap[1];
    ap[4] = kt_onnx_attr_int(&at[4], "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    nd[4].n_attribute = 1, nd[4].attribute = &ap[4];
    ap[7] = kt_onnx_attr_int(&at[7], "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    nd[7].n_attribute = 1, nd[7].attribute = &ap[7];
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "views.onnx");
    kt_onnx_write_graph(path, "views", np, 8, ins, 3, outs, 3, 13);
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = true};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("create: %s", err.msg);
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 8);
    return vm;
}

static void want_shape(const kiln_tensor *t, int rank, const int64_t *dims, const char *what)
{
    if (t->shape.rank != rank)
        fail_msg("%s: rank %d, want %d", what, t->shape.rank, rank);
    for (int d = 0; d < rank; d++)
        if (t->shape.dims[d] != dims[d])
            fail_msg("%s: dim %d is %lld, want %lld", what, d, (long long)t->shape.dims[d],
                     (long long)dims[d]);
}

static void test_views(void **state)
{
    (void)state;
    kiln_vm *vm = build();
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i - 7.5f;
    /* targets of Reshape; Flatten(axis 2) of the result, then [.., 1 at 1, ..] */
    static const int64_t targets[][4] = {{3, 2, 0, 4}, {3, 2, -1, 0}, {3, 6, 1, 4}};
    static const int64_t flat[][2] = {{6, 4}, {6, 4}, {6, 4}};
    int64_t conv_before = 0;
    for (int t = 0; t < 3; t++) {
        const int64_t axes = 1;
        kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, 2, 3, 4), x);
        kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, targets[t][0]), &targets[t][1]);
        kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 1), &axes);
        kiln_error err = {0};
        if (kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run %d: %s", t, err.msg);
        const kiln_tensor *y = kiln_vm_output(vm, 0), *u = kiln_vm_output(vm, 1),
                          *k = kiln_vm_output(vm, 2);
        want_shape(y, 2, flat[t], "y");
        const int64_t ud[3] = {flat[t][0], 1, flat[t][1]};
        want_shape(u, 3, ud, "u");
        want_shape(k, 2, flat[t], "k");
        for (int i = 0; i < 24; i++) {
            assert_true(((const float *)y->data)[i] == 2 * x[i]);
            assert_true(((const float *)u->data)[i] == x[i]);
            assert_int_equal(((const int64_t *)k->data)[i], (int64_t)x[i]);
        }
        static const char *views[] = {"reshape", "flatten",   "unsqueeze",
                                      "squeeze", "cast_same", "identity"};
        for (int v = 0; v < 6; v++)
            if (strcmp(kt_vm_step_kind(vm, views[v], false, NULL), "vm view"))
                fail_msg("run %d: '%s' is %s, not a view", t, views[v],
                         kt_vm_step_kind(vm, views[v], false, NULL));
        assert_string_equal(kt_vm_step_kind(vm, "cast_int", false, NULL), "vm converted");
        assert_string_equal(kt_vm_step_kind(vm, "add", false, NULL), "vm converted");
        /* the same shapes downstream on every run: the Add and the int64
         * Cast converted on the first run only */
        if (t == 0)
            conv_before = kiln_vm_num_conversions(vm);
        assert_int_equal(conv_before, 2);
        assert_int_equal(kiln_vm_num_conversions(vm), conv_before);
    }
#ifdef KT_COUNT_ALLOCS
    { /* the last shapes again: nothing allocated (views, cached classes) */
        kiln_error err = {0};
        kt_alloc_count_start();
        kiln_status st = kiln_vm_run(vm, &err);
        long allocs = kt_alloc_count_stop();
        assert_int_equal(st, KILN_OK);
        assert_int_equal(allocs, 0);
    }
#endif
    /* the graph output u is a copy: new data in x before a run leaves it */
    const kiln_tensor *u = kiln_vm_output(vm, 1);
    float x2[24];
    for (int i = 0; i < 24; i++)
        x2[i] = 100.0f + (float)i;
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, 2, 3, 4), x2);
    for (int i = 0; i < 24; i++)
        assert_true(((const float *)u->data)[i] == x[i]);
    /* a target that does not hold 24 elements: the Reshape's error */
    const int64_t bad[3] = {5, 5, 5};
    kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, 3), bad);
    kiln_error err = {0};
    assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK);
    if (!strstr(err.msg, "reshape") && !strstr(err.msg, "Reshape"))
        fail_msg("the error does not name the Reshape: %s", err.msg);
    kiln_vm_destroy(vm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
