#!/usr/bin/python3
"""A detection sweep: torchvision detection networks no test names, checked and timed.

Exports five torchvision 0.14 detection networks (retinanet_resnet50_fpn,
fcos_resnet50_fpn, maskrcnn_resnet50_fpn, keypointrcnn_resnet50_fpn at
320x320, ssd300_vgg16 at 300x300) with scripts/export_detection.py's
machinery: seeded random weights (weights=None, weights_backbone=None),
batch-norm statistics calibrated on a noise image and a scene, the ranked
layers (classification logits, RPN objectness) and box regressors spread to
a set output deviation, the background logit of 91-class softmax classifiers
raised (SSD by 8, Mask R-CNN by 6; sigmoid classifiers keep their prior
bias), score thresholds 0.01 (R-CNNs, SSD) and 0.05 (RetinaNet, FCOS) and
20 detections per image. The graph is forward(images [3, H, W]) -> the
torchvision output dict's tensors in sorted-key order (boxes, labels, scores;
Mask R-CNN adds masks, Keypoint R-CNN keypoints and keypoints_scores), named
after the keys; opset 13. Layout (default OUTDIR ~/.cache/kiln/fixtures/
detection-sweep; exports of this script's version are skipped):

    OUTDIR/NAME/model.onnx, OUTDIR/NAME/export.version
    OUTDIR/NAME/test_data_set_0/input_0.pb     images: a scene (export_detection.scene_image)
    OUTDIR/NAME/test_data_set_0/output_K.pb    PyTorch's outputs, in the graph's order

A reference with fewer than 5 detections (or tied scores, equal boxes of one
label) is noted, not refused. Then per network:

  check  `kiln check model.onnx --inputs ... --outputs ...` (every output
         elementwise, rtol 1e-3, atol 1e-4); when that mismatches, kiln's
         outputs from `kiln run` are compared again, (boxes, scores, labels)
         detection by detection (scripts/compare_detection.py: near-tied
         detections in either order) and masks / keypoints elementwise; the
         row says which check passed. Masks and keypoints are fragile: the
         graph rounds box extents to integers (paste size, heatmap size), so a
         box coordinate within ~0.005 px of an integer moves a whole mask or
         a detection's keypoints on any engine that is not PyTorch
  time   --rounds interleaved rounds; per round, per network, each engine in a
         process of its own, in reverse order every other round: kiln
         (`kiln bench model.onnx --threads T --json --input ...`,
         KILN_NUM_THREADS=T; bench/compare.py's measure), ONNX Runtime and
         OpenVINO f32 (bench/peer_ort.py, bench/peer_ov.py under bench/.venv,
         run through this script's --peer mode, which replaces peer_common's
         output check by the one above, since peer_common's --detection check
         takes exactly (boxes, scores, labels)). A peer that errors or
         mismatches is reported, not fatal; the best peer of a round is the
         fastest whose output, or at least whose (boxes, scores, labels),
         matched.

It prints one JSON line per network after its check, and at the end a Markdown
table (median ms per engine, kiln / best peer: the median of the rounds'
ratios), also written to OUTDIR/sweep-detection.md and, with every
measurement, OUTDIR/sweep-detection.json.

Usage: /usr/bin/python3 scripts/sweep_detection.py [--out DIR] [--only A,B]
       [--kiln build/kiln] [--threads 2] [--rounds 3] [--repeat 10]
       [--min-repeat-ms 200] [--skip-bench] [--export-only]
"""
import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)
import compare as bench_compare  # noqa: E402 (bench/compare.py: measure, last_json, run)
import compare_detection as cd  # noqa: E402
import peer_common as pc  # noqa: E402

# Bump when the exported files change, so cached exports are redone.
EXPORT_VERSION = "sweep-1"
RTOL, ATOL = 1e-3, 1e-4
RCNN = dict(min_size=320, max_size=320, box_score_thresh=0.01, box_detections_per_img=20)
ONE_STAGE = dict(min_size=320, max_size=320, score_thresh=0.05, detections_per_img=20)
# name -> (constructor kwargs, image size, score threshold, output keys sorted)
NETWORKS = {
    "retinanet_resnet50_fpn": (ONE_STAGE, 320, 0.05, ["boxes", "labels", "scores"]),
    "fcos_resnet50_fpn": (ONE_STAGE, 320, 0.05, ["boxes", "labels", "scores"]),
    "maskrcnn_resnet50_fpn": (RCNN, 320, 0.01, ["boxes", "labels", "masks", "scores"]),
    "keypointrcnn_resnet50_fpn": (RCNN, 320, 0.01, ["boxes", "keypoints", "keypoints_scores",
                                                    "labels", "scores"]),
    "ssd300_vgg16": (dict(score_thresh=0.01, detections_per_img=20), 300, 0.01,
                     ["boxes", "labels", "scores"]),
}
ENGINES = ["kiln", "ort", "ov"]
TITLES = {"kiln": "kiln", "ort": "ORT", "ov": "OV f32"}


