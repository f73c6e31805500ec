#!/usr/bin/env python3
"""bench/compare.py: kiln against ONNX Runtime, OpenVINO and PyTorch, side by side.

Every engine runs the same ONNX export (scripts/export_torchvision.py,
scripts/export_bert.py, scripts/export_detection.py: random weights from a
fixed seed, batch 1, with the PyTorch reference input and output), each
measurement in its own process:

  kiln        `kiln bench MODEL.onnx --json --input ...` (compiled through the
              cache, no tuning records, the export's input as run-time data;
              KILN_NUM_THREADS=N);
              its output is checked once, before the rounds, by `kiln check`
  ort         bench/peer_ort.py: ONNX Runtime, CPU EP, ORT_ENABLE_ALL,
              intra-op threads N, inter-op 1, sequential
  ov          bench/peer_ov.py: OpenVINO CPU, LATENCY hint, INFERENCE_NUM_THREADS
              N, NUM_STREAMS 1, INFERENCE_PRECISION_HINT f32
  ov-default  the same without the precision hint: OpenVINO's default (bf16 on
              CPUs with AMX or AVX-512 BF16); shown, never an fp32 peer, and its
              output mismatching is reported, not a failure
  torch       bench/peer_torch.py: Debian's PyTorch, set_num_threads(N), the
              exporting script's module (same weights) in inference mode

The peers run with the venv's python (bench/.venv, made by `make bench`), load
the model, check every output against the export's (rtol 1e-3, atol 1e-4, kiln
check's rule; for the detection networks, detection by detection in score
order: scripts/compare_detection.py, and kiln's outputs come from `kiln run`
instead of `kiln check`), warm up and time with kiln bench's rule (--repeat measurements of
at least --min-repeat-ms each; the median). Rounds are interleaved: each round
goes over all the networks, and per network over all the engines (in reverse
order every other round), so a slow phase of a shared machine costs a round,
not a network or an engine. Per network it prints the median ms of each engine,
kiln / best fp32 peer (the median of the rounds' ratios; the best peer of a
round is the fastest fp32 engine whose output matched), kiln's GFLOP/s (the
FLOPs of the compiled model's kernels, from `kiln profile`) and its fraction of
the FP32 peak (kiln profile's FMA loop, measured before each round; the best
reading of the run); then the geometric mean of kiln / best peer, and writes
bench/RESULTS.md with the CPU model, date, command and versions.

Exit status: 0; 1 when an fp32 engine's output did not match on some network
(or kiln failed); 2 on a usage or setup error.

Usage: make bench [BENCH_ARGS="..."]   (or bench/.venv/bin/python bench/compare.py)
       [--kiln build/kiln] [--threads 2] [--rounds 3] [--only NET,...] [--detection]
       [--engines kiln,ort,ov,ov-default,torch] [--repeat 10] [--min-repeat-ms 200]
       [--fixtures DIR] [--results FILE | --no-results]

A run of the twelve default networks, 5 rounds, 2 threads: about 25 minutes
on a quiet 2-core machine with kiln's cache and the exports warm (each
measurement ~4 s: 10 x 200 ms plus the process's start and model load),
10-15 minutes more when kiln compiles the networks for the first time.
The two detection networks (--detection, or named in --only; not in the default
set) add ~3 min of export once and ~1 min per round at ORT's speed.
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The networks: name -> (fixture subdirectory of --fixtures, the exporting
# script and how it is called, default set or not). Add a network by adding
# a row (and, for the torch column, a make(name) to its exporting script:
# bench/peer_torch.py).
TV = ("torchvision", "scripts/export_torchvision.py")
DET = ("detection", "scripts/export_detection.py")
NETWORKS = {
    # the ten CNNs of the CNN-speed issue
    "resnet18": TV, "resnet50": TV, "mobilenet_v2": TV, "vgg16": TV, "squeezenet1_1": TV,
    "inception_v3": TV, "efficientnet_b0": TV, "mobilenet_v3_large": TV, "densenet121": TV,
    "resnext50_32x4d": TV,
    # transformers and the transformer-style CNN
    "vit_b_16": TV, "convnext_tiny": TV,
    # in the default set only once exported (scripts/export_bert.py FIXTURES)
    "bert": ("", "scripts/export_bert.py"),
    # detection networks (data-dependent shapes: kiln runs them on its VM);
    # only with --detection or --only
    "ssdlite320_mobilenet_v3_large": DET, "fasterrcnn_mobilenet_v3_large_320_fpn": DET,
}
OPTIONAL = {"bert"}
# outputs (boxes, scores, labels) compared detection by detection in score
# order (scripts/compare_detection.py), not elementwise
DETECTION = {"ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"}

# name, column title, fp32 peer?, runner argv after the python (None: kiln)
ENGINES = {
    "kiln": ("kiln", False, None),
    "ort": ("ORT", True, ["peer_ort.py"]),
    "ov": ("OV f32", True, ["peer_ov.py", "--precision", "f32"]),
    "ov-default": ("OV default", False, ["peer_ov.py", "--precision", "default"]),
    "torch": ("PyTorch", True, ["peer_torch.py"]),
}
TIMEOUT_S = 900


class Failed(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def run(cmd, env=None, timeout=TIMEOUT_S):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{' '.join(cmd)}: no answer in {timeout} s")
    if p.returncode != 0:
        tail = (p.stderr + p.stdout).strip().splitlines()[-6:]
        raise Failed(f"{' '.join(cmd)} failed ({p.returncode}): " + " | ".join(tail))
    return p.stdout


def last_json(out):
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise Failed(f"no JSON in the output: {out[-300:]!r}")


def find_key(j, key):
    if isinstance(j, dict):
        if key in j:
            return j[key]
        for v in j.values():
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def net_dir(fixtures, name):
    sub = NETWORKS[name][0]
    return os.path.join(fixtures, sub, name) if sub else os.path.join(fixtures, name)


def ensure_exports(fixtures, names):
    """Runs each exporting script once for its networks (cached exports are
    skipped by the scripts themselves)."""
    by_script = {}
    for n in names:
        by_script.setdefault(NETWORKS[n], []).append(n)
    for (sub, script), ns in by_script.items():
        path = os.path.join(ROOT, script)
        if not os.path.exists(path):
            raise Failed(f"{script} does not exist: cannot export {', '.join(ns)}")
        cmd = ["/usr/bin/python3", path, os.path.join(fixtures, sub) if sub else fixtures]
        if sub:
            cmd += ["--only", ",".join(ns)]
        log(f"exports: {' '.join(cmd)}")
        out = run(cmd, timeout=3600)
        for line in out.splitlines():
            if "exported" in line:
                log("  " + line)


def kiln_env(threads):
    return dict(os.environ, KILN_NUM_THREADS=str(threads))


def kiln_check_detection(kiln, d, threads, ins, outs):
    """kiln's detections on the export's input (`kiln run`, every output
    written) against the export's, by scripts/compare_detection.py: the check
    dict of kiln_setup, and kiln's stderr/stdout."""
    sys.path.insert(0, HERE)
    import peer_common
    with tempfile.TemporaryDirectory() as tmp:
        got = [os.path.join(tmp, f) for f in outs]
        cmd = [kiln, "run", os.path.join(d, "model.onnx"), "--threads", str(threads)]
        for f in ins:
            cmd += ["--input", f]
        for f in got:
            cmd += ["--output", f]
        p = subprocess.run(cmd, capture_output=True, text=True, env=kiln_env(threads),
                           timeout=3600)
        text = (p.stdout + p.stderr).strip()
        if p.returncode != 0:
            raise Failed(f"kiln run failed: {text.splitlines()[-1] if text else p.returncode}")
        gs = [peer_common._read_tensor(f)[1] for f in got]
    want = [peer_common._read_tensor(f) for f in outs]
    x = peer_common._read_tensor(ins[0])[1]
    chk = peer_common.check_detections(gs, want, 1e-3, 1e-4, float(max(x.shape[-2:])))
    chk["message"] = "" if chk["ok"] else chk["message"]
    return chk, text


