#!/usr/bin/env bash
# The test command of README.md: installs the Debian packages, configures
# (CUDA on automatically when nvcc is present), builds everything and runs
# the whole ctest suite. Set BUILD_DIR to build elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja
cmake --build "$BUILD_DIR" -j "$(nproc)"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 300
