/* tests/vm/test_vm_so.c: models the VM runs, compiled to one .so
 * (kiln_vm_export) and loaded from it (kiln_vm_load) with the .onnx gone.
 *
 * - Reshape with a run-time shape, NonZero on its result, an initializer
 *   read only by the static part (left out of the section) and one read by
 *   the dynamic part: outputs of the .so equal the .onnx VM's and values
 *   computed here, at several shapes; loaded with no C compiler (CC points
 *   at nothing) and an empty cache, so the static part's kernels can only
 *   come from the .so.
 * - If reading a static value from its branches, both ways.
 * - Loop with every node dynamic: a .so with no static part.
 * - A heavy dynamic MatMul (compiled per class where a compiler exists):
 *   with none, it runs on reference kernels (said once) and still matches.
 * - Corrupt and truncated VM sections: errors that name the file, no crash.
 * - The CLI: `kiln compile` writes the .so, `kiln run` runs it; a symbolic
 *   input needs --input-shape, which the .so then takes only. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "test_support.h"
#include "util/file.h"
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

static float W6[6] = {1, -2, 3, -4, 5, -6}, B1[1] = {10};

/* x [6] -> r = Relu(x * W) (static; W only there) -> y = Reshape(r, shape)
 * -> z = y + B, nz = NonZero(y); outputs z, nz, r */
static void reshape_nz_model(const char *path)
{
    vi_store s[5];
    int64_t six[1] = {6}, one[1] = {1}, two[1] = {2};
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 1, six),
                                    kt_onnx_vi(&s[1], "shape", KILN_DTYPE_INT64, 1, two)};
    Onnx__ValueInfoProto *outs[3] = {kt_onnx_vi(&s[2], "z", KILN_DTYPE_FLOAT32, -1, NULL),
                                     kt_onnx_vi(&s[3], "nz", KILN_DTYPE_INT64, -1, NULL),
                                     kt_onnx_vi(&s[4], "r", KILN_DTYPE_FLOAT32, 1, six)};
    char *mul_in[] = {"x", "W"}, *mul_out[] = {"m"};
    char *relu_in[] = {"m"}, *relu_out[] = {"r"};
    char *rs_in[] = {"r", "shape"}, *rs_out[] = {"y"};
    char *add_in[] = {"y", "B"}, *add_out[] = {"z"};
    char *nz_in[] = {"y"}, *nz_out[] = {"nz"};
    Onnx__NodeProto n[5];
    kt_onnx_node(&n[0], "Mul", mul_in, 2, mul_out, 1);
    kt_onnx_node(&n[1], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&n[2], "Reshape", rs_in, 2, rs_out, 1);
    kt_onnx_node(&n[3], "Add", add_in, 2, add_out, 1);
    kt_onnx_node(&n[4], "NonZero", nz_in, 1, nz_out, 1);
    Onnx__NodeProto *np[5] = {&n[0], &n[1], &n[2], &n[3], &n[4]};
    Onnx__TensorProto t[2];
    Onnx__TensorProto *inits[2] = {kt_onnx_init_f32(&t[0], "W", 1, six, W6, 6),
                                   kt_onnx_init_f32(&t[1], "B", 1, one, B1, 1)};
    Onnx__GraphProto g;
    kt_onnx_graph(&g, "reshape_nz", np, 5, ins, 2, outs, 3);
    g.n_initializer = 2;
    g.initializer = inits;
    kt_onnx_write(path, &g, 17);
}

/* Exports the .onnx at path to so (checking the split), removes the .onnx. */
static kiln_vm_export_info export_so(const char *onnx, const char *so)
{
    void *data = NULL;
    size_t size = 0;
    kiln_error err = {0};
    assert_int_equal(kiln_file_read(onnx, 1u << 30, &data, &size, &err), KILN_OK);
    kiln_vm_export_info info;
    if (kiln_vm_export(data, size, NULL, NULL, NULL, so, &info, &err) != KILN_OK)
        fail_msg("export: %s", err.msg);
    free(data);
    assert_true(kiln_vm_so_has_section(so));
    assert_int_equal(unlink(onnx), 0);
    return info;
}

