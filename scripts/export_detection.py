#!/usr/bin/python3
"""Exports torchvision detection networks to ONNX with reference inputs and outputs.

The networks are torchvision 0.14's ssdlite320_mobilenet_v3_large and
fasterrcnn_mobilenet_v3_large_320_fpn with random weights from a fixed seed
(weights=None, weights_backbone=None: no downloads), a low score threshold
(0.01) and 20 detections per image, so the outputs are non-trivial. Random
weights alone give degenerate outputs: batch-norm layers with running
statistics (0, 1) make the activations vanish through the backbone, and every
class score ties at ~1/91. So before the export:

  1. batch-norm calibration: every BatchNorm layer is reset and put in train
     mode with momentum None (a cumulative average), the network (otherwise
     in eval mode) runs on two images of the kinds tested (below: one noise
     image, one scene; other draws), and the layers go back to eval with
     those running statistics;
  2. spread: the layers whose outputs are ranked (classification logits, RPN
     objectness) and the box regressors are rescaled (weight and bias) so that
     their outputs over the calibration images have a set standard deviation
     (logits 1, box deltas 0.3): scores spread out and rarely tie, so TopK,
     the score threshold and NMS pick the same candidates on every engine;
  3. background: the background class's logit bias is raised by 8, so that
     most (anchor, class) pairs score below the threshold, as in a trained
     detector where most anchors are background. Without it nearly every
     class of every anchor passes (SSD: 90 classes x 300 candidates, 27,000
     boxes into NMS, which would dominate every engine's time).

The exported graph is a wrapper: forward(image [3, H, W]) -> (boxes [N, 4],
scores [N], labels [N]) of the torchvision model on [image], detections in
decreasing score order, N <= 20 (data-dependent). Opset 13 by default (so
RoiAlign has opset 10's semantics, torchvision's aligned=False). The layout is
the ONNX conformance suite's, one data set per test image:

    OUTDIR/NAME/model.onnx
    OUTDIR/NAME/test_data_set_K/input_0.pb     images, float32 [3, 320, 320]
    OUTDIR/NAME/test_data_set_K/output_0.pb    boxes, float32 [N, 4] (x1, y1, x2, y2)
    OUTDIR/NAME/test_data_set_K/output_1.pb    scores, float32 [N]
    OUTDIR/NAME/test_data_set_K/output_2.pb    labels, int64 [N]

K = 0: uniform random pixels in [0, 1) (the image the graph was traced with);
K = 1: a smooth image (upsampled low-resolution noise) with bright and dark
rectangles. Each reference output is checked to be non-degenerate (distinct
scores, several labels, distinct boxes) or the export fails. Exports already
made by this version of the script are skipped; the files are large: never
commit them.

Usage: /usr/bin/python3 scripts/export_detection.py [OUTDIR] [--only NAME[,NAME...]]
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

SEED = 20261124
# Bump when the exported files change, so cached exports are redone.
EXPORT_VERSION = "2"
SIZE = 320
SCORE_THRESH = 0.01
DETECTIONS = 20
LOGIT_STD, DELTA_STD = 1.0, 0.3
BACKGROUND_LOGIT = 8.0
NUM_CLASSES = 91  # COCO's, background first
NETWORKS = ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"]
OUTPUT_NAMES = ["boxes", "scores", "labels"]


class Detector(torch.nn.Module):
    """One image in, (boxes, scores, labels) out: the torchvision model's
    first result as a tuple in a fixed order (its dict's order differs
    between SSD and Faster R-CNN)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, image):
        d = self.net([image])[0]
        return d["boxes"], d["scores"], d["labels"]


def build(name):
    """The torchvision model NAME with random weights, the layers to spread
    ([(module, target std of its output)]) and the classifiers whose
    background logit to raise."""
    m = torchvision.models.detection
    if name == "ssdlite320_mobilenet_v3_large":
        net = m.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                              score_thresh=SCORE_THRESH,
                                              detections_per_img=DETECTIONS)
        head = net.head
        spread = [(s[-1], LOGIT_STD) for s in head.classification_head.module_list]
        spread += [(s[-1], DELTA_STD) for s in head.regression_head.module_list]
        return net, spread, [s[-1] for s in head.classification_head.module_list]
    if name == "fasterrcnn_mobilenet_v3_large_320_fpn":
        net = m.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                      box_score_thresh=SCORE_THRESH,
                                                      box_detections_per_img=DETECTIONS)
        spread = [(net.rpn.head.cls_logits, LOGIT_STD), (net.rpn.head.bbox_pred, DELTA_STD),
                  (net.roi_heads.box_predictor.cls_score, LOGIT_STD),
                  (net.roi_heads.box_predictor.bbox_pred, DELTA_STD)]
        return net, spread, [net.roi_heads.box_predictor.cls_score]
    raise SystemExit(f"unknown network '{name}' (known: {', '.join(NETWORKS)})")


def noise_image(gen):
    """Uniform random pixels in [0, 1), float32 [3, SIZE, SIZE]."""
    return torch.rand(3, SIZE, SIZE, generator=gen)


