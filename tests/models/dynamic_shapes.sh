#!/usr/bin/env bash
# tests/models/dynamic_shapes.sh KILN VM_CHECK_SETS: ONNX models whose inputs
# have symbolic dims (PyTorch dynamic_axes). Exports a small convnet, a
# transformer block and two batch-only models, one whose items are computed
# apart and one whose items meet (scripts/export_dynamic.py, cached under $KILN_FIXTURES,
# default $XDG_CACHE_HOME/kiln/fixtures) with PyTorch's outputs at two input
# shapes each, then checks:
# - one process, shapes A B A B (vm_check_sets, compiled and reference): every
#   output matches PyTorch's, and the model is imported twice, not four times;
# - a symbolic batch: batchnet and batchattn run in chunks (three
#   specializations for batches 11 and 3), batchmix does not (its outputs
#   would be wrong), and
#   kiln run says which and why;
# - the CLI: kiln check at each shape; kiln run without an input names the
#   symbolic dim and the options; --input-shape; a wrong rank and a fixed dim
#   that differs are errors naming the input (exit 2); kiln compile refuses
#   without --input-shape and compiles with it; bench and profile run.
set -euo pipefail
kiln=${1:?usage: dynamic_shapes.sh path/to/kiln path/to/vm_check_sets}
sets=${2:?usage: dynamic_shapes.sh path/to/kiln path/to/vm_check_sets}
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${KILN_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/fixtures}
mkdir -p "$dir"
nice /usr/bin/python3 "$here/scripts/export_dynamic.py" "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dynamic shapes: FAILED: $*"; exit 1; }
# expect_error WHAT TEXT... -- CMD...: CMD exits 2 and prints every TEXT
expect_error() {
  local what=$1; shift
  local want=()
  while [ "$1" != "--" ]; do want+=("$1"); shift; done
  shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  echo "$out" | tail -2
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
  for w in "${want[@]}"; do
    grep -qF -- "$w" <<<"$out" || fail "$what: no '$w' in the message"
  done
}

for m in convnet transformer; do
  d="$dir/dynamic/$m"
  A="$d/test_data_set_0" B="$d/test_data_set_1"
  echo "== $m: one process, shapes A B A B"
  "$sets" --specializations 2 "$d/model.onnx" "$A" "$B" "$A" "$B" || fail "$m compiled"
  "$sets" --reference --specializations 2 "$d/model.onnx" "$A" "$B" "$A" || fail "$m reference"
  for s in "$A" "$B"; do
    "$kiln" check "$d/model.onnx" --inputs "$s/input_0.pb" --outputs "$s/output_0.pb" ||
      fail "$m: kiln check $s"
  done
done

# A symbolic batch: batchnet computes its items apart, so batches of 11
# (8 + 2 + 1) and 3 (2 + 1) are chunks of three extents, three
# specializations in all; batchmix's items meet (the batch's mean), so each
# batch is its own class, and chunks would give PyTorch's outputs wrong.
d="$dir/dynamic/batchnet"
A="$d/test_data_set_0" B="$d/test_data_set_1"
echo "== batchnet: a symbolic batch in chunks, A B A B"
"$sets" --chunked --specializations 3 "$d/model.onnx" "$A" "$B" "$A" "$B" || fail "batchnet compiled"
"$sets" --reference --chunked --specializations 3 "$d/model.onnx" "$A" "$B" || fail "batchnet reference"
"$kiln" run "$d/model.onnx" --input "$A/input_0.pb" | grep -F "batch:   11 items in 3 chunks" ||
  fail "batchnet: kiln run does not say its chunks"
d="$dir/dynamic/batchattn"
echo "== batchattn: nn.MultiheadAttention's layout, in chunks"
"$sets" --chunked --specializations 3 "$d/model.onnx" "$d/test_data_set_0" "$d/test_data_set_1" \
  "$d/test_data_set_0" || fail "batchattn"
d="$dir/dynamic/batchmix"
A="$d/test_data_set_0" B="$d/test_data_set_1"
echo "== batchmix: items that meet, one class per batch"
"$sets" --not-chunked --specializations 2 "$d/model.onnx" "$A" "$B" "$A" || fail "batchmix"
"$kiln" run "$d/model.onnx" --input "$A/input_0.pb" |
  grep -F "the items of a batch meet: ReduceMean" || fail "batchmix: kiln run does not say why"
"$kiln" run "$dir/dynamic/transformer/model.onnx" --input-shape x=2x7x16 |
  grep -F "input 'x' has a symbolic dim other than axis 0" || fail "transformer: why not chunks"

c="$dir/dynamic/convnet"
t="$dir/dynamic/transformer"
echo "== kiln run: the shape from the input, or --input-shape"
"$kiln" run "$c/model.onnx" --input "$c/test_data_set_1/input_0.pb" | grep -F "input:   x float32 [3, 3, 20, 12]" ||
  fail "run --input"
"$kiln" run "$t/model.onnx" --input-shape x=2x7x16 | grep -F "output:  y float32 [2, 7, 16]" ||
  fail "run --input-shape"
expect_error "run without a shape" "input 0 'x' dim 0 ('batch') is symbolic" "--input FILE" \
  "--input-shape x=" -- "$kiln" run "$c/model.onnx"
expect_error "wrong rank" "input 'x' has rank 4" "[batch, 3, height, width]" "got rank 3" -- \
  "$kiln" run "$c/model.onnx" --input "$t/test_data_set_0/input_0.pb"
expect_error "fixed dim" "input 'x' dim 2 is 16" "got 17" -- \
  "$kiln" run "$t/model.onnx" --input-shape x=2x5x17
expect_error "unknown input name" "no input named 'y'" -- \
  "$kiln" run "$t/model.onnx" --input-shape y=2x5x16
expect_error "--input-shape with --input" "not with --input" -- \
  "$kiln" run "$t/model.onnx" --input-shape x=2x5x16 --input "$t/test_data_set_0/input_0.pb"

echo "== kiln compile --input-shape"
expect_error "compile without --input-shape" "input 'x' has a symbolic dimension 'batch'" \
  "--input-shape x=DIMS" -- "$kiln" compile "$c/model.onnx" -o "$tmp/c.so" --quiet
"$kiln" compile "$c/model.onnx" -o "$tmp/c.so" --quiet --input-shape x=3x3x20x12 ||
  fail "compile --input-shape"
"$kiln" check "$tmp/c.so" --inputs "$c/test_data_set_1/input_0.pb" \
  --outputs "$c/test_data_set_1/output_0.pb" || fail "the compiled .so"
expect_error "compile, a fixed dim bound to another extent" "input 'x' dim 1 is 3, bound to 4" -- \
  "$kiln" compile "$c/model.onnx" -o "$tmp/c2.so" --quiet --input-shape x=1x4x16x16

echo "== kiln bench and profile"
"$kiln" bench "$t/model.onnx" --input-shape x=1x9x16 --repeat 2 --number 5 | grep -F "ProfileResult" ||
  fail "bench"
"$kiln" profile "$c/model.onnx" --input "$c/test_data_set_0/input_0.pb" --runs 3 --warmup 1 \
  --no-bench | grep -F "Total" || fail "profile"
echo "dynamic shapes: passed"
