"""ctypes declarations of kiln's C API (include/kiln/*.h, and the VM's
src/vm/vm.h) and the library loader.

The libraries are looked up, in order, in $KILN_LIBRARY_DIR (a CMake build
folder, for development and the in-tree tests) and in the package's own
_lib folder (where `pip install ./python` puts them). ctypes.CDLL releases
the GIL during every foreign call, so a model runs while other Python threads
go on.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int, c_int32,
                    c_int64, c_size_t, c_uint64, c_void_p)

import numpy as np

MAX_RANK = 8
BENCH_MAX_REPEAT = 10000


# kiln_dtype numbering (include/kiln/types.h) <-> numpy
DTYPES = [None, np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16,
          np.int32, np.uint32, np.int64, np.uint64, np.bool_]
DTYPE_NAMES = [None, "float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
               "int32", "uint32", "int64", "uint64", "bool"]


class KilnError(Exception):
    """An error reported by kiln (or a bad argument caught before calling it).

    ``status`` is kiln's status name ("shape mismatch", "not found", ...);
    the message is kiln's own, naming what was wrong and where. ``code`` is
    kiln's numeric status when the error came from kiln, else None."""

    def __init__(self, message: str, status: str = "invalid argument", code=None):
        super().__init__(message)
        self.status = status
        self.code = code


class Error(Structure):
    _fields_ = [("status", c_int), ("msg", c_char * 1024)]


class Shape(Structure):
    _fields_ = [("rank", c_int32), ("dims", c_int64 * MAX_RANK)]

    def to_tuple(self) -> tuple:
        return tuple(int(self.dims[i]) for i in range(self.rank))


class Tensor(Structure):
    _fields_ = [("dtype", c_int), ("shape", Shape), ("data", c_void_p)]


class ZooInfo(Structure):
    _fields_ = [("name", c_char_p), ("description", c_char_p), ("input_shape", Shape)]


class CompileOptions(Structure):
    _fields_ = [("target", c_char_p), ("records", c_char_p), ("cache_dir", c_char_p),
                ("dump_code_dir", c_char_p), ("print_ir_after", c_char_p), ("verbose", c_int),
                ("jobs", c_int)]


class ModuleOptions(Structure):
    _fields_ = [("num_threads", c_int), ("bind_threads", c_int)]


class BenchOptions(Structure):
    _fields_ = [("number", c_int), ("repeat", c_int), ("min_repeat_ms", c_double),
                ("cooldown_ms", c_double), ("flush_cache", c_int),
                ("preproc", c_void_p), ("preproc_ctx", c_void_p)]  # NULL from Python


class BenchResult(Structure):
    _fields_ = [("mean", c_double), ("median", c_double), ("min", c_double), ("max", c_double),
                ("std", c_double), ("number", c_int), ("repeat", c_int), ("threads", c_int),
                ("results", c_double * BENCH_MAX_REPEAT)]


class StepInfo(Structure):
    _fields_ = [("name", c_char_p), ("op", c_char_p), ("workload", c_char_p),
                ("shapes", c_char_p), ("layouts", c_char_p), ("config", c_char_p),
                ("workload_hash", c_uint64), ("flops", c_double)]


class VMOptions(Structure):
    # compile: NULL, so libkiln's kiln_vm_create/kiln_vm_load use its compiler
    _fields_ = [("reference", c_bool), ("num_threads", c_int), ("cache_dir", c_char_p),
                ("target", c_char_p), ("records", c_char_p), ("compile", c_void_p)]


class VMStepInfo(Structure):
    _fields_ = [("name", c_char_p), ("op", c_char_p), ("kind", c_char_p), ("layouts", c_char_p),
                ("flops", c_double), ("workload_hash", c_uint64)]


class ProfileOptions(Structure):
    _fields_ = [("runs", c_int), ("warmup", c_int), ("bench_number", c_int),
                ("bench_repeat", c_int), ("no_bench", c_int), ("peak_gflops", c_double),
                ("model", c_char_p)]


