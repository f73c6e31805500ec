/* tests/vm/test_vm.c: parameter inputs as run-time data.
 *
 * - The VM (src/vm, docs/VM.md) on a model built here: x -> Relu (static) ->
 *   Reshape(shape: a graph input) -> Add(y, y) (data-dependent, downstream),
 *   with Relu's output also a graph output. Run with several shapes, on the
 *   reference executor and with the static part compiled: outputs against
 *   values computed here, the split (two data-dependent nodes), and the
 *   shape-class cache (a shape seen before converts nothing).
 * - A Loop whose trip count is an input, its body reading an outer value:
 *   final and stacked outputs for several counts, the body converted once.
 * - Clip min/max, Trilu k and CumSum axis as graph inputs import as a static
 *   graph (convert_rtparams.c) whose result follows the run-time value: one
 *   import, several values, against values computed here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "test_support.h"
#include "vm/vm.h"

#include "onnx_build.h"

/* ---- building small ONNX models -------------------------------------------- */

static kiln_tensor tensor(kiln_dtype dt, kiln_shape s)
{
    kiln_tensor t;
    kiln_error err = {0};
    assert_int_equal(kiln_tensor_alloc(&t, dt, &s, &err), KILN_OK);
    return t;
}

static kiln_tensor int64_vec(int n, const int64_t *v)
{
    kiln_tensor t = tensor(KILN_DTYPE_INT64, ks(1, (int64_t)n));
    memcpy(t.data, v, sizeof(int64_t) * (size_t)n);
    return t;
}

/* ---- the VM ------------------------------------------------------------------ */

/* x [2,3,4] -> r = Relu(x) -> y = Reshape(r, shape) -> z = Add(y, y); outputs z, r */
static char *reshape_model(void)
{
    static char path[4200];
    kt_onnx_temp_path(path, sizeof path, "reshape.onnx");
    vi_store s[4];
    int64_t xd[3] = {2, 3, 4}, sd[1] = {2};
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 3, xd),
                                    kt_onnx_vi(&s[1], "shape", KILN_DTYPE_INT64, 1, sd)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi(&s[2], "z", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[3], "r", KILN_DTYPE_FLOAT32, 3, xd)};
    char *relu_in[] = {"x"}, *relu_out[] = {"r"};
    char *rs_in[] = {"r", "shape"}, *rs_out[] = {"y"};
    char *add_in[] = {"y", "y"}, *add_out[] = {"z"};
    Onnx__NodeProto nodes[3];
    kt_onnx_node(&nodes[0], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&nodes[1], "Reshape", rs_in, 2, rs_out, 1);
    kt_onnx_node(&nodes[2], "Add", add_in, 2, add_out, 1);
    Onnx__NodeProto *np[3] = {&nodes[0], &nodes[1], &nodes[2]};
    kt_onnx_write_graph(path, "vm_test", np, 3, ins, 2, outs, 2, 17);
    return path;
}

