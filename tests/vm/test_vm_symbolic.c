/* tests/vm/test_vm_symbolic.c: graph inputs with symbolic dims (dim_param)
 * on the VM (src/vm: one specialization per input-shape class).
 *
 * The model, built here: x [batch, 3], y [batch, 3], w [3, 2], shape [1]
 *   r = Relu(Add(x, y)); out = MatMul(r, w)  [batch, 2]  (the static part)
 *   flat = Reshape(r, shape)                           (data-dependent)
 * - run at batch 2, 5, 2, 5 (alternating), static part compiled: outputs
 *   against values computed here, two specializations in all, and a run of
 *   a class seen before allocates nothing (malloc counted);
 * - the cache keeps the 4 most recently used classes (a fifth class evicts
 *   the oldest, which is imported again when it comes back);
 * - errors: wrong rank, a fixed dim that differs, two inputs that disagree on
 *   'batch', a wrong dtype; each names the input and the dim, none crashes;
 * - an input with an unknown dim (no name) and one with no declared shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "import/onnx/onnx.h"
#include "test_support.h"
#include "vm/vm.h"

#include "onnx_build.h"
#include "vm_helpers.h"


static kiln_tensor tensor(kiln_dtype dt, kiln_shape s)
{
    kiln_tensor t;
    kiln_error err = {0};
    assert_int_equal(kiln_tensor_alloc(&t, dt, &s, &err), KILN_OK);
    return t;
}

static const char *model_path(const char *file)
{
    static char path[4200];
    return kt_onnx_temp_path(path, sizeof path, "%s", file);
}

static const char *build_model(void)
{
    const char *path = model_path("symbolic.onnx");
    vi_store s[6];
    const int64_t xd[2] = {-1, 3}, wd[2] = {3, 2}, sd[1] = {1}, od[2] = {-1, 2}, fd[1] = {-1};
    const char *xp[2] = {"batch", NULL}, *op[2] = {"batch", NULL}, *fp[1] = {NULL};
    Onnx__ValueInfoProto *ins[4] = {
        kt_onnx_vi_sym(&s[0], "x", KILN_DTYPE_FLOAT32, 2, xd, xp),
        kt_onnx_vi_sym(&s[1], "y", KILN_DTYPE_FLOAT32, 2, xd, xp),
        kt_onnx_vi(&s[2], "w", KILN_DTYPE_FLOAT32, 2, wd),
        kt_onnx_vi(&s[3], "shape", KILN_DTYPE_INT64, 1, sd)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi_sym(&s[4], "out", KILN_DTYPE_FLOAT32, 2, od, op),
                                     kt_onnx_vi_sym(&s[5], "flat", KILN_DTYPE_FLOAT32, 1, fd, fp)};
    char *add_in[] = {"x", "y"}, *add_out[] = {"s"};
    char *relu_in[] = {"s"}, *relu_out[] = {"r"};
    char *mm_in[] = {"r", "w"}, *mm_out[] = {"out"};
    char *rs_in[] = {"r", "shape"}, *rs_out[] = {"flat"};
    Onnx__NodeProto nodes[4];
    kt_onnx_node(&nodes[0], "Add", add_in, 2, add_out, 1);
    kt_onnx_node(&nodes[1], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&nodes[2], "MatMul", mm_in, 2, mm_out, 1);
    kt_onnx_node(&nodes[3], "Reshape", rs_in, 2, rs_out, 1);
    Onnx__NodeProto *np[4] = {&nodes[0], &nodes[1], &nodes[2], &nodes[3]};
    kt_onnx_write_graph(path, "symbolic", np, 4, ins, 4, outs, 2, 17);
    return path;
}

/* The inputs of one batch size (data from the seed), set into the VM. */
typedef struct batch {
    int n;
    kiln_tensor x, y, w, shape;
} batch;

