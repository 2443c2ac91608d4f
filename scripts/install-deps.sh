#!/usr/bin/env bash
# Installs every Debian package seam needs to build, test and run.
# Idempotent and non-interactive: safe to run on a fresh machine or again.
# In a repository checkout it also installs the pinned npm packages of
# deploy/schema (schema validation of the manifests, deploy/validate.sh) and
# of tests/openai (the official OpenAI client, ctest openai_client) into
# their node_modules; nothing is downloaded later at build or test time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
schema="$root/deploy/schema"
npm_dirs=("$root/deploy/schema" "$root/tests/openai")

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
  libmicrohttpd-dev libgnutls28-dev libcpp-httplib-dev
  prometheus-cpp-dev
  python3-prometheus-client
  iproute2
  yamllint python3-yaml
  python3-grpcio python3-protobuf python3-grpc-tools python3-setuptools python3-wheel python3-pip python3-venv
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

# Each npm folder's node_modules exactly as its package-lock.json pins it
# (npm ci checks every package's integrity hash); skipped when that lock file
# was installed already.
for dir in "${npm_dirs[@]}"; do
  [ -f "$dir/package-lock.json" ] || continue
  name="${dir#"$root"/}"
  stamp="$dir/node_modules/.installed-lock.json"
  if cmp -s "$dir/package-lock.json" "$stamp"; then
    echo "install-deps: $name node modules present"
  else
    npm ci --prefix "$dir" --no-audit --no-fund --ignore-scripts
    cp "$dir/package-lock.json" "$stamp"
    echo "install-deps: installed $name node modules (npm ci)"
  fi
done