static void run_shapes(bool reference)
{
    const char *path = reshape_model();
    kiln_error err = {0};
    /* a plain import cannot take it: the shape is data */
    kiln_graph *g = NULL;
    assert_int_equal(kiln_onnx_load(path, &g, &err), KILN_ERR_UNSUPPORTED);
    if (!strstr(err.msg, "must be a constant"))
        fail_msg("import: %s", err.msg);
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = reference, .num_threads = 1};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    assert_int_equal(kiln_vm_num_inputs(vm), 2);
    assert_int_equal(kiln_vm_num_outputs(vm), 2);
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 2); /* Reshape and the Add after it */
    assert_string_equal(kiln_vm_static_part(vm), reference ? "reference kernels" : "compiled");

    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(3, 2, 3, 4));
    kt_fill_random(x.data, 24, 7, -1, 1);
    assert_int_equal(kiln_vm_set_input(vm, 0, &x, &err), KILN_OK);
    static const int64_t shapes[][3] = {{2, 4, 6}, {2, 24, -1}, {2, 2, 3}, {2, 4, 6}};
    static const int64_t want[][2] = {{4, 6}, {24, 1}, {2, 3}, {4, 6}};
    /* Reshape is a view of Relu's output (vm_view.c: never converted, no
     * copy); Add converts once per new shape class; [4,6] again: cached */
    static const int conversions[] = {1, 2, 2, 2};
    for (int r = 0; r < 4; r++) {
        int rank = (int)shapes[r][0];
        kiln_tensor sh = int64_vec(rank, &shapes[r][1]);
        if (r == 2) {
            /* [2,3] holds 6 of the 24 elements: an error, no crash */
            assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
            assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK);
            assert_non_null(strstr(err.msg, "Reshape"));
            kiln_tensor_release(&sh);
            continue;
        }
        assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
        if (kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run %d: %s", r, err.msg);
        const kiln_tensor *z = kiln_vm_output(vm, 0), *rr = kiln_vm_output(vm, 1);
        assert_int_equal(z->shape.rank, 2);
        assert_int_equal(z->shape.dims[0], want[r][0]);
        assert_int_equal(z->shape.dims[1], want[r][1]);
        for (int i = 0; i < 24; i++) {
            float v = ((float *)x.data)[i] > 0 ? ((float *)x.data)[i] : 0;
            assert_float_equal(((float *)rr->data)[i], v, 0);
            assert_float_equal(((float *)z->data)[i], 2 * v, 0);
        }
        assert_int_equal(kiln_vm_num_conversions(vm), conversions[r]);
        kiln_tensor_release(&sh);
    }

    /* the profiler's steps: the VM's own, the static part's, one per dynamic
     * node; running them in order is a run */
    int n = kiln_vm_num_steps(vm);
    assert_true(n >= 4);
    kiln_vm_step_desc sd;
    char sbuf[256];
    assert_int_equal(kiln_vm_step_info(vm, 0, &sd, sbuf, sizeof sbuf), KILN_OK);
    assert_string_equal(sd.kind, "vm");
    for (int i = 1; i < n - 2; i++) {
        assert_int_equal(kiln_vm_step_info(vm, i, &sd, sbuf, sizeof sbuf), KILN_OK);
        assert_string_equal(sd.kind, reference ? "reference" : "compiled");
    }
    assert_int_equal(kiln_vm_step_info(vm, n - 2, &sd, sbuf, sizeof sbuf), KILN_OK);
    assert_string_equal(sd.op, "Reshape");
    assert_string_equal(sd.kind, "vm view");
    assert_string_equal(sbuf, "float32[2, 3, 4], int64[2]");
    assert_int_equal(kiln_vm_step_info(vm, n - 1, &sd, NULL, 0), KILN_OK);
    assert_string_equal(sd.op, "Add");
    assert_int_not_equal(kiln_vm_step_info(vm, n, &sd, NULL, 0), KILN_OK);
    assert_int_not_equal(kiln_vm_run_step(vm, n, &err), KILN_OK);
    float *xv = x.data;
    for (int i = 0; i < 24; i++)
        xv[i] = -xv[i]; /* new data: the steps must compute it */
    kiln_tensor sh = int64_vec(2, (const int64_t[]){6, -1});
    assert_int_equal(kiln_vm_set_input(vm, 0, &x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
    for (int i = 0; i < n; i++)
        if (kiln_vm_run_step(vm, i, &err) != KILN_OK)
            fail_msg("step %d: %s", i, err.msg);
    const kiln_tensor *z = kiln_vm_output(vm, 0);
    assert_int_equal(z->shape.dims[0], 6);
    assert_int_equal(z->shape.dims[1], 4);
    for (int i = 0; i < 24; i++)
        assert_float_equal(((float *)z->data)[i], 2 * (xv[i] > 0 ? xv[i] : 0), 0);
    kiln_tensor_release(&sh);
    kiln_tensor_release(&x);
    kiln_vm_destroy(vm);
}

static void test_vm_reference(void **state)
{
    (void)state;
    run_shapes(true);
}

static void test_vm_compiled(void **state)
{
    (void)state;
    run_shapes(false);
}

/* ---- control flow --------------------------------------------------------------- */

/* Loop(M, "", x) with body (i, cond, c) -> (cond, c + y, c + y): y is read
 * from the outer scope; outputs: the final c and the stacked scan output. */
static void test_vm_loop(void **state)
{
    (void)state;
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "loop.onnx");
    vi_store s[12];
    int64_t two[1] = {2};
    /* the body */
    Onnx__ValueInfoProto *bin[3] = {kt_onnx_vi(&s[0], "i", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[1], "cond", KILN_DTYPE_BOOL, 0, NULL),
                                    kt_onnx_vi(&s[2], "c", KILN_DTYPE_FLOAT32, 1, two)};
    Onnx__ValueInfoProto *bout[3] = {kt_onnx_vi(&s[3], "cond_out", KILN_DTYPE_BOOL, 0, NULL),
                                     kt_onnx_vi(&s[4], "c_out", KILN_DTYPE_FLOAT32, 1, two),
                                     kt_onnx_vi(&s[5], "scan", KILN_DTYPE_FLOAT32, 1, two)};
    char *id_in[] = {"cond"}, *id_out[] = {"cond_out"};
    char *add_in[] = {"c", "y"}, *add_out[] = {"c_out"};
    char *cp_in[] = {"c_out"}, *cp_out[] = {"scan"};
    Onnx__NodeProto bn[3];
    kt_onnx_node(&bn[0], "Identity", id_in, 1, id_out, 1);
    kt_onnx_node(&bn[1], "Add", add_in, 2, add_out, 1);
    kt_onnx_node(&bn[2], "Identity", cp_in, 1, cp_out, 1);
    Onnx__NodeProto *bnp[3] = {&bn[0], &bn[1], &bn[2]};
    Onnx__GraphProto body;
    kt_onnx_graph(&body, "body", bnp, 3, bin, 3, bout, 3);
    /* the model */
    Onnx__ValueInfoProto *ins[3] = {kt_onnx_vi(&s[6], "M", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[7], "x", KILN_DTYPE_FLOAT32, 1, two),
                                    kt_onnx_vi(&s[8], "y", KILN_DTYPE_FLOAT32, 1, two)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi(&s[9], "final", KILN_DTYPE_FLOAT32, 1, two),
                                     kt_onnx_vi(&s[10], "rows", KILN_DTYPE_FLOAT32, -1, NULL)};
    char *lp_in[] = {"M", "", "x"}, *lp_out[] = {"final", "rows"};
    Onnx__NodeProto lp;
    kt_onnx_node(&lp, "Loop", lp_in, 3, lp_out, 2);
    Onnx__AttributeProto a;
    Onnx__AttributeProto *ap[1] = {kt_onnx_attr_graph(&a, "body", &body)};
    lp.n_attribute = 1;
    lp.attribute = ap;
    Onnx__NodeProto *np[1] = {&lp};
    kt_onnx_write_graph(path, "loop", np, 1, ins, 3, outs, 2, 17);

    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = true};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 1);
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(1, 2)), y = tensor(KILN_DTYPE_FLOAT32, ks(1, 2));
    kiln_tensor m = tensor(KILN_DTYPE_INT64, ks(0));
    ((float *)x.data)[0] = 1, ((float *)x.data)[1] = -2;
    ((float *)y.data)[0] = 0.5f, ((float *)y.data)[1] = 3;
    assert_int_equal(kiln_vm_set_input(vm, 1, &x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 2, &y, &err), KILN_OK);
    static const int64_t trips[] = {3, 5, 3, 1};
    int64_t conv = 0;
    for (int r = 0; r < 4; r++) {
        *(int64_t *)m.data = trips[r];
        assert_int_equal(kiln_vm_set_input(vm, 0, &m, &err), KILN_OK);
        if (kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run %d: %s", r, err.msg);
        const kiln_tensor *f = kiln_vm_output(vm, 0), *rows = kiln_vm_output(vm, 1);
        int64_t k = trips[r];
        for (int j = 0; j < 2; j++)
            assert_float_equal(((float *)f->data)[j],
                               ((float *)x.data)[j] + (float)k * ((float *)y.data)[j], 1e-6);
        assert_int_equal(rows->shape.rank, 2);
        assert_int_equal(rows->shape.dims[0], k);
        assert_int_equal(rows->shape.dims[1], 2);
        for (int64_t i = 0; i < k; i++)
            for (int j = 0; j < 2; j++)
                assert_float_equal(((float *)rows->data)[i * 2 + j],
                                   ((float *)x.data)[j] + (float)(i + 1) * ((float *)y.data)[j],
                                   1e-6);
        if (r == 0)
            conv = kiln_vm_num_conversions(vm);
    }
    /* the body's Add converted once: every iteration has the same shapes
     * (its Identities are views; body outputs, so copies, vm_view.c) */
    assert_int_equal(conv, 1);
    assert_int_equal(kiln_vm_num_conversions(vm), conv);
    kiln_tensor_release(&x);
    kiln_tensor_release(&y);
    kiln_tensor_release(&m);
    kiln_vm_destroy(vm);
}

