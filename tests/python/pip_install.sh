#!/usr/bin/env bash
# tests/python/pip_install.sh SOURCE_DIR WORK_DIR PYTHON
# The README's install command in a fresh virtual environment: `pip install
# ./python` (scikit-build-core, from PyPI, runs the project's CMake and puts
# libkiln.so and libkiln_runtime.so into the package), then the package used
# from outside the source tree with nothing pointing at a build folder:
# compile the zoo's mlp, run it, time it, profile it; a NonZero model (ONNX
# bytes) on the VM, run and timed. The venv sees the
# system's numpy (--system-site-packages); scikit-build-core's build folder
# is WORK_DIR/skbuild, kept between runs so a rerun rebuilds only what changed.
set -euo pipefail
src=$1 work=$2 python=${3:-/usr/bin/python3}
mkdir -p "$work"
rm -rf "$work/venv" "$work/cache"
"$python" -m venv --system-site-packages "$work/venv"
cd "$src"
"$work/venv/bin/pip" install --disable-pip-version-check -q \
    --config-settings=build-dir="$work/skbuild" ./python
cd "$work"
unset KILN_LIBRARY_DIR PYTHONPATH KILN_CLI
XDG_CACHE_HOME=$work/cache "$work/venv/bin/python" - <<'PY'
import os, sys
import numpy as np
import kiln
lib = os.path.join(os.path.dirname(kiln.__file__), "_lib")
assert kiln.__file__.startswith(sys.prefix), kiln.__file__
assert {"libkiln.so", "libkiln_runtime.so", "kiln"} <= set(os.listdir(lib)), os.listdir(lib)
assert kiln._cli() == os.path.join(lib, "kiln"), kiln._cli()
m = kiln.compile("mlp")
(y,) = m.run(np.zeros((1, 784), np.float32))
assert y.shape == (1, 10)
r = m.benchmark(repeat=3)
print(r)
assert len(r.results) == 3
assert "Total" in m.profile(runs=5, bench=False, peak_gflops=100).table()
try:  # a model on the VM (a data-dependent shape) from the installed package
    from onnx import TensorProto, helper
except ImportError:
    helper = None
if helper:
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "nz",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [1, None])])
    vm = kiln.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
                      .SerializeToString())
    assert isinstance(vm, kiln.VMModule), vm
    np.testing.assert_array_equal(vm.run(np.array([0, 2, 0, 3], np.float32))[0], [[1, 3]])
    assert vm.benchmark(repeat=2, inputs=[np.ones(5, np.float32)]).repeat == 2
print("pip_install: 1 passed, 0 failed")
PY
