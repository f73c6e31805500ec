#!/usr/bin/env bash
# tests/vm/runtime_only.sh KILN VM_RUNTIME_ONLY: models the VM runs (dynamic
# nodes, If, NonMaxSuppression, RoiAlign; a compiled static part or none),
# compiled by `kiln compile` into one .so each, then run by
# vm_runtime_only, a program linked against libkiln_runtime alone, with no C
# compiler reachable (CC=/nonexistent) and an empty cache: the .so matches
# the expected outputs, the .onnx is refused without a compiler where its
# static part needs one, and runs on reference kernels (vm_runtime_only.c).
set -euo pipefail
kiln=${1:?usage: runtime_only.sh KILN VM_RUNTIME_ONLY}
rt=${2:?usage: runtime_only.sh KILN VM_RUNTIME_ONLY}
data=$(cd "$(dirname "$0")/../data/detection_ops" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the program holds no compiler: none of libkiln's compiling entry points
if nm "$rt" | grep -E " [Tt] (kiln_compile|kiln_vm_compile_graph|kiln_vm_export|kiln_build_create|kiln_tc_begin)$"; then
  echo "runtime_only: $rt has the compiler linked in"
  exit 1
fi
for m in multiscale_roi_align batched_nms_export nms_torchvision; do
  d=$data/$m
  "$kiln" compile "$d/model.onnx" -o "$tmp/$m.so" > "$tmp/compile.log" 2>&1 ||
    { cat "$tmp/compile.log"; echo "runtime_only: $m: kiln compile failed"; exit 1; }
  ins=()
  outs=()
  for f in "$d"/test_data_set_0/input_*.pb; do [ -e "$f" ] && ins+=("$f"); done
  for f in "$d"/test_data_set_0/output_*.pb; do outs+=("$f"); done
  CC=/nonexistent XDG_CACHE_HOME="$tmp/cache" "$rt" "$tmp/$m.so" "$d/model.onnx" "${ins[@]}" -- "${outs[@]}"
done
echo "runtime_only: 3 models OK"
