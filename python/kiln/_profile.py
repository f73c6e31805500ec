"""The per-operator profile report (kiln/profile.h, docs/PROFILE.md)."""
from __future__ import annotations

import json
import os
from ctypes import byref, c_void_p
from dataclasses import dataclass
from typing import List, Optional, Union

from . import _lib
from ._lib import KilnError, lib


@dataclass(frozen=True)
class Row:
    """One row of the report (a fused kernel, or several aggregated):
    docs/PROFILE.md's JSON row. Times in microseconds; None where unknown."""
    name: str
    op: str
    duration_us: float
    percent: float
    device: str
    count: int
    shapes: str
    layouts: str
    hash: Optional[str]
    flops: Optional[float]
    gflops: Optional[float]
    peak_fraction: Optional[float]


class Report:
    """A profile: per-kernel times (means over the instrumented runs that were
    not slowed, like Total's, so the rows add up to it), Sum and Total
    rows, the configuration and the agreement with a bench of the same module.

    ``table()``, ``csv()``, ``json()``, ``chrome()`` and ``html()`` give the
    formats of ``kiln profile --format``; ``rows`` are Row objects (the JSON's
    rows, with the default aggregation and sort); ``data`` is the whole JSON
    report as a dict."""

    def __init__(self, handle: c_void_p):
        self._h = handle
        self.data: dict = json.loads(self._format("json", None, None, 0))

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            try:
                lib.kiln_profile_destroy(h)
            except Exception:  # interpreter shutdown: the library may be gone already
                pass

    @classmethod
    def from_json(cls, source: Union[str, os.PathLike]) -> "Report":
        """A report from JSON text or a JSON file (``kiln profile --save-json``
        or ``Report.json()``); a malformed one raises KilnError naming the field."""
        what = "profile JSON"
        text = os.fspath(source)
        if not text.lstrip().startswith("{"):
            what = text
            try:
                with open(text, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise KilnError(f"{what}: {e.strerror}", "I/O error") from e
        p = c_void_p()
        err = _lib.Error()
        _lib.check(lib.kiln_profile_parse_json(text.encode(), what.encode(), byref(p),
                                               byref(err)), err)
        return cls(p)

    def _format(self, fmt: str, aggregate: Optional[str], sort: Optional[str], top: int) -> str:
        if top < 0:
            raise KilnError(f"top must be >= 0, not {top}")
        out = c_void_p()
        err = _lib.Error()
        _lib.check(lib.kiln_profile_format(self._h, fmt.encode(), _lib.enc(aggregate),
                                           _lib.enc(sort), int(top), byref(out), byref(err)),
                   err, "profile")
        return _lib.take_string(out)

    def table(self, aggregate: str = "none", sort: str = "time", top: int = 0) -> str:
        """The text table (TVM debug-executor style). aggregate: "none" (a row
        per kernel), "hash" (kernels with one workload), "op"; sort: "time",
        "order", "name"; top: the first N rows (0: all)."""
        return self._format("table", aggregate, sort, top)

    def csv(self, aggregate: str = "none", sort: str = "time", top: int = 0) -> str:
        return self._format("csv", aggregate, sort, top)

    def json(self, aggregate: str = "none", sort: str = "time", top: int = 0) -> str:
        return self._format("json", aggregate, sort, top)

    def chrome(self) -> str:
        """Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)."""
        return self._format("chrome", None, None, 0)

    def html(self, aggregate: str = "none", sort: str = "time", top: int = 0) -> str:
        return self._format("html", aggregate, sort, top)

    @property
    def rows(self) -> List[Row]:
        return [Row(**{k: r.get(k) for k in Row.__dataclass_fields__})
                for r in self.data["rows"]]

    @property
    def configuration(self) -> dict:
        return self.data["configuration"]

    @property
    def total_us(self) -> float:
        """Mean wall time of the instrumented runs that were not slowed."""
        return self.data["total"]["duration_us"]

    @property
    def sum_us(self) -> float:
        """Sum of every kernel's time (Total less the time between kernels)."""
        return self.data["sum"]["duration_us"]

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        c = self.configuration
        return (f"<kiln.Report {c['model']!r}: {len(self.data['steps'])} kernels, total "
                f"{self.total_us:.1f} us, {c['threads']} threads>")

    @staticmethod
    def compare(a: "Report", b: "Report", format: str = "table", aggregate: str = "none",
                top: int = 0, labels: tuple = ("A", "B")) -> str:
        """``kiln profile --compare``: rows of a and b matched (by workload hash
        and name, then name, then hash, then a fused kernel against its parts),
        B - A and B / A per row, Sum and Total deltas, rows in one only, and
        the configuration settings that differ; as "table", "csv" or "json"."""
        if not isinstance(a, Report) or not isinstance(b, Report):
            raise KilnError("Report.compare takes two kiln.Report objects")
        if top < 0:
            raise KilnError(f"top must be >= 0, not {top}")
        out = c_void_p()
        err = _lib.Error()
        _lib.check(lib.kiln_profile_compare(a._h, _lib.enc(labels[0]), b._h, _lib.enc(labels[1]),
                                            _lib.enc(format), _lib.enc(aggregate), int(top),
                                            byref(out), byref(err)), err, "compare")
        return _lib.take_string(out)
