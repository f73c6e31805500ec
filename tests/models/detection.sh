#!/usr/bin/env bash
# tests/models/detection.sh KILN [NET...]: exports torchvision's detection
# networks (scripts/export_detection.py: ssdlite320_mobilenet_v3_large and
# fasterrcnn_mobilenet_v3_large_320_fpn, seeded weights with calibrated
# batch-norm statistics, two test images; cached under $KILN_FIXTURES,
# default $XDG_CACHE_HOME/kiln/fixtures/detection), runs each on each test
# image with `kiln run` (writing boxes, scores and labels) and compares the
# detections with PyTorch's in score order (scripts/compare_detection.py:
# labels exact, scores rtol 1e-3 / atol 1e-4, boxes within 1e-3 of the image
# size; tied detections pair up in either order, and only a detection at the
# score cut or at the export's score threshold, 0.01, may be missing on one side).
# SSDlite also compiles to one .so (kiln compile) that runs with CC pointing
# at nothing: the same comparison.
set -euo pipefail
kiln=${1:?usage: detection.sh path/to/kiln [NET...]}
shift
nets=("$@")
if [ ${#nets[@]} -eq 0 ]; then
  nets=(ssdlite320_mobilenet_v3_large fasterrcnn_mobilenet_v3_large_320_fpn)
fi
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${KILN_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/fixtures/detection}
mkdir -p "$dir"
/usr/bin/python3 "$here/scripts/compare_detection.py" --self-test
only=$(IFS=,; echo "${nets[*]}")
nice /usr/bin/python3 "$here/scripts/export_detection.py" "$dir" --only "$only" 2> >(grep -v -i warn >&2 || true)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
for net in "${nets[@]}"; do
  d="$dir/$net"
  for set in "$d"/test_data_set_*; do
    k=${set##*_}
    got=("$tmp/boxes.pb" "$tmp/scores.pb" "$tmp/labels.pb")
    rm -f "${got[@]}"
    if out=$("$kiln" run "$d/model.onnx" --input "$set/input_0.pb" --output "${got[0]}" \
               --output "${got[1]}" --output "${got[2]}" 2>&1) &&
       cmp=$(/usr/bin/python3 "$here/scripts/compare_detection.py" --got "${got[@]}" \
               --want "$set/output_0.pb" "$set/output_1.pb" "$set/output_2.pb" \
               --score-thresh 0.01); then
      grep -E "^executor:|^time:|reference kernel" <<<"$out" || true
      echo "detection $net image $k: passed: $cmp"
      pass=$((pass + 1))
    else
      echo "$out" | tail -20
      echo "${cmp:-}"
      echo "detection $net image $k: FAILED"
      fail=$((fail + 1))
      cmp=
    fi
  done
done
# one .so (kiln compile of a model the VM runs: static part compiled plus a
# VM section, docs/VM.md "One .so"), run with no C compiler: SSDlite only
# (its static part's kernels are cached by the runs above; Faster R-CNN's
# would add minutes)
for net in "${nets[@]}"; do
  [ "$net" = ssdlite320_mobilenet_v3_large ] || continue
  d="$dir/$net"
  if ! out=$("$kiln" compile "$d/model.onnx" -o "$tmp/$net.so" 2>&1); then
    echo "$out" | tail -20
    echo "detection $net: kiln compile to one .so FAILED"
    fail=$((fail + 1))
    continue
  fi
  grep -E "VM section" <<<"$out" || true
  for set in "$d"/test_data_set_*; do
    k=${set##*_}
    got=("$tmp/boxes.pb" "$tmp/scores.pb" "$tmp/labels.pb")
    rm -f "${got[@]}"
    if out=$(CC=/nonexistent/cc "$kiln" run "$tmp/$net.so" --input "$set/input_0.pb" \
               --output "${got[0]}" --output "${got[1]}" --output "${got[2]}" 2>&1) &&
       cmp=$(/usr/bin/python3 "$here/scripts/compare_detection.py" --got "${got[@]}" \
               --want "$set/output_0.pb" "$set/output_1.pb" "$set/output_2.pb" \
               --score-thresh 0.01); then
      grep -E "^executor:|^time:" <<<"$out" || true
      echo "detection $net image $k through one .so (no C compiler): passed: $cmp"
      pass=$((pass + 1))
    else
      echo "$out" | tail -20
      echo "${cmp:-}"
      echo "detection $net image $k through one .so: FAILED"
      fail=$((fail + 1))
      cmp=
    fi
  done
done
echo "detection exports: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
