#!/usr/bin/python3
"""Exports torchvision networks to ONNX with reference inputs and outputs.

Each network gets random weights from a fixed seed (no downloads), batch-norm
running statistics perturbed away from (0, 1) so that batch-norm folding is
exercised, and is exported in eval mode. The layout is the ONNX conformance
suite's:

    OUTDIR/NAME/model.onnx
    OUTDIR/NAME/test_data_set_0/input_0.pb    (TensorProto)
    OUTDIR/NAME/test_data_set_0/output_0.pb   (TensorProto, from PyTorch)

Networks already exported (by this version of the script) are skipped. The files are large: never commit them
(fixtures/ is git-ignored).

Usage: /usr/bin/python3 scripts/export_torchvision.py [OUTDIR] [--only NAME[,NAME...]]
       [--opset N] [--force]
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

SEED = 20240229
# Bump when the exported files change, so cached exports are redone.
EXPORT_VERSION = "2"


def build(name):
    m = torchvision.models
    if name == "resnet18":
        return m.resnet18(weights=None), 224
    if name == "resnet50":
        return m.resnet50(weights=None), 224
    if name == "mobilenet_v2":
        return m.mobilenet_v2(weights=None), 224
    if name == "vgg16":
        return m.vgg16(weights=None), 224
    if name == "squeezenet1_1":
        return m.squeezenet1_1(weights=None), 224
    if name == "inception_v3":
        net = m.inception_v3(weights=None, aux_logits=False, init_weights=True,
                             transform_input=False)
        # init_weights draws conv weights with std 0.1 whatever the fan-in, so
        # activations grow ~2.5x per layer and the logits reach 1e13, which
        # makes a weak reference. Rescale them to Kaiming-normal (same draws).
        with torch.no_grad():
            for mod in net.modules():
                if isinstance(mod, torch.nn.Conv2d):
                    fan_in = mod.weight[0].numel()
                    mod.weight.mul_((2.0 / fan_in) ** 0.5 / 0.1)
        return net, 299
    if name == "vit_b_16":
        net = m.vit_b_16(weights=None)
        # torchvision zero-initialises the classification head, which would make
        # the reference output constant (all zeros plus bias): re-initialise it.
        head = net.heads.head
        torch.nn.init.normal_(head.weight, std=0.02)
        torch.nn.init.uniform_(head.bias, -0.1, 0.1)
        return net, 224
    if name in ("efficientnet_b0", "mobilenet_v3_large"):
        net = getattr(m, name)(weights=None)
        # The features these draw are small (logits of std 0.027 and 0.003), so
        # atol 1e-4 would hide errors of several percent: redraw the last
        # classifier layer's weights with std 1 (logits of std ~1 and ~0.3).
        with torch.no_grad():
            torch.nn.init.normal_(net.classifier[-1].weight, std=1.0)
        return net, 224
    if name == "densenet121":
        return m.densenet121(weights=None), 224
    if name == "resnext50_32x4d":
        return m.resnext50_32x4d(weights=None), 224
    if name == "convnext_tiny":
        net = m.convnext_tiny(weights=None)
        # torchvision initialises every block's layer scale to 1e-6, so each
        # residual branch adds ~1e-6 of its value and the reference output
        # would not see the blocks' internals at atol 1e-4: redraw the scales.
        with torch.no_grad():
            for mod in net.modules():
                if hasattr(mod, "layer_scale"):
                    mod.layer_scale.uniform_(0.1, 0.5)
        return net, 224
    raise SystemExit(f"unknown network '{name}'")


NETWORKS = ["resnet18", "resnet50", "mobilenet_v2", "vgg16", "squeezenet1_1",
            "inception_v3", "vit_b_16", "efficientnet_b0", "mobilenet_v3_large",
            "densenet121", "resnext50_32x4d", "convnext_tiny"]


def perturb_batchnorm(net, gen):
    for mod in net.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                n = mod.running_mean.numel()
                mod.running_mean.copy_(torch.rand(n, generator=gen) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(n, generator=gen) + 0.5)


def make(name):
    """The network NAME in eval mode, with this script's weights, and its
    input: what the export holds (bench/peer_torch.py times it)."""
    torch.manual_seed(SEED)
    net, size = build(name)
    gen = torch.Generator().manual_seed(SEED + 1)
    perturb_batchnorm(net, gen)
    net.eval()
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(SEED + 2))
    return net, x


def export_one(name, outdir, opset, force):
    dst = os.path.join(outdir, name)
    data_dir = os.path.join(dst, "test_data_set_0")
    model_path = os.path.join(dst, "model.onnx")
    out_path = os.path.join(data_dir, "output_0.pb")
    version_path = os.path.join(dst, "export.version")
    cached_version = open(version_path).read().strip() if os.path.exists(version_path) else ""
    if (not force and cached_version == EXPORT_VERSION and os.path.exists(model_path)
            and os.path.exists(out_path)):
        print(f"{name}: cached in {dst}")
        return
    os.makedirs(data_dir, exist_ok=True)
    t0 = time.time()
    net, x = make(name)
    with torch.no_grad():
        y = net(x)
    y_np = y.detach().numpy().astype(np.float32)
    if float(y_np.max() - y_np.min()) < 1e-6:
        raise SystemExit(f"{name}: the reference output is constant; weights are degenerate")
    tmp_model = model_path + ".tmp"
    torch.onnx.export(net, x, tmp_model, opset_version=opset, input_names=["input"],
                      output_names=["output"], do_constant_folding=True,
                      # PRESERVE (with the network in eval mode) keeps the
                      # BatchNormalization nodes, with their perturbed running
                      # statistics, instead of folding them into the convs:
                      # kiln's own conversion and folding get exercised.
                      training=torch.onnx.TrainingMode.PRESERVE)
    onnx.checker.check_model(tmp_model)
    with open(os.path.join(data_dir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x.numpy().astype(np.float32), "input").SerializeToString())
    with open(out_path + ".tmp", "wb") as f:
        f.write(numpy_helper.from_array(y_np, "output").SerializeToString())
    os.replace(tmp_model, model_path)
    os.replace(out_path + ".tmp", out_path)
    with open(version_path, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    ops = sorted({n.op_type for n in onnx.load(model_path, load_external_data=False).graph.node})
    print(f"{name}: exported to {dst} in {time.time() - t0:.0f}s "
          f"(opset {opset}, output {list(y_np.shape)}; ops: {' '.join(ops)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default="fixtures/torchvision")
    ap.add_argument("--only", default="", help="export these networks only (NAME[,NAME...])")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--force", action="store_true", help="re-export cached networks")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in args.only.split(",") if n] or NETWORKS
    for name in names:
        if name not in NETWORKS:
            raise SystemExit(f"unknown network '{name}' (known: {', '.join(NETWORKS)})")
    for name in names:
        export_one(name, args.outdir, args.opset, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
