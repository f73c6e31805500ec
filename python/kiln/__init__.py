"""kiln: compile deep-learning models to one shared object, run them with
numpy, benchmark and profile them.

    >>> import kiln
    >>> m = kiln.compile("resnet-50")              # a zoo name, an .onnx path or bytes
    >>> (logits,) = m.run(x)                       # numpy in, numpy out
    >>> print(m.benchmark(number=10, repeat=3))    # TVM time_evaluator semantics
    >>> print(m.profile().table())                 # per fused kernel

A thin ctypes binding over kiln's C APIs (include/kiln/kiln.h, runtime.h,
profile.h); see docs/PYTHON.md.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional, Sequence

from ._lib import KilnError
from ._module import BenchmarkResult, Module, TensorInfo, ZooEntry, compile, load, zoo
from ._profile import Report, Row

__version__ = "0.1.0"

__all__ = ["KilnError", "Module", "BenchmarkResult", "TensorInfo", "ZooEntry", "Report", "Row",
           "compile", "load", "zoo", "tune", "__version__"]


def _cli() -> Optional[str]:
    return os.environ.get("KILN_CLI") or shutil.which("kiln")


def tune(model: str, records: str, *args: str, cli: Optional[str] = None) -> None:
    """Tunes ``model``'s kernels and appends the measurements to ``records``
    (then ``kiln.compile(model, records=records)`` uses the best of them).

    kiln's tuner is a command of the CLI; this runs ``kiln tune MODEL
    --records RECORDS ARGS...`` with the CLI from ``cli``, $KILN_CLI or PATH.
    A kiln without the tuner (the `tune` command not built yet) or no CLI at
    all raises KilnError saying so."""
    exe = cli or _cli()
    if not exe:
        raise KilnError("kiln.tune: no kiln CLI found (set KILN_CLI or put `kiln` on PATH); the "
                        "tuner runs as `kiln tune`", "unsupported")
    probe = subprocess.run([exe, "tune", "--help"], capture_output=True, text=True)
    if probe.returncode != 0 or "not available" in probe.stdout + probe.stderr:
        raise KilnError(f"kiln.tune: this kiln has no tuner yet ({exe} tune: "
                        f"{(probe.stderr or probe.stdout).strip()[:200]})", "unsupported")
    r = subprocess.run([exe, "tune", os.fspath(model), "--records", os.fspath(records),
                        *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise KilnError(f"kiln tune: {r.stderr.strip() or r.stdout.strip()}")
