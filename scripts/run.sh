#!/usr/bin/env bash
# The main-job command of README.md. Installs and builds if needed, then runs
# the embedded default job: a local pipeline on CPU (two seam-stage processes
# and a seam-coordinator on loopback) serving a small generated checkpoint,
# whose greedy tokens are checked against a single-process run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja
cmake --build "$BUILD_DIR" -j "$(nproc)" --target seam seam-stage seam-coordinator
"$BUILD_DIR/bin/seam" run "$@"
