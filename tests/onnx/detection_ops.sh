#!/usr/bin/env bash
# tests/onnx/detection_ops.sh KILN: the ops of torchvision's detection networks
# (RoiAlign, NonMaxSuppression, ScatterElements, GatherND, Resize), each a small
# ONNX model in tests/data/detection_ops/ whose expected output comes from
# torchvision / torch (and agrees with ONNX Runtime; make_fixtures.py there),
# checked with `kiln check` (rtol 1e-4, atol 1e-5) on the reference executor
# and on the default compiled one (or the VM, where the model needs it).
set -euo pipefail
kiln=${1:?usage: detection_ops.sh path/to/kiln}
data=$(cd "$(dirname "$0")/../data/detection_ops" && pwd)
pass=0
fail=0
for d in "$data"/*/; do
  name=$(basename "$d")
  ins=()
  outs=()
  for f in "$d"test_data_set_0/input_*.pb; do [ -e "$f" ] && ins+=("$f"); done
  for f in "$d"test_data_set_0/output_*.pb; do outs+=("$f"); done
  for ex in ref graph; do
    if out=$("$kiln" check "$d/model.onnx" --executor "$ex" --inputs "${ins[@]}" \
               --outputs "${outs[@]}" --rtol 1e-4 --atol 1e-5 2>&1); then
      pass=$((pass + 1))
    else
      echo "$out" | tail -8
      echo "detection op $name ($ex): FAILED"
      fail=$((fail + 1))
    fi
  done
done
echo "detection ops: $pass passed, $fail failed"
[ "$pass" -gt 0 ] && [ "$fail" -eq 0 ]
