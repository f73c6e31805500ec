/* tests/vm/test_vm_kernels.c: the VM's own kernels (src/vm/vm_kernels.c) and
 * its one-pass split.
 *
 * Each model is one ONNX node whose data inputs are graph inputs, so the
 * importer cannot compute it at conversion and the VM runs it: NonZero,
 * Compress, NonMaxSuppression (ties, score and IoU thresholds, the per-class
 * limit, several classes and batches, centre boxes) and TopK with k a
 * run-time input, each against values worked out here. New input values of
 * the same shape, and new output extents, convert nothing. A chain model
 * checks the split: nodes before the data-dependent one are static, the
 * ones after it dynamic, in one VM with a 70-input Concat. RoiAlign on rois
 * that a run-time condition picks runs as the VM's kernel and must equal the
 * reference kernel exactly (avg and max, adaptive and fixed sampling). */
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

/* ---- one-node models --------------------------------------------------------- */

typedef struct io_spec {
    const char *name;
    kiln_dtype dt;
    int rank; /* -1: no shape */
    int64_t dims[4];
} io_spec;

static Onnx__ValueInfoProto *vi(vi_store *s, const io_spec *io)
{
    return kt_onnx_vi(s, io->name, io->dt, io->rank, io->dims);
}

/* Opens path on the VM (reference static part), failing with `what` and the
 * error; it must have n_dynamic dynamic nodes. */
static kiln_vm *open_ref(const char *path, const char *what, int n_dynamic)
{
    kiln_error err = {0};
    kiln_vm *vm = NULL;
    kiln_vm_options o = {.reference = true};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("%s: %s", what, err.msg);
    assert_int_equal(kiln_vm_num_dynamic_nodes(vm), n_dynamic);
    return vm;
}

/* A model of one node `op` (int attributes names[i] = vals[i]) on graph
 * inputs `ins` with outputs `outs`; opens it on the VM (reference static part). */
static kiln_vm *one_node(const char *op, const io_spec *ins, int n_in, const io_spec *outs,
                         int n_out, const char **names, const int64_t *vals, int n_attr)
{
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "%s.onnx", op);
    vi_store s[12];
    Onnx__ValueInfoProto *gi[6], *go[4];
    char *in_names[6], *out_names[4];
    for (int i = 0; i < n_in; i++) {
        gi[i] = vi(&s[i], &ins[i]);
        in_names[i] = (char *)ins[i].name;
    }
    for (int i = 0; i < n_out; i++) {
        go[i] = vi(&s[6 + i], &outs[i]);
        out_names[i] = (char *)outs[i].name;
    }
    Onnx__AttributeProto a[4], *ap[4];
    for (int i = 0; i < n_attr; i++)
        ap[i] = kt_onnx_attr_int(&a[i], names[i], vals[i]);
    Onnx__NodeProto nd;
    kt_onnx_node(&nd, op, in_names, n_in, out_names, n_out);
    nd.name = (char *)op;
    nd.n_attribute = (size_t)n_attr;
    nd.attribute = ap;
    Onnx__NodeProto *np[1] = {&nd};
    kt_onnx_write_graph(path, "one", np, 1, gi, n_in, go, n_out, 13);
    return open_ref(path, op, 1);
}

static void want_i64(const kiln_tensor *t, int rank, const int64_t *dims, const int64_t *v)
{
    assert_int_equal(t->dtype, KILN_DTYPE_INT64);
    assert_int_equal(t->shape.rank, rank);
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        assert_int_equal(t->shape.dims[d], dims[d]);
        n *= dims[d];
    }
    for (int64_t i = 0; i < n; i++)
        if (((const int64_t *)t->data)[i] != v[i])
            fail_msg("element %lld: got %lld, want %lld", (long long)i,
                     (long long)((const int64_t *)t->data)[i], (long long)v[i]);
}

/* ---- NonZero, Compress ----------------------------------------------------------- */

