#!/usr/bin/python3
"""A wider torchvision sweep: networks nobody named, checked and timed.

Exports a broad set of torchvision 0.14 networks with scripts/export_torchvision.py's
machinery (seeded random weights, batch-norm statistics perturbed, eval-mode
ONNX export with the PyTorch reference input and output as .pb files), to

    OUTDIR/NAME/model.onnx, OUTDIR/NAME/test_data_set_0/{input,output}_0.pb

(default ~/.cache/kiln/fixtures/sweep; cached exports are skipped), then per
network:

  compile  `kiln compile model.onnx -o NAME.so` (wall time, kiln's object
           cache bypassed with --cache-dir in a fresh directory)
  check    `kiln check NAME.so --inputs ... --outputs ...` (rtol 1e-3, atol 1e-4)
  kiln ms  `kiln bench NAME.so --json --input ...` (KILN_NUM_THREADS, median)
  ort ms   bench/peer_ort.py (ORT_ENABLE_ALL, the same threads; bench/.venv)
  profile  `kiln profile NAME.so --aggregate op` for networks slower than
           --cliff x ORT, saved as NAME.profile.txt beside the export

and prints one JSON line per network and a Markdown table at the end (also
written to OUTDIR/sweep.json). A network torch cannot export is noted, not an
error.

Usage: /usr/bin/python3 scripts/sweep_torchvision.py [--out DIR] [--only A,B]
       [--kiln build/kiln] [--threads 2] [--skip-bench] [--cliff 1.5]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import export_torchvision as etv  # noqa: E402 (after the path)


class _OutOnly(torch.nn.Module):
    """A segmentation network returns a dict; export its 'out' tensor only."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def _redraw_last_linear(net, std=1.0):
    """Networks whose random features are tiny give logits that atol 1e-4
    cannot tell apart: redraw the last Linear's weights with std STD."""
    last = [m for m in net.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        torch.nn.init.normal_(last.weight, std=std)
        if last.bias is not None:
            torch.nn.init.uniform_(last.bias, -0.1, 0.1)


def _redraw_layer_scale(net):
    with torch.no_grad():
        for mod in net.modules():
            if hasattr(mod, "layer_scale"):
                mod.layer_scale.uniform_(0.1, 0.5)


def _cool_fcn_head(net):
    """FCN-ResNet50's random logits reach |x| ~ 100 (std 38): fp32 rounding
    of such values alone exceeds atol 1e-4 (ONNX Runtime fails it too), so
    scale its last conv down 32x to logits of std ~1."""
    with torch.no_grad():
        net.classifier[-1].weight.mul_(1.0 / 32)
        net.classifier[-1].bias.mul_(1.0 / 32)


# name -> (constructor kwargs, input size, fix-ups). Sizes are modest: the
# sweep is about coverage, not about each network's native resolution.
SWEEP = {
    "alexnet": ({}, 224, []),
    "googlenet": ({"aux_logits": False, "init_weights": True}, 224, []),
    "shufflenet_v2_x1_0": ({}, 224, []),
    "mnasnet1_0": ({}, 224, [_redraw_last_linear]),
    "regnet_y_400mf": ({}, 224, [_redraw_last_linear]),
    "regnet_x_1_6gf": ({}, 224, [_redraw_last_linear]),
    "wide_resnet50_2": ({}, 224, []),
    "efficientnet_v2_s": ({}, 224, [_redraw_last_linear]),
    "mobilenet_v3_small": ({}, 224, [_redraw_last_linear]),
    "squeezenet1_0": ({}, 224, []),
    "densenet201": ({}, 224, []),
    "swin_t": ({}, 224, [_redraw_last_linear]),
    "maxvit_t": ({}, 224, [_redraw_last_linear]),
    "vit_b_32": ({}, 224, [lambda n: _redraw_last_linear(n, 0.02)]),
    "convnext_small": ({}, 224, [_redraw_layer_scale]),
    "resnet34": ({}, 224, []),
    "efficientnet_b1": ({}, 240, [_redraw_last_linear]),
    "mobilenet_v3_large": ({}, 224, [_redraw_last_linear]),
    "fcn_resnet50": ({}, 256, [_cool_fcn_head]),
    "deeplabv3_mobilenet_v3_large": ({}, 256, []),
    "lraspp_mobilenet_v3_large": ({}, 256, []),
}
SEGMENTATION = ("fcn_", "deeplabv3_", "lraspp_")

_etv_build = etv.build


def build(name):
    """export_torchvision.build for the sweep's networks (its own otherwise):
    export_torchvision.make and export_one call this through the module."""
    if name not in SWEEP:
        return _etv_build(name)
    kwargs, size, fixups = SWEEP[name]
    if name.startswith(SEGMENTATION):
        ctor = getattr(torchvision.models.segmentation, name)
        net = ctor(weights=None, weights_backbone=None, **kwargs)
    else:
        net = getattr(torchvision.models, name)(weights=None, **kwargs)
    for fix in fixups:
        fix(net)
    if name.startswith(SEGMENTATION):
        net = _OutOnly(net)
    return net, size


etv.build = build


def run(cmd, env=None, timeout=1800):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout}s", time.time() - t0


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def sweep_one(name, a, env):
    row = {"net": name}
    d = os.path.join(a.out, name)
    try:
        etv.export_one(name, a.out, a.opset, False)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (torch raises anything)
        row["export"] = f"failed: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        return row
    row["export"] = "ok"
    model = os.path.join(d, "model.onnx")
    data = os.path.join(d, "test_data_set_0")
    ins = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("input_"))
    outs = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("output_"))
    so = os.path.join(d, "kiln.so")
    if a.reuse and os.path.exists(so):
        row["compile_s"] = a.prior.get(name, {}).get("compile_s", "")
    else:
        cache = tempfile.mkdtemp(prefix="kiln-sweep-")
        rc, out, err, secs = run([a.kiln, "compile", model, "-o", so, "--cache-dir", cache,
                                  "--quiet"], env)
        shutil.rmtree(cache, ignore_errors=True)
        row["compile_s"] = round(secs, 1)
        if rc != 0:
            row["check"] = f"compile failed: {last_line(err or out)[:300]}"
            return row
    rc, out, err, _ = run([a.kiln, "check", so, "--inputs", *ins, "--outputs", *outs,
                           "--rtol", "1e-3", "--atol", "1e-4"], env)
    row["check"] = "pass" if rc == 0 else (("FAIL: " if rc == 1 else "error: ")
                                           + last_line(out + "\n" + err)[:300])
    row["check_detail"] = (out + err).strip()[-600:]
    if a.skip_bench or rc == 2:
        return row
    bench = [a.kiln, "bench", so, "--json", "--repeat", str(a.repeat), "--min-repeat-ms",
             str(a.min_repeat_ms)]
    for f in ins:
        bench += ["--input", f]
    rc, out, err, _ = run(bench, env)
    if rc == 0:
        row["kiln_ms"] = round(json.loads(last_line(out))["median"] * 1e3, 3)
    else:
        row["kiln_ms"] = f"error: {last_line(err)[:200]}"
    rc, out, err, _ = run([a.python, os.path.join(ROOT, "bench", "peer_ort.py"), d,
                           "--threads", str(a.threads), "--repeat", str(a.repeat),
                           "--min-repeat-ms", str(a.min_repeat_ms)], env)
    try:
        r = json.loads(last_line(out))
        row["ort_ms"] = round(r["median"] * 1e3, 3)
        row["ort_check"] = "pass" if r.get("check", {}).get("ok", True) else "FAIL"
    except (ValueError, KeyError):
        row["ort_ms"] = f"error: {last_line(err)[:200]}"
    k, o = row.get("kiln_ms"), row.get("ort_ms")
    if isinstance(k, float) and isinstance(o, float) and o > 0:
        row["ratio"] = round(k / o, 3)
        if row["ratio"] > a.cliff:
            prof = [a.kiln, "profile", so, "--aggregate", "op", "--top", "15"]
            for f in ins:
                prof += ["--input", f]
            rc, out, err, _ = run(prof, env)
            with open(os.path.join(d, "profile.txt"), "w") as f:
                f.write(out + err)
            row["profile"] = os.path.join(d, "profile.txt")
    return row


