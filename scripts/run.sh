#!/usr/bin/env bash
# The main-job command of README.md. Installs and builds if needed, then runs
# the embedded default job. Until the pipeline (stage servers, coordinator)
# exists, that job is the kernels-and-collectives demo on CPU ranks over real
# Gloo on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja
cmake --build "$BUILD_DIR" -j "$(nproc)" --target seam
"$BUILD_DIR/bin/seam" demo --ranks 2
