/* tests/ops/test_movement.c: the reference kernels of the index-driven
 * data-movement ops (Tile, Expand, GatherElements, GatherND, ScatterElements,
 * ScatterND, DepthToSpace, SpaceToDepth, Trilu, OneHot, ReverseSequence) on
 * one-node graphs run by the reference executor. Expected outputs are written
 * out by hand (the ONNX operator documentation's examples, worked by hand), or
 * derived in the test differently from the kernel: Tile and Expand by
 * explicit modulo / broadcast index loops, Trilu by the j - i >= k condition
 * per element, DepthToSpace and SpaceToDepth from numpy's
 * reshape-transpose-reshape (values pasted), plus a DepthToSpace(SpaceToDepth)
 * round trip. Several dtypes (float32, int64, int32, uint8, float16 bits,
 * bool) since the kernels move raw elements; scatter reductions on float32 and
 * int32. Error cases: out-of-range indices and sequence lengths are a status. */
#include <string.h>

#include "op_harness.h"

/* float32 outputs within 1e-6: the scatter reductions compute theirs */
static void assert_f32(const kiln_tensor *t, const float *want, int64_t n)
{
    assert_f32_rtol(t, want, n, 1e-6);
}

/* ---- Tile ------------------------------------------------------------------------ */

static void test_tile(void **state)
{
    (void)state;
    /* hand-written: [[1,2],[3,4]] tiled (2, 3) */
    static const float x[] = {1, 2, 3, 4};
    static const float want[] = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 2), x);
    h_node(&h, KILN_OP_TILE);
    set_ints(&h, "repeats", INTS(2, 3));
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(2, 4, 6));
    assert_f32(y, want, 24);
    h_free(&h);

    /* int64 rank 3, derived with modulo indexing */
    int64_t xi[2 * 3 * 2];
    for (int i = 0; i < 12; i++)
        xi[i] = 100 + i;
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(3, 2, 3, 2), xi);
    h_node(&h, KILN_OP_TILE);
    set_ints(&h, "repeats", INTS(3, 1, 2));
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 6, 3, 4));
    int64_t wi[6 * 3 * 4];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                wi[(a * 3 + b) * 4 + c] = xi[((a % 2) * 3 + b) * 2 + c % 2];
    assert_i64(y, wi, 72);
    h_free(&h);

    /* a zero repeat gives an empty result */
    static const uint8_t xu[] = {7, 8, 9};
    h_init(&h);
    h_input(&h, KILN_DTYPE_UINT8, ks(1, 3), xu);
    h_node(&h, KILN_OP_TILE);
    set_ints(&h, "repeats", INTS(0));
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(1, 0));
    h_free(&h);
}

/* ---- Expand ------------------------------------------------------------------------ */

static void test_expand(void **state)
{
    (void)state;
    /* [3, 1] to (2, 1, 4): out[a][b][c] = x[b] */
    static const float x[] = {1.5f, -2, 3};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 1), x);
    h_node(&h, KILN_OP_EXPAND);
    set_ints(&h, "shape", INTS(2, 1, 4));
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 2, 3, 4));
    float want[24];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                want[(a * 3 + b) * 4 + c] = x[b];
    assert_f32(y, want, 24);
    h_free(&h);

    /* a shape smaller than the input keeps the input's extents (bidirectional) */
    static const int64_t xi[] = {1, 2, 3, 4, 5, 6};
    static const int64_t wi[] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(3, 1, 2, 3), xi);
    h_node(&h, KILN_OP_EXPAND);
    set_ints(&h, "shape", INTS(2, 1, 1));
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 2, 2, 3));
    assert_i64(y, wi, 12);
    h_free(&h);
}

/* ---- GatherElements, GatherND ------------------------------------------------------- */

static void test_gather_elements(void **state)
{
    (void)state;
    /* ONNX examples */
    static const float d0[] = {1, 2, 3, 4};
    static const int64_t i0[] = {0, 0, 1, 0};
    static const float w0[] = {1, 1, 4, 3};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 2), d0);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 2), i0);
    h_node(&h, KILN_OP_GATHERELEMENTS);
    set_int(&h, "axis", 1);
    assert_f32(h_run_ok(&h), w0, 4);
    h_free(&h);

    static const float d1[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const int32_t i1[] = {-1, -2, 0, -2, 0, 0};
    static const float w1[] = {7, 5, 3, 4, 2, 3};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 3), d1);
    h_input(&h, KILN_DTYPE_INT32, ks(2, 2, 3), i1);
    h_node(&h, KILN_OP_GATHERELEMENTS);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(2, 2, 3));
    assert_f32(y, w1, 6);
    h_free(&h);

    /* out of range: a status, not a crash */
    static const int64_t bad[] = {0, 3, 0, 0, 0, 0};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 3), d1);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 3), bad);
    h_node(&h, KILN_OP_GATHERELEMENTS);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(h.err.msg, "out of range"));
    h_free(&h);
}

