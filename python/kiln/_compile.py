"""kiln.compile: a zoo network or an ONNX model compiled into one shared
object (kiln.h) and loaded (Module), or opened on the VM when it needs one
(VMModule, _vm.py)."""
from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_void_p
from typing import Optional, Union

from . import _lib
from ._lib import KilnError, lib
from ._module import Module, load
from ._vm import VMModule, open_vm, vm_needed


def _is_zoo(name: str) -> bool:
    return bool(lib.kiln_zoo_find(name.encode()))


def _options(target, records, cache_dir, jobs) -> _lib.CompileOptions:
    if records is not None and not os.path.isfile(records):
        raise KilnError(f"{records}: no such tuning records file", "I/O error")
    return _lib.CompileOptions(target=_lib.enc(target), records=_lib.enc(records),
                               cache_dir=_lib.enc(cache_dir), jobs=int(jobs))


def compile(model: Union[str, os.PathLike, bytes], target: Optional[str] = None,
            records: Optional[str] = None, *, seed: int = 0, cache_dir: Optional[str] = None,
            num_threads: int = 0, jobs: int = 0,
            executor: Optional[str] = None) -> Union[Module, VMModule]:
    """Compiles ``model`` into one shared object and loads it, or opens it on
    kiln's VM when it needs one.

    model: a zoo name (``kiln.zoo()``), a path to an ``.onnx`` file, or the
    bytes of an ONNX ModelProto. target: "avx512", "avx2", "generic" or None
    (the host). records: a tuning records file (JSON lines) or None. seed:
    the zoo weights' seed. The ``.so`` lands in kiln's model cache
    ($XDG_CACHE_HOME/kiln or cache_dir) and is reused when the graph and
    options are the same; ``Module.export`` copies it out. num_threads: as in
    ``load``. Raises KilnError (unknown name, missing file, unsupported op,
    no C compiler...).

    executor: None (the default) picks as the CLI does: an ONNX model whose
    static import stops on what only the VM runs (control flow, a shape
    parameter that is run-time data, NonZero/NMS on data, a graph input with
    symbolic dims) is opened on the VM and returned as a ``VMModule`` (its
    static part compiled with the same target, records and cache; ``jobs``
    is for static compiles). "graph" refuses that (the import's error is
    raised); "vm" opens any ONNX model on the VM."""
    if executor not in (None, "graph", "vm"):
        raise KilnError(f"kiln.compile: executor must be None, 'graph' or 'vm', not {executor!r}")
    opts = _options(target, records, cache_dir, jobs)
    vm_args = dict(target=target, records=records, cache_dir=cache_dir, num_threads=num_threads)
    err = _lib.Error()
    if isinstance(model, (bytes, bytearray, memoryview)):
        buf = bytes(model)
        if executor == "vm":
            return open_vm(buf, "<onnx bytes>", **vm_args)
        g = c_void_p()
        try:
            _lib.check(lib.kiln_onnx_load_buffer(buf, len(buf), None, byref(g), byref(err)), err,
                       "ONNX bytes")
        except KilnError as e:
            if executor is None and vm_needed(e):
                return open_vm(buf, "<onnx bytes>", **vm_args)
            raise
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
    if executor == "vm":
        if _is_zoo(name):
            raise KilnError(f"'{name}': the VM opens ONNX models, not zoo networks (static: "
                            "executor='graph')", "unsupported")
        return open_vm(name, name, **vm_args)
    so_p = c_void_p()
    try:
        _lib.check(lib.kiln_compile_cached(_lib.enc(name), seed, byref(opts), byref(so_p),
                                           byref(err)), err)
    except KilnError as e:
        if executor is None and name.endswith(".onnx") and vm_needed(e):
            return open_vm(name, name, **vm_args)
        raise
    try:
        so = os.fsdecode(ctypes.string_at(so_p.value))
    finally:
        lib.kiln_free(so_p)
    m = load(so, num_threads=num_threads, _name=name)
    m._rebuild = _Rebuild(name, seed, target, records, cache_dir, jobs)
    return m


class _Rebuild:
    """How Module.export compiles a cached model again as one file."""

    def __init__(self, name, seed, target, records, cache_dir, jobs):
        self.name, self.seed = name, seed
        self.args = (target, records, cache_dir, jobs)

    def __call__(self, path: str) -> None:
        opts = _options(*self.args)
        err = _lib.Error()
        g = c_void_p()
        _lib.check(lib.kiln_model_load(_lib.enc(self.name), self.seed, byref(g), byref(err)), err,
                   self.name)
        try:
            _lib.check(lib.kiln_compile(g, byref(opts), _lib.enc(path), byref(err)), err)
        finally:
            lib.kiln_graph_destroy(g)
