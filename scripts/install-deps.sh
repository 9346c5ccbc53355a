#!/usr/bin/env bash
# Installs the Debian packages Sluice needs to build and test (nodejs and npm
# only when node or npm is not on PATH). Idempotent: when every package is
# already installed it does nothing (no apt-get update, no network).
set -euo pipefail

packages=(
  build-essential
  cmake
  ccache
  libcaf-dev
  libboost-dev
  libfmt-dev
  catch2
  libtomlplusplus-dev
  nlohmann-json3-dev
  libbenchmark-dev
  libjemalloc2
  libhiredis-dev
  libspdlog-dev
  libcli11-dev
  libssl-dev
  ca-certificates
  openssl
  clang
  libclang-rt-14-dev
  python3-prometheus-client
  redis-server
  chromium
)
# chromium: the dashboard's browser test (driven by playwright-core, from npm).
# The JS end-to-end test (tests/js) needs node and npm; a machine that has them
# from elsewhere (e.g. a newer Node) keeps its own.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
