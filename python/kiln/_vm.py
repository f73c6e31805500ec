"""Models on kiln's VM (src/vm/vm.h, docs/VM.md): control flow (If, Loop,
Scan), data-dependent shapes (NonZero, NonMaxSuppression, RoiAlign, TopK:
torchvision's detection networks) and graph inputs with symbolic dims.

``kiln.compile`` opens such an ONNX model here when its static import stops
on what only the VM runs (kiln_vm_needed, the CLI's rule): its static part is
compiled exactly as a static model is, the data-dependent nodes run on the
VM, and with symbolic input dims the model is specialized per input-shape
class at the first run of each (4 kept).
"""
from __future__ import annotations

import os
import shutil
from ctypes import byref, c_char_p, c_void_p, create_string_buffer
from typing import List, Optional, Tuple, Union

from . import _lib
from ._lib import KilnError, lib
from ._module import Runner


def vm_needed(e: KilnError) -> bool:
    """Whether a failed static import or compile stopped on what the VM runs."""
    return e.code is not None and bool(lib.kiln_vm_needed(e.code, str(e).encode()))


def open_vm(model: Union[str, bytes], name: str, *, target: Optional[str] = None,
            records: Optional[str] = None, cache_dir: Optional[str] = None,
            num_threads: int = 0) -> "VMModule":
    """A VMModule for an .onnx path or the bytes of an ONNX model."""
    if not isinstance(num_threads, int) or num_threads < 0:
        raise KilnError(f"num_threads must be an integer >= 0, not {num_threads!r}")
    opts = _lib.VMOptions(reference=False, num_threads=num_threads, cache_dir=_lib.enc(cache_dir),
                          target=_lib.enc(target), records=_lib.enc(records))
    h = c_void_p()
    err = _lib.Error()
    if isinstance(model, bytes):
        st = lib.kiln_vm_create_buffer(model, len(model), None, byref(opts), byref(h), byref(err))
        _lib.check(st, err, "ONNX bytes")
    else:
        _lib.check(lib.kiln_vm_create(_lib.enc(model), byref(opts), byref(h), byref(err)), err)
    vm = VMModule(h, name)
    vm._source = model
    vm._compile_args = dict(target=target, records=records, cache_dir=cache_dir)
    return vm


def load_vm(path: str, name: str, num_threads: int = 0) -> "VMModule":
    """A VMModule from a .so with a VM section (``kiln compile`` or
    ``VMModule.export`` of a model the VM runs): its static part is the .so's
    compiled model, its data-dependent nodes come from the section."""
    opts = _lib.VMOptions(reference=False, num_threads=num_threads)
    h = c_void_p()
    err = _lib.Error()
    _lib.check(lib.kiln_vm_load(_lib.enc(path), byref(opts), byref(h), byref(err)), err)
    vm = VMModule(h, name)
    vm._so_path = path
    return vm


def has_vm_section(path: str) -> bool:
    """Whether the .so at path carries a VM section."""
    return bool(lib.kiln_vm_so_has_section(_lib.enc(path)))


