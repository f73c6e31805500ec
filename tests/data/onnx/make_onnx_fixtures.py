#!/usr/bin/python3
"""Writes the tiny ONNX models used by tests/onnx/test_onnx_import.c.

Each case is a directory NAME/ holding model.onnx and, for models that run,
input_K.pb / output_K.pb (TensorProto) with outputs computed here with numpy.
The files are small and committed; re-run this script after changing it:

    /usr/bin/python3 tests/data/onnx/make_onnx_fixtures.py
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(1234)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def save(name, graph, opset=13, inputs=(), outputs=(), check=True, **save_kw):
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-tests")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    onnx.save_model(model, os.path.join(d, "model.onnx"), **save_kw)
    for k, a in enumerate(inputs):
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, f"input_{k}").SerializeToString())
    for k, a in enumerate(outputs):
        with open(os.path.join(d, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, f"output_{k}").SerializeToString())
    return d


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i:i + kh, j:j + kw].astype(np.float64)
            y[:, :, i, j] = np.tensordot(patch, w.astype(np.float64), axes=([1, 2, 3], [1, 2, 3]))
    return (y + b[None, :, None, None]).astype(np.float32)


def conv_relu():
    x, w, b = rand(1, 2, 5, 5), rand(3, 2, 3, 3), rand(3)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "conv_relu", [vi("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [vi("y", TensorProto.FLOAT, [1, 3, 5, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    save("conv_relu", g, inputs=[x], outputs=[np.maximum(conv2d(x, w, b, 1), 0)])


def gemm():
    a, bm, c = rand(2, 4), rand(3, 4), rand(3)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", alpha=0.5, beta=2.0,
                          transB=1)],
        "gemm", [vi("a", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(bm, "b"), numpy_helper.from_array(c, "c")])
    y = (0.5 * a.astype(np.float64) @ bm.T.astype(np.float64) + 2.0 * c).astype(np.float32)
    save("gemm", g, inputs=[a], outputs=[y])


def vit_chain():
    """The shape arithmetic torch.onnx emits for ViT: a class token expanded to
    the batch with ConstantOfShape/Equal/Where, a reshape whose target comes
    from Shape -> Gather -> Unsqueeze -> Concat, and a slice whose bounds are
    computed with integer Add/Div/Mul."""
    x = rand(1, 6, 4)
    tok = rand(1, 1, 4)
    i64 = lambda *v: numpy_helper.from_array(np.array(v, np.int64))  # noqa: E731

    def const(name, arr):
        return helper.make_node("Constant", [], [name], name=name + "_c",
                                value=numpy_helper.from_array(np.array(arr)))

    nodes = [
        # expand the token to [1, 1, 4] through the Where dance
        const("neg", np.array([1, -1, -1], np.int64)),
        const("len3", np.array([3], np.int64)),
        helper.make_node("ConstantOfShape", ["len3"], ["ones"], name="cos", value=i64(1)),
        const("minus1", np.array(-1, np.int64)),
        helper.make_node("Mul", ["ones", "minus1"], ["m1s"], name="mul_m1"),
        helper.make_node("Equal", ["neg", "m1s"], ["eq"], name="eq"),
        helper.make_node("Where", ["eq", "ones", "neg"], ["eshape"], name="where"),
        helper.make_node("Expand", ["tok", "eshape"], ["tokx"], name="expand"),
        helper.make_node("Concat", ["tokx", "x"], ["cat"], name="cat", axis=1),  # [1, 7, 4]
        # reshape [1, 7, 4] -> [1, 7, 2, 2] with a computed target
        helper.make_node("Shape", ["cat"], ["shp"], name="shape"),
        const("idx01", np.array([0, 1], np.int64)),
        helper.make_node("Gather", ["shp", "idx01"], ["nb"], name="gather", axis=0),
        const("tail", np.array([2, 2], np.int64)),
        helper.make_node("Concat", ["nb", "tail"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["cat", "target"], ["r"], name="reshape"),
        # slice [0, (2 + 2) / 3) = [0, 1) of the last axis
        helper.make_node("Shape", ["r"], ["rs"], name="shape2"),
        const("last", np.array([-1], np.int64)),
        helper.make_node("Gather", ["rs", "last"], ["c"], name="gather2", axis=0),
        const("two", np.array([2], np.int64)),
        helper.make_node("Add", ["c", "two"], ["c2"], name="add"),
        const("three", np.array([3], np.int64)),
        helper.make_node("Div", ["c2", "three"], ["c3"], name="div"),
        const("zero", np.array([0], np.int64)),
        helper.make_node("Slice", ["r", "zero", "c3", "last"], ["y"], name="slice"),
        # Unsqueeze/Squeeze of a run-time value become Reshape
        const("ax0", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["y", "ax0"], ["u"], name="unsq"),
        helper.make_node("Squeeze", ["u", "ax0"], ["z"], name="sq"),
    ]
    g = helper.make_graph(nodes, "vit_chain", [vi("x", TensorProto.FLOAT, [1, 6, 4])],
                          [vi("z", TensorProto.FLOAT, [1, 7, 2, 1])],
                          [numpy_helper.from_array(tok, "tok")])
    cat = np.concatenate([tok, x], axis=1)
    y = cat.reshape(1, 7, 2, 2)[..., 0:1]
    save("vit_chain", g, inputs=[x], outputs=[y])


def old_opsets():
    """Opset 10/11 forms: Softmax's 2-D coercion, Clip and Pad with inputs,
    Slice with attributes (opset 1 form is below), Dropout, Split."""
    x = rand(2, 3, 4)
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], name="softmax", axis=1),
        helper.make_node("Constant", [], ["lo"], name="lo_c",
                         value=numpy_helper.from_array(np.array(0.01, np.float32))),
        helper.make_node("Constant", [], ["hi"], name="hi_c",
                         value=numpy_helper.from_array(np.array(0.2, np.float32))),
        helper.make_node("Clip", ["s", "lo", "hi"], ["cl"], name="clip"),
        helper.make_node("Dropout", ["cl"], ["d"], name="dropout"),
        helper.make_node("Constant", [], ["pads"], name="pads_c",
                         value=numpy_helper.from_array(np.array([0, 1, 0, 0, 0, 2], np.int64))),
        helper.make_node("Constant", [], ["pv"], name="pv_c",
                         value=numpy_helper.from_array(np.array(0.5, np.float32))),
        helper.make_node("Pad", ["d", "pads", "pv"], ["p"], name="pad"),  # [2, 4, 6]
        helper.make_node("Split", ["p"], ["p0", "p1"], name="split", axis=0),
        helper.make_node("Add", ["p0", "p1"], ["y"], name="add"),
    ]
    g = helper.make_graph(nodes, "old_opsets", [vi("x", TensorProto.FLOAT, [2, 3, 4])],
                          [vi("y", TensorProto.FLOAT, [1, 4, 6])])
    flat = x.reshape(2, 12).astype(np.float64)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    s = (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4)
    cl = np.clip(s, 0.01, 0.2)
    p = np.pad(cl, ((0, 0), (1, 0), (0, 2)), constant_values=0.5)
    y = (p[0:1] + p[1:2]).astype(np.float32)
    save("old_opsets", g, opset=11, inputs=[x], outputs=[y])


def slice_v1():
    x = rand(3, 5)
    g = helper.make_graph(
        [helper.make_node("Slice", ["x"], ["y"], name="slice", starts=[1, -4], ends=[3, 100],
                          axes=[0, 1])],
        "slice_v1", [vi("x", TensorProto.FLOAT, [3, 5])], [vi("y", TensorProto.FLOAT, [2, 4])])
    save("slice_v1", g, opset=9, inputs=[x], outputs=[x[1:3, -4:]])


def errors():
    x = vi("x", TensorProto.FLOAT, [1, 4])
    y = vi("y", TensorProto.FLOAT, [1, 4])
    save("unsupported_op", helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Bernoulli", ["r"], ["y"], name="bern_node")],
        "unsupported_op", [x], [y]), check=False)
    save("unknown_attr", helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_node", bogus=3)],
        "unknown_attr", [x], [y]), check=False)
    save("wrong_attr_type", helper.make_graph(
        [helper.make_node("Conv", ["x4", "w"], ["y4"], name="conv_node", group=1.5)],
        "wrong_attr_type", [vi("x4", TensorProto.FLOAT, [1, 1, 3, 3])],
        [vi("y4", TensorProto.FLOAT, [1, 1, 3, 3])],
        [numpy_helper.from_array(rand(1, 1, 1, 1), "w")]), check=False)
    # a Reshape whose target shape is a graph input: fine for ONNX, not for
    # kiln unless the caller binds the input to a constant
    save("dynamic_reshape", helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y2"], name="reshape_node")],
        "dynamic_reshape", [x, vi("shape", TensorProto.INT64, [2])],
        [vi("y2", TensorProto.FLOAT, [2, 2])]))
    # a symbolic batch dimension
    save("symbolic_dim", helper.make_graph(
        [helper.make_node("Relu", ["xs"], ["ys"], name="relu")],
        "symbolic_dim", [vi("xs", TensorProto.FLOAT, ["N", 4])],
        [vi("ys", TensorProto.FLOAT, ["N", 4])]))


def external_data():
    w = rand(4, 3)
    a = rand(2, 4)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"], name="matmul")],
        "external", [vi("a", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w")])
    save("external_data", g, inputs=[a], outputs=[(a @ w).astype(np.float32)],
         save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
         size_threshold=0)
    # the same model pointing outside its directory, and past the file's end
    for name, entries in [("external_escape", {"location": "../external_data/weights.bin"}),
                          ("external_short", {"location": "weights.bin", "offset": "40"})]:
        model = onnx.load(os.path.join(HERE, "external_data", "model.onnx"),
                          load_external_data=False)
        t = model.graph.initializer[0]
        del t.external_data[:]
        for k, v in entries.items():
            t.external_data.add(key=k, value=v)
        d = os.path.join(HERE, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        onnx.save_model(model, os.path.join(d, "model.onnx"))
        if name == "external_short":
            shutil.copy(os.path.join(HERE, "external_data", "weights.bin"), d)


def swin_pad_chain():
    """The shifted-window padding of torchvision's Swin transformer as
    torch.onnx exports it: pad = (window - size % window) % window as int64
    scalar Mod/Sub/Mod chains on the static sizes, unsqueezed into F.pad's
    pair list, reversed and transposed into ONNX Pad's order, then Pad on the
    NHWC activation (scaled per channel first, as norm1 would). The pads
    vector is a second output, so that the folded int64 values are checked
    too (tests/compiler/test_fold_constant.c). With the scale first, one of
    the chain's constants is the 17th value of fold-constant's new graph:
    copying it grew the value array under a pointer the pass still held (the
    crash on swin_t)."""
    x = rand(1, 5, 4, 2)
    scale = rand(2)
    win = 3
    i64 = lambda v: numpy_helper.from_array(np.array(v, np.int64))  # noqa: E731

    def const(name, arr):
        return helper.make_node("Constant", [], [name], name=name + "_c", value=i64(arr))

    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"], name="norm1"),
             helper.make_node("Shape", ["xs"], ["shp"], name="shape")]
    for axis, tag in ((1, "h"), (2, "w")):  # pad_b from H, pad_r from W
        nodes += [
            const(f"ax_{tag}", axis),
            helper.make_node("Gather", ["shp", f"ax_{tag}"], [f"size_{tag}"], name=f"gather_{tag}",
                             axis=0),
            const(f"win_{tag}", win),
            helper.make_node("Mod", [f"size_{tag}", f"win_{tag}"], [f"rem_{tag}"], name=f"mod_{tag}"),
            const(f"win2_{tag}", win),
            helper.make_node("Sub", [f"win2_{tag}", f"rem_{tag}"], [f"gap_{tag}"], name=f"sub_{tag}"),
            const(f"win3_{tag}", win),
            helper.make_node("Mod", [f"gap_{tag}", f"win3_{tag}"], [f"pad_{tag}"],
                             name=f"mod2_{tag}"),
            const(f"ax0_{tag}", [0]),
            helper.make_node("Unsqueeze", [f"pad_{tag}", f"ax0_{tag}"], [f"upad_{tag}"],
                             name=f"unsqueeze_{tag}"),
        ]
    zeros = [f"zero{k}" for k in range(4)]
    nodes += [const(z, [0]) for z in zeros]
    nodes += [
        # F.pad(x, (0, 0, 0, pad_r, 0, pad_b)) in torch's order, then the
        # missing leading pair and the reversal into ONNX's begin/end order
        helper.make_node("Concat", [zeros[0], zeros[1], zeros[2], "upad_w", zeros[3], "upad_h"],
                         ["tpads"], name="concat", axis=0),
        const("len2", [2]),
        helper.make_node("ConstantOfShape", ["len2"], ["lead"], name="cos", value=i64([0])),
        helper.make_node("Concat", ["tpads", "lead"], ["tpads8"], name="concat8", axis=0),
        const("pairs", [-1, 2]),
        helper.make_node("Reshape", ["tpads8", "pairs"], ["pp"], name="pairs_reshape"),
        const("s_start", [-1]),
        const("s_end", [-(2 ** 63) + 1]),
        const("s_axis", [0]),
        const("s_step", [-1]),
        helper.make_node("Slice", ["pp", "s_start", "s_end", "s_axis", "s_step"], ["rev"],
                         name="reverse"),
        helper.make_node("Transpose", ["rev"], ["revt"], name="transpose", perm=[1, 0]),
        const("flat", [-1]),
        helper.make_node("Reshape", ["revt", "flat"], ["pads"], name="flat_reshape"),
        helper.make_node("Pad", ["xs", "pads"], ["y"], name="pad", mode="constant"),
    ]
    g = helper.make_graph(nodes, "swin_pad_chain", [vi("x", TensorProto.FLOAT, [1, 5, 4, 2])],
                          [vi("y", TensorProto.FLOAT, [1, 6, 6, 2]),
                           vi("pads", TensorProto.INT64, [8])],
                          [numpy_helper.from_array(scale, "scale")])
    pad_b, pad_r = (win - 5 % win) % win, (win - 4 % win) % win
    pads = np.array([0, 0, 0, 0, 0, pad_b, pad_r, 0], np.int64)
    y = np.pad(x * scale, ((0, 0), (0, pad_b), (0, pad_r), (0, 0)))
    save("swin_pad_chain", g, opset=17, inputs=[x], outputs=[y, pads])


def main():
    conv_relu()
    gemm()
    vit_chain()
    old_opsets()
    slice_v1()
    errors()
    external_data()
    swin_pad_chain()
    print("wrote", HERE)


if __name__ == "__main__":
    main()
