/* tests/vm/test_vm_scatter.c: the VM's ScatterElements and ConstantOfShape
 * (src/vm/vm_scatter.c) on run-time values.
 *
 * The model is PyTorch's export of `y[idx] = v` (torchvision's
 * MultiScaleRoIAlign merges its levels this way): y0 = ConstantOfShape(ys),
 * ix = Expand(r, es), y = ScatterElements(y0, ix, v), with every shape and
 * index a graph input, so all of it runs on the VM. The tests check, against
 * values worked out here element by element:
 * - the row path (indices constant off the axis): duplicates (the last
 *   write wins), negative indices, rows along axis 0 and along axis 1,
 *   a second run with more rows and another fill value;
 * - the general path (indices that vary off the axis, expanded in scratch),
 *   with reduction add;
 * - an Expand also read elsewhere (not fused) and a data input that a graph
 *   output also reads (not taken over: the graph output keeps its values);
 * - a chain of two scatters (the second takes over the first's buffer);
 * - an index out of range: an error that names the node;
 * - which steps are fused (the Expand, "vm fused") and which are the VM's
 *   kernels, and that nothing is converted per shape class;
 * - a third run of the same shapes allocates nothing (malloc counted; the
 *   second allocates the buffer the first scatter gave away). */
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

/* ---- building the models -------------------------------------------------------- */

enum { MAXN = 8 };

typedef struct model {
    vi_store vs[MAXN * 2];
    Onnx__ValueInfoProto *gi[MAXN], *go[MAXN];
    int n_in, n_out;
    Onnx__NodeProto nodes[MAXN], *np[MAXN];
    char *names[MAXN][2][4]; /* per node: inputs, outputs */
    Onnx__AttributeProto attrs[MAXN][2], *ap[MAXN][2];
    int n_node;
    /* ConstantOfShape's value */
    Onnx__TensorProto value;
    int64_t value_dims[1];
    float fill;
} model;

static void add_input(model *m, const char *name, kiln_dtype dt, int rank, const int64_t *dims)
{
    m->gi[m->n_in] = kt_onnx_vi(&m->vs[m->n_in], name, dt, rank, dims);
    m->n_in++;
}

static void add_output(model *m, const char *name)
{
    m->go[m->n_out] = kt_onnx_vi(&m->vs[MAXN + m->n_out], name, KILN_DTYPE_FLOAT32, -1, NULL);
    m->n_out++;
}

static Onnx__NodeProto *add_node(model *m, const char *op, const char *name, const char *i0,
                                 const char *i1, const char *i2, const char *out)
{
    int k = m->n_node++;
    const char *ins[3] = {i0, i1, i2};
    int n_in = 0;
    for (int i = 0; i < 3 && ins[i]; i++)
        m->names[k][0][n_in++] = (char *)ins[i];
    m->names[k][1][0] = (char *)out;
    kt_onnx_node(&m->nodes[k], op, m->names[k][0], n_in, m->names[k][1], 1);
    m->nodes[k].name = (char *)name;
    m->np[k] = &m->nodes[k];
    return &m->nodes[k];
}

/* ScatterElements(data, ix, v) -> out with `axis` and `reduction` (NULL: none). */
static void add_scatter(model *m, const char *name, const char *data, const char *ix, const char *v,
                        const char *out, int64_t axis, const char *reduction)
{
    int k = m->n_node;
    Onnx__NodeProto *nd = add_node(m, "ScatterElements", name, data, ix, v, out);
    m->ap[k][0] = kt_onnx_attr_int(&m->attrs[k][0], "axis", axis);
    nd->n_attribute = 1;
    if (reduction) {
        Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
        Onnx__AttributeProto *a = &m->attrs[k][1];
        *a = a0;
        a->name = "reduction";
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        a->has_s = 1;
        a->s.data = (uint8_t *)reduction;
        a->s.len = strlen(reduction);
        m->ap[k][1] = a;
        nd->n_attribute = 2;
    }
    nd->attribute = m->ap[k];
}