def _candidates():
    env = os.environ.get("KILN_LIBRARY_DIR")
    if env:
        yield env
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")


def _load():
    tried = []
    for d in _candidates():
        path = os.path.join(d, "libkiln.so")
        if os.path.exists(path):
            # the runtime first, by path, so that libkiln.so's dependency
            # resolves to the copy beside it whatever its RPATH says
            rt = os.path.join(d, "libkiln_runtime.so")
            if os.path.exists(rt):
                ctypes.CDLL(rt, mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path)
        tried.append(path)
    raise ImportError("kiln: libkiln.so not found (looked for %s); install the package with "
                      "`pip install ./python` or set KILN_LIBRARY_DIR to a CMake build folder"
                      % ", ".join(tried))


lib = _load()

_status = c_int
_E = POINTER(Error)


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


# types.h
_proto("kiln_status_str", c_char_p, c_int)
# kiln.h
_proto("kiln_graph_destroy", None, c_void_p)
_proto("kiln_zoo_count", c_int)
_proto("kiln_zoo_get", POINTER(ZooInfo), c_int)
_proto("kiln_zoo_find", POINTER(ZooInfo), c_char_p)
_proto("kiln_onnx_load_buffer", _status, c_void_p, c_size_t, c_char_p, POINTER(c_void_p), _E)
_proto("kiln_compile_cached", _status, c_char_p, c_uint64, POINTER(CompileOptions),
       POINTER(c_void_p), _E)
_proto("kiln_model_load", _status, c_char_p, c_uint64, POINTER(c_void_p), _E)
_proto("kiln_compile", _status, c_void_p, POINTER(CompileOptions), c_char_p, _E)
_proto("kiln_build_create", _status, c_void_p, POINTER(CompileOptions), POINTER(c_void_p), _E)
_proto("kiln_build_destroy", None, c_void_p)
_proto("kiln_build_link", _status, c_void_p, c_char_p, _E)
_proto("kiln_build_output", c_char_p, c_void_p)
# runtime.h
_proto("kiln_module_load", _status, c_char_p, POINTER(ModuleOptions), POINTER(c_void_p), _E)
_proto("kiln_module_destroy", None, c_void_p)
_proto("kiln_module_num_inputs", c_int, c_void_p)
_proto("kiln_module_num_outputs", c_int, c_void_p)
_proto("kiln_module_input_info", _status, c_void_p, c_int, POINTER(c_char_p), POINTER(c_int),
       POINTER(Shape))
_proto("kiln_module_output_info", _status, c_void_p, c_int, POINTER(c_char_p), POINTER(c_int),
       POINTER(Shape))
_proto("kiln_module_set_input", _status, c_void_p, c_int, POINTER(Tensor), _E)
_proto("kiln_module_run", _status, c_void_p, _E)
_proto("kiln_module_output", POINTER(Tensor), c_void_p, c_int)
_proto("kiln_module_num_threads", c_int, c_void_p)
_proto("kiln_module_name", c_char_p, c_void_p)
_proto("kiln_module_target", c_char_p, c_void_p)
_proto("kiln_module_build_id", c_char_p, c_void_p)
_proto("kiln_module_metadata_json", c_char_p, c_void_p)
_proto("kiln_module_num_steps", c_int, c_void_p)
_proto("kiln_module_step_info", _status, c_void_p, c_int, POINTER(StepInfo))
_proto("kiln_module_bench", _status, c_void_p, POINTER(BenchOptions), POINTER(BenchResult), _E)
_proto("kiln_runtime_physical_cores", c_int)
# profile.h
_proto("kiln_profile_module", _status, c_void_p, POINTER(ProfileOptions), POINTER(c_void_p), _E)
_proto("kiln_profile_parse_json", _status, c_char_p, c_char_p, POINTER(c_void_p), _E)
_proto("kiln_profile_destroy", None, c_void_p)
_proto("kiln_profile_format", _status, c_void_p, c_char_p, c_char_p, c_char_p, c_int,
       POINTER(c_void_p), _E)