static void test_nonzero(void **state)
{
    (void)state;
    io_spec in = {"x", KILN_DTYPE_FLOAT32, 2, {2, 3}}, out = {"y", KILN_DTYPE_INT64, -1, {0}};
    kiln_vm *vm = one_node("NonZero", &in, 1, &out, 1, NULL, NULL, 0);
    const float a[6] = {0, 1.5f, 0, -2, 0, 0.25f};
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 2, 3), a);
    kt_vm_run(vm);
    int64_t d1[2] = {2, 3}, w1[6] = {0, 1, 1, 1, 0, 2};
    want_i64(kiln_vm_output(vm, 0), 2, d1, w1);
    /* a new value of the same shape: other extents, nothing converted */
    const float b[6] = {0, 0, 0, 0, 0, 0}, c[6] = {1, 1, 1, 1, 1, 1};
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 2, 3), b);
    kt_vm_run(vm);
    int64_t d0[2] = {2, 0};
    want_i64(kiln_vm_output(vm, 0), 2, d0, NULL);
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 2, 3), c);
    kt_vm_run(vm);
    int64_t d6[2] = {2, 6}, w6[12] = {0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2};
    want_i64(kiln_vm_output(vm, 0), 2, d6, w6);
    assert_int_equal(kiln_vm_num_conversions(vm), 0);
    kiln_vm_destroy(vm);
}

/* Compress(x, c) of x = [[1, 2], [3, 4], [5, 6]] (int64) and c = cond[0..nc)
 * (bool), along axis 0 (axis NULL: no axis, the flattened input): the
 * output must be want, of rank and dims. */
static void compress_case(const int64_t *axis, const uint8_t *cond, int nc, int rank,
                          const int64_t *dims, const int64_t *want)
{
    io_spec ins[2] = {{"x", KILN_DTYPE_INT64, 2, {3, 2}}, {"c", KILN_DTYPE_BOOL, 1, {nc}}};
    io_spec out = {"y", KILN_DTYPE_INT64, -1, {0}};
    const char *names[1] = {"axis"};
    const int64_t x[6] = {1, 2, 3, 4, 5, 6};
    kiln_vm *vm = one_node("Compress", ins, 2, &out, 1, axis ? names : NULL, axis, axis ? 1 : 0);
    kt_vm_set(vm, 0, KILN_DTYPE_INT64, ks(2, 3, 2), x);
    kt_vm_set(vm, 1, KILN_DTYPE_BOOL, ks(1, nc), cond);
    kt_vm_run(vm);
    want_i64(kiln_vm_output(vm, 0), rank, dims, want);
    kiln_vm_destroy(vm);
}

static void test_compress(void **state)
{
    (void)state;
    const int64_t axis0[1] = {0};
    const uint8_t c1[3] = {1, 0, 1}, c2[2] = {0, 1};
    int64_t d[2] = {2, 2}, w[4] = {1, 2, 5, 6};
    compress_case(axis0, c1, 3, 2, d, w);
    /* a condition shorter than the axis keeps only its true entries */
    int64_t d2[2] = {1, 2}, w2[2] = {3, 4};
    compress_case(axis0, c2, 2, 2, d2, w2);
    /* no axis: the flattened input */
    int64_t d3[1] = {2}, w3[2] = {1, 3};
    compress_case(NULL, c1, 3, 1, d3, w3);
}

/* ---- NonMaxSuppression -------------------------------------------------------------- */

static kiln_vm *nms_model(int64_t b, int64_t c, int64_t n, int64_t center)
{
    io_spec ins[5] = {{"boxes", KILN_DTYPE_FLOAT32, 3, {b, n, 4}},
                      {"scores", KILN_DTYPE_FLOAT32, 3, {b, c, n}},
                      {"max", KILN_DTYPE_INT64, 1, {1}},
                      {"iou", KILN_DTYPE_FLOAT32, 1, {1}},
                      {"score", KILN_DTYPE_FLOAT32, 1, {1}}};
    io_spec out = {"sel", KILN_DTYPE_INT64, -1, {0}};
    const char *names[1] = {"center_point_box"};
    return one_node("NonMaxSuppression", ins, 5, &out, 1, names, &center, 1);
}