static void batch_make(batch *b, int n, uint64_t seed)
{
    b->n = n;
    b->x = tensor(KILN_DTYPE_FLOAT32, ks(2, (int64_t)n, 3));
    b->y = tensor(KILN_DTYPE_FLOAT32, ks(2, (int64_t)n, 3));
    b->w = tensor(KILN_DTYPE_FLOAT32, ks(2, 3, 2));
    b->shape = tensor(KILN_DTYPE_INT64, ks(1, 1));
    kt_fill_random(b->x.data, 3 * n, seed, -1, 1);
    kt_fill_random(b->y.data, 3 * n, seed + 1, -1, 1);
    kt_fill_random(b->w.data, 6, 99, -1, 1);
    ((int64_t *)b->shape.data)[0] = -1;
}

static void batch_free(batch *b)
{
    kiln_tensor_release(&b->x);
    kiln_tensor_release(&b->y);
    kiln_tensor_release(&b->w);
    kiln_tensor_release(&b->shape);
}

static kiln_status batch_set(kiln_vm *vm, const batch *b, kiln_error *err)
{
    kiln_status s = kiln_vm_set_input(vm, 0, &b->x, err);
    if (s == KILN_OK)
        s = kiln_vm_set_input(vm, 1, &b->y, err);
    if (s == KILN_OK)
        s = kiln_vm_set_input(vm, 2, &b->w, err);
    if (s == KILN_OK)
        s = kiln_vm_set_input(vm, 3, &b->shape, err);
    return s;
}

/* Sets b's inputs and runs; the status, in err on failure. */
static kiln_status batch_set_run(kiln_vm *vm, const batch *b, kiln_error *err)
{
    kiln_status s = batch_set(vm, b, err);
    return s == KILN_OK ? kiln_vm_run(vm, err) : s;
}

/* The outputs against values computed here. */
static void batch_check(const kiln_vm *vm, const batch *b)
{
    const kiln_tensor *out = kiln_vm_output(vm, 0), *flat = kiln_vm_output(vm, 1);
    assert_non_null(out);
    assert_non_null(flat);
    assert_int_equal(out->shape.rank, 2);
    assert_int_equal(out->shape.dims[0], b->n);
    assert_int_equal(out->shape.dims[1], 2);
    assert_int_equal(flat->shape.rank, 1);
    assert_int_equal(flat->shape.dims[0], 3 * b->n);
    const float *x = b->x.data, *y = b->y.data, *w = b->w.data;
    const float *o = out->data, *f = flat->data;
    for (int i = 0; i < b->n; i++) {
        float r[3];
        for (int k = 0; k < 3; k++) {
            r[k] = x[i * 3 + k] + y[i * 3 + k];
            r[k] = r[k] > 0 ? r[k] : 0;
            assert_float_equal(f[i * 3 + k], r[k], 0);
        }
        for (int j = 0; j < 2; j++) {
            float want = r[0] * w[0 * 2 + j] + r[1] * w[1 * 2 + j] + r[2] * w[2 * 2 + j];
            assert_float_equal(o[i * 2 + j], want, 1e-5);
        }
    }
}

/* Sets b's inputs, runs (run r: failing names it) and checks the outputs. */
static void batch_run(kiln_vm *vm, const batch *b, int r)
{
    kiln_error err = {0};
    if (batch_set_run(vm, b, &err) != KILN_OK)
        fail_msg("run %d (batch %d): %s", r, b->n, err.msg);
    batch_check(vm, b);
}

#ifdef KT_COUNT_ALLOCS
/* batch_set_run, counting the allocations of both (the status in *s). */
static long batch_set_run_counted(kiln_vm *vm, const batch *b, kiln_status *s)
{
    kiln_error err = {0};
    kt_alloc_count_start();
    *s = batch_set_run(vm, b, &err);
    return kt_alloc_count_stop();
}
#endif

static kiln_vm *open_vm(const char *path, bool reference)
{
    return kt_vm_open(path, reference, 1);
}

/* A plain import refuses the model, naming the input and the dim; the VM
 * takes it and reports the declared shapes with -1 and the names. */
