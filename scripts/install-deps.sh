#!/usr/bin/env bash
# Installs every Debian package seam needs to build, test and run.
# Idempotent and non-interactive: safe to run on a fresh machine or again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  libucx-dev ucx-utils
  libgloo-dev
  libopenblas-dev
  libgtest-dev libgmock-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  prometheus-cpp-dev
  iproute2
  yamllint python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