/* ConstantOfShape(shape) -> out, filled with m->fill (float32). */
static void add_fill(model *m, const char *shape, const char *out)
{
    int k = m->n_node;
    Onnx__NodeProto *nd = add_node(m, "ConstantOfShape", "fill", shape, NULL, NULL, out);
    Onnx__TensorProto t0 = ONNX__TENSOR_PROTO__INIT;
    m->value = t0;
    m->value.has_data_type = 1;
    m->value.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    m->value_dims[0] = 1;
    m->value.n_dims = 1;
    m->value.dims = m->value_dims;
    m->value.n_float_data = 1;
    m->value.float_data = &m->fill;
    Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *a = &m->attrs[k][0];
    *a = a0;
    a->name = "value";
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = &m->value;
    m->ap[k][0] = a;
    nd->n_attribute = 1;
    nd->attribute = m->ap[k];
}

static kiln_vm *open_model(model *m, const char *what)
{
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "%s.onnx", what);
    kt_onnx_write_graph(path, what, m->np, m->n_node, m->gi, m->n_in, m->go, m->n_out, 18);
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = true};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("%s: %s", what, err.msg);
    return vm;
}

static void want_f32(const kiln_tensor *t, const kiln_shape *sh, const float *v, const char *what)
{
    assert_non_null(t);
    assert_int_equal(t->dtype, KILN_DTYPE_FLOAT32);
    assert_int_equal(t->shape.rank, sh->rank);
    for (int d = 0; d < sh->rank; d++)
        assert_int_equal(t->shape.dims[d], sh->dims[d]);
    int64_t n = kiln_shape_numel(sh);
    for (int64_t i = 0; i < n; i++)
        if (((const float *)t->data)[i] != v[i])
            fail_msg("%s: element %lld is %g, want %g", what, (long long)i,
                     (double)((const float *)t->data)[i], (double)v[i]);
}

static float val(int64_t i)
{
    return (float)((i * 37) % 101) - 50.0f;
}

/* ---- y[idx] = v: the row path ------------------------------------------------------ */

/* inputs ys [4], r [n, 1, 1, 1] (indices), es [4] (v's shape), v [n, C, H, W] */
static void build_index_put(model *m, int64_t n, int64_t c, int64_t h, int64_t w)
{
    memset(m, 0, sizeof *m);
    const int64_t four[1] = {4}, rd[4] = {n, 1, 1, 1}, vd[4] = {n, c, h, w};
    add_input(m, "ys", KILN_DTYPE_INT64, 1, four);
    add_input(m, "r", KILN_DTYPE_INT64, 4, rd);
    add_input(m, "es", KILN_DTYPE_INT64, 1, four);
    add_input(m, "v", KILN_DTYPE_FLOAT32, 4, vd);
    add_fill(m, "ys", "y0");
    add_node(m, "Expand", "expand", "r", "es", NULL, "ix");
    add_scatter(m, "scatter", "y0", "ix", "v", "y", 0, NULL);
    add_output(m, "y");
}

static void index_put_case(kiln_vm *vm, int64_t rows, int64_t n, const int64_t *r, int64_t c,
                           int64_t h, int64_t w, float fill)
{
    int64_t inner = c * h * w, ys[4] = {rows, c, h, w}, es[4] = {n, c, h, w};
    float *v = malloc((size_t)(n * inner) * sizeof *v);
    float *want = malloc((size_t)(rows * inner) * sizeof *want);
    assert_true(v && want);
    for (int64_t i = 0; i < n * inner; i++)
        v[i] = val(i);
    for (int64_t i = 0; i < rows * inner; i++)
        want[i] = fill;
    for (int64_t i = 0; i < n; i++) { /* in order: the last write wins */
        int64_t to = r[i] < 0 ? r[i] + rows : r[i];
        memcpy(want + to * inner, v + i * inner, (size_t)inner * sizeof *v);
    }
    kt_vm_set(vm, 0, KILN_DTYPE_INT64, ks(1, 4), ys);
    kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(4, n, 1, 1, 1), r);
    kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 4), es);
    kt_vm_set(vm, 3, KILN_DTYPE_FLOAT32, ks(4, n, c, h, w), v);
    kt_vm_run(vm);
    kiln_shape sh = ks(4, rows, c, h, w);
    want_f32(kiln_vm_output(vm, 0), &sh, want, "index_put");
    free(v);
    free(want);
}