static void nms_params(kiln_vm *vm, int64_t max, float iou, float score)
{
    kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, 1), &max);
    kt_vm_set(vm, 3, KILN_DTYPE_FLOAT32, ks(1, 1), &iou);
    kt_vm_set(vm, 4, KILN_DTYPE_FLOAT32, ks(1, 1), &score);
}

static void test_nms(void **state)
{
    (void)state;
    /* six boxes [y1, x1, y2, x2]: 0 and 1 overlap (IoU 0.6), 2 is apart, 3 is
     * 0 flipped (same box, corners swapped), 4 apart, 5 overlaps 4 by 1/3 */
    const float boxes[24] = {0, 0, 10, 10, 0, 2.5f, 10, 12.5f, 20, 20, 30, 30,
                             10, 10, 0, 0, 50, 50, 60, 60, 50, 55, 60, 65};
    /* class 0 scores: 1 ties with 4 and comes first (lower index) */
    const float sc[12] = {0.9f, 0.8f, 0.3f, 0.95f, 0.8f, 0.7f,
                          /* class 1 */ 0.1f, 0.2f, 0.6f, 0.05f, 0.5f, 0.4f};
    kiln_vm *vm = nms_model(1, 2, 6, 0);
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, 1, 6, 4), boxes);
    kt_vm_set(vm, 1, KILN_DTYPE_FLOAT32, ks(3, 1, 2, 6), sc);
    /* iou 0.5: class 0 keeps 3 (0 is the same box, 1 overlaps it by 0.6),
     * then 4 (after 1 in the tie: box order), 5 overlaps 4 by 1/3 < 0.5:
     * kept, then 2; class 1: 2, 4, 5 (IoU 1/3), 1 -- 0 and 3 are not above
     * the score threshold 0.1 (strictly greater needed: 0.1 is out) */
    nms_params(vm, 10, 0.5f, 0.1f);
    kt_vm_run(vm);
    int64_t d[2] = {8, 3};
    int64_t w[24] = {0, 0, 3, 0, 0, 4, 0, 0, 5, 0, 0, 2, 0, 1, 2, 0, 1, 4, 0, 1, 5, 0, 1, 1};
    want_i64(kiln_vm_output(vm, 0), 2, d, w);
    /* iou 0.3: 5 now suppressed by 4 (1/3 > 0.3); limit 2 per class */
    nms_params(vm, 2, 0.3f, 0.0f);
    kt_vm_run(vm);
    int64_t d2[2] = {4, 3}, w2[12] = {0, 0, 3, 0, 0, 4, 0, 1, 2, 0, 1, 4};
    want_i64(kiln_vm_output(vm, 0), 2, d2, w2);
    /* a score threshold above every score: nothing */
    nms_params(vm, 10, 0.5f, 0.99f);
    kt_vm_run(vm);
    int64_t d3[2] = {0, 3};
    want_i64(kiln_vm_output(vm, 0), 2, d3, NULL);
    assert_int_equal(kiln_vm_num_conversions(vm), 0);
    kiln_vm_destroy(vm);

    /* two batches, centre boxes [xc, yc, w, h]: box 1 is box 0 moved by 1 (IoU
     * 9*10/(110) = 0.818); batch 1 has them apart */
    const float cb[16] = {5, 5, 10, 10, 6, 5, 10, 10, 5, 5, 10, 10, 40, 40, 10, 10};
    const float cs[4] = {0.5f, 0.6f, 0.5f, 0.6f};
    vm = nms_model(2, 1, 2, 1);
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, 2, 2, 4), cb);
    kt_vm_set(vm, 1, KILN_DTYPE_FLOAT32, ks(3, 2, 1, 2), cs);
    nms_params(vm, 5, 0.8f, 0.0f);
    kt_vm_run(vm);
    int64_t d4[2] = {3, 3}, w4[9] = {0, 0, 1, 1, 0, 1, 1, 0, 0};
    want_i64(kiln_vm_output(vm, 0), 2, d4, w4);
    kiln_vm_destroy(vm);
}

