#!/usr/bin/env bash
# tests/models/torchvision.sh KILN [NET...]: exports public torchvision
# networks with Debian's python3-torch (scripts/export_torchvision.py --only
# NET,...; cached under $KILN_FIXTURES, default ~/.cache/kiln/fixtures/torchvision)
# and checks each with `kiln check` against PyTorch's output (rtol 1e-3,
# atol 1e-4). Without NETs: the seven of models/torchvision (resnet18 resnet50
# mobilenet_v2 vgg16 squeezenet1_1 inception_v3 vit_b_16).
set -euo pipefail
kiln=${1:?usage: torchvision.sh path/to/kiln [NET...]}
shift
nets=("$@")
if [ ${#nets[@]} -eq 0 ]; then
  nets=(resnet18 resnet50 mobilenet_v2 vgg16 squeezenet1_1 inception_v3 vit_b_16)
fi
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${KILN_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/fixtures/torchvision}
mkdir -p "$dir"
only=$(IFS=,; echo "${nets[*]}")
nice /usr/bin/python3 "$here/scripts/export_torchvision.py" "$dir" --only "$only"
pass=0
fail=0
for net in "${nets[@]}"; do
  d="$dir/$net"
  if "$kiln" check "$d/model.onnx" --inputs "$d/test_data_set_0/input_0.pb" \
       --outputs "$d/test_data_set_0/output_0.pb" --rtol 1e-3 --atol 1e-4; then
    echo "torchvision $net: passed"
    pass=$((pass + 1))
  else
    echo "torchvision $net: FAILED"
    fail=$((fail + 1))
  fi
done
echo "torchvision exports: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
