"""Compiling, loading, running and benchmarking models (kiln.h, runtime.h)."""
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
    """Name, shape and numpy dtype of a model input or output."""
    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype


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


def _is_zoo(name: str) -> bool:
    return bool(lib.kiln_zoo_find(name.encode()))


def _options(target, records, cache_dir, jobs) -> _lib.CompileOptions:
    if records is not None and not os.path.isfile(records):
        raise KilnError(f"{records}: no such tuning records file", "I/O error")
    return _lib.CompileOptions(target=_lib.enc(target), records=_lib.enc(records),
                               cache_dir=_lib.enc(cache_dir), jobs=int(jobs))


def compile(model: Union[str, os.PathLike, bytes], target: Optional[str] = None,
            records: Optional[str] = None, *, seed: int = 0, cache_dir: Optional[str] = None,
            num_threads: int = 0, jobs: int = 0) -> "Module":
    """Compiles ``model`` into one shared object and loads it.

    model: a zoo name (``kiln.zoo()``), a path to an ``.onnx`` file, or the
    bytes of an ONNX ModelProto. target: "avx512", "avx2", "generic" or None
    (the host). records: a tuning records file (JSON lines) or None. seed:
    the zoo weights' seed. The ``.so`` lands in kiln's model cache
    ($XDG_CACHE_HOME/kiln or cache_dir) and is reused when the graph and
    options are the same; ``Module.export`` copies it out. num_threads: as in
    ``load``. Raises KilnError (unknown name, missing file, unsupported op,
    no C compiler...)."""
    opts = _options(target, records, cache_dir, jobs)
    err = _lib.Error()
    if isinstance(model, (bytes, bytearray, memoryview)):
        buf = bytes(model)
        g = c_void_p()
        _lib.check(lib.kiln_onnx_load_buffer(buf, len(buf), None, byref(g), byref(err)), err,
                   "ONNX bytes")
        b = c_void_p()
        try:
            _lib.check(lib.kiln_build_create(g, byref(opts), byref(b), byref(err)), err)
            _lib.check(lib.kiln_build_link(b, None, byref(err)), err)
            so = os.fsdecode(lib.kiln_build_output(b))
        finally:
            lib.kiln_build_destroy(b)
            lib.kiln_graph_destroy(g)
        return load(so, num_threads=num_threads, _name="<onnx bytes>")
    if not isinstance(model, (str, os.PathLike)):
        raise KilnError(f"kiln.compile: model must be a zoo name, an .onnx path or bytes, not "
                        f"{type(model).__name__}")
    name = os.fspath(model)
    if not _is_zoo(name):
        if not name.endswith(".onnx"):
            raise KilnError(f"'{name}': not a zoo network (kiln.zoo() lists them) nor an .onnx "
                            "file", "not found")
        if not os.path.isfile(name):
            raise KilnError(f"{name}: no such file", "I/O error")
    so_p = c_void_p()
    _lib.check(lib.kiln_compile_cached(_lib.enc(name), seed, byref(opts), byref(so_p),
                                       byref(err)), err)
    try:
        so = os.fsdecode(ctypes.string_at(so_p.value))
    finally:
        lib.kiln_free(so_p)
    return load(so, num_threads=num_threads, _name=name)


