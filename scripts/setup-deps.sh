#!/usr/bin/env bash
# scripts/setup-deps.sh: installs the Debian packages kiln needs, only those
# that are missing. Called by `make run` and `make test`; safe to run again.
# Each package and what it is for is listed in README.md.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # compiler, build system
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev  # ONNX TensorProto/ModelProto decoding
  libcmocka-dev                      # unit-test framework
  libcjson-dev                       # JSON: profiler reports, model metadata, tuning records
  libonnx-testdata                   # the ONNX backend conformance suite (tests/onnx-backend)
  python3 python3-numpy python3-onnx # test fixtures (.npy/.pb/.onnx generators)
  python3-torch python3-torchvision  # exporting real networks to ONNX with reference outputs
  libopenblas0-pthread               # PyTorch's matmuls for those exports (Debian's torch calls the
                                     # libblas.so.3 alternative; the reference BLAS took 14 s for
                                     # one ViT-B/16 forward, OpenBLAS 0.3 s)
  python3-venv                       # make bench: the peers' venv (bench/requirements.txt)
  python3-pytest                     # the Python package's tests (python/tests; python3-venv for its pip-install test)
  clang libclang-rt-14-dev           # the libFuzzer target for the ONNX importer (tests/fuzz)
  libopenmpi-dev openmpi-bin         # optional: kiln tune's MPI workers (tools/kiln/tune_mpi.c)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing missing packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