/* Loop(M, "", x [1, 2], a0 [0, 2][, l0]) with body (i, cond, c, acc[, l]) ->
 * (cond, c2 = c + y, Concat(acc, c2, axis 0)[, Shape(acc)]): acc collects
 * the rows x + (i + 1) y. Without the Shape, acc is an accumulator
 * (vm_flow.c): its Concat is fused and the Loop appends c2 to its buffer;
 * with it, acc is read twice and the Concat runs. Both give the rows. */
static void loop_accumulator(bool shared)
{
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "loop_acc%d.onnx", shared);
    vi_store s[17];
    int64_t two[1] = {2}, row[2] = {1, 2}, empty[2] = {0, 2}, any[2] = {-1, 2};
    int nb = shared ? 5 : 4, nbo = shared ? 4 : 3;
    Onnx__ValueInfoProto *bin[5] = {kt_onnx_vi(&s[0], "i", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[1], "cond", KILN_DTYPE_BOOL, 0, NULL),
                                    kt_onnx_vi(&s[2], "c", KILN_DTYPE_FLOAT32, 2, row),
                                    kt_onnx_vi(&s[3], "acc", KILN_DTYPE_FLOAT32, 2, any),
                                    kt_onnx_vi(&s[4], "l", KILN_DTYPE_INT64, 1, two)};
    Onnx__ValueInfoProto *bout[4] = {kt_onnx_vi(&s[5], "cond_out", KILN_DTYPE_BOOL, 0, NULL),
                                     kt_onnx_vi(&s[6], "c_out", KILN_DTYPE_FLOAT32, 2, row),
                                     kt_onnx_vi(&s[7], "acc_out", KILN_DTYPE_FLOAT32, 2, any),
                                     kt_onnx_vi(&s[8], "l_out", KILN_DTYPE_INT64, 1, two)};
    char *id_in[] = {"cond"}, *id_out[] = {"cond_out"};
    char *add_in[] = {"c", "y"}, *add_out[] = {"c_out"};
    char *cat_in[] = {"acc", "c_out"}, *cat_out[] = {"acc_out"};
    char *sh_in[] = {"acc"}, *sh_out[] = {"l_out"};
    Onnx__NodeProto bn[4];
    kt_onnx_node(&bn[0], "Identity", id_in, 1, id_out, 1);
    kt_onnx_node(&bn[1], "Add", add_in, 2, add_out, 1);
    kt_onnx_node(&bn[2], "Concat", cat_in, 2, cat_out, 1);
    kt_onnx_node(&bn[3], "Shape", sh_in, 1, sh_out, 1);
    bn[2].name = "append";
    Onnx__AttributeProto axis;
    Onnx__AttributeProto *axp[1] = {kt_onnx_attr_int(&axis, "axis", 0)};
    bn[2].n_attribute = 1, bn[2].attribute = axp;
    Onnx__NodeProto *bnp[4] = {&bn[0], &bn[1], &bn[2], &bn[3]};
    Onnx__GraphProto body;
    kt_onnx_graph(&body, "body", bnp, shared ? 4 : 3, bin, nb, bout, nbo);
    Onnx__ValueInfoProto *ins[5] = {kt_onnx_vi(&s[9], "M", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[10], "x", KILN_DTYPE_FLOAT32, 2, row),
                                    kt_onnx_vi(&s[11], "a0", KILN_DTYPE_FLOAT32, 2, empty),
                                    kt_onnx_vi(&s[12], "y", KILN_DTYPE_FLOAT32, 2, row),
                                    kt_onnx_vi(&s[13], "l0", KILN_DTYPE_INT64, 1, two)};
    Onnx__ValueInfoProto *outs[3] = {kt_onnx_vi(&s[14], "final", KILN_DTYPE_FLOAT32, 2, row),
                                     kt_onnx_vi(&s[15], "rows", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[16], "len", KILN_DTYPE_INT64, 1, two)};
    char *lp_in[] = {"M", "", "x", "a0", "l0"}, *lp_out[] = {"final", "rows", "len"};
    Onnx__NodeProto lp;
    kt_onnx_node(&lp, "Loop", lp_in, shared ? 5 : 4, lp_out, shared ? 3 : 2);
    Onnx__AttributeProto a;
    Onnx__AttributeProto *ap[1] = {kt_onnx_attr_graph(&a, "body", &body)};
    lp.n_attribute = 1;
    lp.attribute = ap;
    Onnx__NodeProto *np[1] = {&lp};
    kt_onnx_write_graph(path, "loop_acc", np, 1, ins, shared ? 5 : 4, outs, shared ? 3 : 2, 17);

    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = true};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    const float x[2] = {1, -2}, y[2] = {0.5f, 3};
    const int64_t l0[2] = {0, 2};
    kiln_tensor tx = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(2, 1, 2), .data = (void *)x};
    kiln_tensor ty = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(2, 1, 2), .data = (void *)y};
    kiln_tensor ta = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(2, 0, 2), .data = (void *)x};
    kiln_tensor tl = {.dtype = KILN_DTYPE_INT64, .shape = ks(1, 2), .data = (void *)l0};
    assert_int_equal(kiln_vm_set_input(vm, 1, &tx, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 2, &ta, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 3, &ty, &err), KILN_OK);
    if (shared)
        assert_int_equal(kiln_vm_set_input(vm, 4, &tl, &err), KILN_OK);
    static const int64_t trips[] = {3, 9, 0, 2};
    for (int r = 0; r < 4; r++) {
        int64_t k = trips[r];
        kiln_tensor tm = {.dtype = KILN_DTYPE_INT64, .shape = ks(0), .data = &k};
        assert_int_equal(kiln_vm_set_input(vm, 0, &tm, &err), KILN_OK);
        if (kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run %d: %s", r, err.msg);
        const kiln_tensor *rows = kiln_vm_output(vm, 1);
        assert_int_equal(rows->shape.rank, 2);
        assert_int_equal(rows->shape.dims[0], k);
        assert_int_equal(rows->shape.dims[1], 2);
        for (int64_t i = 0; i < k; i++)
            for (int j = 0; j < 2; j++)
                assert_float_equal(((const float *)rows->data)[i * 2 + j],
                                   x[j] + (float)(i + 1) * y[j], 1e-6);
        if (shared && k > 0) { /* Shape(acc) of the last iteration: [k - 1, 2] */
            const int64_t *l = kiln_vm_output(vm, 2)->data;
            assert_int_equal(l[0], k - 1);
            assert_int_equal(l[1], 2);
        }
    }
    /* the body's Concat: fused (appended by the Loop) unless acc is read twice */
    kiln_vm_step_desc sd;
    int n = kiln_vm_num_steps(vm);
    assert_int_equal(kiln_vm_step_info(vm, n - 1, &sd, NULL, 0), KILN_OK);
    assert_string_equal(sd.op, "Loop");
    assert_int_equal(kiln_vm_step_accumulators(vm, n - 1), shared ? 0 : 1);
    kiln_vm_destroy(vm);
}

