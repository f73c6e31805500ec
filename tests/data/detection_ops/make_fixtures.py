#!/usr/bin/env python3
"""Writes the small ONNX models of tests/onnx/detection_ops.sh: the ops the
torchvision detection networks use (RoiAlign, NonMaxSuppression, ScatterElements,
GatherND, Resize), each with its expected output from the library whose
semantics it must have:

  - torchvision: roi_align (aligned=False as opset < 16 exports it, and
    aligned=True as opset 16's half_pixel), nms and batched_nms, and
    MultiScaleRoIAlign exported by torch.onnx (the multi-level pooling graph of
    Faster R-CNN: level mapping, per-level NonZero, RoiAlign, ScatterElements);
  - torch: scatter (ScatterElements), F.interpolate nearest (Resize nearest,
    asymmetric, floor: the FPN's upsampling) and bilinear with
    align_corners=False (Resize linear, half_pixel: GeneralizedRCNNTransform);
  - ONNX Runtime, for what the ONNX spec defines beyond torch's semantics (NMS
    with several batches and classes, a score threshold, a per-class limit,
    flipped corners, center_point_box; negative indices; GatherND's batch_dims;
    ScatterElements' reductions; Resize's tf_half_pixel_for_nn with ceil, where
    the dims that are not resized are copied).

Each case is NAME/model.onnx with NAME/test_data_set_0/input_K.pb and
output_K.pb (TensorProto). Every expected output is also checked against ONNX
Runtime running the same model (a case whose two references disagree is an
error here, except where torch's semantics is the point and ORT is known to
differ: none at present). The files are small and committed; re-run after a
change with a python that has torch, torchvision, onnx and onnxruntime:

    bench/.venv/bin/python tests/data/detection_ops/make_fixtures.py
"""
import os
import shutil

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(20261124)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def ort_run(path, inputs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(s.get_inputs(), inputs)}
    return s.run(None, feeds)


def write_case(name, model, inputs, expected, check_ort=True, rtol=1e-5, atol=1e-5):
    """Writes NAME/model.onnx (an onnx ModelProto) with its data set; checks
    EXPECTED against ONNX Runtime unless told not to."""
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    data = os.path.join(d, "test_data_set_0")
    os.makedirs(data)
    onnx.checker.check_model(model)
    path = os.path.join(d, "model.onnx")
    onnx.save_model(model, path)
    in_names = [i.name for i in model.graph.input
                if i.name not in {t.name for t in model.graph.initializer}]
    out_names = [o.name for o in model.graph.output]
    if check_ort:
        got = ort_run(path, inputs)
        for k, (g, w) in enumerate(zip(got, expected)):
            if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=atol):
                raise SystemExit(f"{name}: output {k}: ONNX Runtime and the expected value "
                                 f"differ (shapes {g.shape} {w.shape}; max diff "
                                 f"{np.abs(g.astype(np.float64) - w).max() if g.shape == w.shape else '-'})")
    for k, (n, x) in enumerate(zip(in_names, inputs)):
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(x), n).SerializeToString())
    for k, (n, y) in enumerate(zip(out_names, expected)):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(y), n).SerializeToString())
    print(f"{name}: {len(inputs)} inputs, outputs " +
          ", ".join(f"{list(np.shape(y))}" for y in expected))


def one_node(op, inputs, outputs, attrs=None, opset=13, initializers=()):
    """A model of one node. inputs/outputs: [(name, dtype, shape)]."""
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], **(attrs or {}))
    g = helper.make_graph([node], op.lower(), [vi(*i) for i in inputs if i[0]],
                          [vi(*o) for o in outputs], initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="kiln-tests")
    m.ir_version = 8
    return m


def export(module, args, in_names, out_names, opset=13):
    """torch.onnx.export of MODULE to a ModelProto."""
    import io
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, f, opset_version=opset, input_names=in_names,
                          output_names=out_names, do_constant_folding=True)
    return onnx.load_from_string(f.getvalue())


