#!/usr/bin/python3
"""bench/compare.py: kiln against PyTorch, side by side, on the same networks.

For every network: `kiln bench NAME --json` (the zoo network, compiled through
the cache, no tuning records) and PyTorch (Debian's python3-torch, the same
torchvision architecture, torch.set_num_threads(THREADS), eval, no_grad),
interleaved: ROUNDS rounds, each going over all the networks and timing, per
network, kiln then PyTorch. A shared VM has slow phases that last minutes;
going round the networks spreads each network's measurements over the whole
run, so a slow phase costs one round, not a network. The figure per side is
the median over rounds of each round's median, and the ratio is the median
of the rounds' ratios (each from a kiln and a PyTorch figure taken seconds
apart). Prints per network: kiln ms, PyTorch ms, ratio kiln/PyTorch, kiln
GFLOP/s and fraction of the measured FP32 peak of THREADS threads; then
resnet-50's convolutions' share of peak from `kiln profile` (aggregated by
op). Writes bench/RESULTS.md with the command, the date and the machine.

Usage: /usr/bin/python3 bench/compare.py [--kiln build/kiln] [--threads 2]
       [--rounds 3] [--only resnet-50,...] [--no-results]
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# kiln zoo name -> (torchvision constructor, input size)
NETWORKS = [
    ("resnet-18", "resnet18", 224),
    ("resnet-50", "resnet50", 224),
    ("vgg-16", "vgg16", 224),
    ("inception-v3", "inception_v3", 299),
    ("mobilenet-v2", "mobilenet_v2", 224),
    ("squeezenet-1.1", "squeezenet1_1", 224),
]
# TVM v0.16 untuned / PyTorch on this machine (../shared/PERFORMANCE.md):
# the bar of the compiler issue.
TARGET = {"resnet-18": 0.60, "resnet-50": 0.72, "vgg-16": 0.55, "inception-v3": 0.85,
          "mobilenet-v2": 0.09, "squeezenet-1.1": 0.07}


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"compare: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
    return p.stdout


def kiln_gmacs(kiln):
    out = run([kiln, "zoo"])
    macs = {}
    for line in out.splitlines():
        m = re.match(r"^(\S+)\s+\[.*?\]\s+([\d,]+)\s+([\d.]+)", line)
        if m:
            macs[m.group(1)] = float(m.group(3))
    return macs


def measure_peak(kiln, threads):
    """The FP32 peak as kiln measures it (src/report/peak.c: register-only FMA
    loop, AVX-512 when available, best of five), read from the configuration
    block of a profile of the tiny mlp; returns (peak of `threads`, of 1)."""
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    best = (0.0, 0.0)
    for _ in range(2):  # the better of two: a busy moment only lowers it
        out = run([kiln, "profile", "mlp", "--threads", str(threads), "--format", "json"], env=env)
        j = json.loads(out[out.index("{"):])
        p, p1 = find_key(j, "peak_gflops") or 0.0, find_key(j, "peak_gflops_1") or 0.0
        best = (max(best[0], p), max(best[1], p1))
    return best


def bench_kiln(kiln, name, threads):
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    out = run([kiln, "bench", name, "--threads", str(threads), "--repeat", "10",
               "--min-repeat-ms", "200", "--json"], env=env)
    j = json.loads(out[out.index("{"):])
    return j["median"]


def bench_torch(torch, net, x, runs=20, warmup=3):
    with torch.no_grad():
        for _ in range(warmup):
            net(x)
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            net(x)
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def conv_share(kiln, threads):
    """resnet-50's convolution rows from `kiln profile --aggregate op`, against
    the FP32 peak the profiler measured in the same process."""
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    out = run([kiln, "profile", "resnet-50", "--threads", str(threads), "--aggregate", "op",
               "--format", "json", "--no-bench"], env=env)
    j = json.loads(out[out.index("{"):])
    us, flops = 0.0, 0.0
    for r in j["rows"]:
        if "conv" in r["op"] and r.get("flops"):
            us += r["duration_us"]
            flops += r["flops"]
    if us == 0:
        return None
    peak = find_key(j, "peak_gflops")
    gflops = flops / (us * 1e-6) / 1e9
    return gflops, (gflops / peak if peak else None), us / 1e3, j["total"]["duration_us"] / 1e3, peak


def find_key(j, key):
    if isinstance(j, dict):
        if key in j:
            return j[key]
        for v in j.values():
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-results", action="store_true", help="don't write bench/RESULTS.md")
    args = ap.parse_args()

    import torch
    import torchvision
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    only = [s for s in args.only.split(",") if s]
    nets = [n for n in NETWORKS if not only or n[0] in only]
    gmacs = kiln_gmacs(args.kiln)
    peaks = []

    models = []
    for name, tv, size in nets:
        print(f"{name}: compiling and warming up ...", flush=True)
        bench_kiln(args.kiln, name, args.threads)  # compiles through the cache
        ctor = getattr(torchvision.models, tv)
        kw = {"aux_logits": False, "init_weights": True} if tv == "inception_v3" else {}
        models.append((ctor(weights=None, **kw).eval(), torch.randn(1, 3, size, size)))
    ks = {n[0]: [] for n in nets}
    convs = []  # resnet-50's convolutions, once per round
    ts = {n[0]: [] for n in nets}
    for r in range(args.rounds):
        peaks.append(measure_peak(args.kiln, args.threads))
        for (name, _, _), (net, x) in zip(nets, models):
            ks[name].append(bench_kiln(args.kiln, name, args.threads))
            ts[name].append(bench_torch(torch, net, x))
        if any(n[0] == "resnet-50" for n in nets):
            convs.append(conv_share(args.kiln, args.threads))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{n[0]} {ks[n[0]][-1] / ts[n[0]][-1]:.3f}" for n in nets), flush=True)
    rows = []
    for name, _, _ in nets:
        k, t = statistics.median(ks[name]), statistics.median(ts[name])
        ratio = statistics.median(a / b for a, b in zip(ks[name], ts[name]))
        gf = 2 * gmacs.get(name, 0) / k if gmacs.get(name) else None
        rows.append((name, k * 1e3, t * 1e3, ratio, gf))
        r = rows[-1]
        print(f"{name:15s} kiln {r[1]:8.2f} ms  PyTorch {r[2]:8.2f} ms  ratio {r[3]:.3f} "
              f"(target <= {TARGET.get(name, float('nan')):.2f})  {r[4]:.1f} GFLOP/s", flush=True)

    # The hardware's peak does not change during a run; a low reading only
    # means the machine was busy at that moment: use the best one seen.
    best_peak = max(p[0] for p in peaks) if peaks else None
    rows = [r[:5] + ((r[4] / best_peak) if r[4] and best_peak else None,) for r in rows]
    for r in rows:
        print(f"{r[0]:15s} {100 * r[5]:.1f}% of the best peak measured in this run "
              f"({best_peak:.0f} GFLOP/s)")

    conv = None
    convs = [c for c in convs if c]
    if convs:
        # the round in the middle by GFLOP/s, against the best peak of the run
        c = sorted(convs, key=lambda c: c[0])[len(convs) // 2]
        conv = (c[0], c[0] / best_peak if best_peak else None) + c[2:4] + (best_peak,)
        print(f"resnet-50 convolutions: {conv[0]:.1f} GFLOP/s = {100 * conv[1]:.1f}% of the "
              f"{conv[4]:.0f} GFLOP/s {args.threads}-thread peak (the best measured in this run); "
              f"median of {len(convs)} rounds: "
              + ", ".join(f"{x[0]:.0f}" for x in convs) + f" GFLOP/s ({conv[2]:.2f} ms of "
              f"{conv[3]:.2f} ms)")

    if args.no_results:
        return 0
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cmd = "/usr/bin/python3 bench/compare.py " + " ".join(sys.argv[1:])
    lines = [
        "# kiln vs PyTorch: measured results",
        "",
        "Written by `bench/compare.py`; every figure below was measured in one run of it.",
        "",
        f"- Command: `{cmd.strip()}`",
        f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- Machine: {cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        f"- Threads: {args.threads} (kiln: KILN_NUM_THREADS; PyTorch {torch.__version__}: "
        "torch.set_num_threads)",
        f"- kiln: zoo networks compiled with no tuning records, `kiln bench --repeat 10 "
        f"--min-repeat-ms 200` median; PyTorch: torchvision {torchvision.__version__}, median of "
        f"20 runs after 3 warm-ups; {args.rounds} rounds, each over all the networks (kiln then "
        "PyTorch per network); ms: the median of the rounds, ratio: the median of the rounds' "
        "ratios.",
        "- Peak: measured by kiln itself (`kiln profile`'s register-only AVX-512 FMA loop, "
        "best of five, the better of two such measurements) before each round: "
        + ", ".join(f"{p[0]:.0f}" for p in peaks)
        + f" GFLOP/s on {args.threads} threads; fractions use the best of them, "
        f"{max(p[0] for p in peaks):.0f} GFLOP/s (a lower reading means the shared VM "
        "was busy at that moment).",
        "",
        "| network | kiln ms | PyTorch ms | kiln/PyTorch | target (TVM untuned) | GFLOP/s | "
        "fraction of peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.3f} | "
                     f"{TARGET.get(r[0], float('nan')):.2f} | {r[4]:.1f} | {100 * r[5]:.1f}% |")
    if conv:
        lines += ["", f"resnet-50's convolutions: {conv[0]:.1f} GFLOP/s, {100 * conv[1]:.1f}% of "
                  f"the {conv[4]:.0f} GFLOP/s {args.threads}-thread peak (the best measured in this "
                  f"run), from `kiln profile resnet-50 --aggregate op` once per round, the median "
                  f"round ({conv[2]:.2f} ms of a {conv[3]:.2f} ms run; the rounds: "
                  + ", ".join(f"{x[0]:.0f}" for x in convs) + " GFLOP/s)."]
    with open(os.path.join(HERE, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.join(HERE, 'RESULTS.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
