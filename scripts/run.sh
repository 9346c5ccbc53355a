#!/usr/bin/env bash
# Quick start, first command: builds and runs the project's main job -- for now
# the three-tier admission demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SLUICE_TARGETS=admission_demo bash "$root/scripts/build.sh"
exec "${SLUICE_BUILD_DIR:-$root/build}/examples/admission_demo" "$@"