_proto("kiln_profile_compare", _status, c_void_p, c_char_p, c_void_p, c_char_p, c_char_p,
       c_char_p, c_int, POINTER(c_void_p), _E)
_proto("kiln_free", None, c_void_p)
# vm/vm.h: models with control flow, data-dependent shapes, symbolic input dims
_proto("kiln_vm_needed", c_bool, c_int, c_char_p)
_proto("kiln_vm_create", _status, c_char_p, POINTER(VMOptions), POINTER(c_void_p), _E)
_proto("kiln_vm_create_buffer", _status, c_char_p, c_size_t, c_char_p, POINTER(VMOptions),
       POINTER(c_void_p), _E)
_proto("kiln_vm_destroy", None, c_void_p)
_proto("kiln_vm_num_inputs", c_int, c_void_p)
_proto("kiln_vm_num_outputs", c_int, c_void_p)
_proto("kiln_vm_input_info", _status, c_void_p, c_int, POINTER(c_char_p), POINTER(c_int),
       POINTER(Shape))
_proto("kiln_vm_output_info", _status, c_void_p, c_int, POINTER(c_char_p), POINTER(c_int),
       POINTER(Shape))
_proto("kiln_vm_input_dim_param", c_char_p, c_void_p, c_int, c_int)
_proto("kiln_vm_symbolic", c_bool, c_void_p)
_proto("kiln_vm_num_specializations", c_int64, c_void_p)
_proto("kiln_vm_batch_chunks", c_int, c_void_p, POINTER(c_char_p))
_proto("kiln_vm_set_input", _status, c_void_p, c_int, POINTER(Tensor), _E)
_proto("kiln_vm_run", _status, c_void_p, _E)
_proto("kiln_vm_output", POINTER(Tensor), c_void_p, c_int)
_proto("kiln_vm_num_steps", c_int, c_void_p)
_proto("kiln_vm_step_info", _status, c_void_p, c_int, POINTER(VMStepInfo), c_char_p, c_size_t)
_proto("kiln_vm_num_dynamic_nodes", c_int, c_void_p)
_proto("kiln_vm_static_part", c_char_p, c_void_p)
_proto("kiln_vm_num_conversions", c_int64, c_void_p)
_proto("kiln_vm_num_threads", c_int, c_void_p)
_proto("kiln_vm_bench", _status, c_void_p, POINTER(BenchOptions), POINTER(BenchResult), _E)
_proto("kiln_vm_profile", _status, c_void_p, POINTER(ProfileOptions), POINTER(c_void_p), _E)
_proto("kiln_vm_export", _status, c_char_p, c_size_t, c_char_p, POINTER(CompileOptions), c_void_p,
       c_char_p, c_void_p, _E)
_proto("kiln_vm_so_has_section", c_bool, c_char_p)
_proto("kiln_vm_load", _status, c_char_p, POINTER(VMOptions), POINTER(c_void_p), _E)
_proto("kiln_vm_from_so", c_bool, c_void_p)
_proto("kiln_vm_heavy_on_reference", c_bool, c_void_p)

def status_name(st: int) -> str:
    return lib.kiln_status_str(st).decode()


def check(st: int, err: Error, what: str = "") -> None:
    """Raises KilnError with kiln's message when st is not KILN_OK."""
    if st != 0:
        msg = err.msg.decode(errors="replace") or status_name(st)
        raise KilnError(f"{what}: {msg}" if what and not msg.startswith(what) else msg,
                        status_name(st), st)


def take_string(p: c_void_p) -> str:
    """Copies a malloc'ed C string handed out by kiln and frees it."""
    try:
        return ctypes.string_at(p.value).decode(errors="replace")
    finally:
        lib.kiln_free(p)


def enc(s) -> bytes | None:
    if s is None:
        return None
    return os.fsencode(s)
