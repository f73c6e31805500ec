"""Loading, running, benchmarking and profiling compiled models (runtime.h,
profile.h), and what every executor's model shares (Runner: inputs, runs,
benchmark, profile, lifetime; the VM's model is in _vm.py)."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import threading
from ctypes import byref, c_char_p, c_int, c_void_p
from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import KilnError, lib
from ._profile import Report

# the seed of the default inputs, as `kiln run` (KILN_RUN_INPUT_SEED) uses its
# own generator: Python's are numpy's, so equal seeds do not mean equal data
_DEFAULT_INPUT_SEED = 0


class ZooEntry(NamedTuple):
    """A built-in network: its name, one line on it and its input shape."""
    name: str
    description: str
    input_shape: Tuple[int, ...]


def zoo() -> List[ZooEntry]:
    """The built-in networks (``kiln zoo``), each with seeded weights."""
    out = []
    for i in range(lib.kiln_zoo_count()):
        z = lib.kiln_zoo_get(i).contents
        out.append(ZooEntry(z.name.decode(), z.description.decode(), z.input_shape.to_tuple()))
    return out


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape and numpy dtype of a model input or output.

    A compiled model's shapes are all numbers. On the VM (``executor ==
    "vm"``) a dim that is not fixed is its ``dim_param`` name (a str, e.g.
    "batch") or None (unknown, or set by the data), as in ONNX Runtime's
    ``get_inputs()``; ``shape`` is None for an input declared without a
    shape."""
    name: str
    shape: Optional[Tuple[Union[int, str, None], ...]]
    dtype: np.dtype

    def fits(self, shape: Tuple[int, ...]) -> bool:
        """Whether an array of ``shape`` may be this tensor (a symbolic dim
        takes any extent; kiln checks that one name gets one extent)."""
        if self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            not isinstance(d, int) or d == e for d, e in zip(self.shape, shape))