def load(path: Union[str, os.PathLike], num_threads: int = 0, bind_threads: Optional[bool] = None,
         *, _name: Optional[str] = None) -> "Module":
    """Loads a compiled model (a ``.so`` from ``kiln compile`` or
    ``Module.export``). num_threads: 0 is $KILN_NUM_THREADS, else the physical
    cores; bind_threads: pin thread i to core i (None: $KILN_BIND_THREADS)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise KilnError(f"{path}: no such file", "I/O error")
    if not isinstance(num_threads, int) or num_threads < 0:
        raise KilnError(f"num_threads must be an integer >= 0, not {num_threads!r}")
    opts = _lib.ModuleOptions(num_threads=num_threads,
                              bind_threads=-1 if bind_threads is None else int(bool(bind_threads)))
    h = c_void_p()
    err = _lib.Error()
    _lib.check(lib.kiln_module_load(_lib.enc(os.path.abspath(path)), byref(opts), byref(h),
                                    byref(err)), err)
    return Module(h, os.path.abspath(path), _name or path)


class Module:
    """A loaded compiled model (``kiln.compile`` or ``kiln.load``).

    One module runs one inference at a time (calls on it are serialized by a
    lock); use one module per thread to run concurrently. Foreign calls
    release the GIL."""

    def __init__(self, handle: c_void_p, so_path: str, model: str):
        self._h = handle
        self._lock = threading.Lock()
        self.path = so_path
        self.model = model
        self._inputs_set = False
        self.inputs = self._infos(lib.kiln_module_num_inputs, lib.kiln_module_input_info)
        self.outputs = self._infos(lib.kiln_module_num_outputs, lib.kiln_module_output_info)

    def _infos(self, count, info) -> List[TensorInfo]:
        out = []
        for i in range(count(self._h)):
            name, dt, shape = c_char_p(), c_int(), _lib.Shape()
            if info(self._h, i, byref(name), byref(dt), byref(shape)) != 0:
                raise KilnError(f"{self.path}: cannot describe tensor {i}", "internal error")
            out.append(TensorInfo(name.value.decode(), shape.to_tuple(),
                                  np.dtype(_lib.DTYPES[dt.value])))
        return out

    # ---- description -------------------------------------------------------
    @property
    def handle(self) -> c_void_p:
        if not self._h:
            raise KilnError("the module is closed")
        return self._h

    @property
    def input_names(self) -> List[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [t.name for t in self.outputs]

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

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self.outputs)
        state = "closed" if not self._h else f"{self.target}, {self.num_threads} threads"
        return f"<kiln.Module {self.model!r} ({state}) inputs=[{ins}] outputs=[{outs}]>"

    def close(self) -> None:
        """Releases the module (also done when it is garbage-collected)."""
        with self._lock:
            if self._h:
                lib.kiln_module_destroy(self._h)
                self._h = None

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            try:
                lib.kiln_module_destroy(h)
            except Exception:  # interpreter shutdown: the library may be gone already
                pass

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- inputs and runs ---------------------------------------------------
    def export(self, path: Union[str, os.PathLike]) -> str:
        """Copies the compiled model to ``path`` (loadable by ``kiln.load``,
        the CLI and the C runtime); returns the path."""
        path = os.fspath(path)
        try:
            shutil.copyfile(self.path, path)
        except OSError as e:
            raise KilnError(f"{path}: cannot write: {e.strerror}", "I/O error") from e
        return path

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
                raise KilnError(f"input '{info.name}' ({info.dtype}{list(info.shape)}) missing")
            if isinstance(v, np.ndarray):
                if v.dtype != info.dtype:
                    raise KilnError(f"input '{info.name}': dtype {v.dtype}, the model takes "
                                    f"{info.dtype}", "type mismatch")
            else:
                v = np.asarray(v, dtype=info.dtype)
            if v.shape != info.shape:
                raise KilnError(f"input '{info.name}': shape {list(v.shape)}, the model takes "
                                f"{list(info.shape)}", "shape mismatch")
            # no copy when the array is C-contiguous already; kiln copies it once
            # into the module's planned memory
            out.append(np.ascontiguousarray(v))
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
            _lib.check(lib.kiln_module_set_input(self._h, i, byref(t), byref(err)), err,
                       f"input '{self.inputs[i].name}'")
        self._inputs_set = True

    def default_inputs(self) -> List[np.ndarray]:
        """Seeded random inputs of the right shapes and dtypes (floats uniform in
        [-1, 1], integers and bools zero) for timing and profiling."""
        rng = np.random.default_rng(_DEFAULT_INPUT_SEED)
        out = []
        for t in self.inputs:
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

    def _ensure_inputs(self, arrays, named) -> None:
        if arrays or named:
            self._set(self._arrays(arrays, named))
        elif not self._inputs_set:
            self._set(self.default_inputs())

    def run(self, *arrays: Any, **named: Any) -> List[np.ndarray]:
        """Runs the model once and returns its outputs, in order.

        Inputs by position (the order of ``input_names``) or by name. An input
        must have the model's dtype and shape exactly (a non-array is converted
        to the dtype); anything else raises KilnError. The outputs are new
        arrays (the module reuses its output memory on the next run)."""
        a = self._arrays(arrays, named)
        err = _lib.Error()
        with self._lock:
            self.handle
            self._set(a)
            _lib.check(lib.kiln_module_run(self._h, byref(err)), err, "run")
            outs = []
            for i, info in enumerate(self.outputs):
                t = lib.kiln_module_output(self._h, i).contents
                res = np.empty(info.shape, info.dtype)
                if res.nbytes:
                    ctypes.memmove(res.ctypes.data, t.data, res.nbytes)
                outs.append(res)
        return outs

    def __call__(self, *arrays: Any, **named: Any) -> List[np.ndarray]:
        return self.run(*arrays, **named)

    def benchmark(self, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0,
                  cooldown_ms: float = 0, flush_cache: bool = False,
                  inputs: Optional[Sequence[Any]] = None) -> BenchmarkResult:
        """Times the model with TVM's time_evaluator semantics (kiln_module_bench,
        as ``kiln bench``): one warm-up run, then ``repeat`` measurements of
        ``number`` back-to-back runs each (``number`` grows until a measurement
        lasts ``min_repeat_ms``), ``cooldown_ms`` between measurements, caches
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
        a = self._arrays(inputs, {}) if inputs is not None else None
        with self._lock:
            self.handle
            if a is not None:
                self._set(a)
            self._ensure_inputs((), {})
            _lib.check(lib.kiln_module_bench(self._h, byref(opts), byref(res), byref(err)), err,
                       "benchmark")
        return BenchmarkResult(res)

    def profile(self, runs: int = 0, warmup: int = 0, bench_number: int = 0,
                bench_repeat: int = 0, bench: bool = True, peak_gflops: float = 0,
                inputs: Optional[Sequence[Any]] = None) -> Report:
        """Profiles every fused kernel (``kiln profile``): warm-up runs, then
        instrumented runs interleaved with bench measurements of the same
        module. Zeros are the CLI's defaults (20 runs, more for fast models;
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
        a = self._arrays(inputs, {}) if inputs is not None else None
        with self._lock:
            self.handle
            if a is not None:
                self._set(a)
            self._ensure_inputs((), {})
            _lib.check(lib.kiln_profile_module(self._h, byref(opts), byref(p), byref(err)), err,
                       "profile")
        return Report(p)
