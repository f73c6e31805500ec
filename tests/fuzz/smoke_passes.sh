#!/usr/bin/env bash
# tests/fuzz/smoke_passes.sh SRC OUT [SECONDS]: builds the libFuzzer target for
# the pass pipeline and lowering (tests/fuzz/fuzz_passes.c: the fuzzer's bytes
# build a small valid graph through the IR API, which then goes through every
# pass and kiln_lower) with clang, ASan and UBSan, replays the committed
# regression inputs (tests/fuzz/regressions-passes/), then fuzzes for SECONDS
# (default $KILN_FUZZ_SECONDS or 45) from those and a few random seeds. Any
# crash, leak, timeout, sanitizer report or internal error fails the run;
# libFuzzer writes the offending input to OUT/ so it can be committed as a
# regression.
#
# The generator needs no seeds: any byte string is a graph. To fuzz longer by
# hand: smoke_passes.sh . /tmp/fp 600, or run OUT/fuzz_passes directly with
# -jobs/-workers; KILN_FUZZ_STATS=1 prints what the generated graphs did.
# KILN_FUZZ_CFLAGS=-DKILN_FUZZ_ALL (with another OUT) also generates the graphs
# of the known open bugs (fuzz_passes.c, known_bug), to check a fix; the
# inputs in tests/fuzz/open-passes/ reproduce them (none is open: fixed
# ones move to tests/fuzz/regressions-passes/).
set -euo pipefail
src=${1:?usage: smoke_passes.sh SRC OUT [SECONDS]}
out=${2:?}
secs=${3:-${KILN_FUZZ_SECONDS:-45}}
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
  echo "fuzz passes: clang not found (scripts/setup-deps.sh installs it)" >&2
  exit 1
fi
mkdir -p "$out"
bin="$out/fuzz_passes"
# Rebuilt only when a source (or this script) is newer than the binary. Links
# the IR, the reference kernels, the passes and, for kiln_lower, lowering with
# what it needs (the kernel templates and the target); no importer, no
# compiler driver.
if [ ! -x "$bin" ] || [ "$0" -nt "$bin" ] ||
   [ -n "$(find "$src/src" "$src/include" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]' | head -1)" ]; then
  echo "fuzz passes: building $bin with $cc"
  dirs=()
  for d in util ir ref pass lower codegen target; do
    dirs+=("$src/src/$d")
  done
  # shellcheck disable=SC2086 # KILN_FUZZ_CFLAGS is a list of flags
  "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE -DKILN_FUZZ_LOWER ${KILN_FUZZ_CFLAGS:-} \
    -Wall -Wextra \
    -I"$src/include" -I"$src/src" -I"$src/src/codegen/c/kernels" \
    "$src/tests/fuzz/fuzz_passes.c" $(find "${dirs[@]}" -name '*.c') \
    -lm -lpthread -o "$bin"
fi
# -len_control=0: long inputs (graphs of 20-40 nodes) from the start
opts=(-rss_limit_mb=2048 -timeout=20 -malloc_limit_mb=1024 -max_len=512 -len_control=0)
regs=("$src"/tests/fuzz/regressions-passes/*)
if [ -e "${regs[0]}" ]; then
  echo "fuzz passes: replaying ${#regs[@]} regression inputs"
  "$bin" "${opts[@]}" "${regs[@]}"
fi
corpus="$out/corpus-passes"
rm -rf "$corpus"
mkdir -p "$corpus"
# seeds: the regressions and a few random programs (any bytes are a graph)
for r in "${regs[@]}"; do [ -e "$r" ] && cp "$r" "$corpus/"; done
for i in $(seq 1 16); do head -c 400 /dev/urandom > "$corpus/random-$i"; done
echo "fuzz passes: ${secs}s"
cd "$out"
"$bin" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 "$corpus"
echo "fuzz passes: no crash, leak or hang in ${secs}s"