# ---- RoiAlign -------------------------------------------------------------------

def random_rois(k, h, w, scale, n_batch):
    """K boxes in input-image coordinates (feature extent / SCALE): mostly
    inside, some crossing the border, a degenerate one (x1 == x2) and a tiny
    one; their batch indices."""
    ih, iw = h / scale, w / scale
    x1 = RNG.uniform(-0.1 * iw, 0.9 * iw, k)
    y1 = RNG.uniform(-0.1 * ih, 0.9 * ih, k)
    x2 = x1 + RNG.uniform(0.02 * iw, 0.6 * iw, k)
    y2 = y1 + RNG.uniform(0.02 * ih, 0.6 * ih, k)
    rois = np.stack([x1, y1, x2, y2], 1).astype(np.float32)
    rois[0, 2] = rois[0, 0]                                   # zero width
    rois[1, 2:] = rois[1, :2] + np.float32(0.3)               # smaller than a cell
    idx = RNG.integers(0, n_batch, k).astype(np.int64)
    return rois, idx


def roialign_case(name, opset, aligned, sampling_ratio, scale, shape=(2, 5, 12, 15), k=10,
                  out_hw=(7, 7)):
    n, c, h, w = shape
    x = RNG.standard_normal(shape).astype(np.float32)
    rois, idx = random_rois(k, h, w, scale, n)
    attrs = {"output_height": out_hw[0], "output_width": out_hw[1],
             "sampling_ratio": sampling_ratio, "spatial_scale": scale, "mode": "avg"}
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = "half_pixel" if aligned else "output_half_pixel"
    m = one_node("RoiAlign", [("X", TensorProto.FLOAT, list(shape)),
                              ("rois", TensorProto.FLOAT, [k, 4]),
                              ("batch_indices", TensorProto.INT64, [k])],
                 [("Y", TensorProto.FLOAT, [k, c, *out_hw])], attrs, opset)
    boxes = torch.cat([torch.from_numpy(idx).float()[:, None], torch.from_numpy(rois)], 1)
    y = torchvision.ops.roi_align(torch.from_numpy(x), boxes, out_hw, scale, sampling_ratio,
                                  aligned).numpy()
    write_case(name, m, [x, rois, idx], [y])


class MultiScalePool(torch.nn.Module):
    """torchvision's MultiScaleRoIAlign over three levels of one image:
    Faster R-CNN's box_roi_pool as it is exported."""

    def __init__(self, image_hw):
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["0", "1", "2"], 7, 2)
        self.image_hw = image_hw

    def forward(self, f0, f1, f2, boxes):
        return self.pool({"0": f0, "1": f1, "2": f2}, [boxes], [self.image_hw])


