"""docs/examples/tvm_tutorial.py: TVM's "compile, run, time, profile" tutorial
flow with kiln (docs/PYTHON.md).

    python docs/examples/tvm_tutorial.py [MODEL] [--threads N]

MODEL is a zoo name (default squeezenet-1.1), an .onnx file, or
torchvision:NAME (exported to ONNX with PyTorch when torch and torchvision are
importable, e.g. torchvision:resnet18). When onnxruntime is importable and the
model is ONNX, the same file also runs on ONNX Runtime (CPU, same threads):
outputs compared, times side by side. One run of this script on a shared
machine is an illustration, not a measurement (see bench/ for that).

What TVM users write, and kiln's equivalent:

    TVM                                             kiln
    mod, params = relay.frontend.from_onnx(model)   m = kiln.compile("model.onnx")
    lib = relay.build(mod, target="llvm", ...)      (compile does both)
    m = graph_executor.GraphModule(lib["default"](dev))
    m.set_input("data", x); m.run(); m.get_output(0)    (y,) = m.run(data=x)
    m.module.time_evaluator("run", dev, repeat=3)()     m.benchmark(repeat=3)
    debug_executor.create(...).profile()                m.profile().table()
    lib.export_library("model.so")                      m.export("model.so")
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import kiln


def export_torchvision(name, path):
    import torch
    import torchvision
    net = getattr(torchvision.models, name)(weights=None).eval()
    torch.onnx.export(net, torch.randn(1, 3, 224, 224), path, input_names=["data"],
                      output_names=["logits"], opset_version=13)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="squeezenet-1.1")
    ap.add_argument("--threads", type=int, default=0, help="0: the physical cores")
    args = ap.parse_args()

    model = args.model
    tmp = tempfile.TemporaryDirectory()
    if model.startswith("torchvision:"):
        model = export_torchvision(model.split(":", 1)[1], os.path.join(tmp.name, "model.onnx"))

    # 1. compile (import, graph passes, one C kernel per fused op, one .so)
    m = kiln.compile(model, num_threads=args.threads)
    print(m)
    so = m.export(os.path.join(tmp.name, "model.so"))
    print(f"exported {so} ({os.path.getsize(so) / 1e6:.1f} MB)")

    # 2. run on an input of the right shape and dtype
    x = m.default_inputs()
    outs = m.run(*x)
    y = outs[0]
    top5 = np.argsort(y.ravel())[::-1][:5]
    print(f"output {m.output_names[0]} {y.shape}: top-5 indices {top5.tolist()}")

    # 3. time it (TVM time_evaluator semantics)
    r = m.benchmark(number=10, repeat=3)
    print(r)

    # 4. profile it per fused kernel (TVM's debug executor table)
    report = m.profile()
    print(report.table(top=10))
    slowest = report.rows[0]
    print(f"slowest kernel: {slowest.name} ({slowest.op}), {slowest.duration_us:.1f} us, "
          f"{slowest.percent:.1f}% of the run")

    # 5. ONNX Runtime on the same file, when it is installed
    if not model.endswith(".onnx"):
        print("(ONNX Runtime comparison: pass an .onnx file or torchvision:NAME)")
        return 0
    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime is not installed: no comparison)")
        return 0
    so_opts = ort.SessionOptions()
    so_opts.intra_op_num_threads = m.num_threads
    sess = ort.InferenceSession(model, so_opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(sess.get_inputs(), x)}
    want = sess.run(None, feeds)
    for name, got, ref in zip(m.output_names, outs, want):
        err = float(np.max(np.abs(got - ref))) if got.size else 0.0
        print(f"{name}: max |kiln - ORT| = {err:.3g}")
    import timeit
    t = timeit.repeat(lambda: sess.run(None, feeds), number=10, repeat=3)
    ort_ms = [s / 10 * 1e3 for s in t]
    print(f"ONNX Runtime: median {sorted(ort_ms)[1]:.3f} ms, kiln: median "
          f"{r.median * 1e3:.3f} ms ({m.num_threads} threads each; one run, a shared machine "
          "is noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