static void test_vm_loop_accumulator(void **state)
{
    (void)state;
    loop_accumulator(false);
    loop_accumulator(true);
}

/* ---- parameters that decide no shape ------------------------------------------- */

/* op(x, p1[, p2]) with p as graph inputs of dtype pdt and rank prank */
static kiln_graph *param_model(const char *op, int n_params, kiln_dtype pdt, int prank,
                               const char *attr_name, int64_t attr)
{
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "%s.onnx", op);
    vi_store s[4];
    int64_t xd[2] = {3, 4}, one[1] = {1};
    Onnx__ValueInfoProto *ins[3] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 2, xd),
                                    kt_onnx_vi(&s[1], "p1", pdt, prank, one),
                                    kt_onnx_vi(&s[2], "p2", pdt, prank, one)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[3], "y", KILN_DTYPE_FLOAT32, 2, xd)};
    char *in[] = {"x", "p1", "p2"}, *out[] = {"y"};
    Onnx__NodeProto n;
    kt_onnx_node(&n, op, in, 1 + n_params, out, 1);
    Onnx__AttributeProto a, *ap[1] = {&a};
    if (attr_name) {
        kt_onnx_attr_int(&a, attr_name, attr);
        n.n_attribute = 1;
        n.attribute = ap;
    }
    Onnx__NodeProto *np[1] = {&n};
    kt_onnx_write_graph(path, "params", np, 1, ins, 1 + n_params, outs, 1, 17);
    kiln_graph *gr = NULL;
    kiln_error err = {0};
    if (kiln_onnx_load(path, &gr, &err) != KILN_OK)
        fail_msg("%s: %s", op, err.msg);
    return gr;
}