def multiscale_case():
    image_hw = (128, 160)
    feats = [RNG.standard_normal((1, 4, image_hw[0] // s, image_hw[1] // s)).astype(np.float32)
             for s in (4, 8, 16)]
    # box sizes from 8 to 128 px so that every level gets some (the level is
    # floor(4 + log2(sqrt(area) / 224)) clamped to [2, 4]: k_min 2 for s=4)
    k = 24
    side = np.exp(RNG.uniform(np.log(6), np.log(150), k))
    aspect = np.exp(RNG.uniform(-0.7, 0.7, k))
    bw, bh = side * aspect, side / aspect
    x1 = RNG.uniform(0, image_hw[1] - 4, k)
    y1 = RNG.uniform(0, image_hw[0] - 4, k)
    boxes = np.stack([x1, y1, np.minimum(x1 + bw, image_hw[1]),
                      np.minimum(y1 + bh, image_hw[0])], 1).astype(np.float32)
    mod = MultiScalePool(image_hw).eval()
    args = tuple(torch.from_numpy(a) for a in feats + [boxes])
    with torch.no_grad():
        y = mod(*args).numpy()
    levels = mod.pool.map_levels  # set by the first call
    m = export(mod, args, ["f0", "f1", "f2", "boxes"], ["pooled"])
    lv = levels([torch.from_numpy(boxes)]).numpy()
    write_case("multiscale_roi_align", m, feats + [boxes], [y])
    print(f"  boxes per level: {np.bincount(lv.astype(np.int64), minlength=3).tolist()}")


# ---- NonMaxSuppression --------------------------------------------------------

def cluster_boxes(n, size=100.0, clusters=6):
    """N boxes around a few centres (so many overlap), x1 < x2, y1 < y2."""
    centres = RNG.uniform(10, size - 10, (clusters, 2))
    c = centres[RNG.integers(0, clusters, n)] + RNG.normal(0, 4, (n, 2))
    wh = RNG.uniform(8, 30, (n, 2))
    return np.concatenate([c - wh / 2, c + wh / 2], 1).astype(np.float32)


def distinct_scores(shape):
    """Scores in (0, 1) with no ties (torchvision sorts them; ties would
    make the order depend on the sort)."""
    s = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)
    return ((s + 1) / (s.size + 1)).astype(np.float32)


def nms_ref(boxes, scores, iou, max_out=None, thresh=None):
    """[[batch, class, index]] by torchvision.ops.nms per batch and class,
    the boxes given corner-first (x1 < x2, y1 < y2)."""
    sel = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = torch.from_numpy(scores[b, c])
            keep_mask = s > thresh if thresh is not None else torch.ones_like(s, dtype=torch.bool)
            cand = torch.nonzero(keep_mask)[:, 0]
            keep = torchvision.ops.nms(torch.from_numpy(boxes[b])[cand], s[cand], iou)
            keep = cand[keep]
            if max_out is not None:
                keep = keep[:max_out]
            sel += [[b, c, int(i)] for i in keep]
    return np.array(sel, dtype=np.int64).reshape(-1, 3)


def nms_model(n_batch, n_class, n, max_out, iou, thresh, center=0, const=None):
    """NonMaxSuppression with max_output_boxes_per_class, iou_threshold and
    score_threshold as initializers; boxes and scores inputs, or initializers
    too when CONST = (boxes, scores)."""
    inits = [numpy_helper.from_array(np.array([max_out], np.int64), "max_out"),
             numpy_helper.from_array(np.array([iou], np.float32), "iou")]
    names = ["boxes", "scores", "max_out", "iou"]
    if thresh is not None:
        inits.append(numpy_helper.from_array(np.array([thresh], np.float32), "thresh"))
        names.append("thresh")
    ins = [("boxes", TensorProto.FLOAT, [n_batch, n, 4]),
           ("scores", TensorProto.FLOAT, [n_batch, n_class, n])]
    if const is not None:
        inits += [numpy_helper.from_array(const[0], "boxes"),
                  numpy_helper.from_array(const[1], "scores")]
        ins = []
    node = helper.make_node("NonMaxSuppression", names, ["selected"], center_point_box=center)
    g = helper.make_graph([node], "nms", [vi(*i) for i in ins],
                          [vi("selected", TensorProto.INT64, [None, 3])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)],
                          producer_name="kiln-tests")
    m.ir_version = 8
    return m


class BatchedNms(torch.nn.Module):
    """torchvision.ops.batched_nms as the detection networks export it
    (boxes offset per class, one NonMaxSuppression)."""

    def forward(self, boxes, scores, idxs):
        return torchvision.ops.batched_nms(boxes, scores, idxs, 0.5)


