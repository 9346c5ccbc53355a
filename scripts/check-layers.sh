#!/usr/bin/env bash
# Fails on an #include against the layers (../STYLE.md, ARCHITECTURE.md),
# bottom to top:
#   1 runtime/policy/  pure: includes only runtime/policy/; no CAF, Boost,
#                      spdlog, hiredis, OpenSSL; no clock read
#   2 messages/        runtime/policy/, messages/; no Boost, hiredis
#   3 actors/          the layers below and actors/; no runtime/ outside
#                      policy, no hiredis, no toml
#   4 runtime/         anything above, never tests/, bench/ or examples/
# Paths may carry the project's prefix ("sluice/runtime/policy/time.hpp",
# also as <sluice/...>) or not ("runtime/policy/time.hpp"); both are checked.
# Usage: scripts/check-layers.sh [ROOT] (default: this checkout).
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
bad=0

# $1: folder, $2: find's prune args, $3: regex of allowed project includes
# (without the prefix), $4: regex of forbidden angle includes (or empty),
# $5: the layer's name.
check() {
  local dir=$1 prune=$2 allowed=$3 forbidden=$4 name=$5
  [ -d "$dir" ] || return 0
  local files
  # shellcheck disable=SC2086
  files=$(find "$dir" $prune -type f \( -name '*.hpp' -o -name '*.cpp' \) -print | sort)
  [ -n "$files" ] || return 0
  while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    echo "check-layers: $hit: $name may not include that"
    bad=1
  done < <(
    # shellcheck disable=SC2086
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<sluice/)' $files |
      grep -vE "#[[:space:]]*include[[:space:]]*(\"(sluice/)?|<sluice/)($allowed)" || true
    if [ -n "$forbidden" ]; then
      # shellcheck disable=SC2086
      grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<($forbidden)" $files || true
    fi
  )
}

check runtime/policy "" 'runtime/policy/' \
  'caf/|boost/|spdlog/|fmt/|hiredis/|openssl/|toml|nlohmann/|thread>|mutex>|future>' \
  'layer 1 (runtime/policy/)'
check messages "" 'runtime/policy/|messages/' 'boost/|hiredis/|toml' \
  'layer 2 (messages/)'
check actors "" 'runtime/policy/|messages/|actors/' 'hiredis/|toml' \
  'layer 3 (actors/)'
check runtime "-path runtime/policy -prune -o" \
  'runtime/|messages/|actors/' '' 'layer 4 (runtime/)'

# Policy takes the time as an argument: no clock read.
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  echo "check-layers: $hit: layer 1 (runtime/policy/) may not read a clock"
  bad=1
done < <(grep -rnE '(steady_clock|system_clock|high_resolution_clock)::now' \
           runtime/policy 2>/dev/null || true)

if [ "$bad" -ne 0 ]; then
  echo "check-layers: FAILED (see the layers in ARCHITECTURE.md)"
  exit 1
fi
echo "check-layers: every include follows the layers"