def scene_image(gen):
    """A smooth image (bilinearly upsampled 10x10 noise) with six flat
    rectangles, float32 [3, SIZE, SIZE] in [0, 1]."""
    low = torch.rand(1, 3, 10, 10, generator=gen)
    x = torch.nn.functional.interpolate(low, size=(SIZE, SIZE), mode="bilinear",
                                        align_corners=False)[0] * 0.6 + 0.2
    for _ in range(6):
        x0, y0 = (int(v) for v in torch.randint(0, SIZE - 40, (2,), generator=gen))
        w, h = (int(v) for v in torch.randint(30, 140, (2,), generator=gen))
        x[:, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1, generator=gen)
    return x.clamp(0, 1).contiguous()


def test_images():
    """The test images: a noise image and a scene (see above)."""
    gen = torch.Generator().manual_seed(SEED + 2)
    return [noise_image(gen), scene_image(gen)]


def calibrate(net, gen):
    """Batch-norm running statistics from a noise image and a scene (see
    the module's docstring); the network is left in eval mode."""
    bns = [b for b in net.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)]
    net.eval()
    for b in bns:
        b.reset_running_stats()
        b.momentum = None
        b.train()
    images = [noise_image(gen), scene_image(gen)]
    with torch.no_grad():
        net(images)
    net.eval()
    return images


def spread(net, layers, images):
    """Rescales each layer's weight and bias so that its output's standard
    deviation over IMAGES is the target."""
    stds = {}

    def hook(mod, _inp, out):
        stds.setdefault(mod, []).append(out.detach().float().reshape(-1))

    handles = [mod.register_forward_hook(hook) for mod, _ in layers]
    with torch.no_grad():
        net(images)
    for h in handles:
        h.remove()
    with torch.no_grad():
        for mod, target in layers:
            s = float(torch.cat(stds[mod]).std())
            if s > 0:
                mod.weight.mul_(target / s)
                if mod.bias is not None:
                    mod.bias.mul_(target / s)


def make(name):
    """The calibrated Detector of NAME in eval mode and its test images:
    what the export holds (bench/peer_torch.py times it)."""
    torch.manual_seed(SEED)
    net, layers, classifiers = build(name)
    gen = torch.Generator().manual_seed(SEED + 1)
    images = calibrate(net, gen)
    spread(net, layers, images)
    with torch.no_grad():
        for mod in classifiers:
            # rows (SSD: output channels anchor * NUM_CLASSES + class) of class 0
            mod.bias.view(-1, NUM_CLASSES)[:, 0] += BACKGROUND_LOGIT
    return Detector(net).eval(), test_images()


def check_outputs(name, k, boxes, scores, labels):
    """Refuses a degenerate reference: too few detections, tied scores, one
    label, or equal boxes."""
    n = len(scores)
    why = None
    if n < 5:
        why = f"{n} detections"
    elif not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
        why = "non-finite values"
    elif len(np.unique(scores)) < n:
        why = "tied scores"
    elif len(np.unique(labels)) < 3:
        why = f"labels {sorted(set(labels.tolist()))}"
    elif len(np.unique(boxes, axis=0)) < n:
        why = "equal boxes"
    if why:
        raise SystemExit(f"{name}: the reference output of image {k} is degenerate ({why})")


def write_data_set(data_dir, image, names, ys):
    """DATA_DIR/input_0.pb (IMAGE, a tensor named "images") and output_K.pb
    (YS, numpy arrays named NAMES), the conformance suite's layout."""
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(image.numpy(), "images").SerializeToString())
    for i, (oname, y) in enumerate(zip(names, ys)):
        with open(os.path.join(data_dir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, oname).SerializeToString())


def export_one(name, outdir, opset, force):
    dst = os.path.join(outdir, name)
    model_path = os.path.join(dst, "model.onnx")
    version_path = os.path.join(dst, "export.version")
    n_sets = len(test_images())
    last = os.path.join(dst, f"test_data_set_{n_sets - 1}", "output_2.pb")
    cached = open(version_path).read().strip() if os.path.exists(version_path) else ""
    if (not force and cached == EXPORT_VERSION and os.path.exists(model_path)
            and os.path.exists(last)):
        print(f"{name}: cached in {dst}")
        return
    os.makedirs(dst, exist_ok=True)
    if os.path.exists(version_path):
        os.remove(version_path)
    t0 = time.time()
    net, images = make(name)
    results = []
    with torch.no_grad():
        for k, x in enumerate(images):
            ys = [y.numpy() for y in net(x)]
            check_outputs(name, k, *ys)
            results.append(ys)
    tmp = model_path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(net, (images[0],), tmp, opset_version=opset, input_names=["images"],
                          output_names=OUTPUT_NAMES, do_constant_folding=True)
    onnx.checker.check_model(tmp)
    for k, (x, ys) in enumerate(zip(images, results)):
        write_data_set(os.path.join(dst, f"test_data_set_{k}"), x, OUTPUT_NAMES, ys)
    os.replace(tmp, model_path)
    with open(version_path, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    ops = sorted({n.op_type for n in onnx.load(model_path, load_external_data=False).graph.node})
    dets = ", ".join(f"{len(ys[1])} detections (scores {ys[1][0]:.4f}..{ys[1][-1]:.4f}, "
                     f"{len(np.unique(ys[2]))} labels)" for ys in results)
    print(f"{name}: exported to {dst} in {time.time() - t0:.0f}s (opset {opset}; {dets}; "
          f"ops: {' '.join(ops)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default="fixtures/detection")
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