def table(rows):
    lines = ["| network | check | compile s | kiln ms | ORT ms | kiln/ORT |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        chk = r.get("check", "") if r.get("export") == "ok" else "export " + r.get("export", "")
        lines.append(f"| {r['net']} | {chk[:80]} | {r.get('compile_s', '')} | "
                     f"{r.get('kiln_ms', '')} | {r.get('ort_ms', '')} | {r.get('ratio', '')} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/kiln/fixtures/sweep"))
    ap.add_argument("--only", default="", help="these networks only (NAME[,NAME...])")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--python", default=os.path.join(ROOT, "bench", ".venv", "bin", "python"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-repeat-ms", type=float, default=100.0)
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--cliff", type=float, default=1.5, help="profile networks slower than this x ORT")
    ap.add_argument("--skip-bench", action="store_true", help="export and check only")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an existing NAME/kiln.so (and its recorded compile time)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in a.only.split(",") if n] or list(SWEEP)
    unknown = [n for n in names if n not in SWEEP]
    if unknown:
        raise SystemExit(f"unknown network(s) {', '.join(unknown)} (known: {', '.join(SWEEP)})")
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, KILN_NUM_THREADS=str(a.threads))
    rows = []
    path = os.path.join(a.out, "sweep.json")
    a.prior = {r["net"]: r for r in json.load(open(path))} if os.path.exists(path) else {}
    for name in names:
        if a.export_only:
            try:
                etv.export_one(name, a.out, a.opset, False)
            except (Exception, SystemExit) as e:  # noqa: BLE001
                print(f"{name}: export failed: {str(e)[:300]}", flush=True)
            continue
        row = sweep_one(name, a, env)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if rows:
        old = dict(a.prior)
        old.update({r["net"]: r for r in rows})
        with open(path, "w") as f:
            json.dump(list(old.values()), f, indent=1)
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
