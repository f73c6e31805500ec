#!/usr/bin/env python3
"""bench/ab.py: two kiln builds side by side on the zoo networks.

Usage: bench/ab.py OLD_KILN NEW_KILN [--nets a,b,..] [--rounds N] [--threads T]
                   [--old-records R] [--new-records R] [--out FILE]

--nets takes zoo names and .onnx paths (a model.onnx is named by its folder,
as bench/compare.py's exports are). The same kiln twice with --new-records
R.jsonl (written by `kiln tune`) compares the tuned build with the untuned one.

Each build compiles every network into its own .so (each with its own cache
directory, under a temporary folder), then `kiln bench SO --json` times them
round-robin: every round goes over all the networks, old and new back to
back with the order alternating from round to round, so a slow phase of a
shared machine costs a round, not a network or a build. The ratio per
network is the median over rounds of new/old (each the median of
`--repeat 7 --min-repeat-ms 150`); below 1 the new build is faster. This is
the check that a change to the compiler or runtime costs no speed (issue:
'no ratio more than 3% worse'). Prints a Markdown table (and writes it to
--out)."""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

NETS = "resnet-18,resnet-50,vgg-16,mobilenet-v2,squeezenet-1.1,inception-v3,vit-b-16,mlp"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def label(net):
    """A network's name in the table and in file names: a zoo name as it is,
    an .onnx path by its file name, or its folder's for a model.onnx."""
    if not net.endswith(".onnx"):
        return net
    base = os.path.basename(net)[:-5]
    return os.path.basename(os.path.dirname(os.path.abspath(net))) if base == "model" else base


def compile_so(kiln, net, so, cache, records=None):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    extra = ["--records", records] if records else []
    r = subprocess.run([kiln, "compile", net, "-o", so, "--quiet"] + extra, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ab: {kiln} compile {net} failed:\n{r.stderr}")


def bench_ms(kiln, so, threads):
    r = subprocess.run([kiln, "bench", so, "--threads", str(threads), "--repeat", "7",
                        "--min-repeat-ms", "150", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ab: {kiln} bench {so} failed:\n{r.stderr}")
    return json.loads(r.stdout)["median"] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--nets", default=NETS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--old-records", help="tuning records the old build compiles with")
    ap.add_argument("--new-records", help="tuning records the new build compiles with")
    ap.add_argument("--out")
    a = ap.parse_args()
    records = {"old": a.old_records, "new": a.new_records}
    nets = [n for n in a.nets.split(",") if n]
    builds = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    tmp = tempfile.mkdtemp(prefix="kiln-ab-")
    so = {}
    for w, kiln in builds.items():
        for n in nets:
            so[w, n] = os.path.join(tmp, f"{label(n)}.{w}.so")
            print(f"ab: compiling {n} with the {w} build", file=sys.stderr, flush=True)
            compile_so(kiln, n, so[w, n], os.path.join(tmp, f"cache-{w}"), records[w])
    t = {(w, n): [] for w in builds for n in nets}
    for r in range(a.rounds):
        for n in nets:
            for w in (("old", "new") if r % 2 == 0 else ("new", "old")):
                t[w, n].append(bench_ms(builds[w], so[w, n], a.threads))
        print(f"ab: round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    lines = [f"{time.strftime('%Y-%m-%d %H:%M')}, {cpu_model()}, {a.threads} threads, "
             f"{a.rounds} rounds: `bench/ab.py {a.old} {a.new}"
             + (f" --old-records {a.old_records}" if a.old_records else "")
             + (f" --new-records {a.new_records}" if a.new_records else "") + "`", "",
             "| network | old ms | new ms | new/old (median of rounds) | rounds' range |",
             "|---|---|---|---|---|"]
    for n in nets:
        ratios = [b / o for o, b in zip(t["old", n], t["new", n])]
        lines.append(f"| {label(n)} | {statistics.median(t['old', n]):.3f} | "
                     f"{statistics.median(t['new', n]):.3f} | {statistics.median(ratios):.3f} | "
                     f"{min(ratios):.3f}-{max(ratios):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
