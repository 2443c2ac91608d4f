#!/usr/bin/env bash
# Installs every Debian package seam needs to build, test and run.
# Idempotent and non-interactive: safe to run on a fresh machine or again.
# In a repository checkout it also installs the pinned npm packages of
# deploy/schema (schema validation of the manifests, deploy/validate.sh) into
# deploy/schema/node_modules; nothing is downloaded later at build or test time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
schema="$root/deploy/schema"

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  libucx-dev ucx-utils
  libssl-dev
  libgloo-dev
  libopenblas-dev
  libgtest-dev libgmock-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev zlib1g-dev
  prometheus-cpp-dev libcpp-httplib-dev
  python3-prometheus-client
  iproute2
  yamllint python3-yaml
)
# node + npm for deploy/schema, only where it exists (the image builds copy
# this script alone) and only when no node/npm is installed already (a
# NodeSource nodejs carries its own npm and conflicts with Debian's npm).
if [ -f "$schema/package-lock.json" ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  echo "install-deps: installed ${missing[*]}"
fi

# deploy/schema/node_modules exactly as package-lock.json pins it (npm ci
# checks every package's integrity hash); skipped when that lock file was
# installed already.
if [ -f "$schema/package-lock.json" ]; then
  stamp="$schema/node_modules/.installed-lock.json"
  if cmp -s "$schema/package-lock.json" "$stamp"; then
    echo "install-deps: deploy/schema node modules present"
  else
    npm ci --prefix "$schema" --no-audit --no-fund --ignore-scripts
    cp "$schema/package-lock.json" "$stamp"
    echo "install-deps: installed deploy/schema node modules (npm ci)"
  fi
fi