static kiln_vm *load_so(const char *so)
{
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.num_threads = 1};
    if (kiln_vm_load(so, &o, &vm, &err) != KILN_OK)
        fail_msg("load %s: %s", so, err.msg);
    assert_true(kiln_vm_from_so(vm));
    return vm;
}

/* Output i of a and b: the same dtype, shape and bytes. */
static void same_output(const kiln_vm *a, const kiln_vm *b, int i)
{
    const kiln_tensor *x = kiln_vm_output(a, i), *y = kiln_vm_output(b, i);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->dtype, y->dtype);
    assert_int_equal(x->shape.rank, y->shape.rank);
    for (int d = 0; d < x->shape.rank; d++)
        assert_int_equal(x->shape.dims[d], y->shape.dims[d]);
    assert_memory_equal(x->data, y->data, (size_t)kiln_tensor_nbytes(x));
}

static void run_reshape_nz(kiln_vm *vm, const kiln_tensor *x, const int64_t *shape)
{
    kiln_error err = {0};
    kiln_tensor sh = tensor(KILN_DTYPE_INT64, ks(1, 2));
    memcpy(sh.data, shape, 16);
    assert_int_equal(kiln_vm_set_input(vm, 0, x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
    kiln_tensor_release(&sh);
}

/* A new temporary directory (the caller removes and frees it) and the paths
 * of NAME.onnx and NAME.so in it. */
static char *temp_paths(const char *name, char onnx[4200], char so[4200])
{
    char *dir = kt_tempdir();
    snprintf(onnx, 4200, "%s/%s.onnx", dir, name);
    snprintf(so, 4200, "%s/%s.so", dir, name);
    return dir;
}

static void test_reshape_nonzero(void **state)
{
    (void)state;
    char onnx[4200], so[4200];
    char *dir = temp_paths("m", onnx, so);
    reshape_nz_model(onnx);
    kiln_error err = {0};
    kiln_vm *ref = NULL;
    kiln_vm_options o = {.num_threads = 1};
    if (kiln_vm_create(onnx, &o, &ref, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    kiln_vm_export_info info = export_so(onnx, so);
    assert_true(info.static_part);
    assert_int_equal(info.static_nodes, 2);     /* Mul, Relu */
    assert_int_equal(info.dynamic_nodes, 3);    /* Reshape, Add, NonZero */
    assert_int_equal(info.initializers_kept, 1);    /* B */
    assert_int_equal(info.initializers_dropped, 1); /* W: static only */

    /* no compiler and an empty cache: the static part can only be the .so's */
    char *empty = kt_tempdir();
    const char *cc = getenv("CC"), *xdg = getenv("XDG_CACHE_HOME");
    char *cc0 = cc ? strdup(cc) : NULL, *xdg0 = xdg ? strdup(xdg) : NULL;
    setenv("CC", "/nonexistent/cc", 1);
    setenv("XDG_CACHE_HOME", empty, 1);
    kiln_vm *vm = load_so(so);
    assert_string_equal(kiln_vm_static_part(vm), "compiled");
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 3);
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(1, 6));
    static const float xv[6] = {1, 1, 1, -1, 0.5f, 1};
    memcpy(x.data, xv, sizeof xv);
    static const int64_t shapes[][2] = {{2, 3}, {3, 2}, {6, 1}, {2, 3}};
    for (int r = 0; r < 4; r++) {
        run_reshape_nz(ref, &x, shapes[r]);
        run_reshape_nz(vm, &x, shapes[r]);
        for (int i = 0; i < 3; i++)
            same_output(ref, vm, i);
        /* against values computed here: r = relu(x w), z = r + 10 */
        const kiln_tensor *z = kiln_vm_output(vm, 0), *nz = kiln_vm_output(vm, 1);
        assert_int_equal(z->shape.dims[0], shapes[r][0]);
        assert_int_equal(z->shape.dims[1], shapes[r][1]);
        int k = 0;
        for (int i = 0; i < 6; i++) {
            float rv = xv[i] * W6[i] > 0 ? xv[i] * W6[i] : 0;
            assert_float_equal(((float *)z->data)[i], rv + 10, 0);
            k += rv != 0;
        }
        assert_int_equal(nz->shape.rank, 2);
        assert_int_equal(nz->shape.dims[0], 2);
        assert_int_equal(nz->shape.dims[1], k); /* x w > 0 at 0, 2, 3 (-1 * -4), 4 */
        assert_int_equal(k, 4);
    }
    kiln_tensor_release(&x);
    kiln_vm_destroy(vm);
    if (cc0)
        setenv("CC", cc0, 1);
    else
        unsetenv("CC");
    if (xdg0)
        setenv("XDG_CACHE_HOME", xdg0, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(cc0);
    free(xdg0);
    kt_rmdir(empty);
    free(empty);
    kiln_vm_destroy(ref);
    kt_rmdir(dir);
    free(dir);
}

/* cond, x [3] -> a = Neg(x) (static) -> If(cond) then a + a else a * a */
static void test_if(void **state)
{
    (void)state;
    char onnx[4200], so[4200];
    char *dir = temp_paths("if", onnx, so);
    vi_store s[6];
    int64_t three[1] = {3};
    Onnx__ValueInfoProto *tout[1] = {kt_onnx_vi(&s[0], "t", KILN_DTYPE_FLOAT32, 1, three)};
    Onnx__ValueInfoProto *eout[1] = {kt_onnx_vi(&s[1], "e", KILN_DTYPE_FLOAT32, 1, three)};
    char *t_in[] = {"a", "a"}, *t_out[] = {"t"}, *e_in[] = {"a", "a"}, *e_out[] = {"e"};
    Onnx__NodeProto tn, en;
    kt_onnx_node(&tn, "Add", t_in, 2, t_out, 1);
    kt_onnx_node(&en, "Mul", e_in, 2, e_out, 1);
    Onnx__NodeProto *tnp[1] = {&tn}, *enp[1] = {&en};
    Onnx__GraphProto tg, eg;
    kt_onnx_graph(&tg, "then", tnp, 1, NULL, 0, tout, 1);
    kt_onnx_graph(&eg, "else", enp, 1, NULL, 0, eout, 1);
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi(&s[2], "cond", KILN_DTYPE_BOOL, 0, NULL),
                                    kt_onnx_vi(&s[3], "x", KILN_DTYPE_FLOAT32, 1, three)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[4], "y", KILN_DTYPE_FLOAT32, 1, three)};
    char *neg_in[] = {"x"}, *neg_out[] = {"a"}, *if_in[] = {"cond"}, *if_out[] = {"y"};
    Onnx__NodeProto n[2];
    kt_onnx_node(&n[0], "Neg", neg_in, 1, neg_out, 1);
    kt_onnx_node(&n[1], "If", if_in, 1, if_out, 1);
    Onnx__AttributeProto a[2];
    kt_onnx_attr_graph(&a[0], "then_branch", &tg);
    kt_onnx_attr_graph(&a[1], "else_branch", &eg);
    Onnx__AttributeProto *ap[2] = {&a[0], &a[1]};
    n[1].n_attribute = 2;
    n[1].attribute = ap;
    Onnx__NodeProto *np[2] = {&n[0], &n[1]};
    kt_onnx_write_graph(onnx, "if", np, 2, ins, 2, outs, 1, 17);

    kiln_error err = {0};
    kiln_vm *ref = NULL;
    kiln_vm_options o = {.num_threads = 1};
    if (kiln_vm_create(onnx, &o, &ref, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    kiln_vm_export_info info = export_so(onnx, so);
    assert_true(info.static_part);
    assert_int_equal(info.dynamic_nodes, 1);
    kiln_vm *vm = load_so(so);
    kiln_tensor c = tensor(KILN_DTYPE_BOOL, ks(0)), x = tensor(KILN_DTYPE_FLOAT32, ks(1, 3));
    static const float xv[3] = {1.5f, -2, 3};
    memcpy(x.data, xv, sizeof xv);
    for (int r = 0; r < 3; r++) {
        bool cond = r != 1;
        *(bool *)c.data = cond;
        kiln_vm *both[2] = {ref, vm};
        for (int k = 0; k < 2; k++) {
            assert_int_equal(kiln_vm_set_input(both[k], 0, &c, &err), KILN_OK);
            assert_int_equal(kiln_vm_set_input(both[k], 1, &x, &err), KILN_OK);
            if (kiln_vm_run(both[k], &err) != KILN_OK)
                fail_msg("run: %s", err.msg);
        }
        same_output(ref, vm, 0);
        const float *y = kiln_vm_output(vm, 0)->data;
        for (int i = 0; i < 3; i++)
            assert_float_equal(y[i], cond ? -2 * xv[i] : xv[i] * xv[i], 0);
    }
    kiln_tensor_release(&c);
    kiln_tensor_release(&x);
    kiln_vm_destroy(vm);
    kiln_vm_destroy(ref);
    kt_rmdir(dir);
    free(dir);
}

/* Loop(M, "", x) body (i, cond, c) -> (cond, c + y): every node dynamic, so
 * the .so holds the section alone */
static void test_loop_no_static(void **state)
{
    (void)state;
    char onnx[4200], so[4200];
    char *dir = temp_paths("loop", onnx, so);
    vi_store s[10];
    int64_t two[1] = {2};
    Onnx__ValueInfoProto *bin[3] = {kt_onnx_vi(&s[0], "i", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[1], "cond", KILN_DTYPE_BOOL, 0, NULL),
                                    kt_onnx_vi(&s[2], "c", KILN_DTYPE_FLOAT32, 1, two)};
    Onnx__ValueInfoProto *bout[2] = {kt_onnx_vi(&s[3], "cond_out", KILN_DTYPE_BOOL, 0, NULL),
                                     kt_onnx_vi(&s[4], "c_out", KILN_DTYPE_FLOAT32, 1, two)};
    char *id_in[] = {"cond"}, *id_out[] = {"cond_out"}, *add_in[] = {"c", "y"},
         *add_out[] = {"c_out"};
    Onnx__NodeProto bn[2];
    kt_onnx_node(&bn[0], "Identity", id_in, 1, id_out, 1);
    kt_onnx_node(&bn[1], "Add", add_in, 2, add_out, 1);
    Onnx__NodeProto *bnp[2] = {&bn[0], &bn[1]};
    Onnx__GraphProto body;
    kt_onnx_graph(&body, "body", bnp, 2, bin, 3, bout, 2);
    Onnx__ValueInfoProto *ins[3] = {kt_onnx_vi(&s[5], "M", KILN_DTYPE_INT64, 0, NULL),
                                    kt_onnx_vi(&s[6], "x", KILN_DTYPE_FLOAT32, 1, two),
                                    kt_onnx_vi(&s[7], "y", KILN_DTYPE_FLOAT32, 1, two)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[8], "final", KILN_DTYPE_FLOAT32, 1, two)};
    char *lp_in[] = {"M", "", "x"}, *lp_out[] = {"final"};
    Onnx__NodeProto lp;
    kt_onnx_node(&lp, "Loop", lp_in, 3, lp_out, 1);
    Onnx__AttributeProto a;
    kt_onnx_attr_graph(&a, "body", &body);
    Onnx__AttributeProto *ap[1] = {&a};
    lp.n_attribute = 1;
    lp.attribute = ap;
    Onnx__NodeProto *np[1] = {&lp};
    kt_onnx_write_graph(onnx, "loop", np, 1, ins, 3, outs, 1, 17);

    kiln_vm_export_info info = export_so(onnx, so);
    assert_false(info.static_part);
    kiln_vm *vm = load_so(so);
    assert_string_equal(kiln_vm_static_part(vm), "none");
    kiln_error err = {0};
    kiln_tensor m = tensor(KILN_DTYPE_INT64, ks(0)), x = tensor(KILN_DTYPE_FLOAT32, ks(1, 2)),
                y = tensor(KILN_DTYPE_FLOAT32, ks(1, 2));
    ((float *)x.data)[0] = 1, ((float *)x.data)[1] = -2;
    ((float *)y.data)[0] = 0.5f, ((float *)y.data)[1] = 3;
    assert_int_equal(kiln_vm_set_input(vm, 1, &x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 2, &y, &err), KILN_OK);
    for (int64_t k = 1; k <= 4; k += 3) {
        *(int64_t *)m.data = k;
        assert_int_equal(kiln_vm_set_input(vm, 0, &m, &err), KILN_OK);
        if (kiln_vm_run(vm, &err) != KILN_OK)
            fail_msg("run: %s", err.msg);
        const float *f = kiln_vm_output(vm, 0)->data;
        assert_float_equal(f[0], 1 + 0.5f * (float)k, 1e-6);
        assert_float_equal(f[1], -2 + 3 * (float)k, 1e-6);
    }
    kiln_tensor_release(&m);
    kiln_tensor_release(&x);
    kiln_tensor_release(&y);
    kiln_vm_destroy(vm);
    kt_rmdir(dir);
    free(dir);
}

/* x [64*256] -> Reshape(Relu(x), shape) [64, 256] -> MatMul(., W [256, 1024]):
 * 33.5 Mflop, a heavy class (compiled per class when a compiler exists) */
static void test_heavy_without_compiler(void **state)
{
    (void)state;
    enum { M = 64, K = 256, N = 1024 };
    char onnx[4200], so[4200];
    char *dir = temp_paths("heavy", onnx, so);
    vi_store s[3];
    int64_t xd[1] = {M * K}, two[1] = {2}, wd[2] = {K, N};
    float *w = malloc(sizeof(float) * K * N);
    assert_non_null(w);
    kt_fill_random(w, K * N, 3, -1, 1);
    Onnx__ValueInfoProto *ins[2] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 1, xd),
                                    kt_onnx_vi(&s[1], "shape", KILN_DTYPE_INT64, 1, two)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[2], "y", KILN_DTYPE_FLOAT32, -1, NULL)};
    char *relu_in[] = {"x"}, *relu_out[] = {"r"}, *rs_in[] = {"r", "shape"}, *rs_out[] = {"a"},
         *mm_in[] = {"a", "W"}, *mm_out[] = {"y"};
    Onnx__NodeProto n[3];
    kt_onnx_node(&n[0], "Relu", relu_in, 1, relu_out, 1);
    kt_onnx_node(&n[1], "Reshape", rs_in, 2, rs_out, 1);
    kt_onnx_node(&n[2], "MatMul", mm_in, 2, mm_out, 1);
    Onnx__NodeProto *np[3] = {&n[0], &n[1], &n[2]};
    Onnx__TensorProto t;
    Onnx__TensorProto *inits[1] = {kt_onnx_init_f32(&t, "W", 2, wd, w, K * N)};
    Onnx__GraphProto g;
    kt_onnx_graph(&g, "heavy", np, 3, ins, 2, outs, 1);
    g.n_initializer = 1;
    g.initializer = inits;
    kt_onnx_write(onnx, &g, 17);
    kiln_vm_export_info info = export_so(onnx, so);
    assert_int_equal(info.initializers_kept, 1); /* W: read by the dynamic MatMul */

    const char *cc = getenv("CC");
    char *cc0 = cc ? strdup(cc) : NULL;
    setenv("CC", "/nonexistent/cc", 1);
    kiln_vm *vm = load_so(so);
    kiln_error err = {0};
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(1, M * K));
    kiln_tensor sh = tensor(KILN_DTYPE_INT64, ks(1, 2));
    kt_fill_random(x.data, M * K, 5, -1, 1);
    ((int64_t *)sh.data)[0] = M, ((int64_t *)sh.data)[1] = K;
    assert_int_equal(kiln_vm_set_input(vm, 0, &x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
    assert_true(kiln_vm_heavy_on_reference(vm));
    const kiln_tensor *y = kiln_vm_output(vm, 0);
    assert_int_equal(y->shape.dims[0], M);
    assert_int_equal(y->shape.dims[1], N);
    float *want = calloc((size_t)M * N, sizeof *want);
    assert_non_null(want);
    const float *xv = x.data;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            float a = xv[i * K + k] > 0 ? xv[i * K + k] : 0;
            for (int j = 0; j < N; j++)
                want[i * N + j] += a * w[k * N + j];
        }
    assert_allclose(y->data, want, (int64_t)M * N, 1e-4, 1e-4);
    /* the profile's row: converted, with the class's flops */
    assert_string_equal(kt_vm_step_kind(vm, "MatMul", true, NULL), "vm converted");
    if (cc0)
        setenv("CC", cc0, 1);
    else
        unsetenv("CC");
    free(cc0);
    /* with a compiler, the class is compiled: "vm compiled", the same flops */
    kiln_vm_destroy(vm);
    vm = load_so(so);
    assert_int_equal(kiln_vm_set_input(vm, 0, &x, &err), KILN_OK);
    assert_int_equal(kiln_vm_set_input(vm, 1, &sh, &err), KILN_OK);
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("run with a compiler: %s", err.msg);
    assert_false(kiln_vm_heavy_on_reference(vm));
    assert_allclose(kiln_vm_output(vm, 0)->data, want, (int64_t)M * N, 1e-4, 1e-4);
    double flops = 0;
    assert_string_equal(kt_vm_step_kind(vm, "MatMul", true, &flops), "vm compiled");
    assert_true(flops == 2.0 * M * K * N);
    free(want);
    free(w);
    kiln_tensor_release(&x);
    kiln_tensor_release(&sh);
    kiln_vm_destroy(vm);
    kt_rmdir(dir);
    free(dir);
}