static void test_info(void **state)
{
    (void)state;
    const char *path = build_model();
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_onnx_load(path, &g, &err), KILN_ERR_UNSUPPORTED);
    if (!strstr(err.msg, "input 'x'") || !strstr(err.msg, "'batch'"))
        fail_msg("import: %s", err.msg);
    kiln_vm *vm = open_vm(path, true);
    assert_true(kiln_vm_symbolic(vm));
    assert_int_equal(kiln_vm_num_specializations(vm), 0);
    assert_int_equal(kiln_vm_num_inputs(vm), 4);
    assert_int_equal(kiln_vm_num_outputs(vm), 2);
    const char *name = NULL;
    kiln_dtype dt;
    kiln_shape sh;
    assert_int_equal(kiln_vm_input_info(vm, 0, &name, &dt, &sh), KILN_OK);
    assert_string_equal(name, "x");
    assert_int_equal(sh.rank, 2);
    assert_int_equal(sh.dims[0], -1);
    assert_int_equal(sh.dims[1], 3);
    assert_string_equal(kiln_vm_input_dim_param(vm, 0, 0), "batch");
    assert_null(kiln_vm_input_dim_param(vm, 0, 1));
    assert_null(kiln_vm_input_dim_param(vm, 0, -1));
    assert_null(kiln_vm_input_dim_param(vm, 2, 0));
    /* before a run: no output, one step (the one that picks the class) */
    assert_null(kiln_vm_output(vm, 0));
    assert_int_equal(kiln_vm_num_steps(vm), 1);
    assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK); /* inputs not set */
    assert_non_null(strstr(err.msg, "not set"));
    kiln_vm_destroy(vm);
}

/* Batch 2, 5, 2, 5, 2 with the static part compiled: two specializations;
 * the runs of a class seen before allocate nothing. */
static void test_alternate_compiled(void **state)
{
    (void)state;
    const char *path = build_model();
    kiln_vm *vm = open_vm(path, false);
    kiln_error err = {0};
    batch b[2];
    batch_make(&b[0], 2, 1);
    batch_make(&b[1], 5, 11);
    for (int r = 0; r < 5; r++) {
        batch_run(vm, &b[r % 2], r);
        assert_int_equal(kiln_vm_num_specializations(vm), r == 0 ? 1 : 2);
        assert_true(kiln_vm_static_compiled(vm));
        assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 1); /* the Reshape */
    }
    int64_t conv = kiln_vm_num_conversions(vm);
#ifdef KT_COUNT_ALLOCS
    for (int r = 0; r < 4; r++) {
        const batch *bb = &b[r % 2];
        kiln_status s;
        long n_allocs = batch_set_run_counted(vm, bb, &s);
        assert_int_equal(s, KILN_OK);
        if (n_allocs != 0)
            fail_msg("run %d (batch %d, a class seen before): %ld allocations", r, bb->n,
                     n_allocs);
        batch_check(vm, bb);
    }
    assert_int_equal(kiln_vm_num_conversions(vm), conv); /* nothing converted again */
    /* the counter counts: a new class (batch 3) imports and compiles */
    batch b3;
    batch_make(&b3, 3, 21);
    kiln_status s3;
    long n_allocs3 = batch_set_run_counted(vm, &b3, &s3);
    assert_int_equal(s3, KILN_OK);
    assert_true(n_allocs3 > 0);
    batch_check(vm, &b3);
    batch_free(&b3);
    assert_int_equal(kiln_vm_num_specializations(vm), 3);
#else
    assert_int_equal(kiln_vm_num_specializations(vm), 2);
    assert_int_equal(kiln_vm_num_conversions(vm), conv);
#endif
    /* the profiler's steps are the last class's; running them is a run */
    int n = kiln_vm_num_steps(vm);
    assert_true(n >= 3);
    kiln_vm_step_desc sd;
    assert_int_equal(kiln_vm_step_info(vm, n - 1, &sd, NULL, 0), KILN_OK);
    assert_string_equal(sd.op, "Reshape");
    assert_int_equal(batch_set(vm, &b[1], &err), KILN_OK);
    for (int i = 0; i < n; i++)
        if (kiln_vm_run_step(vm, i, &err) != KILN_OK)
            fail_msg("step %d: %s", i, err.msg);
    batch_check(vm, &b[1]);
    batch_free(&b[0]);
    batch_free(&b[1]);
    kiln_vm_destroy(vm);
}