static void test_gather_nd(void **state)
{
    (void)state;
    static const int32_t d[] = {0, 1, 2, 3, 4, 5, 6, 7};
    /* full index tuples: data [2,2], indices [[0,0],[1,1]] -> [0, 3] */
    static const int64_t i0[] = {0, 0, 1, 1};
    static const int32_t w0[] = {0, 3};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(2, 2, 2), d);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 2), i0);
    h_node(&h, KILN_OP_GATHERND);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(1, 2));
    assert_i32(y, w0, 2);
    h_free(&h);

    /* slices: data [2,2,2], indices [[[0,1]],[[1,0]]] -> [[[2,3]],[[4,5]]] */
    static const int64_t i1[] = {0, 1, 1, 0};
    static const int32_t w1[] = {2, 3, 4, 5};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(3, 2, 2, 2), d);
    h_input(&h, KILN_DTYPE_INT64, ks(3, 2, 1, 2), i1);
    h_node(&h, KILN_OP_GATHERND);
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 2, 1, 2));
    assert_i32(y, w1, 4);
    h_free(&h);

    /* batch_dims 1: indices [[1],[0]] -> [[2,3],[4,5]]; negative index too */
    static const int64_t i2[] = {-1, 0};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(3, 2, 2, 2), d);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 1), i2);
    h_node(&h, KILN_OP_GATHERND);
    set_int(&h, "batch_dims", 1);
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(2, 2, 2));
    assert_i32(y, w1, 4);
    h_free(&h);

    static const int64_t bad[] = {0, 2};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(3, 2, 2, 2), d);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 1, 2), bad);
    h_node(&h, KILN_OP_GATHERND);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    h_free(&h);
}

/* ---- ScatterElements, ScatterND ------------------------------------------------------ */

static void test_scatter_elements(void **state)
{
    (void)state;
    /* ONNX example, axis 0 */
    static const float d0[9] = {0};
    static const int64_t i0[] = {1, 0, 2, 0, 2, 1};
    static const float u0[] = {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f};
    static const float w0[] = {2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 3), d0);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 3), i0);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 3), u0);
    h_node(&h, KILN_OP_SCATTERELEMENTS);
    assert_f32(h_run_ok(&h), w0, 9);
    h_free(&h);

    /* axis 1 with duplicate (one negative) indices, add */
    static const float d1[] = {1, 2, 3, 4, 5};
    static const int64_t i1[] = {1, -4};
    static const float u1[] = {1.1f, 2.1f};
    static const float w1[] = {1, 5.2f, 3, 4, 5};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 1, 5), d1);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 1, 2), i1);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 1, 2), u1);
    h_node(&h, KILN_OP_SCATTERELEMENTS);
    set_int(&h, "axis", 1);
    set_str(&h, "reduction", "add");
    assert_f32(h_run_ok(&h), w1, 5);
    h_free(&h);

    /* int32 mul / max / min */
    static const int32_t d2[] = {2, 5, 7};
    static const int32_t i2[] = {0, 0, 2};
    static const int32_t u2[] = {3, 4, 1};
    static const struct {
        const char *red;
        int32_t want[3];
    } reds[] = {{"mul", {24, 5, 7}}, {"max", {4, 5, 7}}, {"min", {2, 5, 1}}, {"none", {4, 5, 1}}};
    for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++) {
        h_init(&h);
        h_input(&h, KILN_DTYPE_INT32, ks(1, 3), d2);
        h_input(&h, KILN_DTYPE_INT32, ks(1, 3), i2);
        h_input(&h, KILN_DTYPE_INT32, ks(1, 3), u2);
        h_node(&h, KILN_OP_SCATTERELEMENTS);
        set_str(&h, "reduction", reds[r].red);
        assert_i32(h_run_ok(&h), reds[r].want, 3);
        h_free(&h);
    }

    static const int32_t bad[] = {0, 3, 0};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 3), d2);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 3), bad);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 3), u2);
    h_node(&h, KILN_OP_SCATTERELEMENTS);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    h_free(&h);
}

/* ScatterElements and GatherElements on rank 4 along axis 0 and 1, where
 * the kernel moves whole runs over the trailing dims (indices covering them
 * whole, or one partly), against explicit coordinate loops here; int64
 * indices (the kernel's fast loop, negative ones included) and int32. */
