#!/usr/bin/python3
"""Exports five small PyTorch models with dynamic axes (symbolic input dims,
what torch.onnx.export writes for `dynamic_axes`) and PyTorch's outputs at
two input shapes each, for tests/models/dynamic_shapes.sh:

  convnet      Conv 3x3 + BatchNorm + ReLU, Conv 3x3 stride 2 + ReLU, global
               average pool, flatten, Linear; input [batch, 3, height, width]
  transformer  a pre-norm transformer block (LayerNorm, 2-head self-attention
               whose reshapes read x.shape, residual, LayerNorm, Linear + GELU
               + Linear, residual); input [batch, seq, 16]
  batchnet     items computed apart (conv stem, squeeze-excite, grouped
               conv, tokens behind a class token, the transformer block, a
               Linear on the class token); input [batch, 3, 16, 16]: a
               symbolic batch the VM runs in chunks
  batchattn    items computed apart through nn.MultiheadAttention's
               reshapes (a TransformerEncoderLayer); input [batch, 10, 32]
  batchmix     items that meet (each less the batch's mean, a Linear); input
               [batch, 8]: must not run in chunks

Layout (the ONNX conformance suite's), per model:
    OUTDIR/dynamic/NAME/model.onnx
    OUTDIR/dynamic/NAME/test_data_set_K/input_0.pb, output_0.pb   K = 0, 1
Shapes: convnet [1, 3, 16, 16] and [3, 3, 20, 12]; transformer [2, 5, 16]
and [1, 9, 16]; batchnet [11, 3, 16, 16] (chunks 8 + 2 + 1) and [3, 3, 16,
16]; batchattn [11, 10, 32] and [3, 10, 32]; batchmix [5, 8] and [3, 8]. Weights and inputs from a fixed seed. A model already
exported by this version of the script is skipped (small files, a few
seconds); never commit them.
Usage: /usr/bin/python3 scripts/export_dynamic.py [OUTDIR] [--force]
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

SEED = 20261124
EXPORT_VERSION = "1"
OPSET = 17


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class Block(nn.Module):
    DIM, HEADS, FF = 16, 2, 32

    def __init__(self):
        super().__init__()
        d = self.DIM
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, self.FF)
        self.fc2 = nn.Linear(self.FF, d)

    def forward(self, x):
        b, t, c = x.shape  # traced as Shape/Gather: symbolic in the export
        h = self.HEADS
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q = q.reshape(b, t, h, c // h).transpose(1, 2)
        k = k.reshape(b, t, h, c // h).transpose(1, 2)
        v = v.reshape(b, t, h, c // h).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.DIM // h), dim=-1)
        y = (a @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class BatchNet(nn.Module):
    """Every item on its own: conv stem + BatchNorm + ReLU, squeeze-excite,
    a grouped conv, the map as tokens behind a class token, a transformer
    block, the class token's features to a Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.se1 = nn.Linear(16, 4)
        self.se2 = nn.Linear(4, 16)
        self.gconv = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.cls = nn.Parameter(torch.rand(1, 1, 16) - 0.5)
        self.block = Block()
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        s = torch.sigmoid(self.se2(torch.relu(self.se1(x.mean((2, 3))))))
        x = torch.relu(self.gconv(x * s[:, :, None, None]))
        t = x.flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], dim=1)
        return self.head(self.block(t)[:, 0])


class BatchAttn(nn.Module):
    """Every item on its own, through nn.MultiheadAttention's layout
    ([seq, batch x heads, dim]: the batch merged with the heads, then with
    the sequence): a TransformerEncoderLayer, the mean over the sequence, a
    Linear."""

    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc(self.enc(x).mean(1))


class BatchMix(nn.Module):
    """The items meet: each item less the batch's mean, then a Linear."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x - x.mean(0, keepdim=True))


MODELS = {
    "convnet": (ConvNet, {0: "batch", 2: "height", 3: "width"},
                [(1, 3, 16, 16), (3, 3, 20, 12)]),
    "transformer": (Block, {0: "batch", 1: "seq"}, [(2, 5, 16), (1, 9, 16)]),
    "batchnet": (BatchNet, {0: "batch"}, [(11, 3, 16, 16), (3, 3, 16, 16)]),
    "batchattn": (BatchAttn, {0: "batch"}, [(11, 10, 32), (3, 10, 32)]),
    "batchmix": (BatchMix, {0: "batch"}, [(5, 8), (3, 8)]),
}


def write_pb(path, name, arr):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export(name, outdir, force):
    cls, axes, shapes = MODELS[name]
    d = os.path.join(outdir, "dynamic", name)
    stamp = os.path.join(d, "EXPORT_VERSION")
    if not force and os.path.exists(stamp) and open(stamp).read().strip() == EXPORT_VERSION:
        print(f"{name}: already exported in {d}")
        return
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(SEED)
    net = cls().eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # batch-norm statistics that are not the identity
        for mod in net.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2, generator=gen)
                mod.running_var.uniform_(0.5, 1.5, generator=gen)
                mod.weight.uniform_(0.8, 1.2, generator=gen)
                mod.bias.uniform_(-0.1, 0.1, generator=gen)
    example = torch.rand(shapes[0], generator=gen) * 2 - 1
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(net, (example,), path, opset_version=OPSET, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": axes, "y": {0: "batch"}})
    m = onnx.load(path)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    sym = [dm.dim_param for dm in dims if dm.HasField("dim_param")]
    if not sym:
        sys.exit(f"{name}: the export has no symbolic input dim")
    for k, shape in enumerate(shapes):
        x = torch.rand(shape, generator=gen) * 2 - 1
        with torch.no_grad():
            y = net(x)
        sd = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(sd, exist_ok=True)
        write_pb(os.path.join(sd, "input_0.pb"), "x", x.numpy())
        write_pb(os.path.join(sd, "output_0.pb"), "y", y.numpy())
    with open(stamp, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    print(f"{name}: exported to {d} (symbolic input dims {sym}; shapes {shapes})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?",
                    default=os.path.join(os.environ.get("XDG_CACHE_HOME",
                                                        os.path.expanduser("~/.cache")),
                                         "kiln", "fixtures"))
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    for name in MODELS:
        export(name, a.outdir, a.force)


if __name__ == "__main__":
    main()