/* Six batch sizes then the first again: 4 kept, least recently used out. */
static void test_lru(void **state)
{
    (void)state;
    const char *path = build_model();
    kiln_vm *vm = open_vm(path, true);
    static const int sizes[] = {1, 2, 3, 4, 1, 5, 2, 1, 3};
    /* specializations after each run: 1..4 new, 1 kept; 5 evicts 2 (the
     * least recently used); 2 again is new (evicts 3); 1 kept; 3 is new */
    static const int64_t made[] = {1, 2, 3, 4, 4, 5, 6, 6, 7};
    for (size_t r = 0; r < sizeof sizes / sizeof *sizes; r++) {
        batch b;
        batch_make(&b, sizes[r], 100 + r);
        batch_run(vm, &b, (int)r);
        assert_int_equal(kiln_vm_num_specializations(vm), made[r]);
        batch_free(&b);
    }
    kiln_vm_destroy(vm);
}

static void expect_set_error(kiln_vm *vm, int i, kiln_tensor t, const char *const *words)
{
    kiln_error err = {0};
    assert_int_not_equal(kiln_vm_set_input(vm, i, &t, &err), KILN_OK);
    for (int k = 0; words[k]; k++)
        if (!strstr(err.msg, words[k]))
            fail_msg("'%s' not in: %s", words[k], err.msg);
    kiln_tensor_release(&t);
}

static void test_errors(void **state)
{
    (void)state;
    const char *path = build_model();
    kiln_vm *vm = open_vm(path, true);
    kiln_error err = {0};
    expect_set_error(vm, 0, tensor(KILN_DTYPE_FLOAT32, ks(3, 2, 3, 1)),
                     (const char *[]){"input 'x'", "rank 2", "[batch, 3]", "rank 3", NULL});
    expect_set_error(vm, 0, tensor(KILN_DTYPE_FLOAT32, ks(2, 2, 4)),
                     (const char *[]){"input 'x'", "dim 1 is 3", "got 4", NULL});
    expect_set_error(vm, 2, tensor(KILN_DTYPE_FLOAT32, ks(2, 3, 3)),
                     (const char *[]){"input 'w'", "dim 1 is 2", "got 3", NULL});
    expect_set_error(vm, 0, tensor(KILN_DTYPE_INT64, ks(2, 2, 3)),
                     (const char *[]){"input 'x'", "float32", "int64", NULL});
    /* 'batch' 2 in x, 3 in y: the run names both */
    batch b2, b3;
    batch_make(&b2, 2, 5);
    batch_make(&b3, 3, 6);
    assert_int_equal(batch_set(vm, &b2, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 1, &b3.y, &err), KILN_OK);
    assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK);
    if (!strstr(err.msg, "input 'y' dim 0 ('batch') is 3") ||
        !strstr(err.msg, "input 'x' dim 0 ('batch') is 2"))
        fail_msg("%s", err.msg);
    assert_int_equal(kiln_vm_num_specializations(vm), 0);
    /* the VM still runs afterwards */
    assert_int_equal(batch_set(vm, &b3, &err), KILN_OK);
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    batch_check(vm, &b3);
    batch_free(&b2);
    batch_free(&b3);
    kiln_vm_destroy(vm);
}

/* z: an unknown dim (no name) in [?, 2]; u: no declared shape at all.
 * out_z = Neg(z), out_u = Relu(u). */
