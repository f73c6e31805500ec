"""bench/peer_common.py: what every peer runner (bench/peer_*.py) shares.

A runner is one process that times one engine on one ONNX export:

    peer_X.py MODEL_DIR --threads N [--repeat R] [--min-repeat-ms M] [...]

MODEL_DIR is an export in the ONNX conformance layout (model.onnx,
test_data_set_0/input_*.pb, output_*.pb; scripts/export_torchvision.py). The
runner loads the model, runs it once on the export's inputs and compares every
output with the export's (kiln check's rule: |got - want| <= atol + rtol |want|,
NaN matching NaN), warms up, times with kiln bench's rule (time_evaluator, below)
and prints one JSON line on stdout: engine, version, median/mean/min/max and
every result in seconds per run, number, repeat, and the check. With
--detection the outputs are a detection network's (boxes, scores, labels) and
are compared detection by detection in score order instead
(scripts/compare_detection.py: tied detections in either order, labels exact,
scores at rtol/atol, boxes within 1e-3 of the image size). Diagnostics go
to stderr. Exit 0 when it timed the model, even if the check failed (the caller
decides what a mismatch means); 2 on an error.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import time

import numpy as np

GOLDEN_RATIO = 1.618


def parse_args(description, extra=None):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("model_dir", help="export directory: model.onnx, test_data_set_0/")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--min-repeat-ms", type=float, default=200.0)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--detection", action="store_true",
                    help="the outputs are detections (boxes, scores, labels): compare them "
                    "in score order (scripts/compare_detection.py)")
    if extra:
        extra(ap)
    return ap.parse_args()


def _read_tensor(path):
    from onnx import TensorProto, numpy_helper
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def test_data(model_dir):
    """([(name, array)] inputs, [(name, array)] outputs) of test_data_set_0,
    in file order (input_0, input_1, ...)."""
    d = os.path.join(model_dir, "test_data_set_0")

    def files(kind):
        fs = glob.glob(os.path.join(d, f"{kind}_*.pb"))
        return sorted(fs, key=lambda p: int(os.path.basename(p)[len(kind) + 1:-3]))

    ins, outs = [_read_tensor(p) for p in files("input")], [_read_tensor(p) for p in files("output")]
    if not ins or not outs:
        raise SystemExit(f"{d}: no input_*.pb or output_*.pb")
    return ins, outs


def feeds_by_name(graph_inputs, ins):
    """Matches the files to the graph's inputs as kiln check does: by
    TensorProto name when every file has a distinct one naming an input,
    else in order."""
    names = [n for n, _ in ins]
    if all(names) and len(set(names)) == len(names) and set(names) <= set(graph_inputs):
        return {n: a for n, a in ins}
    if len(ins) != len(graph_inputs):
        raise SystemExit(f"the model has {len(graph_inputs)} inputs, the export {len(ins)} files")
    return {g: a for g, (_, a) in zip(graph_inputs, ins)}


def check(got, want, rtol, atol):
    """kiln check's comparison of outputs (lists of arrays, in graph order)."""
    res = {"ok": True, "outputs": len(want), "bad": 0, "max_abs": 0.0, "max_rel": 0.0,
           "message": ""}
    if len(got) != len(want):
        res.update(ok=False, message=f"{len(got)} outputs, expected {len(want)}")
        return res
    for i, (g, (name, w)) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            res.update(ok=False, message=f"output {i} '{name}': shape {list(g.shape)}, "
                       f"expected {list(w.shape)}")
            return res
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        both_nan = np.isnan(g64) & np.isnan(w64)
        diff = np.abs(g64 - w64)
        ok = (g64 == w64) | both_nan | (diff <= atol + rtol * np.abs(w64))
        diff = np.where(both_nan, 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / np.abs(w64))
        res["max_abs"] = max(res["max_abs"], float(diff.max()) if diff.size else 0.0)
        res["max_rel"] = max(res["max_rel"], float(rel.max()) if rel.size else 0.0)
        bad = int((~ok).sum())
        if bad:
            res["bad"] += bad
            if res["ok"]:
                j = int(np.flatnonzero(~ok.reshape(-1))[0])
                res["message"] = (f"output {i} '{name}': {bad} of {w.size} elements outside "
                                  f"tolerance; first at {j}: got {g64.reshape(-1)[j]:.9g}, "
                                  f"expected {w64.reshape(-1)[j]:.9g}")
            res["ok"] = False
    for k in ("max_abs", "max_rel"):
        if math.isinf(res[k]):
            res[k] = "inf"  # JSON has no infinity
    return res


def check_detections(got, want, rtol, atol, image_size):
    """scripts/compare_detection.py's comparison of (boxes, scores, labels),
    as a check dict like check()'s (max_abs: the largest box error in
    pixels, max_rel: the largest score error)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "scripts"))
    import compare_detection
    res = {"ok": False, "outputs": len(want), "bad": 0, "max_abs": 0.0, "max_rel": 0.0,
           "message": ""}
    if len(got) != 3 or len(want) != 3:
        res["message"] = f"{len(got)} outputs, expected boxes, scores, labels"
        return res
    r = compare_detection.compare([np.asarray(g) for g in got], [w for _, w in want],
                                  compare_detection.BOX_ATOL_OF_SIZE * image_size, rtol, atol)
    res.update(ok=r["ok"], message=r["message"], max_abs=r["max_box_err"],
               max_rel=r["max_score_err"], bad=0 if r["ok"] else 1)
    return res


def check_outputs(args, got, ins, want):
    """The check the runner's arguments ask for: check_detections with
    --detection (the image size from the first input's last two extents),
    check otherwise."""
    if args.detection:
        size = max(np.shape(ins[0][1])[-2:]) if ins and np.ndim(ins[0][1]) >= 2 else 0
        return check_detections(got, want, args.rtol, args.atol, float(size))
    return check(got, want, args.rtol, args.atol)


def time_evaluator(fn, repeat, min_repeat_ms):
    """kiln bench's rule (src/runtime/bench.c, TVM's time_evaluator): one
    warm-up run; `repeat` measurements of `number` back-to-back runs; while a
    measurement takes less than min_repeat_ms, number grows to
    max(min_repeat_ms / time per run + 1, 1.618 number) and the measurement
    is redone (the grown number is kept). Seconds per run of each measurement."""
    fn()
    number, results = 1, []
    for _ in range(repeat):
        ms = 0.0
        while True:
            if ms > 0:
                number = int(max(min_repeat_ms / (ms / number) + 1, number * GOLDEN_RATIO))
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            ms = (time.perf_counter() - t0) * 1e3
            if ms >= min_repeat_ms:
                break
        results.append(ms / 1e3 / number)
    return results, number


def report(engine, version, results, number, chk, **extra):
    out = {"engine": engine, "version": version, "median": statistics.median(results),
           "mean": statistics.fmean(results), "min": min(results), "max": max(results),
           "results": results, "number": number, "repeat": len(results), "check": chk}
    out.update(extra)
    print(json.dumps(out), flush=True)


def fail(msg):
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)
