#!/usr/bin/python3
"""Compares a detection network's outputs with a reference, detection by detection.

Each side is (boxes [N, 4], scores [N], labels [N]): the detections of one
image, in decreasing score order (scripts/export_detection.py). Elementwise
comparison is wrong for these: two detections whose scores (nearly) tie may
come out in either order, and the last ones kept (detections per image, the
score threshold) may differ when a score sits at the cut. So the reference's
detections are matched, in score order, to the other side's:

  - a pair matches when the labels are equal, the scores are within
    score_atol + score_rtol * |reference score|, and every box coordinate is
    within box_atol (default: 1e-3 of the image's larger side, 0.32 px at
    320x320);
  - the reference's detection i is paired with the unpaired matching
    detection nearest to position i (so tied detections pair up whatever their
    order);
  - a detection left unpaired on either side is tolerated only at the cut:
    when its score is within the score tolerance of the lowest score of the
    other side, or of the score threshold when one is given (it could have
    been dropped or kept by a score a tolerance away). Anything else unpaired
    is a mismatch, and so is a difference in count beyond those.

Usage: /usr/bin/python3 scripts/compare_detection.py --got B S L --want B S L
       [--image-size PX] [--box-atol A] [--score-rtol R] [--score-atol A]
       [--score-thresh T]
       /usr/bin/python3 scripts/compare_detection.py --self-test
(B S L: TensorProto .pb or .npy files of boxes, scores and labels.) Prints one
line (OK or MISMATCH with the first difference); exit 0 on a match, 1 on a
mismatch, 2 on an error.
"""
import argparse
import sys

import numpy as np

SCORE_RTOL, SCORE_ATOL = 1e-3, 1e-4
BOX_ATOL_OF_SIZE = 1e-3


def read_tensor(path):
    if path.endswith(".npy"):
        return np.load(path)
    from onnx import TensorProto, numpy_helper
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _shape_ok(boxes, scores, labels):
    n = scores.shape[0] if scores.ndim == 1 else -1
    return boxes.ndim == 2 and boxes.shape == (n, 4) and labels.shape == (n,)


def compare(got, want, box_atol, score_rtol=SCORE_RTOL, score_atol=SCORE_ATOL,
            score_thresh=None):
    """got, want: (boxes, scores, labels) arrays; score_thresh: the
    network's score threshold, if known. Returns a dict: ok,
    message, matched, max_box_err, max_score_err, tolerated (unpaired
    detections at the cut)."""
    res = {"ok": False, "message": "", "matched": 0, "max_box_err": 0.0,
           "max_score_err": 0.0, "tolerated": 0}
    gb, gs, gl = (np.asarray(a) for a in got)
    wb, ws, wl = (np.asarray(a) for a in want)
    if not _shape_ok(gb, gs, gl) or not _shape_ok(wb, ws, wl):
        res["message"] = (f"bad shapes: got boxes {list(gb.shape)} scores {list(gs.shape)} "
                          f"labels {list(gl.shape)}, expected boxes {list(wb.shape)} "
                          f"scores {list(ws.shape)} labels {list(wl.shape)}")
        return res
    gb, gs, wb, ws = (a.astype(np.float64) for a in (gb, gs, wb, ws))
    if not (np.isfinite(gb).all() and np.isfinite(gs).all()):
        res["message"] = "got non-finite boxes or scores"
        return res

    def stol(s):
        return score_atol + score_rtol * abs(s)

    paired_g = np.full(len(gs), -1)
    pairs = []
    unpaired_w = []
    for i in range(len(ws)):
        cand = [j for j in range(len(gs)) if paired_g[j] < 0 and gl[j] == wl[i]
                and abs(gs[j] - ws[i]) <= stol(ws[i])
                and np.abs(gb[j] - wb[i]).max() <= box_atol]
        if not cand:
            unpaired_w.append(i)
            continue
        j = min(cand, key=lambda j: (abs(j - i), j))
        paired_g[j] = i
        pairs.append((i, j))
    unpaired_g = [j for j in range(len(gs)) if paired_g[j] < 0]
    res["matched"] = len(pairs)
    if pairs:
        wi = np.array([p[0] for p in pairs])
        gj = np.array([p[1] for p in pairs])
        res["max_box_err"] = float(np.abs(gb[gj] - wb[wi]).max())
        res["max_score_err"] = float(np.abs(gs[gj] - ws[wi]).max())

    def describe(side, k, b, s, l):
        return (f"{side} detection {k}: label {int(l[k])} score {s[k]:.6g} "
                f"box [{', '.join(f'{v:.4g}' for v in b[k])}]")

    def nearest(b, s, l, bo, so, lo, k):
        """The closest detection of the other side with the same label, for
        the message."""
        same = [j for j in range(len(so)) if lo[j] == l[k]]
        if not same:
            return f"no detection of label {int(l[k])} on the other side"
        j = min(same, key=lambda j: np.abs(bo[j] - b[k]).max())
        return (f"nearest of that label: detection {j}, score {so[j]:.6g}, box error "
                f"{np.abs(bo[j] - b[k]).max():.4g}")

    def at_thresh(s):
        return score_thresh is not None and abs(s - score_thresh) <= stol(s)

    bad = []
    # unpaired at the cut: within the tolerance of the other side's lowest
    # score or of the threshold
    for i in unpaired_w:
        if len(gs) and abs(ws[i] - gs.min()) <= stol(ws[i]) or at_thresh(ws[i]):
            res["tolerated"] += 1
        else:
            bad.append(f"{describe('expected', i, wb, ws, wl)} is missing "
                       f"({nearest(wb, ws, wl, gb, gs, gl, i)})")
    for j in unpaired_g:
        if len(ws) and abs(gs[j] - ws.min()) <= stol(ws.min()) or at_thresh(gs[j]):
            res["tolerated"] += 1
        else:
            bad.append(f"{describe('got', j, gb, gs, gl)} is extra "
                       f"({nearest(gb, gs, gl, wb, ws, wl, j)})")
    if bad:
        res["message"] = (f"{len(bad)} detections unmatched ({len(ws)} expected, {len(gs)} "
                          f"got); first: {bad[0]}")
        return res
    res["ok"] = True
    res["message"] = (f"{len(pairs)} detections match (got {len(gs)}, expected {len(ws)}"
                      + (f", {res['tolerated']} unpaired at the score cut" if res["tolerated"]
                         else "")
                      + f"); max box error {res['max_box_err']:.3g} px (atol {box_atol:.3g}), "
                      f"max score error {res['max_score_err']:.3g}")
    return res