static void test_index_put_rows(void **state)
{
    (void)state;
    static model m;
    m.fill = 0;
    build_index_put(&m, -1, 3, 2, 2); /* n symbolic */
    m.fill = 0;
    kiln_vm *vm = open_model(&m, "index_put");
    const int64_t r1[5] = {4, 0, -1, 2, 0}; /* row 0 twice, -1 is row 5 */
    index_put_case(vm, 6, 5, r1, 3, 2, 2, 0);
    assert_string_equal(kt_vm_step_kind(vm, "expand", false, NULL), "vm fused");
    assert_string_equal(kt_vm_step_kind(vm, "scatter", false, NULL), "vm kernel");
    assert_string_equal(kt_vm_step_kind(vm, "fill", false, NULL), "vm kernel");
    /* more rows than before, fewer than the data: buffers grow, nothing converted */
    const int64_t r2[9] = {8, 7, 6, 5, 4, 3, 2, 1, -9};
    index_put_case(vm, 10, 9, r2, 3, 2, 2, 0);
    const int64_t r3[1] = {1};
    index_put_case(vm, 3, 1, r3, 3, 2, 2, 0);
    assert_int_equal(kiln_vm_num_conversions(vm), 0);
    kiln_vm_destroy(vm);

    /* another fill value */
    build_index_put(&m, -1, 2, 1, 3);
    m.fill = -2.5f;
    vm = open_model(&m, "index_put_fill");
    const int64_t r4[3] = {1, 3, 1};
    index_put_case(vm, 4, 3, r4, 2, 1, 3, -2.5f);
    kiln_vm_destroy(vm);
}

static void test_index_put_out_of_range(void **state)
{
    (void)state;
    static model m;
    build_index_put(&m, -1, 2, 1, 1);
    kiln_vm *vm = open_model(&m, "index_put_range");
    int64_t ys[4] = {3, 2, 1, 1}, es[4] = {2, 2, 1, 1};
    const float v[4] = {1, 2, 3, 4};
    for (int bad = 0; bad < 2; bad++) {
        const int64_t r[2] = {0, bad ? -4 : 3};
        kt_vm_set(vm, 0, KILN_DTYPE_INT64, ks(1, 4), ys);
        kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(4, 2, 1, 1, 1), r);
        kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 4), es);
        kt_vm_set(vm, 3, KILN_DTYPE_FLOAT32, ks(4, 2, 2, 1, 1), v);
        kiln_error err = {0};
        assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK);
        if (!strstr(err.msg, "scatter") || !strstr(err.msg, "out of range"))
            fail_msg("the error does not name the node and the index: %s", err.msg);
    }
    kiln_vm_destroy(vm);
}

/* ---- rows along axis 1; indices that vary off the axis; reductions ------------------- */

/* y = ScatterElements(x, Expand(r, es), u, axis, reduction) with x, r, es, u inputs;
 * checked against the definition: y[i][r'][k] (red)= u[i][j][k] where r' is
 * the expanded index at [i][j][k]. Shapes: x [A, B, K], u [A, J, K], r of
 * rank 3 (its dims 1 or u's). */