/* Copies src to dst with `len` bytes at the VM section's offset `at`
 * replaced by `bytes` (len 0: truncated to that offset instead). */
static void patch_copy(const char *src, const char *dst, long at, const void *bytes, size_t len)
{
    void *data = NULL;
    size_t size = 0;
    kiln_error err = {0};
    assert_int_equal(kiln_file_read(src, 1u << 30, &data, &size, &err), KILN_OK);
    unsigned char *p = data, *sec = NULL;
    for (size_t i = 0; i + 8 <= size && !sec; i++)
        if (!memcmp(p + i, "KILNVM\r\n", 8))
            sec = p + i;
    assert_non_null(sec);
    size_t off = (size_t)(sec - p) + (size_t)at;
    assert_true(off + len <= size);
    if (len)
        memcpy(p + off, bytes, len);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    size_t n = len ? size : off;
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
    free(data);
}

static void expect_load_error(const char *so, const char *what)
{
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    assert_int_not_equal(kiln_vm_load(so, NULL, &vm, &err), KILN_OK);
    assert_null(vm);
    if (!strstr(err.msg, what) || !strstr(err.msg, so))
        fail_msg("%s: expected '%s' in: %s", so, what, err.msg);
}

static void test_corrupt(void **state)
{
    (void)state;
    char onnx[4200], so[4200], bad[4200];
    char *dir = temp_paths("m", onnx, so);
    reshape_nz_model(onnx);
    export_so(onnx, so);
    /* the header: magic 8, version 4, flags 4, desc_size 8, onnx_size 8, checksum 8 */
    snprintf(bad, sizeof bad, "%s/version.so", dir);
    uint32_t v = 99;
    patch_copy(so, bad, 8, &v, 4);
    expect_load_error(bad, "VM section format version 99");
    snprintf(bad, sizeof bad, "%s/size.so", dir);
    uint64_t big = 1ull << 40;
    patch_copy(so, bad, 24, &big, 8);
    expect_load_error(bad, "VM section truncated");
    snprintf(bad, sizeof bad, "%s/bytes.so", dir);
    patch_copy(so, bad, 60, "\xff\xff\xff\xff", 4); /* inside the descriptor */
    expect_load_error(bad, "checksum mismatch");
    snprintf(bad, sizeof bad, "%s/magic.so", dir);
    patch_copy(so, bad, 0, "KILNXX", 6);
    expect_load_error(bad, "bad magic");
    snprintf(bad, sizeof bad, "%s/cut.so", dir);
    patch_copy(so, bad, 20, NULL, 0); /* the file ends in the section */
    expect_load_error(bad, "cannot load as a shared object");
    assert_false(kiln_vm_so_has_section(bad));
    kt_rmdir(dir);
    free(dir);
}

