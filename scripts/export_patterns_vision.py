#!/usr/bin/python3
"""Exports small vision models nobody's issue names (a UNet, a YOLOv5-style
detector, a DETR-style encoder-decoder, ESPCN super-resolution with
PixelShuffle and with bilinear upsampling, ConvNeXt blocks, a 3-D video CNN,
a diffusion-style GroupNorm res block with spatial attention, and three
attention micro models) with random weights from a fixed seed and PyTorch's
outputs, to DIR/NAME/model.onnx + DIR/NAME/test_data_set_0/{input_0,
output_K}.pb, for `kiln check` and bench/peer_ort.py (docs/SWEEP.md, "The
pattern sweep"). Never commit the exports.

Usage: /usr/bin/python3 scripts/export_patterns_vision.py [DIR] [--only a,b] [--opset 13]
       (DIR default ~/.cache/kiln/fixtures/patterns/vision)
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import numpy_helper

SEED = 4242


# ---------------------------------------------------------------- 1. unet
def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, cin=3, ncls=2, base=32):
        super().__init__()
        c = [base, base * 2, base * 4, base * 8]          # 4 levels
        self.enc = nn.ModuleList([double_conv(cin, c[0]), double_conv(c[0], c[1]),
                                  double_conv(c[1], c[2])])
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(c[2], c[3])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[3], c[2], 2, stride=2),
                                 nn.ConvTranspose2d(c[2], c[1], 2, stride=2),
                                 nn.ConvTranspose2d(c[1], c[0], 2, stride=2)])
        self.dec = nn.ModuleList([double_conv(c[3], c[2]), double_conv(c[2], c[1]),
                                  double_conv(c[1], c[0])])
        self.head = nn.Conv2d(c[0], ncls, 1)
        nn.init.normal_(self.head.weight, std=3.0 / math.sqrt(c[0]))

    def forward(self, x):
        skips = []
        for e in self.enc:
            x = e(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, dec, s in zip(self.up, self.dec, reversed(skips)):
            x = up(x)
            x = dec(torch.cat([x, s], 1))
        return self.head(x)


# ---------------------------------------------------------------- 2. yolo_like
class Conv(nn.Module):
    def __init__(self, cin, cout, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.cv1 = Conv(c, c, 1)
        self.cv2 = Conv(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, cin, cout, n=1, shortcut=True):
        super().__init__()
        h = cout // 2
        self.cv1 = Conv(cin, h)
        self.cv2 = Conv(cin, h)
        self.cv3 = Conv(2 * h, cout)
        self.m = nn.Sequential(*[Bottleneck(h, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout, k=5):
        super().__init__()
        h = cin // 2
        self.cv1 = Conv(cin, h)
        self.cv2 = Conv(h * 4, cout)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class YoloLike(nn.Module):
    """YOLOv5s layout (width 0.5, depth 0.33), 80 classes, 3 anchors."""

    def __init__(self, nc=80):
        super().__init__()
        self.no = nc + 5
        self.b0 = Conv(3, 32, 6, 2)          # P1/2 (v6.0 uses a 6x6 stem, pad 2)
        self.b0.conv.padding = (2, 2)
        self.b1 = Conv(32, 64, 3, 2)          # P2/4
        self.b2 = C3(64, 64, 1)
        self.b3 = Conv(64, 128, 3, 2)         # P3/8
        self.b4 = C3(128, 128, 2)
        self.b5 = Conv(128, 256, 3, 2)        # P4/16
        self.b6 = C3(256, 256, 3)
        self.b7 = Conv(256, 512, 3, 2)        # P5/32
        self.b8 = C3(512, 512, 1)
        self.b9 = SPPF(512, 512)
        self.h10 = Conv(512, 256, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h13 = C3(512, 256, 1, False)
        self.h14 = Conv(256, 128, 1)
        self.h17 = C3(256, 128, 1, False)     # P3 out
        self.h18 = Conv(128, 128, 3, 2)
        self.h20 = C3(256, 256, 1, False)     # P4 out
        self.h21 = Conv(256, 256, 3, 2)
        self.h23 = C3(512, 512, 1, False)     # P5 out
        self.det = nn.ModuleList([nn.Conv2d(c, 3 * self.no, 1) for c in (128, 256, 512)])

    def forward(self, x):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(p5)
        x = self.h13(torch.cat([self.up(h10), p4], 1))
        h14 = self.h14(x)
        o3 = self.h17(torch.cat([self.up(h14), p3], 1))
        o4 = self.h20(torch.cat([self.h18(o3), h14], 1))
        o5 = self.h23(torch.cat([self.h21(o4), h10], 1))
        outs = []
        for conv, f in zip(self.det, (o3, o4, o5)):
            y = conv(f)
            _, _, ny, nx = y.shape
            y = y.view(1, 3, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            outs.append(y.sigmoid())
        return tuple(outs)


# ---------------------------------------------------------------- 3. detr_decoder
class TinyDETR(nn.Module):
    def __init__(self, d=128, nq=50, ncls=92, tokens=64):
        super().__init__()
        r = torchvision.models.resnet18(weights=None)
        self.backbone = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool,
                                      r.layer1, r.layer2, r.layer3, r.layer4)
        self.proj = nn.Conv2d(512, d, 1)
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.1)
        self.query = nn.Parameter(torch.randn(1, nq, d))
        el = nn.TransformerEncoderLayer(d, 8, 256, dropout=0.0, batch_first=True)
        dl = nn.TransformerDecoderLayer(d, 8, 256, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(el, 2, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dl, 2)
        self.cls = nn.Linear(d, ncls)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                                 nn.Linear(d, 4))

    def forward(self, x):
        f = self.proj(self.backbone(x))                    # [1, d, 8, 8]
        t = f.flatten(2).permute(0, 2, 1) + self.pos        # [1, 64, d]
        mem = self.encoder(t)
        h = self.decoder(self.query, mem)                   # [1, 50, d]
        return self.cls(h), self.box(h).sigmoid()


class TinyDETRDynQ(TinyDETR):
    """detr_decoder with input-dependent queries (query + proj(mean feature)),
    so the decoder's attention queries are not constant-folded: a variant
    kiln can compile while the scale=1 attention bug stands."""

    def __init__(self):
        super().__init__()
        self.qproj = nn.Linear(128, 128)

    def forward(self, x):
        f = self.proj(self.backbone(x))
        t = f.flatten(2).permute(0, 2, 1) + self.pos
        mem = self.encoder(t)
        q = self.query + self.qproj(f.mean((2, 3)))[:, None, :]
        h = self.decoder(q, mem)
        return self.cls(h), self.box(h).sigmoid()


class AttnNoScale(nn.Module):
    """Minimal repro: softmax(q k^T) v with no score scaling (fused attention
    with scale exactly 1)."""

    def __init__(self, d=32):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        w = torch.softmax(torch.matmul(self.q(x), self.k(x).transpose(1, 2)), dim=-1)
        return torch.matmul(w, self.v(x))


class AttnCHW(nn.Module):
    """Micro: single-head attention over 256 tokens, D=128, with q, k, v and
    the output all channel-major [1, C, HW] (every operand permuted), as in
    unet_groupnorm_attn. Input [1, 3C, HW] holds q, k, v."""

    def forward(self, x):
        q, k, v = x[:, :128], x[:, 128:256], x[:, 256:]
        w = torch.softmax(torch.bmm(q.permute(0, 2, 1), k) * 0.08838835, dim=2)
        return torch.bmm(w, v.permute(0, 2, 1)).permute(0, 2, 1)


class AttnHWC(nn.Module):
    """Micro: the same attention with token-major [1, HW, C] operands.
    Input [1, HW, 3C] holds q, k, v."""

    def forward(self, x):
        q, k, v = x[:, :, :128], x[:, :, 128:256], x[:, :, 256:]
        w = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.08838835, dim=2)
        return torch.bmm(w, v)


# ---------------------------------------------------------------- 4. espcn
class ESPCN(nn.Module):
    def __init__(self, r=3):
        super().__init__()
        self.c1 = nn.Conv2d(3, 64, 5, padding=2)
        self.c2 = nn.Conv2d(64, 32, 3, padding=1)
        self.c3 = nn.Conv2d(32, 3 * r * r, 3, padding=1)
        self.ps = nn.PixelShuffle(r)

    def forward(self, x):
        x = torch.tanh(self.c1(x))
        x = torch.tanh(self.c2(x))
        return torch.tanh(self.ps(self.c3(x)))


class ESPCNBilinear(nn.Module):
    """Same trunk, the sub-pixel conv replaced by a bilinear x2 upsample
    (align_corners=False: ONNX Resize linear, half_pixel) and a 3x3 conv."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 64, 5, padding=2)
        self.c2 = nn.Conv2d(64, 32, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.c3 = nn.Conv2d(32, 3, 3, padding=1)

    def forward(self, x):
        x = torch.tanh(self.c1(x))
        x = torch.tanh(self.c2(x))
        return torch.tanh(self.c3(self.up(x)))


# ---------------------------------------------------------------- 5. convnext_ln
class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6)
        self.fc1 = nn.Linear(c, 4 * c)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.empty(c).uniform_(0.1, 0.5))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.ln(y))))
        y = (self.gamma * y).permute(0, 3, 1, 2)
        return x + y