static void check_general(const int64_t *rd, int64_t axis, const char *reduction, bool want_fused)
{
    enum { A = 2, B = 5, J = 3, K = 4 };
    static model m;
    memset(&m, 0, sizeof m);
    const int64_t three[1] = {3};
    int64_t xdims[3] = {A, B, K};
    if (axis == 0) /* x [B, A, K], u [J, A, K] */
        xdims[0] = B, xdims[1] = A;
    int64_t udims[3] = {A, J, K};
    if (axis == 0)
        udims[0] = J, udims[1] = A;
    add_input(&m, "x", KILN_DTYPE_FLOAT32, 3, xdims);
    add_input(&m, "r", KILN_DTYPE_INT64, 3, rd);
    add_input(&m, "es", KILN_DTYPE_INT64, 1, three);
    add_input(&m, "u", KILN_DTYPE_FLOAT32, 3, udims);
    add_node(&m, "Expand", "expand", "r", "es", NULL, "ix");
    add_scatter(&m, "scatter", "x", "ix", "u", "y", axis, reduction);
    add_output(&m, "y");
    kiln_vm *vm = open_model(&m, "scatter_general");
    float x[A * B * K], u[A * J * K], want[A * B * K];
    int64_t r[A * J * K];
    for (int i = 0; i < A * B * K; i++)
        x[i] = want[i] = val(i + 3);
    for (int i = 0; i < A * J * K; i++)
        u[i] = val(5 * i + 1);
    int64_t nr = rd[0] * rd[1] * rd[2];
    for (int64_t i = 0; i < nr; i++)
        r[i] = (i * 3 + 1) % B - (i % 2 ? B : 0); /* negative every other one */
    /* the definition, on the expanded indices */
    const int64_t *xs = xdims, *us = udims;
    for (int64_t a = 0; a < us[0]; a++)
        for (int64_t j = 0; j < us[1]; j++)
            for (int64_t k = 0; k < K; k++) {
                int64_t ra = rd[0] == 1 ? 0 : a, rj = rd[1] == 1 ? 0 : j, rk = rd[2] == 1 ? 0 : k;
                int64_t ix = r[(ra * rd[1] + rj) * rd[2] + rk];
                ix += ix < 0 ? xs[axis] : 0;
                int64_t ya = axis == 0 ? ix : a, yj = axis == 1 ? ix : j;
                float *y = &want[(ya * xs[1] + yj) * K + k];
                float s = u[(a * us[1] + j) * K + k];
                *y = reduction && !strcmp(reduction, "add") ? *y + s : s;
            }
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, xs[0], xs[1], xs[2]), x);
    kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(3, rd[0], rd[1], rd[2]), r);
    int64_t es[3] = {us[0], us[1], us[2]};
    kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 3), es);
    kt_vm_set(vm, 3, KILN_DTYPE_FLOAT32, ks(3, us[0], us[1], us[2]), u);
    kiln_shape sh = ks(3, xs[0], xs[1], xs[2]);
    char what[96];
    snprintf(what, sizeof what, "r [%lld, %lld, %lld], axis %lld, %s", (long long)rd[0],
             (long long)rd[1], (long long)rd[2], (long long)axis, reduction ? reduction : "none");
    /* twice: the second run starts from the input x again (a reduction
     * would see the first run's result if the input were updated in place) */
    for (int pass = 0; pass < 2; pass++) {
        kt_vm_run(vm);
        want_f32(kiln_vm_output(vm, 0), &sh, want, what);
    }
    assert_string_equal(kt_vm_step_kind(vm, "expand", false, NULL),
                        want_fused ? "vm fused" : "vm converted");
    kiln_vm_destroy(vm);
}

static void test_scatter_general(void **state)
{
    (void)state;
    /* rows along axis 1 (outer extent 2): one index per (a, j), and one for all */
    const int64_t row1[3] = {1, 3, 1}, one[3] = {1, 1, 1};
    check_general(row1, 1, NULL, true);
    check_general(one, 1, NULL, true);
    /* rows along axis 0 */
    const int64_t row0[3] = {3, 1, 1};
    check_general(row0, 0, NULL, true);
    /* indices that vary off the axis: expanded, the reference walk */
    const int64_t vary[3] = {1, 3, 4}, full[3] = {2, 3, 4};
    check_general(vary, 1, NULL, true);
    check_general(full, 1, NULL, true);
    /* reductions: never rows */
    check_general(row1, 1, "add", true);
    check_general(full, 1, "add", true);
}