/* Many boxes spread out (the grid) against a brute-force NMS written here. */
static void test_nms_many(void **state)
{
    (void)state;
    enum { N = 700 };
    float *boxes = malloc(sizeof(float) * N * 4), *sc = malloc(sizeof(float) * N);
    assert_true(boxes && sc);
    kt_fill_random(sc, N, 11, 0, 1);
    float r[N * 3];
    kt_fill_random(r, N * 3, 12, 0, 1);
    for (int i = 0; i < N; i++) {
        float y = r[3 * i] * 500, x = r[3 * i + 1] * 2000, s = 5 + r[3 * i + 2] * 60;
        /* some boxes very wide: the grid's list of wide boxes */
        float w = i % 50 == 0 ? 900 : s;
        boxes[4 * i] = y, boxes[4 * i + 1] = x, boxes[4 * i + 2] = y + s,
        boxes[4 * i + 3] = x + w;
    }
    kiln_vm *vm = nms_model(1, 1, N, 0);
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(3, 1, N, 4), boxes);
    kt_vm_set(vm, 1, KILN_DTYPE_FLOAT32, ks(3, 1, 1, N), sc);
    nms_params(vm, N, 0.2f, 0.05f);
    kt_vm_run(vm);
    /* brute force */
    int order[N], n = 0, kept[N], nk = 0;
    for (int i = 0; i < N; i++)
        if (sc[i] > 0.05f)
            order[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort, stable, descending */
        for (int j = i; j > 0 && sc[order[j]] > sc[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        const float *a = &boxes[4 * order[i]];
        bool keep = true;
        for (int j = 0; j < nk && keep; j++) {
            const float *b = &boxes[4 * kept[j]];
            double h = fmin(a[2], b[2]) - fmax(a[0], b[0]), w = fmin(a[3], b[3]) - fmax(a[1], b[1]);
            double in = h > 0 && w > 0 ? h * w : 0;
            double aa = ((double)a[2] - a[0]) * ((double)a[3] - a[1]);
            double ab = ((double)b[2] - b[0]) * ((double)b[3] - b[1]);
            keep = in / (aa + ab - in) <= 0.2;
        }
        if (keep)
            kept[nk++] = order[i];
    }
    const kiln_tensor *t = kiln_vm_output(vm, 0);
    assert_int_equal(t->shape.dims[0], nk);
    assert_true(nk > 100 && nk < n); /* some suppressed, many kept */
    for (int i = 0; i < nk; i++)
        assert_int_equal(((const int64_t *)t->data)[3 * i + 2], kept[i]);
    kiln_vm_destroy(vm);
    free(boxes);
    free(sc);
}

/* ---- TopK ------------------------------------------------------------------------ */

static void test_topk(void **state)
{
    (void)state;
    io_spec ins[2] = {{"x", KILN_DTYPE_FLOAT32, 2, {2, 5}}, {"k", KILN_DTYPE_INT64, 1, {1}}};
    io_spec outs[2] = {{"v", KILN_DTYPE_FLOAT32, -1, {0}}, {"i", KILN_DTYPE_INT64, -1, {0}}};
    const float x[10] = {3, 1, 3, NAN, 2, -1, 5, 5, 0, 5};
    for (int largest = 0; largest <= 1; largest++) {
        const char *names[2] = {"axis", "largest"};
        int64_t vals[2] = {1, largest};
        kiln_vm *vm = one_node("TopK", ins, 2, outs, 2, names, vals, 2);
        kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 2, 5), x);
        for (int64_t k = 0; k <= 5; k++) {
            kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, 1), &k);
            kt_vm_run(vm);
            const kiln_tensor *v = kiln_vm_output(vm, 0), *ix = kiln_vm_output(vm, 1);
            assert_int_equal(v->shape.rank, 2);
            assert_int_equal(v->shape.dims[0], 2);
            assert_int_equal(v->shape.dims[1], k);
            /* NaN above every number; ties keep the lower index first */
            static const int64_t big[2][5] = {{3, 0, 2, 4, 1}, {1, 2, 4, 3, 0}};
            static const int64_t small[2][5] = {{1, 4, 0, 2, 3}, {0, 3, 1, 2, 4}};
            for (int r = 0; r < 2; r++)
                for (int j = 0; j < k; j++) {
                    int64_t want = largest ? big[r][j] : small[r][j];
                    assert_int_equal(((const int64_t *)ix->data)[r * k + j], want);
                    float got = ((const float *)v->data)[r * k + j], exp = x[r * 5 + want];
                    assert_true(isnan(exp) ? isnan(got) : got == exp);
                }
        }
        assert_int_equal(kiln_vm_num_conversions(vm), 0);
        /* k above the axis: an error naming the node, no crash */
        int64_t bad = 6;
        kiln_error err = {0};
        kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, 1), &bad);
        assert_int_not_equal(kiln_vm_run(vm, &err), KILN_OK);
        assert_non_null(strstr(err.msg, "TopK"));
        kiln_vm_destroy(vm);
    }
}

