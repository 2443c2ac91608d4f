# The start every bench/gpu script shares, sourced after `set -uo pipefail`
# with the script's arguments and its default work folder:
#     source bench/gpu/script_prelude.sh /tmp/seam-served "$@"
# Sets R (the bundle's runner), N (GPUs visible), OUT_DIR (first argument,
# created), PART (second argument, default all), WORK ($SEAM_GPU_WORK or the
# default, created), SUMMARY and want PART; NCCL_NVLS_ENABLE=0; the working
# folder is the repository root.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0
R=scripts/gpu-run.sh
N=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
OUT_DIR="${2:?OUT_DIR}"
PART="${3:-all}"
mkdir -p "$OUT_DIR"
WORK="${SEAM_GPU_WORK:-$1}"
mkdir -p "$WORK"
SUMMARY="$OUT_DIR/summary.txt"
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