/* kiln compile MODEL.onnx -o M.so, then kiln run M.so without the .onnx */
static void test_cli(void **state)
{
    (void)state;
    char onnx[4200], so[4200];
    char *dir = temp_paths("m", onnx, so);
    reshape_nz_model(onnx);
    char *out = NULL;
    int rc = kt_run_cli(kt_fmt("compile %s -o %s", onnx, so), &out);
    if (rc != 0 || !strstr(out, "VM section: 3 dynamic nodes"))
        fail_msg("compile (rc %d): %s", rc, out);
    free(out);
    unlink(onnx);
    char xf[4200], sf[4200];
    snprintf(xf, sizeof xf, "%s/x.npy", dir);
    snprintf(sf, sizeof sf, "%s/shape.npy", dir);
    kiln_error err = {0};
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(1, 6)), sh = tensor(KILN_DTYPE_INT64, ks(1, 2));
    kt_fill_random(x.data, 6, 1, -1, 1);
    ((int64_t *)sh.data)[0] = 2, ((int64_t *)sh.data)[1] = 3;
    assert_int_equal(kiln_tensor_write_npy(xf, &x, &err), KILN_OK);
    assert_int_equal(kiln_tensor_write_npy(sf, &sh, &err), KILN_OK);
    kiln_tensor_release(&x);
    kiln_tensor_release(&sh);
    rc = kt_run_cli(kt_fmt("run %s --input %s --input %s", so, xf, sf), &out);
    if (rc != 0 || !strstr(out, "executor: vm") || !strstr(out, "output:  z float32 [2, 3]"))
        fail_msg("run (rc %d): %s", rc, out);
    free(out);
    kt_rmdir(dir);
    free(dir);
}

