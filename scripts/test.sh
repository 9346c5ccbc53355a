#!/usr/bin/env bash
# Quick start, second command: builds everything and runs the whole test suite.
# Set SLUICE_SANITIZE=address,undefined (and a SLUICE_BUILD_DIR of its own) for
# a sanitizer run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
SLUICE_BUILD_DIR=$build_dir bash "$root/scripts/build.sh"
# The JS end-to-end test's client (tests/js): installed from the lockfile when
# missing or older than it.
js=$root/tests/js
if [ ! -d "$js/node_modules" ] || [ "$js/package-lock.json" -nt "$js/node_modules" ]; then
  npm ci --prefix "$js" --no-audit --no-fund
  touch "$js/node_modules"
fi
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)"