class ConvNeXtLN(nn.Module):
    def __init__(self, c=96, n=3):
        super().__init__()
        self.blocks = nn.Sequential(*[ConvNeXtBlock(c) for _ in range(n)])
        for b in self.blocks:   # non-trivial LayerNorm affine
            with torch.no_grad():
                b.ln.weight.uniform_(0.5, 1.5)
                b.ln.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        return self.blocks(x)


# ---------------------------------------------------------------- 6. video3d
def c3d(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout),
                         nn.ReLU(inplace=True))


class Video3D(nn.Module):
    def __init__(self, ncls=10):
        super().__init__()
        self.s1 = nn.Sequential(c3d(3, 32), nn.MaxPool3d((1, 2, 2)))
        self.s2 = nn.Sequential(c3d(32, 64), c3d(64, 64), nn.MaxPool3d(2))
        self.s3 = nn.Sequential(c3d(64, 128), c3d(128, 128), nn.MaxPool3d(2))
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(128, ncls)

    def forward(self, x):
        x = self.s3(self.s2(self.s1(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


# ---------------------------------------------------------------- 7. unet_groupnorm_attn
class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n1 = nn.GroupNorm(32, c)
        self.c1 = nn.Conv2d(c, c, 3, padding=1)
        self.n2 = nn.GroupNorm(32, c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return x + h


class AttnBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.GroupNorm(32, c)
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)
        self.v = nn.Conv2d(c, c, 1)
        self.o = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        h = self.norm(x)
        q = self.q(h).reshape(b, c, hh * ww).permute(0, 2, 1)   # [b, hw, c]
        k = self.k(h).reshape(b, c, hh * ww)                    # [b, c, hw]
        v = self.v(h).reshape(b, c, hh * ww).permute(0, 2, 1)   # [b, hw, c]
        w = torch.softmax(torch.bmm(q, k) * (c ** -0.5), dim=2)
        out = torch.bmm(w, v).permute(0, 2, 1).reshape(b, c, hh, ww)
        return x + self.o(out)


class UNetGNAttn(nn.Module):
    def __init__(self, c=128):
        super().__init__()
        self.r1 = ResBlock(c)
        self.attn = AttnBlock(c)
        self.r2 = ResBlock(c)
        for m in self.modules():   # non-trivial GroupNorm affine
            if isinstance(m, nn.GroupNorm):
                with torch.no_grad():
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        return self.r2(self.attn(self.r1(x)))


MODELS = {
    "unet": (UNet, [1, 3, 128, 128]),
    "yolo_like": (YoloLike, [1, 3, 320, 320]),
    "detr_decoder": (TinyDETR, [1, 3, 256, 256]),
    "detr_dynq": (TinyDETRDynQ, [1, 3, 256, 256]),
    "attn_noscale": (AttnNoScale, [1, 64, 32]),
    "attn_chw": (AttnCHW, [1, 384, 256]),
    "attn_hwc": (AttnHWC, [1, 256, 384]),
    "espcn": (ESPCN, [1, 3, 96, 96]),
    "espcn_bilinear": (ESPCNBilinear, [1, 3, 96, 96]),
    "convnext_ln": (ConvNeXtLN, [1, 96, 56, 56]),
    "video3d": (Video3D, [1, 3, 8, 64, 64]),
    "unet_groupnorm_attn": (UNetGNAttn, [1, 128, 16, 16]),
}


def perturb_batchnorm(net, gen):
    for mod in net.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                n = mod.running_mean.numel()
                mod.running_mean.copy_(torch.rand(n, generator=gen) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                mod.weight.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
                mod.bias.copy_(torch.rand(n, generator=gen) * 0.2 - 0.1)


# PyTorch's default conv init (kaiming_uniform, a=sqrt(5)) shrinks activations
# ~2.4x per conv+ReLU, so deep nets give outputs too small for atol 1e-4 to
# see their internals: redraw these nets' convs Kaiming-normal (fan_in, relu).
KAIMING = {"unet", "yolo_like", "video3d"}


def kaiming(net):
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d)):
            with torch.no_grad():
                # ConvTranspose2d(k=2, s=2): each output sees one tap of every input channel
                fan_in = m.weight.shape[0] if isinstance(m, nn.ConvTranspose2d) \
                    else m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in))


