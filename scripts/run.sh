#!/usr/bin/env bash
# Quick start, first command: builds and runs the project's main job,
# sluice-node, on its embedded default config (simulated upstreams) at
# 127.0.0.1:8080. Extra arguments go to sluice-node (e.g. --config FILE).
# Stop it with Ctrl-C: it drains in-flight calls and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
SLUICE_TARGETS=sluice-node bash "$root/scripts/build.sh"
exec "$build_dir/examples/sluice-node" "$@"
