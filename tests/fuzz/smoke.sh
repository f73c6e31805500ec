#!/usr/bin/env bash
# tests/fuzz/smoke.sh SRC GEN OUT [SECONDS]: builds the libFuzzer target for
# the ONNX importer (tests/fuzz/fuzz_onnx.c) with clang, ASan and UBSan, replays
# the committed regression inputs (tests/fuzz/regressions/), then fuzzes for
# SECONDS (default $KILN_FUZZ_SECONDS or 60) from a corpus seeded with the
# project's tiny models and the smallest models of the ONNX conformance suite.
# Any crash, leak, timeout or sanitizer report fails the run; libFuzzer writes
# the offending input to OUT/ so it can be committed as a regression.
set -euo pipefail
src=${1:?usage: smoke.sh SRC GEN OUT [SECONDS]}
gen=${2:?}
out=${3:?}
secs=${4:-${KILN_FUZZ_SECONDS:-60}}
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
  echo "fuzz smoke: clang not found (scripts/setup-deps.sh installs it)" >&2
  exit 1
fi
mkdir -p "$out"
bin="$out/fuzz_onnx"
# The fuzzer is rebuilt only when a source is newer than it. It links only
# what the importer needs: util, ir, ref, import, io.
if [ ! -x "$bin" ] || [ -n "$(find "$src/src" "$src/include" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]' | head -1)" ]; then
  echo "fuzz smoke: building $bin with $cc"
  "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -std=c11 -D_XOPEN_SOURCE=700 -Wall -Wextra -I"$src/include" -I"$src/src" -I"$gen" \
    "$src/tests/fuzz/fuzz_onnx.c" \
    $(find "$src/src/util" "$src/src/ir" "$src/src/ref" "$src/src/import" "$src/src/io" -name '*.c') \
    "$gen/onnx.pb-c.c" \
    -lprotobuf-c -lm -o "$bin"
fi
opts=(-rss_limit_mb=2048 -timeout=10 -malloc_limit_mb=1024)
regs=("$src"/tests/fuzz/regressions/*)
if [ -e "${regs[0]}" ]; then
  echo "fuzz smoke: replaying ${#regs[@]} regression inputs"
  "$bin" "${opts[@]}" "${regs[@]}"
fi
corpus="$out/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"
for m in "$src"/tests/data/onnx/*/model.onnx; do cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"; done
if [ -d /usr/share/libonnx-testdata/data/node ]; then
  # (no `| head` here: with pipefail, the writer's SIGPIPE would fail the run)
  mapfile -t small < <(find /usr/share/libonnx-testdata/data/node -name model.onnx -size -2k | sort)
  for m in "${small[@]:0:200}"; do cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"; done
fi
seeds=("$corpus"/*)
echo "fuzz smoke: ${#seeds[@]} seeds, ${secs}s"
cd "$out"
"$bin" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 "$corpus"
echo "fuzz smoke: no crash, leak or hang in ${secs}s"
