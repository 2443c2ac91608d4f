#!/usr/bin/env bash
# Runs a command on a GPU machine against the bundle that
# scripts/gpu-bundle.sh packed: bundle/lib first, then python3's NVIDIA
# packages (NCCL, and cuBLAS, which the bundle leaves out), UCX's modules
# from bundle/ucx, bundle/bin on PATH, NVLink multicast off in NCCL.
#
# Usage, from the repo root: scripts/gpu-run.sh <command...>
# BUNDLE_DIR picks another bundle (default: bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  echo "usage: scripts/gpu-run.sh <command...>" >&2
  exit 2
fi

BUNDLE="$(cd "${BUNDLE_DIR:-bundle}" && pwd)"
if [ ! -d "$BUNDLE/bin" ] && [ -f "$BUNDLE/bundle.tar.xz" ]; then
  xz -dc "$BUNDLE/bundle.tar.xz" | tar -C "$BUNDLE" -xf -
elif [ ! -d "$BUNDLE/bin" ] && [ -f "$BUNDLE/bundle.tar.gz" ]; then
  tar -C "$BUNDLE" -xzf "$BUNDLE/bundle.tar.gz"
fi

# python3's nvidia/ folder (site-packages): NCCL under nvidia/nccl/lib.
nvidia_dir=""
nccl_dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)"
if [ -n "$nccl_dir" ] && [ -d "$nccl_dir/lib" ]; then
  nvidia_dir="$(dirname "$nccl_dir")"
else
  for d in /opt/*/.venv/lib/python3*/site-packages/nvidia /usr/local/lib/python3*/dist-packages/nvidia \
           /usr/lib/python3/dist-packages/nvidia "$HOME"/.local/lib/python3*/site-packages/nvidia; do
    if [ -d "$d/nccl/lib" ]; then nvidia_dir="$d"; break; fi
  done
fi
if [ -z "$nvidia_dir" ]; then
  echo "gpu-run: python3's nvidia/nccl/lib not found" >&2
  exit 1
fi

libpath="$BUNDLE/lib:$nvidia_dir/nccl/lib"
# The other NVIDIA packages' lib folders (cuBLAS among them), after the bundle.
for d in "$nvidia_dir"/*/lib; do
  case "$d" in "$nvidia_dir/nccl/lib") continue ;; esac
  [ -d "$d" ] && libpath="$libpath:$d"
done

export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$BUNDLE/ucx"
export NCCL_NVLS_ENABLE=0
export PATH="$BUNDLE/bin:$PATH"
exec "$@"
