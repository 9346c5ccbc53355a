#!/usr/bin/env bash
# Quick start, first command: builds and runs the project's main job -- until
# sluice-node exists, the two demos: three-tier admission, then governed calls
# through the embedding API (failover, a breaker opening and recovering).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${SLUICE_BUILD_DIR:-$root/build}
SLUICE_TARGETS="admission_demo embedding_example" bash "$root/scripts/build.sh"
"$build_dir/examples/admission_demo"
echo
echo "== governed calls through the embedding API =="
"$build_dir/examples/embedding_example"
