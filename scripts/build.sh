#!/usr/bin/env bash
# Configures and builds Sluice (installing missing Debian packages first).
#   SLUICE_BUILD_DIR  build directory (default: build)
#   SLUICE_SANITIZE   e.g. address,undefined (default: none)
#   SLUICE_TARGETS    targets to build (default: all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
# Relative paths in the cache key let clones in other folders (CI) hit the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSLUICE_SANITIZE="${SLUICE_SANITIZE:-}" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$(nproc)" ${SLUICE_TARGETS:+--target $SLUICE_TARGETS}
