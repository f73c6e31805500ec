#!/usr/bin/env bash
# tests/install/install_prefix.sh BUILD_DIR SOURCE_DIR WORK_DIR
# `cmake --install BUILD_DIR --prefix P` into a fresh P, then the documented
# examples built against P with nothing but `pkg-config --cflags --libs`
# (PKG_CONFIG_PATH=P/lib/pkgconfig) and run: run_model.c on the runtime-only
# library (kiln-runtime.pc) on a hand-written test model, profile_model.c on
# the compiler library (kiln.pc) compiling and profiling the zoo's mlp; and
# the installed CLI. The shared libraries are found through LD_LIBRARY_PATH.
set -euo pipefail
build=$1 src=$2 work=$3
prefix=$work/prefix
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in bin/kiln include/kiln/kiln.h include/kiln/runtime.h include/kiln/profile.h \
         include/kiln/types.h include/kiln/abi.h lib/libkiln.so lib/libkiln.a \
         lib/libkiln_runtime.so lib/libkiln_runtime.a lib/pkgconfig/kiln.pc \
         lib/pkgconfig/kiln-runtime.pc; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed under $prefix"; exit 1; }
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ "$(pkg-config --modversion kiln)" = "$(pkg-config --modversion kiln-runtime)" ]
echo "kiln-runtime: $(pkg-config --cflags --libs kiln-runtime)"
echo "kiln:         $(pkg-config --cflags --libs kiln)"
cc="${CC:-cc}"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/docs/examples/run_model.c" -o "$work/run_model" \
    $(pkg-config --cflags --libs kiln-runtime)
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/docs/examples/profile_model.c" -o "$work/profile_model" \
    $(pkg-config --cflags --libs kiln)
# the examples use the installed libraries, not the build folder's
# (output captured first: grep -q closing the pipe early fails it under pipefail)
deps=$(ldd "$work/profile_model" "$work/run_model")
grep -q "$prefix/lib/libkiln.so" <<<"$deps"
grep -q "$prefix/lib/libkiln_runtime.so" <<<"$deps"
"$work/run_model" "$build/tests/runtime_models/rt_model_add_relu.so" | tee "$work/run.txt"
grep -q "^model" "$work/run.txt"
XDG_CACHE_HOME=$work/cache "$work/profile_model" mlp | tee "$work/profile.txt"
grep -q "^Total" "$work/profile.txt"
"$prefix/bin/kiln" zoo >"$work/zoo.txt"
grep -q mlp "$work/zoo.txt"
echo "install_prefix: 1 passed, 0 failed"