/* A k below a quarter of the lane selects with a heap first: the result
 * must be the prefix of the whole lane's sort (k = len), ties (values from
 * a small set) and NaNs included, both directions, two lanes. */
static void test_topk_select(void **state)
{
    (void)state;
    enum { L = 400 };
    io_spec ins[2] = {{"x", KILN_DTYPE_FLOAT32, 2, {2, L}}, {"k", KILN_DTYPE_INT64, 1, {1}}};
    io_spec outs[2] = {{"v", KILN_DTYPE_FLOAT32, -1, {0}}, {"i", KILN_DTYPE_INT64, -1, {0}}};
    static float x[2 * L];
    uint64_t r = 99;
    for (int i = 0; i < 2 * L; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int v = (int)((r >> 33) % 31);
        x[i] = v == 30 ? NAN : (float)(v - 15);
    }
    static int64_t whole[2 * L];
    for (int largest = 0; largest <= 1; largest++) {
        const char *names[2] = {"axis", "largest"};
        int64_t vals[2] = {1, largest};
        kiln_vm *vm = one_node("TopK", ins, 2, outs, 2, names, vals, 2);
        kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(2, 2, L), x);
        int64_t k = L;
        kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, 1), &k);
        kt_vm_run(vm);
        memcpy(whole, kiln_vm_output(vm, 1)->data, sizeof whole);
        static const int64_t kk[] = {1, 5, 37, 99};
        for (int q = 0; q < 4; q++) {
            k = kk[q];
            kt_vm_set(vm, 1, KILN_DTYPE_INT64, ks(1, 1), &k);
            kt_vm_run(vm);
            const int64_t *ix = kiln_vm_output(vm, 1)->data;
            for (int lane = 0; lane < 2; lane++)
                for (int64_t j = 0; j < k; j++)
                    if (ix[lane * k + j] != whole[lane * L + j])
                        fail_msg("TopK largest=%d k=%lld lane %d position %lld: index %lld, the "
                                 "whole sort has %lld",
                                 largest, (long long)k, lane, (long long)j,
                                 (long long)ix[lane * k + j], (long long)whole[lane * L + j]);
        }
        kiln_vm_destroy(vm);
    }
}

/* ---- the split ------------------------------------------------------------------- */

/* x [8] -> a = Relu(x) -> nz = NonZero(a) -> s = Shape(nz) -> c = Concat(s x 70)
 * -> out; also r = Neg(x) (static, a graph output). One pass marks NonZero,
 * Shape and Concat dynamic; Relu and Neg stay static. */
