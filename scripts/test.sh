#!/usr/bin/env bash
# Quick start, second command: builds everything and runs the whole test suite.
# Set SLUICE_SANITIZE=address,undefined (and a SLUICE_BUILD_DIR of its own) for
# a sanitizer run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
SLUICE_BUILD_DIR=$build_dir bash "$root/scripts/build.sh"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)"