/* Runs ex on x and the parameter values p (rank-0 or [1] tensors of dt). */
static const kiln_tensor *run_params(kiln_ref_executor *ex, const kiln_tensor *x, kiln_dtype dt,
                                     int prank, int n, const double *p)
{
    kiln_error err = {0};
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, x, &err), KILN_OK);
    for (int i = 0; i < n; i++) {
        kiln_tensor t = tensor(dt, prank ? ks(1, (int64_t)1) : ks(0));
        if (dt == KILN_DTYPE_INT64)
            *(int64_t *)t.data = (int64_t)p[i];
        else
            *(float *)t.data = (float)p[i];
        if (kiln_ref_executor_set_input(ex, 1 + i, &t, &err) != KILN_OK)
            fail_msg("input %d: %s", i + 1, err.msg);
        kiln_tensor_release(&t);
    }
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
    return kiln_ref_executor_output(ex, 0);
}

static void test_runtime_params(void **state)
{
    (void)state;
    kiln_error err = {0};
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(2, 3, 4));
    const float *xv = x.data;
    kt_fill_random(x.data, 12, 3, -2, 2);

    /* Clip: one import, several bounds */
    kiln_graph *g = param_model("Clip", 2, KILN_DTYPE_FLOAT32, 0, NULL, 0);
    kiln_ref_executor *ex = NULL;
    assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
    static const double bounds[][2] = {{-0.5, 0.5}, {0, 1}, {-3, -1}};
    for (int b = 0; b < 3; b++) {
        const kiln_tensor *y = run_params(ex, &x, KILN_DTYPE_FLOAT32, 0, 2, bounds[b]);
        for (int i = 0; i < 12; i++)
            assert_float_equal(((float *)y->data)[i],
                               fminf(fmaxf(xv[i], (float)bounds[b][0]), (float)bounds[b][1]), 0);
    }
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);

    /* Trilu, upper and lower, k from -3 to 4 */
    for (int upper = 0; upper <= 1; upper++) {
        g = param_model("Trilu", 1, KILN_DTYPE_INT64, 0, "upper", upper);
        assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
        for (int k = -3; k <= 4; k++) {
            double kv = k;
            const kiln_tensor *y = run_params(ex, &x, KILN_DTYPE_INT64, 0, 1, &kv);
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) {
                    bool keep = upper ? j - i >= k : j - i <= k;
                    assert_float_equal(((float *)y->data)[i * 4 + j], keep ? xv[i * 4 + j] : 0,
                                       0);
                }
        }
        kiln_ref_executor_destroy(ex);
        kiln_graph_destroy(g);
    }

    /* CumSum over the axis given at run time (0, 1, -1, -2), exclusive */
    g = param_model("CumSum", 1, KILN_DTYPE_INT64, 1, "exclusive", 1);
    assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
    static const double axes[] = {0, 1, -1, -2};
    for (int a = 0; a < 4; a++) {
        int axis = axes[a] < 0 ? (int)axes[a] + 2 : (int)axes[a];
        const kiln_tensor *y = run_params(ex, &x, KILN_DTYPE_INT64, 1, 1, &axes[a]);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int t = 0; t < (axis == 0 ? i : j); t++)
                    s += axis == 0 ? xv[t * 4 + j] : xv[i * 4 + t];
                assert_float_equal(((float *)y->data)[i * 4 + j], s, 1e-5);
            }
    }
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);
    kiln_tensor_release(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vm_reference),
        cmocka_unit_test(test_vm_compiled),
        cmocka_unit_test(test_vm_loop),
        cmocka_unit_test(test_vm_loop_accumulator),
        cmocka_unit_test(test_runtime_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