/* ---- buffers that must not be taken over ---------------------------------------------- */

static void test_shared_values(void **state)
{
    (void)state;
    static model m;
    memset(&m, 0, sizeof m);
    /* y0 = fill(ys) is a graph output too; the Expand's output too: neither
     * is taken over or fused, and both keep their values */
    const int64_t four[1] = {4}, rd[4] = {-1, 1, 1, 1}, vd[4] = {-1, 2, 1, 1};
    add_input(&m, "ys", KILN_DTYPE_INT64, 1, four);
    add_input(&m, "r", KILN_DTYPE_INT64, 4, rd);
    add_input(&m, "es", KILN_DTYPE_INT64, 1, four);
    add_input(&m, "v", KILN_DTYPE_FLOAT32, 4, vd);
    m.fill = 1;
    add_fill(&m, "ys", "y0");
    add_node(&m, "Expand", "expand", "r", "es", NULL, "ix");
    add_scatter(&m, "scatter", "y0", "ix", "v", "y", 0, NULL);
    /* a second scatter on the first's output: takes its buffer over */
    add_scatter(&m, "scatter2", "y", "ix", "v", "y2", 0, NULL);
    add_output(&m, "y2");
    add_output(&m, "y0");
    m.go[2] = kt_onnx_vi(&m.vs[MAXN + 2], "ix", KILN_DTYPE_INT64, -1, NULL);
    m.n_out = 3;
    kiln_vm *vm = open_model(&m, "scatter_shared");
    int64_t ys[4] = {4, 2, 1, 1}, r[2] = {2, 0}, es[4] = {2, 2, 1, 1};
    const float v[4] = {5, 6, 7, 8};
    kt_vm_set(vm, 0, KILN_DTYPE_INT64, ks(1, 4), ys);
    kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(4, 2, 1, 1, 1), r);
    kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 4), es);
    kt_vm_set(vm, 3, KILN_DTYPE_FLOAT32, ks(4, 2, 2, 1, 1), v);
    for (int pass = 0; pass < 3; pass++) {
#ifdef KT_COUNT_ALLOCS
        /* the first run allocates the scatters' buffers, the second the one
         * the first scatter gave away; from then on they trade buffers */
        kt_alloc_count_start();
        kt_vm_run(vm);
        long allocs = kt_alloc_count_stop();
        if (pass == 2 && allocs != 0)
            fail_msg("a third run of the same shapes allocated %ld times", allocs);
#else
        kt_vm_run(vm);
#endif
        const float w2[8] = {7, 8, 1, 1, 5, 6, 1, 1}, w0[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        kiln_shape sh = ks(4, 4, 2, 1, 1);
        want_f32(kiln_vm_output(vm, 0), &sh, w2, "y2");
        want_f32(kiln_vm_output(vm, 1), &sh, w0, "y0 (a graph output)");
        const kiln_tensor *ix = kiln_vm_output(vm, 2);
        assert_int_equal(ix->shape.rank, 4);
        assert_int_equal(kiln_shape_numel(&ix->shape), 4);
        const int64_t wix[4] = {2, 2, 0, 0};
        for (int i = 0; i < 4; i++)
            assert_int_equal(((const int64_t *)ix->data)[i], wix[i]);
    }
    assert_string_equal(kt_vm_step_kind(vm, "expand", false, NULL), "vm converted");
    kiln_vm_destroy(vm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_put_rows),
        cmocka_unit_test(test_index_put_out_of_range),
        cmocka_unit_test(test_scatter_general),
        cmocka_unit_test(test_shared_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