def input_args(data, ins):
    """`--input F` per model input, for a profile of the measured input."""
    return [a for f in ins for a in ("--input", os.path.join(data, f))]


def kiln_setup(kiln, d, threads, detection=False):
    """Compiles (through the cache) and checks kiln on the export; returns
    (check dict, FLOPs per run from the compiled model's kernels or None).
    DETECTION: compare detections (kiln_check_detection)."""
    data = os.path.join(d, "test_data_set_0")
    ins = sorted((f for f in os.listdir(data) if f.startswith("input_")),
                 key=lambda f: int(f[6:-3]))
    outs = sorted((f for f in os.listdir(data) if f.startswith("output_")),
                  key=lambda f: int(f[7:-3]))
    if detection:
        chk, text = kiln_check_detection(kiln, d, threads, [os.path.join(data, f) for f in ins],
                                         [os.path.join(data, f) for f in outs])
        fallback = [ln for ln in text.splitlines() if "reference kernel" in ln]
        if fallback:
            chk["fallback"] = fallback[0]
        try:  # the VM's profile may not give FLOPs
            # on the measured input: the heads' FLOPs follow its proposals
            out = run([kiln, "profile", os.path.join(d, "model.onnx"), "--threads", str(threads),
                       "--runs", "1", "--warmup", "0", "--no-bench", "--peak-gflops", "1",
                       "--format", "json"] + input_args(data, ins), env=kiln_env(threads),
                      timeout=3600)
            j = json.loads(out[out.index("{"):])
            flops = sum(s["flops"] for s in j.get("steps", []) if s.get("flops"))
        except (Failed, ValueError, KeyError, TypeError):
            flops = 0
        return chk, (flops or None)
    cmd = [kiln, "check", os.path.join(d, "model.onnx"), "--threads", str(threads),
           "--rtol", "1e-3", "--atol", "1e-4", "--inputs"] + [os.path.join(data, f) for f in ins]
    cmd += ["--outputs"] + [os.path.join(data, f) for f in outs]
    p = subprocess.run(cmd, capture_output=True, text=True, env=kiln_env(threads),
                       timeout=3600)
    text = (p.stdout + p.stderr).strip()
    if p.returncode == 2:
        raise Failed(f"kiln check failed: {text.splitlines()[-1] if text else p.returncode}")
    chk = {"ok": p.returncode == 0, "message": "" if p.returncode == 0 else
           " | ".join(ln.strip() for ln in text.splitlines() if "MISMATCH" in ln or "got" in ln)}
    for line in text.splitlines():
        if "max abs error" in line:  # "..., max abs error A, max rel error R"
            parts = line.replace(",", " ").split()
            try:
                chk["max_abs"] = float(parts[parts.index("abs") + 2])
                chk["max_rel"] = float(parts[parts.index("rel") + 2])
            except (ValueError, IndexError):
                pass
    fallback = [ln for ln in text.splitlines() if "reference kernel" in ln]
    if fallback:
        chk["fallback"] = fallback[0]
    out = run([kiln, "profile", os.path.join(d, "model.onnx"), "--threads", str(threads),
               "--runs", "1", "--warmup", "0", "--no-bench", "--peak-gflops", "1",
               "--format", "json"] + input_args(data, ins), env=kiln_env(threads), timeout=3600)
    j = json.loads(out[out.index("{"):])
    flops = sum(s["flops"] for s in j["steps"] if s.get("flops"))
    return chk, (flops or None)