def build(name):
    """NAME with seeded random weights, calibrated and spread (the module's
    docstring), in eval mode; and the scene image it is exported with."""
    import torch
    import torchvision
    import export_detection as ed
    kwargs, size, _, _ = NETWORKS[name]
    torch.manual_seed(ed.SEED)
    net = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None,
                                                      **kwargs)
    lo, dl = ed.LOGIT_STD, ed.DELTA_STD
    keep_bias, background = [], []  # sigmoid classifiers keep their prior; softmax: raise bg
    if name in ("retinanet_resnet50_fpn", "fcos_resnet50_fpn"):
        layers = [(net.head.classification_head.cls_logits, lo)]
        keep_bias = [net.head.classification_head.cls_logits]
    elif name == "ssd300_vgg16":
        layers = [(m, lo) for m in net.head.classification_head.module_list]
        layers += [(m, dl) for m in net.head.regression_head.module_list]
        background = [(m, ed.BACKGROUND_LOGIT) for m in net.head.classification_head.module_list]
    else:
        pred = net.roi_heads.box_predictor
        layers = [(net.rpn.head.cls_logits, lo), (net.rpn.head.bbox_pred, dl),
                  (pred.cls_score, lo), (pred.bbox_pred, dl)]
        if pred.cls_score.out_features == ed.NUM_CLASSES:  # not Keypoint R-CNN's 2 classes
            # +8 (export_detection's) leaves no score over 0.01 at ResNet-50's logit spread
            background = [(pred.cls_score, 6.0)]
    ed.SIZE = size  # calibrate's and scene_image's image size
    images = ed.calibrate(net, torch.Generator().manual_seed(ed.SEED + 1))
    biases = [m.bias.detach().clone() for m in keep_bias]
    ed.spread(net, layers, images)
    with torch.no_grad():
        for m, b in zip(keep_bias, biases):
            m.bias.copy_(b)
        for m, by in background:
            m.bias.view(-1, ed.NUM_CLASSES)[:, 0] += by
    return net.eval(), ed.scene_image(torch.Generator().manual_seed(ed.SEED + 2))