def self_test():
    """The rules above on synthetic detections; returns the failures."""
    rng = np.random.default_rng(7)
    n = 12
    xy = np.sort(rng.uniform(0, 300, (n, 2, 2)), 1)      # [n, (lo, hi), (x, y)]
    boxes = xy.reshape(n, 4).astype(np.float32)         # x1, y1, x2, y2
    scores = np.sort(rng.uniform(0.2, 0.9, n))[::-1].astype(np.float32)
    labels = rng.integers(1, 91, n).astype(np.int64)
    cases = []  # (name, expect a match, got, want)

    def case(name, expect, b=boxes, s=scores, lab=labels, want=(boxes, scores, labels)):
        cases.append((name, expect, (b, s, lab), want))

    case("identical", True)
    b = boxes.copy()
    b[3, 1] += 0.1
    case("box within tolerance", True, b=b)
    b = boxes.copy()
    b[3, 1] += 1.1
    case("box off by 1.1 px", False, b=b)
    lab = labels.copy()
    lab[5] = labels[5] % 90 + 1
    case("a label differs", False, lab=lab)
    s = scores.copy()
    s[4] *= 1.01
    case("a score off by 1%", False, s=s)
    tied = scores.copy()
    tied[7] = tied[6] - np.float32(1e-6)
    swap = np.arange(n)
    swap[[6, 7]] = [7, 6]
    case("near-tied pair in either order", True, b=boxes[swap], s=tied[swap], lab=labels[swap],
         want=(boxes, tied, labels))
    keep = np.arange(n) != 5
    case("a middle detection missing", False, b=boxes[keep], s=scores[keep], lab=labels[keep])
    cut = scores.copy()
    cut[-1] = cut[-2] - np.float32(1e-5)
    case("the last one, at the cut, missing", True, b=boxes[:-1], s=cut[:-1], lab=labels[:-1],
         want=(boxes, cut, labels))
    case("the last one, not at the cut, missing", False, b=boxes[:-1], s=scores[:-1],
         lab=labels[:-1])
    case("none got, all expected", False, b=boxes[:0], s=scores[:0], lab=labels[:0])
    thr = scores.copy()
    thr[-1] = np.float32(0.05)
    failures = []
    r = compare((boxes[:-1], thr[:-1], labels[:-1]), (boxes, thr, labels), 0.32,
                score_thresh=0.05 - 1e-5)
    if not r["ok"]:
        failures.append(f"the last one, at the threshold, missing: {r['message']}")
    for name, expect, got, want in cases:
        r = compare(got, want, 0.32)
        if r["ok"] != expect:
            failures.append(f"{name}: expected {'a match' if expect else 'a mismatch'}, "
                            f"got {r['message']}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--got", nargs=3, metavar=("BOXES", "SCORES", "LABELS"))
    ap.add_argument("--want", nargs=3, metavar=("BOXES", "SCORES", "LABELS"))
    ap.add_argument("--self-test", action="store_true",
                    help="check these rules on synthetic detections and exit")
    ap.add_argument("--image-size", type=float, default=320.0,
                    help="the image's larger side in pixels (default 320)")
    ap.add_argument("--box-atol", type=float, default=None,
                    help=f"box tolerance in pixels (default {BOX_ATOL_OF_SIZE} x image size)")
    ap.add_argument("--score-rtol", type=float, default=SCORE_RTOL)
    ap.add_argument("--score-atol", type=float, default=SCORE_ATOL)
    ap.add_argument("--score-thresh", type=float, default=None,
                    help="the network's score threshold: a detection at it may be unpaired")
    args = ap.parse_args()
    if args.self_test:
        failures = self_test()
        for f in failures:
            print(f"self-test: {f}")
        print(f"compare_detection self-test: {'FAILED' if failures else 'passed'}")
        return 1 if failures else 0
    if not args.got or not args.want:
        ap.error("--got and --want are required")
    try:
        got = [read_tensor(p) for p in args.got]
        want = [read_tensor(p) for p in args.want]
    except (OSError, ValueError) as e:
        print(f"compare_detection: {e}", file=sys.stderr)
        return 2
    box_atol = args.box_atol if args.box_atol is not None else BOX_ATOL_OF_SIZE * args.image_size
    r = compare(got, want, box_atol, args.score_rtol, args.score_atol, args.score_thresh)
    print(("OK: " if r["ok"] else "MISMATCH: ") + r["message"])
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