def export_one(name, outdir, opset):
    cls, shape = MODELS[name]
    torch.manual_seed(SEED)
    net = cls()
    if name in KAIMING:
        kaiming(net)
    if name == "yolo_like":   # head logits of std ~1.5: sigmoids neither ~0.5 nor saturated
        for d, g in zip(net.det, (0.09, 0.075, 0.06)):
            with torch.no_grad():
                d.weight.mul_(g)
    if name in ("detr_decoder", "detr_dynq"):   # box logits of std ~1
        with torch.no_grad():
            net.box[-1].weight.normal_(0.0, 1.0 / math.sqrt(net.box[-1].in_features))
    perturb_batchnorm(net, torch.Generator().manual_seed(SEED + 1))
    net.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(SEED + 2))
    with torch.no_grad():
        ys = net(x)
    if isinstance(ys, torch.Tensor):
        ys = (ys,)
    ys = [y.detach().numpy().astype(np.float32) for y in ys]
    for i, y in enumerate(ys):
        if not np.isfinite(y).all() or float(y.std()) <= 1e-3:
            raise SystemExit(f"{name}: output {i} degenerate (std {y.std()}, finite "
                             f"{np.isfinite(y).all()})")
    dst = os.path.join(outdir, name)
    data = os.path.join(dst, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for f in os.listdir(data):
        os.remove(os.path.join(data, f))
    onames = [f"output_{i}" for i in range(len(ys))]
    path = os.path.join(dst, "model.onnx")
    # Not under no_grad: nn.Transformer*Layer would take its fused fast path
    # (aten::_transformer_encoder_layer_fwd), which has no ONNX symbolic.
    torch.onnx.export(net, x, path, opset_version=opset, input_names=["input"],
                      output_names=onames, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE)
    onnx.checker.check_model(path)
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x.numpy().astype(np.float32), "input").SerializeToString())
    for i, y in enumerate(ys):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, onames[i]).SerializeToString())
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: {[list(y.shape) for y in ys]} std {[round(float(y.std()), 4) for y in ys]} "
          f"ops: {' '.join(ops)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", nargs="?",
                    default=os.path.expanduser("~/.cache/kiln/fixtures/patterns/vision"))
    ap.add_argument("--only", default="")
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    torch.set_num_threads(2)
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    for n in names:
        export_one(n, a.outdir, a.opset)


if __name__ == "__main__":
    sys.exit(main())
