"""kiln: compile deep-learning models to one shared object, run them with
numpy, benchmark and profile them.

    >>> import kiln
    >>> m = kiln.compile("resnet-50")              # a zoo name, an .onnx path or bytes
    >>> (logits,) = m.run(x)                       # numpy in, numpy out
    >>> print(m.benchmark(number=10, repeat=3))    # TVM time_evaluator semantics
    >>> print(m.profile().table())                 # per fused kernel
    >>> det = kiln.compile("ssdlite.onnx")         # control flow, dynamic shapes: a VMModule
    >>> boxes, scores, labels = det.run(image)     # as many detections as the image has

A thin ctypes binding over kiln's C APIs (include/kiln/kiln.h, runtime.h,
profile.h, and the VM's src/vm/vm.h); see docs/PYTHON.md.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional, Sequence

from ._lib import KilnError
from ._compile import compile
from ._module import BenchmarkResult, Module, Runner, TensorInfo, ZooEntry, load, zoo
from ._vm import VMModule
from ._profile import Report, Row

__version__ = "0.1.0"

__all__ = ["KilnError", "Runner", "Module", "VMModule", "BenchmarkResult", "TensorInfo",
           "ZooEntry", "Report", "Row", "compile", "load", "zoo", "tune", "__version__"]


def _cli() -> Optional[str]:
    """The kiln CLI: $KILN_CLI, else the one installed in the package, else PATH's."""
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "kiln")
    if os.environ.get("KILN_CLI"):
        return os.environ["KILN_CLI"]
    return bundled if os.access(bundled, os.X_OK) else shutil.which("kiln")


def tune(model: str, records: str, *args: str, trials: Optional[int] = None,
         time_budget: Optional[float] = None, cli: Optional[str] = None) -> str:
    """Tunes ``model``'s kernels on this machine and appends the measurements
    to ``records`` (JSON lines); ``kiln.compile(model, records=records)`` then
    uses the best of them. Returns the tuner's report (its stdout).

    kiln's tuner is a command of the CLI (docs/TUNING.md): this runs
    ``kiln tune MODEL --records RECORDS [--trials N] [--time-budget S] ARGS...``
    with the CLI from ``cli``, $KILN_CLI, the package (``pip install ./python``
    installs it) or PATH. A kiln built without the
    tuner, or no CLI at all, raises KilnError (status "unsupported") saying so."""
    exe = cli or _cli()
    if not exe:
        raise KilnError("kiln.tune: no kiln CLI found (set KILN_CLI or put `kiln` on PATH); the "
                        "tuner runs as `kiln tune`", "unsupported")
    probe = subprocess.run([exe, "tune", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise KilnError(f"kiln.tune: this kiln has no tuner yet ({exe} tune: "
                        f"{(probe.stderr or probe.stdout).strip()[:200]})", "unsupported")
    cmd = [exe, "tune", os.fspath(model), "--records", os.fspath(records)]
    if trials is not None:
        cmd += ["--trials", str(int(trials))]
    if time_budget is not None:
        cmd += ["--time-budget", str(time_budget)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise KilnError(f"kiln tune: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout
