/* tests/unit/test_infer_movement_fold.c: import-time folding through kiln ops
 * (onnx_fold_op in import/onnx/fold.c, and the onnx_fold_gather / concat /
 * slice / reshape / expand wrappers built on it): results checked against
 * values written out by hand; shape-inference errors and out-of-range indices
 * come back as a status with nothing allocated (the sanitizer build checks
 * for leaks); a result above ONNX_FOLD_MAX_BYTES is UNSUPPORTED so that the
 * converter can emit the node instead. */
#include <string.h>

#include "import/onnx/fold_op.h"
#include "test_support.h"

static kiln_tensor view(kiln_dtype dt, kiln_shape s, const void *data)
{
    kiln_tensor t = {.dtype = dt, .shape = s, .data = (void *)data};
    return t;
}

static void test_fold_op_tile_onehot(void **state)
{
    (void)state;
    static const int32_t x[] = {1, 2, 3};
    kiln_tensor tx = view(KILN_DTYPE_INT32, ks(2, 1, 3), x);
    const kiln_tensor *ins[1] = {&tx};
    kiln_attr a = onnx_attr_is("repeats", (const int64_t[]){2, 2}, 2);
    kiln_tensor out;
    kiln_error err = {0};
    assert_int_equal(onnx_fold_op(KILN_OP_TILE, &a, 1, ins, 1, &out, 1, &err), KILN_OK);
    static const int32_t want[] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
    assert_int_equal(out.dtype, KILN_DTYPE_INT32);
    assert_true(kiln_shape_equal(&out.shape, &(kiln_shape){.rank = 2, .dims = {2, 6}}));
    assert_memory_equal(out.data, want, sizeof want);
    kiln_tensor_release(&out);

    /* OneHot: indices [2, 0], depth 3, values (off -1, on 7) */
    static const int64_t ix[] = {2, 0};
    static const float vals[] = {-1, 7};
    kiln_tensor ti = view(KILN_DTYPE_INT64, ks(1, 2), ix), tv = view(KILN_DTYPE_FLOAT32, ks(1, 2), vals);
    const kiln_tensor *ins2[2] = {&ti, &tv};
    kiln_attr d = onnx_attr_i("depth", 3);
    assert_int_equal(onnx_fold_op(KILN_OP_ONEHOT, &d, 1, ins2, 2, &out, 1, &err), KILN_OK);
    static const float want2[] = {-1, -1, 7, 7, -1, -1};
    assert_memory_equal(out.data, want2, sizeof want2);
    kiln_tensor_release(&out);
}

static void test_fold_wrappers(void **state)
{
    (void)state;
    static const int64_t x[] = {10, 11, 12, 13, 14, 15};
    kiln_tensor tx = view(KILN_DTYPE_INT64, ks(2, 2, 3), x), out;
    kiln_error err = {0};

    static const int32_t ix[] = {-1, 0};
    kiln_tensor ti = view(KILN_DTYPE_INT32, ks(1, 2), ix);
    assert_int_equal(onnx_fold_gather(&tx, &ti, 1, &out, &err), KILN_OK);
    static const int64_t g[] = {12, 10, 15, 13};
    assert_memory_equal(out.data, g, sizeof g);
    kiln_tensor_release(&out);

    const kiln_tensor *two[2] = {&tx, &tx};
    assert_int_equal(onnx_fold_concat(two, 2, -1, &out, &err), KILN_OK);
    static const int64_t cc[] = {10, 11, 12, 10, 11, 12, 13, 14, 15, 13, 14, 15};
    assert_int_equal(out.shape.dims[1], 6);
    assert_memory_equal(out.data, cc, sizeof cc);
    kiln_tensor_release(&out);

    static const int64_t st[] = {2}, en[] = {-100}, ax[] = {1}, sp[] = {-2};
    assert_int_equal(onnx_fold_slice(&tx, st, en, ax, sp, 1, &out, &err), KILN_OK);
    static const int64_t sl[] = {12, 10, 15, 13};
    assert_int_equal(out.shape.dims[1], 2);
    assert_memory_equal(out.data, sl, sizeof sl);
    kiln_tensor_release(&out);

    kiln_shape to = ks(3, 3, 1, 2);
    assert_int_equal(onnx_fold_reshape(&tx, &to, &out, &err), KILN_OK);
    assert_true(kiln_shape_equal(&out.shape, &to));
    assert_memory_equal(out.data, x, sizeof x);
    kiln_tensor_release(&out);

    static const int64_t shape[] = {2, 2, 1};
    assert_int_equal(onnx_fold_expand(&tx, shape, 3, &out, &err), KILN_OK);
    assert_int_equal(kiln_shape_numel(&out.shape), 12);
    assert_memory_equal(out.data, x, sizeof x);
    assert_memory_equal((int64_t *)out.data + 6, x, sizeof x);
    kiln_tensor_release(&out);
}

static void test_fold_errors(void **state)
{
    (void)state;
    static const float x[] = {1, 2, 3, 4};
    kiln_tensor tx = view(KILN_DTYPE_FLOAT32, ks(2, 2, 2), x), out;
    kiln_error err = {0};
    /* inference error: a Reshape that does not keep the element count */
    kiln_shape to = ks(1, 3);
    assert_int_equal(onnx_fold_reshape(&tx, &to, &out, &err), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(err.msg, "reshape"));
    /* kernel error: an out-of-range index, after the output was allocated */
    static const int64_t bad[] = {0, 5};
    kiln_tensor ti = view(KILN_DTYPE_INT64, ks(1, 2), bad);
    assert_int_equal(onnx_fold_gather(&tx, &ti, 0, &out, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "out of range"));
    /* too large to fold: UNSUPPORTED (the converter then emits the node) */
    const kiln_tensor *ins[1] = {&tx};
    int64_t big = ONNX_FOLD_MAX_BYTES / 16 + 1;
    kiln_attr a = onnx_attr_is("repeats", (const int64_t[]){big, 1}, 2);
    assert_int_equal(onnx_fold_op(KILN_OP_TILE, &a, 1, ins, 1, &out, 1, &err),
                     KILN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "too large"));
    /* wrong arity for the op */
    assert_int_equal(onnx_fold_op(KILN_OP_GATHER, NULL, 0, ins, 1, &out, 1, &err),
                     KILN_ERR_INVALID_GRAPH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_op_tile_onehot),
        cmocka_unit_test(test_fold_wrappers),
        cmocka_unit_test(test_fold_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