class BenchmarkResult:
    """Times of one run in seconds, TVM time_evaluator style.

    ``results`` holds one entry per measurement (``repeat`` of them), each the
    mean of ``number`` back-to-back runs; mean, median, std, min and max are
    over ``results``."""

    def __init__(self, r: _lib.BenchResult):
        self.mean: float = r.mean
        self.median: float = r.median
        self.std: float = r.std
        self.min: float = r.min
        self.max: float = r.max
        self.number: int = r.number
        self.repeat: int = r.repeat
        self.threads: int = r.threads
        self.results: Tuple[float, ...] = tuple(r.results[i] for i in range(r.repeat))

    def __repr__(self) -> str:
        return (f"BenchmarkResult(min={self.min!r}, mean={self.mean!r}, median={self.median!r}, "
                f"max={self.max!r}, std={self.std!r}, results={self.results!r})")

    def __str__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        head = "".join(f"{h:^13}" for h in
                       ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"))
        return ("Execution time summary:\n" + head.rstrip() + "\n" +
                "".join(f"{v:^13.4f}" for v in ms).rstrip() +
                f"\n({self.repeat} measurement{'s' if self.repeat != 1 else ''} of "
                f"{self.number} run{'s' if self.number != 1 else ''}, "
                f"{self.threads} thread{'s' if self.threads != 1 else ''})")


def load(path: Union[str, os.PathLike], num_threads: int = 0, bind_threads: Optional[bool] = None,
         *, _name: Optional[str] = None) -> "Runner":
    """Loads a compiled model (a ``.so`` from ``kiln compile`` or
    ``Module.export``; one with a VM section, from a model the VM runs,
    loads as a ``VMModule``). num_threads: 0 is $KILN_NUM_THREADS, else the physical
    cores; bind_threads: pin thread i to core i (None: $KILN_BIND_THREADS)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise KilnError(f"{path}: no such file", "I/O error")
    if not isinstance(num_threads, int) or num_threads < 0:
        raise KilnError(f"num_threads must be an integer >= 0, not {num_threads!r}")
    from ._vm import has_vm_section, load_vm  # _vm imports this module
    if has_vm_section(os.path.abspath(path)):
        return load_vm(os.path.abspath(path), _name or path, num_threads)
    opts = _lib.ModuleOptions(num_threads=num_threads,
                              bind_threads=-1 if bind_threads is None else int(bool(bind_threads)))
    h = c_void_p()
    err = _lib.Error()
    _lib.check(lib.kiln_module_load(_lib.enc(os.path.abspath(path)), byref(opts), byref(h),
                                    byref(err)), err)
    return Module(h, os.path.abspath(path), _name or path)


class Runner:
    """What every loaded model shares, whichever executor runs it: inputs
    checked and set, runs, benchmark, profile, lifetime. ``Module`` (a
    compiled model) and ``VMModule`` (a model on the VM) fill in the C calls.

    One model runs one inference at a time (calls on it are serialized by a
    lock); use one per thread to run concurrently. Foreign calls release the
    GIL."""

    executor = "graph"
    # the C functions of the executor: (handle, i, tensor, err), (handle, err),
    # (handle, i) -> tensor*, (handle, opts, result, err), (handle, opts, out, err)
    _c_set_input = _c_run = _c_output = _c_bench = _c_profile = _c_destroy = None

    def __init__(self, handle: c_void_p, model: str, count_in, info_in, count_out, info_out,
                 dim_name=None):
        self._h = handle
        self._lock = threading.Lock()
        self.model = model
        self._inputs_set = False
        self.inputs = self._infos(count_in, info_in, dim_name)
        self.outputs = self._infos(count_out, info_out, None)

    def _infos(self, count, info, dim_name) -> List[TensorInfo]:
        out = []
        for i in range(count(self._h)):
            name, dt, shape = c_char_p(), c_int(), _lib.Shape()
            if info(self._h, i, byref(name), byref(dt), byref(shape)) != 0:
                raise KilnError(f"{self.model}: cannot describe tensor {i}", "internal error")
            dims = shape.to_tuple()
            if dim_name:
                dims = dim_name(i, dims)
            elif any(d < 0 for d in dims):
                dims = tuple(None if d < 0 else d for d in dims)
            out.append(TensorInfo(name.value.decode(), dims, np.dtype(_lib.DTYPES[dt.value])))
        return out

    # ---- description -------------------------------------------------------
    @property
    def handle(self) -> c_void_p:
        if not self._h:
            raise KilnError(f"the {'VM model' if self.executor == 'vm' else 'module'} is closed")
        return self._h

    @property
    def input_names(self) -> List[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [t.name for t in self.outputs]

    def _state(self) -> str:
        return f"{self.num_threads} threads"

    def __repr__(self) -> str:
        def shape(t):
            return "[any]" if t.shape is None else list(t.shape)
        ins = ", ".join(f"{t.name}: {t.dtype}{shape(t)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}{shape(t)}" for t in self.outputs)
        state = "closed" if not self._h else self._state()
        return (f"<kiln.{type(self).__name__} {self.model!r} ({state}) inputs=[{ins}] "
                f"outputs=[{outs}]>")

    def close(self) -> None:
        """Releases the model (also done when it is garbage-collected)."""
        with self._lock:
            if self._h:
                type(self)._c_destroy(self._h)
                self._h = None

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            try:
                type(self)._c_destroy(h)
            except Exception:  # interpreter shutdown: the library may be gone already
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- inputs and runs ---------------------------------------------------
    def _arrays(self, arrays: Sequence[Any], named: dict) -> List[np.ndarray]:
        n = len(self.inputs)
        if len(arrays) > n:
            raise KilnError(f"{len(arrays)} inputs given, the model has {n} "
                            f"({', '.join(self.input_names)})")
        vals: List[Any] = list(arrays) + [None] * (n - len(arrays))
        for key, v in named.items():
            if key not in self.input_names:
                raise KilnError(f"no input named '{key}' (inputs: {', '.join(self.input_names)})",
                                "not found")
            i = self.input_names.index(key)
            if vals[i] is not None:
                raise KilnError(f"input '{key}' given twice (by position and by name)")
            vals[i] = v
        out = []
        for info, v in zip(self.inputs, vals):
            if v is None:
                raise KilnError(f"input '{info.name}' ({info.dtype}{list(info.shape or [])}) "
                                "missing")
            if isinstance(v, np.ndarray):
                if v.dtype != info.dtype:
                    raise KilnError(f"input '{info.name}': dtype {v.dtype}, the model takes "
                                    f"{info.dtype}", "type mismatch")
            else:
                v = np.asarray(v, dtype=info.dtype)
            if not info.fits(v.shape):
                raise KilnError(f"input '{info.name}': shape {list(v.shape)}, the model takes "
                                f"{list(info.shape)}", "shape mismatch")
            # no copy when the array is C-contiguous already; kiln copies it once
            # into the model's own memory
            out.append(v if v.flags.c_contiguous else np.ascontiguousarray(v))
        return out

    def _set(self, arrays: List[np.ndarray]) -> None:
        err = _lib.Error()
        for i, a in enumerate(arrays):
            t = _lib.Tensor()
            t.dtype = _lib.DTYPES.index(self.inputs[i].dtype.type)
            t.shape.rank = a.ndim
            for d, e in enumerate(a.shape):
                t.shape.dims[d] = e
            t.data = a.ctypes.data
            _lib.check(type(self)._c_set_input(self._h, i, byref(t), byref(err)), err,
                       f"input '{self.inputs[i].name}'")
        self._inputs_set = True

    def default_inputs(self) -> List[np.ndarray]:
        """Seeded random inputs of the right shapes and dtypes (floats uniform in
        [-1, 1], integers and bools zero) for timing and profiling. An input
        whose shape is not fixed (symbolic dims, on the VM) has none: pass
        inputs instead."""
        rng = np.random.default_rng(_DEFAULT_INPUT_SEED)
        out = []
        for t in self.inputs:
            if t.shape is None or not all(isinstance(d, int) for d in t.shape):
                raise KilnError(f"input '{t.name}' has no fixed shape "
                                f"({'any' if t.shape is None else list(t.shape)}): give the "
                                "inputs (run(...), set_inputs(...) or inputs=[...])")
            if np.issubdtype(t.dtype, np.floating):
                out.append(rng.uniform(-1, 1, t.shape).astype(t.dtype))
            else:
                out.append(np.zeros(t.shape, t.dtype))
        return out

    def set_inputs(self, *arrays: Any, **named: Any) -> None:
        """Sets the inputs for the next run, benchmark or profile."""
        a = self._arrays(arrays, named)
        with self._lock:
            self.handle
            self._set(a)

    def _ensure_inputs(self, arrays: Optional[Sequence[Any]]) -> None:
        if arrays is not None:
            self._set(self._arrays(arrays, {}))
        elif not self._inputs_set:
            self._set(self.default_inputs())

    def run(self, *arrays: Any, **named: Any) -> List[np.ndarray]:
        """Runs the model once and returns its outputs, in order.

        Inputs by position (the order of ``input_names``) or by name. An input
        must have the model's dtype and shape exactly (a non-array is converted
        to the dtype; a symbolic dim takes any extent); anything else raises
        KilnError. The outputs are new arrays of the shapes this run produced
        (the model reuses its output memory on the next run)."""
        a = self._arrays(arrays, named)
        err = _lib.Error()
        with self._lock:
            self.handle
            self._set(a)
            _lib.check(type(self)._c_run(self._h, byref(err)), err, "run")
            outs = []
            for i, info in enumerate(self.outputs):
                p = type(self)._c_output(self._h, i)
                if not p:
                    raise KilnError(f"output '{info.name}' missing after the run",
                                    "internal error")
                t = p.contents
                res = np.empty(t.shape.to_tuple(), _lib.DTYPES[t.dtype])
                if res.nbytes:
                    ctypes.memmove(res.ctypes.data, t.data, res.nbytes)
                outs.append(res)
        return outs

    def __call__(self, *arrays: Any, **named: Any) -> List[np.ndarray]:
        return self.run(*arrays, **named)

    def benchmark(self, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0,
                  cooldown_ms: float = 0, flush_cache: bool = False,
                  inputs: Optional[Sequence[Any]] = None) -> BenchmarkResult:
        """Times the model with TVM's time_evaluator semantics (as ``kiln
        bench``): one warm-up run, then ``repeat`` measurements of ``number``
        back-to-back runs each (``number`` grows until a measurement lasts
        ``min_repeat_ms``), ``cooldown_ms`` between measurements, caches
        evicted before each when ``flush_cache``. On ``inputs`` if given, else
        the last inputs set, else ``default_inputs()``."""
        for k, v in (("number", number), ("repeat", repeat)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise KilnError(f"benchmark: {k} must be an integer >= 1, not {v!r}")
        if repeat > _lib.BENCH_MAX_REPEAT:
            raise KilnError(f"benchmark: repeat must be at most {_lib.BENCH_MAX_REPEAT}")
        if min_repeat_ms < 0 or cooldown_ms < 0:
            raise KilnError("benchmark: min_repeat_ms and cooldown_ms must be >= 0")
        opts = _lib.BenchOptions(number=int(number), repeat=int(repeat),
                                 min_repeat_ms=float(min_repeat_ms),
                                 cooldown_ms=float(cooldown_ms), flush_cache=int(bool(flush_cache)))
        res = _lib.BenchResult()
        err = _lib.Error()
        with self._lock:
            self.handle
            self._ensure_inputs(inputs)
            _lib.check(type(self)._c_bench(self._h, byref(opts), byref(res), byref(err)), err,
                       "benchmark")
        return BenchmarkResult(res)

    def profile(self, runs: int = 0, warmup: int = 0, bench_number: int = 0,
                bench_repeat: int = 0, bench: bool = True, peak_gflops: float = 0,
                inputs: Optional[Sequence[Any]] = None) -> Report:
        """Profiles every step (``kiln profile``): warm-up runs, then
        instrumented runs interleaved with bench measurements of the same
        model. Zeros are the CLI's defaults (20 runs, more for fast models;
        3 warm-up; bench 10 x 5); peak_gflops 0 measures the FMA peak. Inputs
        as in ``benchmark``. Returns a Report."""
        for k, v in (("runs", runs), ("warmup", warmup), ("bench_number", bench_number),
                     ("bench_repeat", bench_repeat)):
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise KilnError(f"profile: {k} must be an integer >= 0, not {v!r}")
        opts = _lib.ProfileOptions(runs=int(runs), warmup=int(warmup),
                                   bench_number=int(bench_number),
                                   bench_repeat=int(bench_repeat), no_bench=int(not bench),
                                   peak_gflops=float(peak_gflops), model=_lib.enc(self.model))
        p = c_void_p()
        err = _lib.Error()
        with self._lock:
            self.handle
            self._ensure_inputs(inputs)
            _lib.check(type(self)._c_profile(self._h, byref(opts), byref(p), byref(err)), err,
                       "profile")
        return Report(p)


class Module(Runner):
    """A loaded compiled model (``kiln.compile`` or ``kiln.load``), run by the
    graph executor of libkiln_runtime: static shapes, planned memory."""

    _c_set_input = lib.kiln_module_set_input
    _c_run = lib.kiln_module_run
    _c_output = lib.kiln_module_output
    _c_bench = lib.kiln_module_bench
    _c_profile = lib.kiln_profile_module
    _c_destroy = lib.kiln_module_destroy

    def __init__(self, handle: c_void_p, so_path: str, model: str):
        self.path = so_path
        self._rebuild = None  # kiln.compile's, for a model in the cache (export)
        super().__init__(handle, model, lib.kiln_module_num_inputs, lib.kiln_module_input_info,
                         lib.kiln_module_num_outputs, lib.kiln_module_output_info)

    @property
    def num_threads(self) -> int:
        return lib.kiln_module_num_threads(self.handle)

    @property
    def name(self) -> str:
        return lib.kiln_module_name(self.handle).decode()

    @property
    def target(self) -> str:
        return lib.kiln_module_target(self.handle).decode()

    @property
    def build_id(self) -> str:
        return lib.kiln_module_build_id(self.handle).decode()

    @property
    def metadata(self) -> dict:
        text = lib.kiln_module_metadata_json(self.handle).decode()
        return json.loads(text) if text else {}

    @property
    def steps(self) -> List[dict]:
        """The fused kernels in execution order (name, op, workload, shapes,
        layouts, config, hash, flops)."""
        out = []
        for i in range(lib.kiln_module_num_steps(self.handle)):
            s = _lib.StepInfo()
            if lib.kiln_module_step_info(self.handle, i, byref(s)) == 0:
                out.append({"name": s.name.decode(), "op": s.op.decode(),
                            "workload": s.workload.decode(), "shapes": s.shapes.decode(),
                            "layouts": s.layouts.decode(), "config": s.config.decode(),
                            "hash": "%016x" % s.workload_hash, "flops": s.flops})
        return out

    def _state(self) -> str:
        return f"{self.target}, {self.num_threads} threads"

    def export(self, path: Union[str, os.PathLike]) -> str:
        """Writes the compiled model to ``path`` as one file (loadable by
        ``kiln.load``, the CLI and the C runtime); returns the path. A model
        ``kiln.compile`` took from the model cache keeps its large weights in
        files beside it there, so it is compiled again into ``path`` with the
        weights inside (its kernels from the object cache); one loaded from
        a file is copied."""
        path = os.fspath(path)
        if self._rebuild is not None:
            self._rebuild(path)
            return path
        try:
            shutil.copyfile(self.path, path)
        except OSError as e:
            raise KilnError(f"{path}: cannot write: {e.strerror}", "I/O error") from e
        return path
