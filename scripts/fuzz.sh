#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cpp) with clang under ASan and
# UBSan in build-fuzz/ and runs each for SLUICE_FUZZ_SECONDS (default 60)
# from its committed seed corpus (fuzz/corpus/NAME/), new inputs going to a
# scratch copy. A crash fails the script and leaves the input in
# build-fuzz/crashes/. To fuzz for hours:
#   SLUICE_FUZZ_SECONDS=14400 scripts/fuzz.sh [target ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${SLUICE_FUZZ_SECONDS:-60}
bash "$root/scripts/install-deps.sh"
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON \
  -DSLUICE_SANITIZE=address,undefined -DBUILD_TESTING=OFF >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/fuzz/*_fuzz.cpp; do
    targets+=("$(basename "$f" .cpp)")
  done
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build_dir/crashes"
status=0
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  mkdir -p "$corpus"
  cp -n "$root/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
  echo "== fuzz $t for ${seconds}s =="
  if ! "$build_dir/fuzz/$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build_dir/crashes/$t-" "$corpus" 2>&1 |
      tee "$build_dir/$t.log" | grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)'; then
    :
  fi
  if grep -qE '==[0-9]+==ERROR|SUMMARY: |deadly signal|Test unit written' "$build_dir/$t.log"; then
    echo "fuzz: $t found a crash (see $build_dir/$t.log, $build_dir/crashes/)" >&2
    status=1
  fi
done
exit $status