static void test_split(void **state)
{
    (void)state;
    enum { NC = 70 };
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "split.onnx");
    vi_store s[3];
    io_spec xs = {"x", KILN_DTYPE_FLOAT32, 1, {8}}, cs = {"c", KILN_DTYPE_INT64, -1, {0}},
            rs = {"r", KILN_DTYPE_FLOAT32, 1, {8}};
    Onnx__ValueInfoProto *gi[1] = {vi(&s[0], &xs)}, *go[2] = {vi(&s[1], &cs), vi(&s[2], &rs)};
    char *relu_in[] = {"x"}, *relu_out[] = {"a"}, *nz_in[] = {"a"}, *nz_out[] = {"nz"};
    char *sh_in[] = {"nz"}, *sh_out[] = {"s"}, *neg_in[] = {"x"}, *neg_out[] = {"r"};
    char *cat_in[NC], *cat_out[] = {"c"};
    for (int i = 0; i < NC; i++)
        cat_in[i] = "s";
    Onnx__NodeProto nd[5];
    const char *ops[5] = {"Relu", "NonZero", "Shape", "Concat", "Neg"};
    char **in[5] = {relu_in, nz_in, sh_in, cat_in, neg_in};
    char **out[5] = {relu_out, nz_out, sh_out, cat_out, neg_out};
    int n_in[5] = {1, 1, 1, NC, 1};
    Onnx__AttributeProto axis, *ap[1] = {kt_onnx_attr_int(&axis, "axis", 0)};
    Onnx__NodeProto *np[5];
    for (int i = 0; i < 5; i++) {
        kt_onnx_node(&nd[i], ops[i], in[i], n_in[i], out[i], 1);
        np[i] = &nd[i];
    }
    nd[3].n_attribute = 1;
    nd[3].attribute = ap;
    kt_onnx_write_graph(path, "split", np, 5, gi, 1, go, 2, 13);
    kiln_vm *vm = open_ref(path, "split", 3);
    assert_string_equal(kiln_vm_static_part(vm), "reference kernels");
    float x[8] = {1, -1, 2, 0, 3, -4, 5, 6};
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(1, 8), x);
    kt_vm_run(vm);
    int64_t want[2 * NC];
    for (int i = 0; i < NC; i++)
        want[2 * i] = 1, want[2 * i + 1] = 5; /* NonZero of [8]: [1, 5] */
    int64_t d[1] = {2 * NC};
    want_i64(kiln_vm_output(vm, 0), 1, d, want);
    const kiln_tensor *r = kiln_vm_output(vm, 1);
    for (int i = 0; i < 8; i++)
        assert_float_equal(((const float *)r->data)[i], -x[i], 0);
    assert_int_equal(kiln_vm_num_conversions(vm), 2); /* Shape and Concat */
    /* another value, another count: Shape converts for its new input shape;
     * Concat's inputs keep theirs (it binds no parameter): nothing new */
    x[1] = 7;
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(1, 8), x);
    kt_vm_run(vm);
    for (int i = 0; i < NC; i++)
        want[2 * i + 1] = 6;
    want_i64(kiln_vm_output(vm, 0), 1, d, want);
    assert_int_equal(kiln_vm_num_conversions(vm), 3);
    /* the first value again: every class seen */
    x[1] = -1;
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, ks(1, 8), x);
    kt_vm_run(vm);
    for (int i = 0; i < NC; i++)
        want[2 * i + 1] = 5;
    want_i64(kiln_vm_output(vm, 0), 1, d, want);
    assert_int_equal(kiln_vm_num_conversions(vm), 3);
    kiln_vm_destroy(vm);
}

/* ---- RoiAlign -------------------------------------------------------------------- */

/* rois and batch indices picked by Compress (a run-time condition), so the
 * RoiAlign after them is dynamic and runs as the VM's kernel (x through a
 * static Relu first, so that a compiled static part lends its threads); the
 * same model imported with the condition bound is static and runs the
 * reference kernel, in double: float32 rounding apart, the outputs agree.
 * ch 3 reads the channel planes in place, ch 24 with 7x7 bins goes channels
 * last; threads 0: the static part on the reference executor (serial). */