def export_one(name, outdir):
    """Exports NAME to OUTDIR/NAME unless cached there."""
    import onnx
    import torch
    keys = NETWORKS[name][3]
    dst = os.path.join(outdir, name)
    data = os.path.join(dst, "test_data_set_0")
    model_path, version_path = os.path.join(dst, "model.onnx"), os.path.join(dst, "export.version")
    cached = open(version_path).read().strip() if os.path.exists(version_path) else ""
    if cached == EXPORT_VERSION and all(os.path.exists(p) for p in [model_path] + [
            os.path.join(data, f"output_{k}.pb") for k in range(len(keys))]):
        print(f"{name}: cached in {dst}", flush=True)
        return
    os.makedirs(data, exist_ok=True)
    if os.path.exists(version_path):
        os.remove(version_path)
    t0 = time.time()
    net, image = build(name)

    class Sorted(torch.nn.Module):  # one image in, the dict's tensors in sorted-key order out
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            d = self.net([x])[0]
            self.keys = sorted(d)
            return tuple(d[k] for k in self.keys)

    wrapped = Sorted(net).eval()
    with torch.no_grad():
        ys = [y.numpy() for y in wrapped(image)]
    if wrapped.keys != keys:
        raise SystemExit(f"{name}: outputs {wrapped.keys}, expected {keys}")
    tmp = model_path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(wrapped, (image,), tmp, opset_version=13, input_names=["images"],
                          output_names=keys, do_constant_folding=True)
    onnx.checker.check_model(tmp)
    import export_detection as ed
    ed.write_data_set(data, image, keys, ys)
    os.replace(tmp, model_path)
    with open(version_path, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    print(f"{name}: exported to {dst} in {time.time() - t0:.0f}s (outputs "
          f"{', '.join(f'{k} {list(y.shape)}' for k, y in zip(keys, ys))})", flush=True)


def reference(d):
    """(trivial?, summary) of export D's reference: at least 5 detections,
    finite, no tied scores, no equal boxes of one label (export_detection's
    check_outputs less its label count: Keypoint R-CNN has one class)."""
    ref = dict(pc._read_tensor(f) for f in files(d, "output"))
    b, s, lab = ref["boxes"], ref["scores"], ref["labels"]
    why = next((w for bad, w in [
        (len(s) < 5, "fewer than 5 detections"),
        (not (np.isfinite(b).all() and np.isfinite(s).all()), "non-finite values"),
        (len(np.unique(s)) < len(s), "tied scores"),
        (len(np.unique(np.c_[b, lab.astype(b.dtype)], axis=0)) < len(s),
         "equal boxes of one label")] if bad), "")
    text = f"{len(s)} detections"
    if len(s):
        text += f", scores {s.max():.4f}..{s.min():.4f}, {len(np.unique(lab))} labels"
    return bool(why), text + (f" (trivial reference: {why})" if why else "")


def check_all(got, want, size, thresh=None):
    """GOT (arrays, graph order) against WANT ([(name, array)]): every output
    elementwise; if that fails, (boxes, scores, labels) by compare_detection
    and the other outputs elementwise. A check dict like peer_common's, with
    mode: which comparison decided."""
    res = pc.check(got, want, RTOL, ATOL)
    res["mode"] = "elementwise"
    names = [n for n, _ in want]
    if res["ok"] or len(got) != len(want) or not {"boxes", "scores", "labels"} <= set(names):
        return res
    det = [names.index(k) for k in ("boxes", "scores", "labels")]
    r = cd.compare([np.asarray(got[i]) for i in det], [want[i][1] for i in det],
                   cd.BOX_ATOL_OF_SIZE * size, RTOL, ATOL, thresh)
    rest = [pc.check([got[i]], [want[i]], RTOL, ATOL) | {"index": i}
            for i in range(len(want)) if i not in det]  # masks, keypoints
    bad = "; ".join(e["message"].replace("output 0 ", f"output {e['index']} ", 1)
                    for e in rest if not e["ok"])
    msg = f"elementwise: {res['message']}; detections: {r['message']}"
    if rest:
        msg += f"; elementwise: {', '.join(names[e['index']] for e in rest)} {bad or 'ok'}"
    res.update(ok=r["ok"] and not bad, mode="detections", detections_ok=r["ok"], message=msg,
               max_box_err=r["max_box_err"], max_score_err=r["max_score_err"], rest_message=bad)
    return res


def peer_main(argv):
    """--peer ENGINE DIR ARGS...: bench/peer_ENGINE.py with check_all as its check."""
    engine, rest = argv[0], argv[1:]
    thresh = NETWORKS.get(os.path.basename(os.path.normpath(rest[0])), (0, 0, None))[2]

    def check_outputs(args, got, ins, want):
        size = float(max(np.shape(ins[0][1])[-2:]))
        return check_all(list(got), want, size, thresh)

    pc.check_outputs = check_outputs  # the runner imports this very module
    sys.argv = [f"peer_{engine}.py"] + rest
    runpy.run_path(os.path.join(BENCH, f"peer_{engine}.py"), run_name="__main__")
    return 0


def files(d, kind):
    data = os.path.join(d, "test_data_set_0")
    fs = [f for f in os.listdir(data) if f.startswith(kind + "_")]
    return [os.path.join(data, f) for f in sorted(fs, key=lambda f: int(f[len(kind) + 1:-3]))]


def kiln_check(a, name, d):
    """kiln check; on a mismatch, kiln run + check_all. The check dict."""
    env = bench_compare.kiln_env(a.threads)
    ins, outs = files(d, "input"), files(d, "output")
    model = os.path.join(d, "model.onnx")
    t0 = time.time()
    p = subprocess.run([a.kiln, "check", model, "--threads", str(a.threads), "--rtol", str(RTOL),
                        "--atol", str(ATOL), "--inputs", *ins, "--outputs", *outs],
                       capture_output=True, text=True, env=env, timeout=3600)
    lines = (p.stdout + p.stderr).strip().splitlines()
    res = {"ok": p.returncode == 0, "mode": "elementwise", "seconds": round(time.time() - t0, 1),
           "message": " | ".join(ln.strip() for ln in lines if "max abs" in ln)[:400]}
    res.update({"fallback": ln.strip() for ln in lines[::-1] if "reference kernel" in ln})
    if p.returncode == 2:
        res.update(error=True, message=f"kiln check error: {lines[-1] if lines else 2}")
    if p.returncode != 1:
        return res
    with tempfile.TemporaryDirectory() as tmp:
        got = [os.path.join(tmp, f"got_{k}.pb") for k in range(len(outs))]
        cmd = [a.kiln, "run", model, "--threads", str(a.threads)]
        cmd += [x for f in ins for x in ("--input", f)] + [x for f in got for x in ("--output", f)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if p.returncode != 0:
            tail = (p.stdout + p.stderr).strip().splitlines()
            res["message"] += f"; kiln run failed: {tail[-1] if tail else p.returncode}"
            return res
        gs = [pc._read_tensor(f)[1] for f in got]
    _, size, thresh, _ = NETWORKS[name]
    chk = check_all(gs, [pc._read_tensor(f) for f in outs], size, thresh)
    return dict(chk, **{k: res[k] for k in ("seconds", "fallback") if k in res})


def measure(a, engine, name, d):
    """One measurement in a process of its own: the runner's JSON."""
    if engine == "kiln":
        return bench_compare.measure("kiln", a, d, name)
    cmd = [a.python, os.path.abspath(__file__), "--peer", engine, d, "--threads", str(a.threads),
           "--repeat", str(a.repeat), "--min-repeat-ms", str(a.min_repeat_ms), "--detection"]
    return bench_compare.last_json(bench_compare.run(cmd))


def bench(a, rows, dirs):
    names = [n for n in rows if rows[n].get("check", {}).get("ok") is not None
             and not rows[n]["check"].get("error")]
    for r in range(a.rounds):
        order = ENGINES if r % 2 == 0 else ENGINES[::-1]
        for n in names:
            row = rows[n]
            for e in order:
                t = row.setdefault("times", {}).setdefault(e, [])
                if e in row.setdefault("errors", {}):
                    t.append(None)  # a runner that failed once fails again
                    continue
                try:
                    j = measure(a, e, n, dirs[n])
                except (bench_compare.Failed, OSError, ValueError, KeyError) as ex:
                    row["errors"][e] = str(ex)[-400:]
                    t.append(None)
                    continue
                t.append(j["median"])
                if e != "kiln" and (e not in row.setdefault("peer_checks", {})
                                    or not j["check"]["ok"]):
                    row["peer_checks"][e] = j["check"]
            print(f"round {r + 1}/{a.rounds} {n}: " + ", ".join(
                f"{e} {row['times'][e][-1] * 1e3:.1f} ms" if row["times"][e][-1] else f"{e} -"
                for e in ENGINES), flush=True)
    for n in names:
        row = rows[n]
        # a peer counts when its output matched, or its detections did (masks and
        # keypoints flip with a box coordinate at an integer: see the report's notes)
        ok = {e: bool(c and (c["ok"] or c.get("detections_ok")))
              for e, c in row.get("peer_checks", {}).items()}
        ts = {e: [t for t in row["times"][e] if t] for e in ENGINES}
        row["ms"] = {e: round(statistics.median(ts[e]) * 1e3, 3) if ts[e] else None
                     for e in ENGINES}
        ratios = [k / min(best) for k, best in (
            (row["times"]["kiln"][r], [row["times"][e][r] for e in ok if ok[e]
                                       and row["times"][e][r]]) for r in range(a.rounds))
                  if k and best]
        row["ratio"] = round(statistics.median(ratios), 3) if ratios else None
        row["best_peer"] = min((e for e in ok if ok[e] and row["ms"][e]),
                               key=lambda e: row["ms"][e], default=None)


def check_cell(row):
    if row.get("export") != "ok":
        return "export " + row.get("export", "?")
    c = row.get("check") or {"ok": False, "error": True, "message": "-"}
    if c["ok"]:
        return "pass (" + ("elementwise" if c["mode"] == "elementwise" else "detections in "
                           "score order; elementwise failed") + ")"
    return (c["message"][:120] if c.get("error") else f"FAIL: detections match; "
            f"{c.get('rest_message', '')[:160]}" if c.get("detections_ok") else
            "FAIL: " + c["message"][-200:])


def table(rows, timed):
    head = ["network", "kiln check"]
    if timed:
        head += [f"{TITLES[e]} ms" for e in ENGINES] + ["kiln / best peer", "best peer"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, r in rows.items():
        cells = [n, check_cell(r).replace("|", "/")]
        if timed:
            for e in ENGINES:
                ms = r.get("ms", {}).get(e)
                c = f"{ms:.1f}" if ms else ("error" if e in r.get("errors", {}) else "-")
                pchk = r.get("peer_checks", {}).get(e)
                if pchk and not pchk["ok"]:
                    c += " (detections ok)" if pchk.get("detections_ok") else " (mismatch)"
                cells.append(c)
            cells += [f"{r['ratio']:.3f}" if r.get("ratio") else "-",
                      TITLES.get(r.get("best_peer"), "-")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--peer":
        return peer_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/kiln/fixtures/detection-sweep"))
    ap.add_argument("--only", default="", help="these networks only (NAME[,NAME...])")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--python", default=os.path.join(BENCH, ".venv", "bin", "python"),
                    help="python of the peers (default bench/.venv/bin/python)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10, help="measurements per engine and round")
    ap.add_argument("--min-repeat-ms", type=float, default=200.0)
    ap.add_argument("--skip-bench", action="store_true", help="export and check only")
    ap.add_argument("--export-only", action="store_true")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or list(NETWORKS)
    unknown = [n for n in names if n not in NETWORKS]
    if unknown or a.rounds < 1 or a.threads < 1:
        ap.error(f"unknown network(s) {', '.join(unknown)} (known: {', '.join(NETWORKS)}), "
                 "or rounds/threads < 1")
    if not a.export_only and not os.access(a.kiln, os.X_OK):
        ap.error(f"{a.kiln} is not an executable (build kiln, or pass --kiln)")
    import torch
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    rows, dirs = {}, {n: os.path.join(a.out, n) for n in names}
    for n in names:
        row = rows[n] = {"net": n}
        try:
            export_one(n, a.out)
            row["export"] = "ok"
            row["trivial"], row["reference"] = reference(dirs[n])
            print(f"{n}: {row['reference']}", flush=True)
        except (Exception, SystemExit) as e:  # noqa: BLE001 (torch raises anything)
            row["export"] = "failed: " + (str(e).splitlines()[0][:200] if str(e)
                                          else type(e).__name__)
            print(f"{n}: export {row['export']}", flush=True)
    if a.export_only:
        return 0 if all(r["export"] == "ok" for r in rows.values()) else 1
    for n, row in rows.items():
        if row["export"] == "ok":
            try:
                row["check"] = kiln_check(a, n, dirs[n])
            except (OSError, subprocess.SubprocessError) as e:  # no kiln, a timeout
                row["check"] = {"ok": False, "error": True, "mode": "elementwise",
                                "message": f"kiln check error: {e}"}
        print(json.dumps(row), flush=True)
    if not a.skip_bench:
        bench(a, rows, dirs)
    md = table(rows, not a.skip_bench)
    notes = [f"- {n}: {r['reference']}" for n, r in rows.items() if r.get("trivial")]
    notes += [f"- {n} {e}: {m}" for n, r in rows.items() for e, m in r.get("errors", {}).items()]
    notes += [f"- {n} kiln: {r['check']['fallback']}" for n, r in rows.items()
              if r.get("check", {}).get("fallback")]
    with open(os.path.join(a.out, "sweep-detection.md"), "w") as f:
        f.write("# Detection sweep (scripts/sweep_detection.py)\n\n"
                f"`{' '.join(sys.argv[1:]) or '(defaults)'}`; {bench_compare.cpu_model()}, "
                f"{a.threads} threads, {a.rounds} rounds; kiln {bench_compare.git_rev()}; "
                f"{time.strftime('%Y-%m-%d %H:%M')}\n\n{md}\n"
                + ("\n" + "\n".join(notes) + "\n" if notes else ""))
    with open(os.path.join(a.out, "sweep-detection.json"), "w") as f:
        json.dump(list(rows.values()), f, indent=1)
    print(md)
    for line in notes:
        print("note: " + line[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