def nms_cases():
    # torchvision.ops.nms on one class: what the exports' NMS computes
    n = 60
    boxes = cluster_boxes(n)
    scores = distinct_scores((1, 1, n))
    big = 1 << 30
    write_case("nms_torchvision", nms_model(1, 1, n, big, 0.5, None),
               [boxes[None], scores], [nms_ref(boxes[None], scores, 0.5)])
    # batched_nms exported by torch.onnx (If on an empty input, the offsets)
    idxs = RNG.integers(0, 4, n).astype(np.int64)
    s1 = scores[0, 0]
    keep = torchvision.ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(s1),
                                       torch.from_numpy(idxs), 0.5).numpy()
    m = export(BatchedNms(), (torch.from_numpy(boxes), torch.from_numpy(s1),
                              torch.from_numpy(idxs)), ["boxes", "scores", "idxs"], ["keep"])
    write_case("batched_nms_export", m, [boxes, s1, idxs], [keep])
    # several batches and classes, a per-class limit and a score threshold
    # (boxes kept when score > threshold, the ONNX Runtime rule)
    nb, nc, n = 2, 3, 40
    boxes = np.stack([cluster_boxes(n) for _ in range(nb)])
    scores = distinct_scores((nb, nc, n))
    want = nms_ref(boxes, scores, 0.4, max_out=5, thresh=0.3)
    write_case("nms_classes_limit", nms_model(nb, nc, n, 5, 0.4, 0.3), [boxes, scores], [want])
    # the same with every input a constant: computed when the model is converted
    write_case("nms_constant", nms_model(nb, nc, n, 5, 0.4, 0.3, const=(boxes, scores)),
               [], [want])
    # corners given in any order (ONNX: "any diagonal pair"); expected: the
    # same selection as the ordered boxes
    flipped = boxes.copy()
    sw = RNG.random((nb, n)) < 0.5
    flipped[sw] = flipped[sw][:, [2, 3, 0, 1]]
    sw = RNG.random((nb, n)) < 0.3
    flipped[sw] = flipped[sw][:, [0, 3, 2, 1]]
    write_case("nms_flipped_corners", nms_model(nb, nc, n, 5, 0.4, 0.3), [flipped, scores],
               [want])
    # center_point_box = 1: [x_center, y_center, width, height]
    cwh = np.concatenate([(boxes[..., :2] + boxes[..., 2:]) / 2, boxes[..., 2:] - boxes[..., :2]],
                         -1).astype(np.float32)
    write_case("nms_center_point_box", nms_model(nb, nc, n, 5, 0.4, 0.3, center=1),
               [cwh, scores], [want])


# ---- ScatterElements, GatherND --------------------------------------------------

def scatter_cases():
    # Faster R-CNN's pooled-feature scatter: zeros [K, C, 7, 7], indices the
    # rows of one level expanded over C, 7, 7, axis 0
    k, c = 9, 4
    data = np.zeros((k, c, 3, 3), np.float32)
    rows = RNG.permutation(k)[:5]
    idx = np.broadcast_to(rows[:, None, None, None], (5, c, 3, 3)).astype(np.int64).copy()
    upd = RNG.standard_normal((5, c, 3, 3)).astype(np.float32)
    want = torch.from_numpy(data).scatter(0, torch.from_numpy(idx), torch.from_numpy(upd)).numpy()
    m = one_node("ScatterElements", [("data", TensorProto.FLOAT, list(data.shape)),
                                     ("indices", TensorProto.INT64, list(idx.shape)),
                                     ("updates", TensorProto.FLOAT, list(upd.shape))],
                 [("y", TensorProto.FLOAT, list(data.shape))], {"axis": 0}, 11)
    write_case("scatter_elements_rows", m, [data, idx, upd], [want])
    # axis -1 with negative indices, int32 indices (ORT's result)
    data = RNG.standard_normal((3, 4, 6)).astype(np.float32)
    # two distinct positions per row (no repeated writes), half given negative
    idx = np.stack([[RNG.permutation(6)[:2] for _ in range(4)] for _ in range(3)])
    idx = np.where(RNG.random(idx.shape) < 0.5, idx - 6, idx).astype(np.int32)
    upd = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    m = one_node("ScatterElements", [("data", TensorProto.FLOAT, [3, 4, 6]),
                                     ("indices", TensorProto.INT32, [3, 4, 2]),
                                     ("updates", TensorProto.FLOAT, [3, 4, 2])],
                 [("y", TensorProto.FLOAT, [3, 4, 6])], {"axis": -1}, 11)
    want = torch.from_numpy(data).scatter(-1, torch.from_numpy(idx.astype(np.int64) % 6),
                                          torch.from_numpy(upd)).numpy()
    write_case("scatter_elements_negative", m, [data, idx, upd], [want])
    # opset 16 reductions with repeated indices (torch scatter_reduce)
    data = RNG.standard_normal((5, 3)).astype(np.float32)
    idx = RNG.integers(0, 5, (7, 3)).astype(np.int64)
    upd = RNG.standard_normal((7, 3)).astype(np.float32)
    for red, tred in (("add", "sum"), ("mul", "prod")):
        m = one_node("ScatterElements", [("data", TensorProto.FLOAT, [5, 3]),
                                         ("indices", TensorProto.INT64, [7, 3]),
                                         ("updates", TensorProto.FLOAT, [7, 3])],
                     [("y", TensorProto.FLOAT, [5, 3])], {"axis": 0, "reduction": red}, 16)
        want = torch.from_numpy(data).scatter_reduce(0, torch.from_numpy(idx),
                                                     torch.from_numpy(upd), tred).numpy()
        write_case(f"scatter_elements_{red}", m, [data, idx, upd], [want])