static void roialign_case(const char *mode, int64_t ratio, float scale, int64_t ch, int64_t oh,
                          int64_t ow, int threads)
{
    char path[4200];
    kt_onnx_temp_path(path, sizeof path, "roialign.onnx");
    enum { R = 5, H = 9, W = 11 };
    vi_store s[5];
    io_spec xs = {"x", KILN_DTYPE_FLOAT32, 4, {2, ch, H, W}}, rs = {"rois", KILN_DTYPE_FLOAT32, 2, {R, 4}},
            bs = {"bi", KILN_DTYPE_INT64, 1, {R}}, cs = {"cond", KILN_DTYPE_BOOL, 1, {R}},
            ys = {"y", KILN_DTYPE_FLOAT32, -1, {0}};
    Onnx__ValueInfoProto *gi[4] = {vi(&s[0], &xs), vi(&s[1], &rs), vi(&s[2], &bs), vi(&s[3], &cs)};
    Onnx__ValueInfoProto *go[1] = {vi(&s[4], &ys)};
    char *c1_in[] = {"rois", "cond"}, *c1_out[] = {"r2"}, *c2_in[] = {"bi", "cond"};
    char *c2_out[] = {"b2"}, *ra_in[] = {"xr", "r2", "b2"}, *ra_out[] = {"y"};
    char *re_in[] = {"x"}, *re_out[] = {"xr"};
    Onnx__AttributeProto ax, *axp[1] = {kt_onnx_attr_int(&ax, "axis", 0)};
    Onnx__AttributeProto ra[5], *rap[5];
    const char *in_names[3] = {"output_height", "output_width", "sampling_ratio"};
    int64_t in_vals[3] = {oh, ow, ratio};
    for (int i = 0; i < 5; i++) {
        if (i < 3) {
            rap[i] = kt_onnx_attr_int(&ra[i], in_names[i], in_vals[i]);
            continue;
        }
        Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
        ra[i] = a0;
        rap[i] = &ra[i];
        ra[i].has_type = 1;
        if (i == 3) {
            ra[i].name = "spatial_scale";
            ra[i].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
            ra[i].has_f = 1, ra[i].f = scale;
        } else {
            ra[i].name = "mode";
            ra[i].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            ra[i].has_s = 1, ra[i].s.data = (uint8_t *)mode, ra[i].s.len = strlen(mode);
        }
    }
    Onnx__NodeProto nd[4];
    char **ins[4] = {re_in, c1_in, c2_in, ra_in}, **outs[4] = {re_out, c1_out, c2_out, ra_out};
    const char *ops[4] = {"Relu", "Compress", "Compress", "RoiAlign"};
    int n_ins[4] = {1, 2, 2, 3}, n_attrs[4] = {0, 1, 1, 5};
    Onnx__AttributeProto **attrs[4] = {NULL, axp, axp, rap};
    Onnx__NodeProto *np[4];
    for (int i = 0; i < 4; i++) {
        kt_onnx_node(&nd[i], ops[i], ins[i], n_ins[i], outs[i], 1);
        nd[i].n_attribute = (size_t)n_attrs[i];
        nd[i].attribute = attrs[i];
        np[i] = &nd[i];
    }
    kt_onnx_write_graph(path, "roialign", np, 4, gi, 4, go, 1, 13);

    int64_t nx = 2 * ch * H * W;
    float *x = malloc(sizeof(float) * (size_t)nx);
    assert_non_null(x);
    kt_fill_random(x, nx, 5, -1, 1);
    /* corners [x1, y1, x2, y2] in input pixels / scale: inside, partly
     * outside, degenerate, reversed, the whole map */
    float rois[R * 4] = {2, 1, 14, 10, 18, -4, 30, 12, 6, 6, 6, 6, 12, 9, 4, 3, 0, 0, 22, 18};
    int64_t bi[R] = {0, 1, 1, 0, 1};
    uint8_t cond[R] = {1, 1, 0, 1, 1};
    kiln_tensor xt = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(4, 2, ch, H, W), .data = x};
    kiln_tensor ct = {.dtype = KILN_DTYPE_BOOL, .shape = ks(1, R), .data = cond};
    kiln_vm *vm = NULL;
    kiln_error err = {0};
    if (threads == 0) {
        vm = open_ref(path, "roialign", 3);
    } else {
        kiln_vm_options vo = {.num_threads = threads};
        if (kiln_vm_create(path, &vo, &vm, &err) != KILN_OK)
            fail_msg("roialign: %s", err.msg);
        assert_int_equal(kiln_vm_num_dynamic_nodes(vm), 3);
        assert_int_equal(kiln_vm_num_threads(vm), threads);
    }
    kt_vm_set(vm, 0, KILN_DTYPE_FLOAT32, xt.shape, x);
    kt_vm_set(vm, 1, KILN_DTYPE_FLOAT32, ks(2, R, 4), rois);
    kt_vm_set(vm, 2, KILN_DTYPE_INT64, ks(1, R), bi);
    kt_vm_set(vm, 3, KILN_DTYPE_BOOL, ct.shape, cond);
    kt_vm_run(vm);
    const kiln_tensor *y = kiln_vm_output(vm, 0);
    assert_int_equal(kiln_vm_num_conversions(vm), 0);
    /* the reference: rois, indices and condition bound, RoiAlign static */
    kiln_tensor rt = {.dtype = KILN_DTYPE_FLOAT32, .shape = ks(2, R, 4), .data = rois};
    kiln_tensor bt = {.dtype = KILN_DTYPE_INT64, .shape = ks(1, R), .data = bi};
    kiln_onnx_binding b[3] = {{.name = "cond", .value = &ct},
                              {.name = "rois", .value = &rt},
                              {.name = "bi", .value = &bt}};
    kiln_onnx_options io = {.bindings = b, .n_bindings = 3};
    kiln_graph *gr = NULL;
    if (kiln_onnx_load_ex(path, &io, &gr, &err) != KILN_OK)
        fail_msg("import: %s", err.msg);
    kiln_ref_executor *ex = NULL;
    assert_int_equal(kiln_ref_executor_create(gr, &ex, &err), KILN_OK);
    assert_int_equal(kiln_graph_num_inputs(gr), 1);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &xt, &err), KILN_OK);
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("ref: %s", err.msg);
    const kiln_tensor *want = kiln_ref_executor_output(ex, 0);
    assert_true(kiln_shape_equal(&y->shape, &want->shape));
    assert_int_equal(y->shape.dims[0], 4);
    int64_t n = kiln_shape_numel(&y->shape), nonzero = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = ((const float *)y->data)[i], e = ((const float *)want->data)[i];
        if (!(fabsf(a - e) <= 1e-6f + 1e-5f * fabsf(e)))
            fail_msg("%s ratio %lld, %lld channels, %d threads: element %lld: %.9g, reference "
                     "%.9g",
                     mode, (long long)ratio, (long long)ch, threads, (long long)i, a, e);
        nonzero += a != 0;
    }
    if (nonzero <= n / 5) /* some rois fall partly outside the map */
        fail_msg("%s ratio %lld: %lld of %lld nonzero", mode, (long long)ratio, (long long)nonzero, (long long)n);
    /* a second run on the same rois: the same output, nothing converted */
    float *first = malloc(sizeof(float) * (size_t)n);
    assert_non_null(first);
    memcpy(first, y->data, sizeof(float) * (size_t)n);
    kt_vm_run(vm);
    y = kiln_vm_output(vm, 0);
    assert_memory_equal(first, y->data, sizeof(float) * (size_t)n);
    assert_int_equal(kiln_vm_num_conversions(vm), 0);
    free(first);
    free(x);
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(gr);
    kiln_vm_destroy(vm);
}

static void test_roialign(void **state)
{
    (void)state;
    roialign_case("avg", 0, 0.5f, 3, 3, 4, 0);
    roialign_case("avg", 2, 0.5f, 3, 3, 4, 0);
    roialign_case("max", 0, 0.5f, 3, 3, 4, 0);
    roialign_case("max", 3, 1.0f, 3, 3, 4, 0);
    /* channels last, serial and on two threads */
    roialign_case("avg", 2, 0.5f, 24, 7, 7, 0);
    roialign_case("avg", 0, 0.5f, 24, 7, 7, 2);
    roialign_case("max", 2, 1.0f, 24, 7, 7, 2);
    roialign_case("avg", 2, 0.5f, 3, 3, 4, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonzero),  cmocka_unit_test(test_compress),
        cmocka_unit_test(test_nms),      cmocka_unit_test(test_nms_many),
        cmocka_unit_test(test_topk),     cmocka_unit_test(test_topk_select),     cmocka_unit_test(test_split),
        cmocka_unit_test(test_roialign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
