#!/usr/bin/env bash
# tests/models/bert.sh KILN: exports the BERT-base encoder (scripts/export_bert.py,
# our own module with Hugging Face BertModel's structure, seeded weights; cached
# under $KILN_FIXTURES, default $XDG_CACHE_HOME/kiln/fixtures) and checks it with
# `kiln check` against PyTorch's output (rtol 1e-3, atol 1e-4); the compiled model
# must have no node on the reference fallback (the CLI names them on stderr).
set -euo pipefail
kiln=${1:?usage: bert.sh path/to/kiln}
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${KILN_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/fixtures}
mkdir -p "$dir"
nice /usr/bin/python3 "$here/scripts/export_bert.py" "$dir"
d="$dir/bert"
out=$("$kiln" check "$d/model.onnx" --inputs "$d/test_data_set_0/input_0.pb" \
  "$d/test_data_set_0/input_1.pb" --outputs "$d/test_data_set_0/output_0.pb" \
  --rtol 1e-3 --atol 1e-4 2>&1) || { echo "$out"; echo "bert export: FAILED"; exit 1; }
echo "$out"
if grep -q "reference kernel" <<<"$out"; then
  echo "bert export: FAILED (nodes on the reference fallback)"
  exit 1
fi
echo "bert export: passed"