def gather_nd_cases():
    # SSD's per-class selection: data [N, 4], indices NonZero's transposed [K, 1]
    data = RNG.standard_normal((30, 4)).astype(np.float32)
    sel = np.sort(RNG.permutation(30)[:11])[:, None].astype(np.int64)
    m = one_node("GatherND", [("data", TensorProto.FLOAT, [30, 4]),
                              ("indices", TensorProto.INT64, [11, 1])],
                 [("y", TensorProto.FLOAT, [11, 4])], opset=13)
    write_case("gather_nd_rows", m, [data, sel], [data[sel[:, 0]]])
    # full indices with negatives, and a slice of a 3-D tensor
    data = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    idx = np.stack([RNG.integers(-4, 4, (2, 3)), RNG.integers(-5, 5, (2, 3))], -1).astype(np.int64)
    want = data[idx[..., 0], idx[..., 1]]
    m = one_node("GatherND", [("data", TensorProto.FLOAT, [4, 5, 3]),
                              ("indices", TensorProto.INT64, [2, 3, 2])],
                 [("y", TensorProto.FLOAT, [2, 3, 3])], opset=13)
    write_case("gather_nd_negative", m, [data, idx], [want])
    # batch_dims 1 (opset 12+)
    data = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    idx = np.stack([RNG.integers(0, 4, (3, 2)), RNG.integers(0, 5, (3, 2))], -1).astype(np.int64)
    want = np.stack([data[b][idx[b, :, 0], idx[b, :, 1]] for b in range(3)])
    m = one_node("GatherND", [("data", TensorProto.FLOAT, [3, 4, 5]),
                              ("indices", TensorProto.INT64, [3, 2, 2])],
                 [("y", TensorProto.FLOAT, [3, 2])], {"batch_dims": 1}, 13)
    write_case("gather_nd_batch_dims", m, [data, idx], [want])


# ---- Resize -------------------------------------------------------------------

