"""Fixtures of the Python package's tests (run by ctest as python/pytest with
KILN_LIBRARY_DIR, KILN_CLI and XDG_CACHE_HOME set; see tests/CMakeLists.txt)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import kiln


def _cli():
    exe = os.environ.get("KILN_CLI") or shutil.which("kiln")
    if not exe:
        pytest.skip("no kiln CLI (set KILN_CLI)")
    return exe


@pytest.fixture(scope="session")
def cli():
    return _cli()


def run_cli(cli, *args):
    """Runs the CLI, fails the test with its stderr on a non-zero exit."""
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"kiln {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


@pytest.fixture(scope="session")
def mlp():
    return kiln.compile("mlp", num_threads=1)


@pytest.fixture(scope="session")
def squeezenet():
    return kiln.compile("squeezenet-1.1", num_threads=1)


def reference(cli, model, inputs, tmp_path):
    """The first output of `model` (a zoo name or .onnx) on `inputs` from the
    reference executor (kiln run --executor ref)."""
    args = ["run", model, "--executor", "ref"]
    for i, x in enumerate(inputs):
        p = tmp_path / f"in{i}.npy"
        np.save(p, x)
        args += ["--input", p]
    out = tmp_path / "ref.npy"
    run_cli(cli, *args, "--output", out)
    return np.load(out)