class VMModule(Runner):
    """An ONNX model on kiln's VM (``kiln.compile`` picks it when the model
    needs it). The same interface as ``Module``: ``run`` takes inputs of any
    extent along a symbolic dim and returns outputs of the shapes this run
    produced (a detection network's variable number of boxes), ``benchmark``
    and ``profile`` time the VM's run with the same semantics (the profile's
    rows: the VM's own step, the static part's compiled kernels, one row per
    data-dependent node, its kind in the Layouts column).

    ``export`` writes one ``.so`` (the static part compiled, plus a VM
    section with the data-dependent nodes' ONNX bytes) that ``kiln.load``
    and the CLI open; it still needs libkiln (the VM converts those nodes at
    run time), but no C compiler for the static part. A model with symbolic
    input dims does not export (a .so holds one input-shape class: ``kiln
    compile MODEL --input-shape NAME=DIMS``)."""

    _source: Optional[Union[str, bytes]] = None
    _compile_args: dict = {}
    _so_path: Optional[str] = None

    executor = "vm"
    _c_set_input = lib.kiln_vm_set_input
    _c_run = lib.kiln_vm_run
    _c_output = lib.kiln_vm_output
    _c_bench = lib.kiln_vm_bench
    _c_profile = lib.kiln_vm_profile
    _c_destroy = lib.kiln_vm_destroy

    def __init__(self, handle: c_void_p, model: str):
        self._h = handle  # for _dims, before Runner.__init__ sets it again
        super().__init__(handle, model, lib.kiln_vm_num_inputs, lib.kiln_vm_input_info,
                         lib.kiln_vm_num_outputs, lib.kiln_vm_output_info, self._dims)

    def _dims(self, i: int, dims: Tuple[int, ...]):
        """Input i's declared dims: a number, a dim_param name, or None."""
        if lib.kiln_vm_input_dim_param(self._h, i, -1) is not None:
            return None  # no declared shape: any rank
        out = []
        for d, e in enumerate(dims):
            p = lib.kiln_vm_input_dim_param(self._h, i, d)
            out.append(e if p is None and e >= 0 else (p.decode() or None if p else None))
        return tuple(out)

    @property
    def num_threads(self) -> int:
        """Threads of the compiled parts (the static part, heavy per-class
        kernels); the data-dependent nodes run one at a time."""
        return lib.kiln_vm_num_threads(self.handle)

    @property
    def symbolic(self) -> bool:
        """Whether some input has a symbolic or unknown dim."""
        return bool(lib.kiln_vm_symbolic(self.handle))

    @property
    def num_specializations(self) -> int:
        """Input-shape classes imported and compiled so far (symbolic dims)."""
        return int(lib.kiln_vm_num_specializations(self.handle))

    @property
    def batch_chunks(self) -> int:
        """Chunks the last run ran its batch in (a symbolic batch whose items
        are computed apart runs as chunks of 8, 4, 2 and 1 items); 0: not in
        chunks (batch_chunks_why says why)."""
        return int(lib.kiln_vm_batch_chunks(self.handle, None))

    @property
    def batch_chunks_why(self) -> str:
        """Why the model does not run its batch in chunks ("" when it does,
        or before its first run)."""
        why = c_char_p()
        lib.kiln_vm_batch_chunks(self.handle, byref(why))
        return (why.value or b"").decode()

    @property
    def num_dynamic_nodes(self) -> int:
        """Data-dependent nodes (those of the last run's shape class)."""
        return lib.kiln_vm_num_dynamic_nodes(self.handle)

    @property
    def num_conversions(self) -> int:
        """Shape classes of data-dependent nodes converted so far (cache misses)."""
        return int(lib.kiln_vm_num_conversions(self.handle))

    @property
    def static_part(self) -> str:
        """"compiled", "reference kernels" or "none"."""
        return lib.kiln_vm_static_part(self.handle).decode()

    @property
    def steps(self) -> List[dict]:
        """The steps of one run, in order (name, op, kind, shapes, layouts,
        hash, flops): the VM's own ("vm"), the static part's ("compiled"),
        then one per data-dependent node ("vm kernel", "vm converted", "vm
        compiled", "vm view", "vm fused", "vm control flow", "vm sequence");
        shapes are those of the last run."""
        out = []
        buf = create_string_buffer(2048)
        for i in range(lib.kiln_vm_num_steps(self.handle)):
            s = _lib.VMStepInfo()
            if lib.kiln_vm_step_info(self.handle, i, byref(s), buf, len(buf)) == 0:
                out.append({"name": s.name.decode(), "op": s.op.decode(),
                            "kind": s.kind.decode(), "shapes": buf.value.decode(),
                            "layouts": (s.layouts or b"").decode(),
                            "hash": "%016x" % s.workload_hash, "flops": s.flops})
        return out

    def _state(self) -> str:
        return f"vm, static part {self.static_part}, {self.num_threads} threads"

    def export(self, path: Union[str, os.PathLike]) -> str:
        """Writes the model as one ``.so`` (its static part compiled, its
        data-dependent part in a VM section; docs/VM.md) that ``kiln.load``,
        ``kiln run|check|bench|profile`` and the C call kiln_vm_load open;
        returns the path. A model loaded from such a .so is copied."""
        path = os.fspath(path)
        if self._so_path is not None:
            try:
                shutil.copyfile(self._so_path, path)
            except OSError as e:
                raise KilnError(f"{path}: cannot write: {e.strerror}", "I/O error") from e
            return path
        src = self._source
        if isinstance(src, bytes):
            data, base = src, None
        else:
            with open(src, "rb") as f:
                data = f.read()
            base = _lib.enc(os.path.dirname(os.path.abspath(src)))
        a = self._compile_args
        co = _lib.CompileOptions(target=_lib.enc(a.get("target")), records=_lib.enc(a.get("records")),
                                 cache_dir=_lib.enc(a.get("cache_dir")), verbose=0, jobs=0)
        err = _lib.Error()
        _lib.check(lib.kiln_vm_export(data, len(data), base, byref(co), None, _lib.enc(path), None,
                                      byref(err)), err)
        return path