static void test_unknown_dims(void **state)
{
    (void)state;
    const char *path = model_path("unknown.onnx");
    vi_store s[4];
    const int64_t zd[2] = {-1, 2};
    const char *zp[2] = {NULL, NULL};
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi_sym(&s[0], "z", KILN_DTYPE_FLOAT32, 2, zd, zp),
                                    kt_onnx_vi(&s[1], "u", KILN_DTYPE_FLOAT32, -1, NULL)};
    Onnx__ValueInfoProto *outs[2] = {kt_onnx_vi(&s[2], "nz", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[3], "ru", KILN_DTYPE_FLOAT32, -1, NULL)};
    char *neg_in[] = {"z"}, *neg_out[] = {"nz"}, *relu_in[] = {"u"}, *relu_out[] = {"ru"};
    Onnx__NodeProto nodes[2];
    kt_onnx_node(&nodes[0], "Neg", neg_in, 1, neg_out, 1);
    kt_onnx_node(&nodes[1], "Relu", relu_in, 1, relu_out, 1);
    Onnx__NodeProto *np[2] = {&nodes[0], &nodes[1]};
    kt_onnx_write_graph(path, "unknown", np, 2, ins, 2, outs, 2, 17);

    kiln_vm *vm = open_vm(path, true);
    kiln_error err = {0};
    assert_string_equal(kiln_vm_input_dim_param(vm, 0, 0), "");
    assert_null(kiln_vm_input_dim_param(vm, 0, 1));
    assert_string_equal(kiln_vm_input_dim_param(vm, 1, -1), "");
    static const kiln_shape zs[2] = {{.rank = 2, .dims = {3, 2}}, {.rank = 2, .dims = {1, 2}}};
    static const kiln_shape us[2] = {{.rank = 1, .dims = {4}}, {.rank = 3, .dims = {2, 1, 2}}};
    for (int r = 0; r < 4; r++) {
        kiln_tensor z = tensor(KILN_DTYPE_FLOAT32, zs[r % 2]), u = tensor(KILN_DTYPE_FLOAT32, us[r % 2]);
        int64_t nz = kiln_shape_numel(&z.shape), nu = kiln_shape_numel(&u.shape);
        kt_fill_random(z.data, nz, 7 + r, -1, 1);
        kt_fill_random(u.data, nu, 17 + r, -1, 1);
        if (kiln_vm_set_input(vm, 0, &z, &err) != KILN_OK ||
            kiln_vm_set_input(vm, 1, &u, &err) != KILN_OK || kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run %d: %s", r, err.msg);
        const kiln_tensor *oz = kiln_vm_output(vm, 0), *ou = kiln_vm_output(vm, 1);
        assert_true(kiln_shape_equal(&oz->shape, &z.shape));
        assert_true(kiln_shape_equal(&ou->shape, &u.shape));
        for (int64_t i = 0; i < nz; i++)
            assert_float_equal(((float *)oz->data)[i], -((float *)z.data)[i], 0);
        for (int64_t i = 0; i < nu; i++) {
            float v = ((float *)u.data)[i];
            assert_float_equal(((float *)ou->data)[i], v > 0 ? v : 0, 0);
        }
        kiln_tensor_release(&z);
        kiln_tensor_release(&u);
    }
    assert_int_equal(kiln_vm_num_specializations(vm), 2);
    expect_set_error(vm, 0, tensor(KILN_DTYPE_FLOAT32, ks(2, 3, 5)),
                     (const char *[]){"input 'z'", "dim 1 is 2", "[?, 2]", NULL});
    kiln_vm_destroy(vm);
}

/* The importer takes the bound shape only where it keeps the declared rank
 * and fixed dims. */
static void test_import_binding(void **state)
{
    (void)state;
    const char *path = build_model();
    kiln_shape bad_rank = ks(3, 2, 3, 1), bad_dim = ks(2, 2, 4), good = ks(2, 7, 3);
    kiln_shape sh1 = ks(1, 1);
    kiln_onnx_binding b[3] = {{.name = "x", .shape = &bad_rank},
                              {.name = "y", .shape = &good},
                              {.name = "shape", .shape = &sh1}};
    kiln_onnx_options o = {.bindings = b, .n_bindings = 3};
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_onnx_load_ex(path, &o, &g, &err), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(err.msg, "input 'x' has rank 2"));
    b[0].shape = &bad_dim;
    assert_int_equal(kiln_onnx_load_ex(path, &o, &g, &err), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(err.msg, "input 'x' dim 1 is 3, bound to 4"));
    assert_null(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_alternate_compiled),
        cmocka_unit_test(test_lru),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_unknown_dims),
        cmocka_unit_test(test_import_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