/* x [n] (symbolic) -> NonZero(x): kiln compile needs --input-shape, which
 * binds n in the section's graph; the .so takes that shape only */
static void test_cli_symbolic(void **state)
{
    (void)state;
    char onnx[4200], so[4200], xf[4200];
    char *dir = temp_paths("sym", onnx, so);
    snprintf(xf, sizeof xf, "%s/x.npy", dir);
    vi_store s[2];
    int64_t n[1] = {-1};
    Onnx__ValueInfoProto *ins[1] = {kt_onnx_vi(&s[0], "x", KILN_DTYPE_FLOAT32, 1, n)};
    Onnx__ValueInfoProto *outs[1] = {kt_onnx_vi(&s[1], "nz", KILN_DTYPE_INT64, -1, NULL)};
    char *nz_in[] = {"x"}, *nz_out[] = {"nz"};
    Onnx__NodeProto nd;
    kt_onnx_node(&nd, "NonZero", nz_in, 1, nz_out, 1);
    Onnx__NodeProto *np[1] = {&nd};
    kt_onnx_write_graph(onnx, "sym", np, 1, ins, 1, outs, 1, 17);
    expect_cli(2, kt_fmt("compile %s -o %s", onnx, so), "--input-shape x=DIMS");
    expect_cli(0, kt_fmt("compile %s -o %s --input-shape x=5", onnx, so), "VM section");
    kiln_error err = {0};
    kiln_tensor x = tensor(KILN_DTYPE_FLOAT32, ks(1, 5));
    static const float xv[5] = {0, 2, 0, -1, 3};
    memcpy(x.data, xv, sizeof xv);
    assert_int_equal(kiln_tensor_write_npy(xf, &x, &err), KILN_OK);
    kiln_tensor_release(&x);
    expect_cli(0, kt_fmt("run %s --input %s", so, xf), "output:  nz int64 [1, 3]");
    kiln_vm *vm = load_so(so);
    x = tensor(KILN_DTYPE_FLOAT32, ks(1, 4));
    assert_int_not_equal(kiln_vm_set_input(vm, 0, &x, &err), KILN_OK); /* bound to 5 */
    assert_non_null(strstr(err.msg, "dim 0 is 5"));
    kiln_tensor_release(&x);
    kiln_vm_destroy(vm);
    kt_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_nonzero),
        cmocka_unit_test(test_if),
        cmocka_unit_test(test_loop_no_static),
        cmocka_unit_test(test_heavy_without_compiler),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_symbolic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