def measure_peak(kiln, threads):
    """kiln's FP32 peak (src/report/peak.c: register-only FMA loop, best of
    five), from the configuration block of a profile of the zoo's mlp."""
    out = run([kiln, "profile", "mlp", "--threads", str(threads), "--format", "json",
               "--no-bench"], env=kiln_env(threads))
    j = json.loads(out[out.index("{"):])
    return find_key(j, "peak_gflops")


def measure(engine, args, d, name):
    """One measurement of ENGINE on export D in a process of its own: the
    runner's JSON (median in seconds per run, check)."""
    base = ["--repeat", str(args.repeat), "--min-repeat-ms", str(args.min_repeat_ms)]
    if engine == "kiln":
        # the export's inputs, as the peers run (a detection network's work
        # depends on its input)
        data = os.path.join(d, "test_data_set_0")
        ins = sorted((f for f in os.listdir(data) if f.startswith("input_")),
                     key=lambda f: int(f[6:-3]))
        out = run([args.kiln, "bench", os.path.join(d, "model.onnx"), "--threads",
                   str(args.threads), "--json"] + input_args(data, ins) + base,
                  env=kiln_env(args.threads))
        return last_json(out)
    runner = ENGINES[engine][2]
    cmd = [args.python, os.path.join(HERE, runner[0]), d, "--threads", str(args.threads)]
    cmd += base + runner[1:]
    if engine == "torch":
        cmd += ["--net", name]
    if name in DETECTION:
        cmd += ["--detection"]
    return last_json(run(cmd))


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def cpu_model():
    """The model name and the vector/matrix ISA flags of /proc/cpuinfo (the
    two kinds of machine, ../shared/PERFORMANCE.md, differ in AMX)."""
    name, flags = platform.processor() or "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name == (platform.processor() or "unknown"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    have = set(line.split(":", 1)[1].split())
                    flags = [x for x in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16",
                                         "avx512_fp16", "amx_bf16", "amx_int8") if x in have]
    except OSError:
        pass
    return name + (f" ({' '.join(flags)})" if flags else "")


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--python", default=None,
                    help="python for the peers (default: bench/.venv/bin/python, else this one)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="networks, comma-separated (default: "
                    + ",".join(n for n in NETWORKS if n not in OPTIONAL | DETECTION)
                    + ", and bert when exported)")
    ap.add_argument("--detection", action="store_true",
                    help="add the detection networks (" + ", ".join(sorted(DETECTION)) + ")")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--repeat", type=int, default=10, help="measurements per engine and round")
    ap.add_argument("--min-repeat-ms", type=float, default=200.0)
    ap.add_argument("--fixtures", default=None, help="exports (default: $XDG_CACHE_HOME/kiln/"
                    "fixtures, or ~/.cache/kiln/fixtures)")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"),
                    help="where to write the results (default bench/RESULTS.md)")
    ap.add_argument("--no-results", action="store_true", help="don't write the results")
    args = ap.parse_args()

    venv_py = os.path.join(HERE, ".venv", "bin", "python")
    args.python = args.python or (venv_py if os.path.exists(venv_py) else sys.executable)
    args.fixtures = args.fixtures or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln", "fixtures")
    engines = [e for e in args.engines.split(",") if e]
    bad = [e for e in engines if e not in ENGINES]
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in NETWORKS]
    if bad or unknown or not engines or args.rounds < 1 or args.threads < 1:
        ap.error(f"unknown engines {bad} or networks {unknown} (known: {', '.join(ENGINES)}; "
                 f"{', '.join(NETWORKS)}), or rounds/threads < 1")
    if "kiln" in engines and not os.access(args.kiln, os.X_OK):
        ap.error(f"{args.kiln} is not an executable (build kiln, or pass --kiln)")
    names = only or [n for n in NETWORKS if n not in DETECTION and (n not in OPTIONAL
                     or os.path.exists(os.path.join(net_dir(args.fixtures, n), "model.onnx")))]
    if args.detection:
        names += [n for n in NETWORKS if n in DETECTION and n not in names]
    t_start = time.time()

    try:
        ensure_exports(args.fixtures, names)
    except Failed as e:
        log(f"compare: {e}")
        return 2
    dirs = {n: net_dir(args.fixtures, n) for n in names}

    # kiln: compile and check once; its FLOPs
    checks = {n: {} for n in names}  # checks[net][engine] -> the first check seen
    errors = {n: {} for n in names}  # errors[net][engine] -> message
    flops = {}
    if "kiln" in engines:
        for n in names:
            t0 = time.time()
            try:
                checks[n]["kiln"], flops[n] = kiln_setup(args.kiln, dirs[n], args.threads,
                                                         n in DETECTION)
            except Failed as e:
                errors[n]["kiln"] = str(e)
            c = checks[n].get("kiln")
            log(f"kiln {n}: compiled and checked in {time.time() - t0:.0f} s: " +
                (errors[n]["kiln"] if "kiln" in errors[n] else
                 ("output OK" if c["ok"] else "MISMATCH " + c["message"])
                 + (f"; {c['fallback']}" if c.get("fallback") else "")
                 + (f"; {flops[n] / 1e9:.2f} GFLOP" if flops.get(n) else "")))

    times = {n: {e: [] for e in engines} for n in names}  # seconds, per round (None: failed)
    extra = {n: {} for n in names}
    peaks = []
    spent = {}  # engine -> seconds of wall time its measuring processes took
    t_rounds = time.time()
    for r in range(args.rounds):
        if "kiln" in engines:
            try:
                peaks.append(measure_peak(args.kiln, args.threads))
            except Failed as e:
                log(f"peak: {e}")
        order = engines if r % 2 == 0 else engines[::-1]
        for n in names:
            for e in order:
                if e == "kiln" and "kiln" in errors[n]:
                    times[n][e].append(None)
                    continue
                if e in errors[n] and e != "kiln":
                    times[n][e].append(None)  # a runner that failed once fails again
                    continue
                t0 = time.time()
                try:
                    j = measure(e, args, dirs[n], n)
                except Failed as ex:
                    errors[n][e] = str(ex)
                    log(f"  {n} {e}: {ex}")
                    times[n][e].append(None)
                    continue
                times[n][e].append(j["median"])
                spent[e] = spent.get(e, 0.0) + time.time() - t0
                if e != "kiln":
                    checks[n].setdefault(e, j["check"])
                    if not j["check"]["ok"]:
                        checks[n][e] = j["check"]
                    extra[n].setdefault(e, {"version": j.get("version"),
                                            "properties": j.get("properties")})
            log(f"round {r + 1}/{args.rounds} {n}: " + ", ".join(
                f"{e} {fmt_ms(times[n][e][-1] * 1e3) if times[n][e][-1] else '-'} ms"
                for e in engines))

    # per network: medians, kiln / best fp32 peer
    peers = [e for e in engines if ENGINES[e][1]]
    best_peak = max((p for p in peaks if p), default=None)
    rows, failed = [], []
    for n in names:
        med = {e: (statistics.median([t for t in times[n][e] if t]) * 1e3
                   if any(times[n][e]) else None) for e in engines}
        ok = {e: checks[n].get(e, {}).get("ok", False) for e in engines}
        ratios = []
        for r in range(args.rounds):
            k = times[n].get("kiln", [None] * args.rounds)[r]
            best = [times[n][e][r] for e in peers if ok[e] and times[n][e][r]]
            if k and best:
                ratios.append(k / min(best))
        ratio = statistics.median(ratios) if ratios else None
        best_peer = min((e for e in peers if ok[e] and med[e]), key=lambda e: med[e], default=None)
        gf = flops[n] / (med["kiln"] * 1e-3) / 1e9 if flops.get(n) and med.get("kiln") else None
        frac = gf / best_peak if gf and best_peak else None
        for e in engines:
            if e != "ov-default" and e in checks[n] and not checks[n][e]["ok"]:
                failed.append(f"{n} {e}: output mismatch: {checks[n][e]['message']}")
        if "kiln" in errors[n]:
            failed.append(f"{n} kiln: {errors[n]['kiln']}")
        rows.append({"net": n, "ms": med, "ok": ok, "ratio": ratio, "best": best_peer,
                     "gflops": gf, "frac": frac, "flops": flops.get(n)})

    gm = geomean([r["ratio"] for r in rows])
    head = ["network"] + [f"{ENGINES[e][0]} ms" for e in engines]
    if "kiln" in engines:
        head += ["kiln / best fp32 peer", "best peer", "kiln GFLOP/s", "of peak"]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["net"]]
        for e in engines:
            c = fmt_ms(r["ms"][e])
            if e in checks[r["net"]] and not checks[r["net"]][e]["ok"]:
                c += " (mismatch)"
            elif e in errors[r["net"]]:
                c = "error" if e == "kiln" else "n/a"
            cells.append(c)
        if "kiln" in engines:
            cells += [f"{r['ratio']:.3f}" if r["ratio"] else "-", ENGINES[r["best"]][0]
                      if r["best"] else "-", f"{r['gflops']:.1f}" if r["gflops"] else "-",
                      f"{100 * r['frac']:.1f}%" if r["frac"] else "-"]
        table.append("| " + " | ".join(cells) + " |")
    log("")
    for line in table:
        log(line)
    if gm:
        log(f"geometric mean of kiln / best fp32 peer over {sum(1 for r in rows if r['ratio'])} "
            f"networks: {gm:.3f}")
    notes = []
    for n in names:
        for e, msg in errors[n].items():
            notes.append(f"{n} {e}: {msg}")
        c = checks[n].get("ov-default")
        if c and not c["ok"]:
            notes.append(f"{n} ov-default (not an fp32 peer; reported only): {c['message']}")
        if checks[n].get("kiln", {}).get("fallback"):
            notes.append(f"{n} kiln: {checks[n]['kiln']['fallback']}")
    for line in notes:
        log("note: " + line)
    for line in failed:
        log("FAILED: " + line)
    elapsed = time.time() - t_start
    log(f"compare: {len(names)} networks x {len(engines)} engines x {args.rounds} rounds "
        f"in {elapsed / 60:.1f} min ({(time.time() - t_rounds) / 60:.1f} min of rounds; "
        "measuring processes: " + ", ".join(f"{e} {v:.0f} s" for e, v in spent.items()) + ")")

    if not args.no_results:
        write_results(args, engines, names, rows, table, gm, peaks, best_peak, extra, notes,
                      failed, elapsed)
    return 1 if failed else 0