static void elements_rank4_case(const int64_t *xd, const int64_t *id, int axis, bool i64)
{
    enum { MAXN = 256 };
    float x[MAXN], u[MAXN], want[MAXN], gwant[MAXN];
    int64_t ix[MAXN];
    int32_t ix32[MAXN];
    int64_t nx = xd[0] * xd[1] * xd[2] * xd[3], ni = id[0] * id[1] * id[2] * id[3];
    assert_true(nx <= MAXN && ni <= MAXN);
    for (int64_t k = 0; k < nx; k++)
        x[k] = want[k] = (float)(k % 17) - 8.0f;
    int64_t c[4], e = 0;
    for (c[0] = 0; c[0] < id[0]; c[0]++)
        for (c[1] = 0; c[1] < id[1]; c[1]++)
            for (c[2] = 0; c[2] < id[2]; c[2]++)
                for (c[3] = 0; c[3] < id[3]; c[3]++, e++) {
                    /* a permutation along the axis per position (no duplicate
                     * targets), every other one negative */
                    int64_t v = (c[axis] + c[3] + 1) % xd[axis];
                    ix[e] = e % 2 ? v - xd[axis] : v;
                    ix32[e] = (int32_t)ix[e];
                    u[e] = 100.0f + (float)e;
                    int64_t t[4] = {c[0], c[1], c[2], c[3]};
                    t[axis] = v;
                    int64_t off = ((t[0] * xd[1] + t[1]) * xd[2] + t[2]) * xd[3] + t[3];
                    want[off] = u[e];
                    gwant[e] = x[off];
                }
    kiln_shape xs = ks(4, xd[0], xd[1], xd[2], xd[3]), is = ks(4, id[0], id[1], id[2], id[3]);
    kiln_dtype it = i64 ? KILN_DTYPE_INT64 : KILN_DTYPE_INT32;
    const void *ip = i64 ? (const void *)ix : (const void *)ix32;
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, xs, x);
    h_input(&h, it, is, ip);
    h_input(&h, KILN_DTYPE_FLOAT32, is, u);
    h_node(&h, KILN_OP_SCATTERELEMENTS);
    set_int(&h, "axis", axis);
    assert_f32(h_run_ok(&h), want, nx);
    h_free(&h);
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, xs, x);
    h_input(&h, it, is, ip);
    h_node(&h, KILN_OP_GATHERELEMENTS);
    set_int(&h, "axis", axis);
    assert_f32(h_run_ok(&h), gwant, ni);
    h_free(&h);
}

static void test_elements_runs(void **state)
{
    (void)state;
    static const int64_t x0[4] = {3, 3, 3, 4};
    static const int64_t whole[4] = {2, 3, 3, 4}, part[4] = {2, 3, 2, 4}, last[4] = {3, 3, 3, 2};
    static const int64_t ax1[4] = {3, 2, 3, 4};
    for (int i64 = 0; i64 < 2; i64++) {
        elements_rank4_case(x0, whole, 0, i64); /* one run of 36 per index row */
        elements_rank4_case(x0, part, 0, i64);  /* runs over dims 2, 3 */
        elements_rank4_case(x0, last, 0, i64);  /* runs of the last dim */
        elements_rank4_case(x0, ax1, 1, i64);   /* axis 1 */
    }
    /* an out-of-range index inside a long run: a status naming it */
    float x[36] = {0}, u[36] = {0};
    int64_t ix[36] = {0};
    ix[29] = 3;
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 3, 3, 2, 2), x);
    h_input(&h, KILN_DTYPE_INT64, ks(4, 3, 3, 2, 2), ix);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 3, 3, 2, 2), u);
    h_node(&h, KILN_OP_SCATTERELEMENTS);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(h.err.msg, "index 3 (element 29 of indices)"));
    h_free(&h);
}

