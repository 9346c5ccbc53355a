#!/usr/bin/env bash
# Installs the Debian packages Sluice needs to build and test. Idempotent: when every
# package is already installed it does nothing (no apt-get update, no network).
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
)

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
