#!/usr/bin/python3
"""Writes the tensor-file fixtures that tests/unit/test_tensor_files.c reads.

The files are produced by independent tools (NumPy's np.save / np.lib.format
and ONNX's numpy_helper / helper.make_tensor), so the C reader is checked
against what those tools actually write, not against kiln's own writer.
Run from anywhere with Debian's Python (it has numpy and onnx):

    /usr/bin/python3 tests/data/make_tensor_fixtures.py

The outputs are tiny and committed; the C test asserts their exact values, so
change both together.
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def save_npy(name, arr, version=None):
    with open(path(name), "wb") as f:
        if version is None:
            np.save(f, arr)
        else:
            np.lib.format.write_array(f, arr, version=version)


def save_pb(name, tp):
    with open(path(name), "wb") as f:
        f.write(tp.SerializeToString())


def main():
    # ---- NumPy ----
    f32 = (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3)
    save_npy("np_f32_2x3.npy", f32)  # [-1, -0.5, 0, 0.5, 1, 1.5]
    save_npy("np_f32_2x3_v2.npy", f32, version=(2, 0))
    save_npy("np_f32_2x3_v3.npy", f32, version=(3, 0))
    save_npy("np_i64_scalar.npy", np.array(-42, dtype=np.int64))  # 0-d
    save_npy("np_bool_5.npy", np.array([True, False, True, True, False]))
    save_npy("np_f16_4.npy", np.array([1.0, -2.5, 0.0, 65504.0], dtype=np.float16))
    save_npy("np_u8_2x2x2.npy", np.arange(8, dtype=np.uint8).reshape(2, 2, 2) * 30)
    save_npy("np_f64_3.npy", np.array([0.1, -1e300, 3.0], dtype=np.float64))
    save_npy("np_i16_empty.npy", np.zeros((0, 3), dtype=np.int16))
    save_npy("np_f32_fortran.npy", np.asfortranarray(f32))  # fortran_order True

    # ---- ONNX TensorProto, raw_data (numpy_helper) ----
    save_pb("pb_f32_2x3_raw.pb", numpy_helper.from_array(f32, name="x"))
    save_pb("pb_i64_scalar_raw.pb", numpy_helper.from_array(np.array(-42, dtype=np.int64)))
    save_pb("pb_u16_3_raw.pb",
            numpy_helper.from_array(np.array([0, 1, 65535], dtype=np.uint16), name="u16"))

    # ---- ONNX TensorProto, typed fields (helper.make_tensor, raw=False) ----
    save_pb("pb_i8_typed.pb", helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]))
    save_pb("pb_u8_typed.pb", helper.make_tensor("u8", TensorProto.UINT8, [2, 2], [0, 1, 254, 255]))
    save_pb("pb_bool_typed.pb", helper.make_tensor("b", TensorProto.BOOL, [3], [True, False, True]))
    save_pb("pb_f16_typed.pb",
            helper.make_tensor("h", TensorProto.FLOAT16, [3], np.array([1.0, -2.0, 0.5], dtype=np.float16)))
    save_pb("pb_i64_typed.pb",
            helper.make_tensor("l", TensorProto.INT64, [2], [-9007199254740993, 9007199254740993]))
    save_pb("pb_f64_typed.pb", helper.make_tensor("d", TensorProto.DOUBLE, [2], [0.1, -2.5]))
    save_pb("pb_f32_typed.pb", helper.make_tensor("f", TensorProto.FLOAT, [1, 2], [0.25, -4.0]))
    save_pb("pb_u32_typed.pb", helper.make_tensor("u32", TensorProto.UINT32, [2], [0, 4294967295]))
    save_pb("pb_string.pb", helper.make_tensor("s", TensorProto.STRING, [1], [b"hi"]))


if __name__ == "__main__":
    main()