static void test_scatter_nd(void **state)
{
    (void)state;
    /* ONNX example 1: elements */
    static const float d0[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const int64_t i0[] = {4, 3, 1, 7};
    static const float u0[] = {9, 10, 11, 12};
    static const float w0[] = {1, 11, 3, 10, 9, 6, 7, 12};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 8), d0);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 4, 1), i0);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 4), u0);
    h_node(&h, KILN_OP_SCATTERND);
    assert_f32(h_run_ok(&h), w0, 8);
    h_free(&h);

    /* slices of rows, with add and mul: data 3x2, rows 2 and 0 (twice) */
    static const int64_t d1[] = {1, 2, 3, 4, 5, 6};
    static const int64_t i1[] = {2, 0, 0};
    static const int64_t u1[] = {10, 20, 3, 4, 5, 6};
    static const struct {
        const char *red;
        int64_t want[6];
    } reds[] = {{"add", {9, 12, 3, 4, 15, 26}}, {"mul", {15, 48, 3, 4, 50, 120}}};
    for (size_t r = 0; r < 2; r++) {
        h_init(&h);
        h_input(&h, KILN_DTYPE_INT64, ks(2, 3, 2), d1);
        h_input(&h, KILN_DTYPE_INT64, ks(2, 3, 1), i1);
        h_input(&h, KILN_DTYPE_INT64, ks(2, 3, 2), u1);
        h_node(&h, KILN_OP_SCATTERND);
        set_str(&h, "reduction", reds[r].red);
        assert_i64(h_run_ok(&h), reds[r].want, 6);
        h_free(&h);
    }

    static const int64_t bad[] = {8, 0, 0, 0};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 8), d0);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 4, 1), bad);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 4), u0);
    h_node(&h, KILN_OP_SCATTERND);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    h_free(&h);
}

/* ---- DepthToSpace, SpaceToDepth -------------------------------------------------------- */

static void test_depth_space(void **state)
{
    (void)state;
    float x[48];
    for (int i = 0; i < 48; i++)
        x[i] = (float)i;
    /* numpy: x.reshape(1,2,2,2,2,3).transpose(0,3,4,1,5,2).reshape(1,2,4,6) (DCR)
     * and x.reshape(1,2,2,2,2,3).transpose(0,1,4,2,5,3).reshape(1,2,4,6) (CRD) */
    static const float dcr[] = {0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                                5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                                31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47};
    static const float crd[] = {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                                5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                                37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47};
    static const char *const modes[] = {NULL, "CRD"};
    for (int m = 0; m < 2; m++) {
        harness h;
        h_init(&h);
        h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 1, 8, 2, 3), x);
        h_node(&h, KILN_OP_DEPTHTOSPACE);
        set_int(&h, "blocksize", 2);
        if (modes[m])
            set_str(&h, "mode", modes[m]);
        const kiln_tensor *y = h_run_ok(&h);
        assert_shape(&y->shape, ks(4, 1, 2, 4, 6));
        assert_f32(y, m ? crd : dcr, 48);
        h_free(&h);
    }
    /* numpy: x.reshape(1,2,2,2,3,2).transpose(0,3,5,1,2,4).reshape(1,8,2,3) */
    static const float s2d[] = {0, 2,  4,  12, 14, 16, 24, 26, 28, 36, 38, 40, 1, 3,  5,  13,
                                15, 17, 25, 27, 29, 37, 39, 41, 6, 8,  10, 18, 20, 22, 30, 32,
                                34, 42, 44, 46, 7, 9,  11, 19, 21, 23, 31, 33, 35, 43, 45, 47};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 1, 2, 4, 6), x);
    h_node(&h, KILN_OP_SPACETODEPTH);
    set_int(&h, "blocksize", 2);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(4, 1, 8, 2, 3));
    assert_f32(y, s2d, 48);
    h_free(&h);

    /* round trip on float16 bits: DepthToSpace (DCR) undoes SpaceToDepth */
    uint16_t hx[2 * 3 * 6 * 9], hy[2 * 3 * 6 * 9];
    for (int i = 0; i < 324; i++)
        hx[i] = (uint16_t)(i * 7 + 1);
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT16, ks(4, 2, 3, 6, 9), hx);
    h_node(&h, KILN_OP_SPACETODEPTH);
    set_int(&h, "blocksize", 3);
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(4, 2, 27, 2, 3));
    memcpy(hy, y->data, sizeof hy);
    h_free(&h);
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT16, ks(4, 2, 27, 2, 3), hy);
    h_node(&h, KILN_OP_DEPTHTOSPACE);
    set_int(&h, "blocksize", 3);
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(4, 2, 3, 6, 9));
    assert_memory_equal(y->data, hx, sizeof hx);
    h_free(&h);
}

/* ---- Trilu ------------------------------------------------------------------------------ */

