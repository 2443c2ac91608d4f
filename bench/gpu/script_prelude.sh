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

# ncu_step NAME STEP_MS CMD...: CMD (whose last kernels are identical decode
# steps, e.g. seam-bench-gpu decode) under Nsight Compute, its clocks left
# alone and one metric, each kernel timed alone; OUT_DIR/NAME.txt and .json
# list the last step's kernels (tools/ncu_step_kernels.py) against STEP_MS,
# the step's own time (0: unknown); the CSV is kept gzipped.
ncu_step() {
  local name=$1 step_ms=$2 ncu
  shift 2
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -1)
  timeout 280 $R "${ncu:-ncu}" --clock-control none --metrics gpu__time_duration.sum --csv \
    --kernel-name-base function --log-file "$OUT_DIR/$name.csv" "$@" > "$OUT_DIR/$name.log" 2>&1
  echo "ncu $name rc=$?" >> "$SUMMARY"
  python3 tools/ncu_step_kernels.py "$OUT_DIR/$name.csv" --step-ms "$step_ms" --json "$OUT_DIR/$name.json" \
    > "$OUT_DIR/$name.txt" 2>&1
  head -40 "$OUT_DIR/$name.txt" >> "$SUMMARY"
  gzip -f "$OUT_DIR/$name.csv"
}
