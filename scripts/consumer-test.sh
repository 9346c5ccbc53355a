#!/usr/bin/env bash
# Builds tests/consumer (a tiny service using Sluice as a library) two ways
# and runs it; each must print one governed call's answer:
#   1. against an install: `cmake --install` of the main build into a fresh
#      prefix, then find_package(sluice) with CMAKE_PREFIX_PATH=<prefix>;
#   2. as a subproject (add_subdirectory), with Catch2, CLI11 and Google
#      Benchmark made unfindable: it must build the libraries only.
#   SLUICE_BUILD_DIR  the main build to install from (default: build); its
#                     libraries are built first when out of date
# Scratch: build-consumer/ and build-consumer-sluice/ (the subproject's build,
# one level under the checkout like build/: ccache's relative paths then
# match the main build's, so its objects come from the cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
scratch=$root/build-consumer
sub_lib=$root/build-consumer-sluice
jobs=$(nproc)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
mkdir -p "$scratch"

# $1: the consumer's build directory. Runs it and checks its answer.
run_consumer() {
  local out
  out=$("$1/consumer")
  echo "$out"
  if ! grep -q '^ok from sim: .*simulated answer' <<<"$out"; then
    echo "consumer-test: $1/consumer did not print the simulated answer" >&2
    exit 1
  fi
}

echo "== consumer: find_package(sluice) against an install =="
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build_dir" -j "$jobs" --target sluice
prefix=$scratch/prefix
rm -rf "$prefix" "$scratch/installed"
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
for f in include/sluice/runtime/runtime.hpp include/sluice/runtime/policy/time.hpp \
         lib/cmake/sluice/sluiceConfig.cmake lib/cmake/sluice/FindCAF.cmake \
         share/doc/sluice/LICENSE; do
  [ -f "$prefix/$f" ] || { echo "consumer-test: $f not installed" >&2; exit 1; }
done
cmake -S "$root/tests/consumer" -B "$scratch/installed" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/installed" -j "$jobs"
run_consumer "$scratch/installed"

echo "== consumer: add_subdirectory (libraries only) =="
# --no-warn-unused-cli: nothing asking for the disabled packages is the
# point, not a mistake. What the subproject must not add; left over from an earlier run they
# would hide it.
rm -rf "$sub_lib/tests" "$sub_lib/examples" "$sub_lib/bench"
cmake -S "$root/tests/consumer" -B "$scratch/subproject" --no-warn-unused-cli \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SOURCE_DIR="$root" \
  -DSLUICE_BINARY_DIR="$sub_lib" \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON >/dev/null
for d in tests examples bench; do
  if [ -e "$sub_lib/$d" ]; then
    echo "consumer-test: the subproject added $d/" >&2
    exit 1
  fi
done
cmake --build "$scratch/subproject" -j "$jobs"
run_consumer "$scratch/subproject"
echo "consumer-test: both builds answered"