static void test_trilu(void **state)
{
    (void)state;
    int64_t x[2 * 4 * 5];
    for (int i = 0; i < 40; i++)
        x[i] = i + 1;
    static const struct {
        int upper;
        int64_t k;
    } cases[] = {{1, 0}, {0, 0}, {1, 2}, {0, -1}, {1, -7}, {0, 9}, {1, 9}, {0, -9}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        harness h;
        h_init(&h);
        h_input(&h, KILN_DTYPE_INT64, ks(3, 2, 4, 5), x);
        h_node(&h, KILN_OP_TRILU);
        if (!cases[c].upper)
            set_int(&h, "upper", 0);
        if (cases[c].k)
            set_int(&h, "k", cases[c].k);
        int64_t want[40];
        for (int m = 0; m < 2; m++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 5; j++) {
                    int idx = (m * 4 + i) * 5 + j;
                    bool keep = cases[c].upper ? j - i >= cases[c].k : j - i <= cases[c].k;
                    want[idx] = keep ? x[idx] : 0;
                }
        assert_i64(h_run_ok(&h), want, 40);
        h_free(&h);
    }
    /* hand-written: 3x3 float, lower with k = 0 */
    static const float xf[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const float wf[] = {1, 0, 0, 4, 5, 0, 7, 8, 9};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 3), xf);
    h_node(&h, KILN_OP_TRILU);
    set_int(&h, "upper", 0);
    assert_f32(h_run_ok(&h), wf, 9);
    h_free(&h);
}

/* ---- OneHot ----------------------------------------------------------------------------- */

static void test_onehot(void **state)
{
    (void)state;
    /* indices [0, -1, 3, 7(out of range)], depth 5, values (off 0, on 1), last axis */
    static const int64_t ix[] = {0, -1, 3, 7};
    static const float vals[] = {0, 1};
    static const float w0[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 4), ix);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 2), vals);
    h_node(&h, KILN_OP_ONEHOT);
    set_int(&h, "depth", 5);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(2, 4, 5));
    assert_f32(y, w0, 20);
    h_free(&h);

    /* float indices [[1, 2], [0, 2]], depth 3, axis 1 (between), int32 values (2, 5) */
    static const float fx[] = {1, 2, 0, 2};
    static const int32_t iv[] = {2, 5};
    /* out[a][d][b] = (x[a][b] == d) ? 5 : 2 */
    static const int32_t w1[] = {2, 2, 5, 2, 2, 5, /* a = 0: d = 0, 1, 2 */
                                 5, 2, 2, 2, 2, 5};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 2), fx);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 2), iv);
    h_node(&h, KILN_OP_ONEHOT);
    set_int(&h, "depth", 3);
    set_int(&h, "axis", 1);
    y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 2, 3, 2));
    assert_i32(y, w1, 12);
    h_free(&h);
}

/* ---- ReverseSequence ------------------------------------------------------------------------ */

static void test_reverse_sequence(void **state)
{
    (void)state;
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    /* ONNX examples: time-major (batch_axis 1) and batch-major */
    static const int64_t lt[] = {4, 3, 2, 1};
    static const float wt[] = {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 4, 4), x);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 4), lt);
    h_node(&h, KILN_OP_REVERSESEQUENCE);
    assert_f32(h_run_ok(&h), wt, 16);
    h_free(&h);

    static const int32_t lb[] = {1, 2, 3, 4};
    static const float wb[] = {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 4, 4), x);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 4), lb);
    h_node(&h, KILN_OP_REVERSESEQUENCE);
    set_int(&h, "batch_axis", 0);
    set_int(&h, "time_axis", 1);
    assert_f32(h_run_ok(&h), wb, 16);
    h_free(&h);

    /* bool elements with an inner dimension: [T=3, B=1, 2], length 2 */
    static const uint8_t xb[] = {1, 0, 0, 0, 1, 1};
    static const uint8_t wbool[] = {0, 0, 1, 0, 1, 1};
    static const int64_t l2[] = {2};
    h_init(&h);
    h_input(&h, KILN_DTYPE_BOOL, ks(3, 3, 1, 2), xb);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 1), l2);
    h_node(&h, KILN_OP_REVERSESEQUENCE);
    const kiln_tensor *y = h_run_ok(&h);
    assert_int_equal(y->dtype, KILN_DTYPE_BOOL);
    assert_memory_equal(y->data, wbool, 6);
    h_free(&h);

    static const int64_t bad[] = {5, 1, 1, 1};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 4, 4), x);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 4), bad);
    h_node(&h, KILN_OP_REVERSESEQUENCE);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(h.err.msg, "sequence_lens"));
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile),           cmocka_unit_test(test_expand),
        cmocka_unit_test(test_gather_elements), cmocka_unit_test(test_gather_nd),
        cmocka_unit_test(test_scatter_elements), cmocka_unit_test(test_elements_runs),
        cmocka_unit_test(test_scatter_nd),
        cmocka_unit_test(test_depth_space),    cmocka_unit_test(test_trilu),
        cmocka_unit_test(test_onehot),         cmocka_unit_test(test_reverse_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