def write_results(args, engines, names, rows, table, gm, peaks, best_peak, extra, notes, failed,
                  elapsed):
    def version(e):
        for n in names:
            v = extra[n].get(e, {}).get("version")
            if v:
                return v
        return None

    ovp = sorted({str(extra[n].get("ov-default", {}).get("properties", {})
                      .get("INFERENCE_PRECISION_HINT")) for n in names
                  if extra[n].get("ov-default")})
    vers = [f"kiln {args.kiln} (tree at {git_rev()})"]
    for e, label in (("ort", "ONNX Runtime"), ("ov", "OpenVINO"), ("ov-default", "OpenVINO"),
                     ("torch", "PyTorch")):
        v = version(e)
        if v and not any(x.startswith(label + " ") for x in vers):
            vers.append(f"{label} {v}")
    cmd = "bench/compare.py " + " ".join(sys.argv[1:])
    lines = [
        "# kiln against ONNX Runtime, OpenVINO and PyTorch: measured results",
        "",
        "Written by `bench/compare.py` (its docstring says how it measures); every figure "
        "below was measured in one run of it.",
        "",
        f"- Command: `{cmd.strip()}`",
        f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} "
        f"({elapsed / 60:.0f} min)",
        f"- Machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}",
        f"- Versions: {', '.join(vers)}",
        f"- Threads: {args.threads}; batch 1; {args.rounds} rounds, each over every network and, "
        f"per network, every engine in its own process ({', '.join(engines)}; reversed every "
        f"other round); per engine and round the median of {args.repeat} measurements of at "
        f"least {args.min_repeat_ms:g} ms (kiln bench's rule); ms: the median of the rounds; "
        "kiln / best fp32 peer: the median of the rounds' ratios, the best peer of a round "
        "being the fastest of ORT, OV f32 and PyTorch whose output matched.",
        "- Outputs checked against PyTorch's (rtol 1e-3, atol 1e-4): kiln by `kiln check` "
        "before the rounds, the peers in every measuring process. "
        + ("Detection networks: detections compared in score order (labels exact, scores at "
           "those tolerances, boxes within 1e-3 of the image size; scripts/compare_detection.py), "
           "kiln's from `kiln run`. " if any(n in DETECTION for n in names) else "")
        + ("Every fp32 engine matched on every network." if not failed
           else f"{len(failed)} failures (below)."),
        "- OV default: OpenVINO without a precision hint; it ran in "
        + (", ".join(ovp) if ovp else "(not run)") + "; not an fp32 peer.",
    ]
    if best_peak:
        lines.append("- Peak: kiln's FP32 FMA loop (`kiln profile`), measured before each round: "
                     + ", ".join(f"{p:.0f}" for p in peaks if p) + f" GFLOP/s on {args.threads} "
                     f"threads; fractions use the best, {best_peak:.0f} GFLOP/s. kiln GFLOP/s: "
                     "the FLOPs of the compiled model's kernels over kiln's median time.")
    lines += [""] + table + [""]
    if gm:
        lines.append(f"Geometric mean of kiln / best fp32 peer: **{gm:.3f}** over "
                     f"{sum(1 for r in rows if r['ratio'])} networks.")
        lines.append("")
    for line in notes:
        lines.append(f"- note: {line}")
    for line in failed:
        lines.append(f"- FAILED: {line}")
    with open(args.results, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    log(f"wrote {args.results}")


if __name__ == "__main__":
    sys.exit(main())