def resize_model(in_shape, sizes, mode, ctm, nearest_mode="floor", sizes_input=False):
    inits = [numpy_helper.from_array(np.array([], np.float32), "roi"),
             numpy_helper.from_array(np.array([], np.float32), "scales")]
    ins = [("X", TensorProto.FLOAT, list(in_shape))]
    if sizes_input:
        ins.append(("sizes", TensorProto.INT64, [len(sizes)]))
    else:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    node = helper.make_node("Resize", ["X", "roi", "scales", "sizes"], ["Y"], mode=mode,
                            coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    g = helper.make_graph([node], "resize", [vi(*i) for i in ins],
                          [vi("Y", TensorProto.FLOAT, [None] * len(sizes) if sizes_input
                              else list(sizes))], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="kiln-tests")
    m.ir_version = 8
    return m


def resize_cases():
    # the FPN's top-down upsampling: nearest, asymmetric, floor = torch's
    # F.interpolate(mode="nearest") to a given size (integer and odd ratios)
    for name, shp, out in (("resize_nearest_2x", (1, 3, 5, 6), (10, 12)),
                           ("resize_nearest_odd", (1, 2, 7, 5), (20, 13)),
                           ("resize_nearest_down", (1, 2, 13, 11), (5, 7))):
        x = RNG.standard_normal(shp).astype(np.float32)
        want = torch.nn.functional.interpolate(torch.from_numpy(x), size=out,
                                               mode="nearest").numpy()
        write_case(name, resize_model(shp, list(shp[:2]) + list(out), "nearest", "asymmetric"),
                   [x], [want])
    # the same with sizes as run-time data
    shp, out = (1, 3, 5, 6), (1, 3, 10, 12)
    x = RNG.standard_normal(shp).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=out[2:], mode="nearest")
    write_case("resize_nearest_sizes_input",
               resize_model(shp, out, "nearest", "asymmetric", sizes_input=True),
               [x, np.array(out, np.int64)], [want.numpy()])
    # GeneralizedRCNNTransform's image resize: bilinear, align_corners=False
    # (linear, half_pixel), up and down, non-square
    for name, shp, out in (("resize_linear_up", (1, 3, 17, 23), (30, 41)),
                           ("resize_linear_down", (1, 3, 40, 33), (21, 16))):
        x = RNG.uniform(0, 1, shp).astype(np.float32)
        want = torch.nn.functional.interpolate(torch.from_numpy(x), size=out, mode="bilinear",
                                               align_corners=False).numpy()
        write_case(name, resize_model(shp, list(shp[:2]) + list(out), "linear", "half_pixel"),
                   [x], [want])
    # dims that are not resized are copied in every mode (ONNX Runtime's
    # result; the formula (x + 0.5) / 1 with ceil would shift the channels)
    for nm in ("ceil", "round_prefer_ceil"):
        shp, out = (1, 3, 4, 5), (1, 3, 7, 5)
        x = RNG.standard_normal(shp).astype(np.float32)
        m = resize_model(shp, list(out), "nearest", "tf_half_pixel_for_nn", nearest_mode=nm)
        path = os.path.join(HERE, "tmp.onnx")
        onnx.save_model(m, path)
        want = ort_run(path, [x])[0]
        os.remove(path)
        write_case(f"resize_nearest_tf_half_pixel_for_nn_{nm}", m, [x], [want])


def main():
    torch.manual_seed(0)
    for d in os.listdir(HERE):
        if os.path.isdir(os.path.join(HERE, d)):
            shutil.rmtree(os.path.join(HERE, d))
    roialign_case("roi_align_tv_s2", 13, False, 2, 0.25)
    roialign_case("roi_align_tv_s2_stride32", 13, False, 2, 1 / 32, shape=(1, 3, 10, 10), k=8)
    roialign_case("roi_align_tv_adaptive", 13, False, 0, 0.5, out_hw=(4, 3))
    roialign_case("roi_align_tv_opset16_output_half_pixel", 16, False, 2, 0.25)
    roialign_case("roi_align_tv_opset16_half_pixel", 16, True, 2, 0.25)
    roialign_case("roi_align_tv_opset16_aligned_adaptive", 16, True, 0, 0.125, out_hw=(5, 6))
    multiscale_case()
    nms_cases()
    scatter_cases()
    gather_nd_cases()
    resize_cases()


if __name__ == "__main__":
    main()
