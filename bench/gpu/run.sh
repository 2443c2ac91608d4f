#!/usr/bin/env bash
# The GPU run: seam's CUDA tests, the transformers logits oracle, seam's GPU
# benchmarks and the PyTorch baselines, merged into one report.
#
# Run it PLAINLY (not under scripts/gpu-run.sh), from the repo root with the
# bundle of scripts/gpu-bundle.sh in bundle/:
#
#     bash bench/gpu/run.sh [OUT_DIR]
#
# OUT_DIR defaults to $OUT when set, else bench/results/gpu-<date>. This script
# calls scripts/gpu-run.sh itself for every seam binary; the python stages
# (torch, transformers) run in the machine's own environment, so they never see
# the bundle's libraries first on LD_LIBRARY_PATH.
#
# Stages, each under a timeout, each run even when an earlier one failed (the
# failure is recorded in OUT_DIR/stages.tsv and in the report):
#   gpu-info          nvidia-smi
#   test:*            cuda_kernels_test, core_test, kernels_test,
#                     models_test --gtest_filter='*Cuda*:*Gpu*' (those present)
#   oracle-small      tools/gpu_oracle.py --only small
#   oracle-0.6b       tools/gpu_oracle.py --only 0.6b (writes the 0.6b-shaped
#                     checkpoints the benchmarks below use)
#   seam-norm, seam-decode, seam-prefill   seam-bench-gpu on WORK/qwen3-0.6b
#   torch-baselines   bench/gpu/torch_baselines.py on the same checkpoint
#   report            bench/gpu/report.py -> OUT_DIR/report.md (printed at the end)
#
# Checkpoints and seam's raw logits (GBs) go to WORK, not OUT_DIR:
# SEAM_GPU_WORK (default /tmp/seam-gpu-work); a checkpoint already there with
# the same spec is reused. The stages share a budget of SEAM_GPU_BUDGET_S
# seconds (default 470, so the whole run ends within ~8 minutes): a stage's
# timeout is cut to what is left, and a stage with less than 5 s left is
# skipped. Exit status 0 when every stage succeeded, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO="$(pwd)"

OUT_DIR="${1:-${OUT:-bench/results/gpu-$(date +%Y-%m-%d-%H%M)}}"
mkdir -p "$OUT_DIR/tests"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
WORK="${SEAM_GPU_WORK:-/tmp/seam-gpu-work}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
BUDGET="${SEAM_GPU_BUDGET_S:-470}"
REPORT_RESERVE=20
START=$(date +%s)
DEADLINE=$((START + BUDGET))
GPU_RUN="$REPO/scripts/gpu-run.sh"
PY="${PYTHON:-python3}"
STAGES="$OUT_DIR/stages.tsv"
CKPT="$WORK/qwen3-0.6b"
FAILED=0

printf 'stage\tstatus\trc\tseconds\tlog\n' > "$STAGES"
{
  echo "date	$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit	$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host	$(hostname 2>/dev/null || echo unknown)"
  echo "work	$WORK"
  echo "budget_s	$BUDGET"
} > "$OUT_DIR/meta.tsv"

record() {  # record NAME STATUS RC SECONDS LOG
  printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$STAGES"
}

# stage NAME LIMIT_S LOG command...   (LOG is relative to OUT_DIR)
stage() {
  local name=$1 limit=$2 logf=$3
  shift 3
  local now left t0 rc secs status
  now=$(date +%s)
  left=$((DEADLINE - REPORT_RESERVE - now))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    record "$name" skipped - 0 "-"
    echo "== $name: skipped (run budget spent)"
    FAILED=1
    return 0
  fi
  echo "== $name (limit ${limit}s, log $logf)"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$OUT_DIR/$logf" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  if [ "$rc" -eq 0 ]; then
    status=ok
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=timeout
  else
    status=failed
  fi
  record "$name" "$status" "$rc" "$secs" "$logf"
  echo "   $name: $status (rc $rc, ${secs}s)"
  if [ "$status" != ok ]; then
    FAILED=1
    tail -n 8 "$OUT_DIR/$logf" | sed 's/^/   | /'
  fi
  return 0
}

have_bin() {
  "$GPU_RUN" bash -c "command -v '$1'" > /dev/null 2>&1
}

# gpu-info; the first gpu-run.sh call also unpacks bundle/bundle.tar.gz if needed.
stage gpu-info 30 gpu-info.log bash -c \
  'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvidia-smi'
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT_DIR/gpu.txt" 2>/dev/null || echo unknown > "$OUT_DIR/gpu.txt"
"$GPU_RUN" true > "$OUT_DIR/gpu-run-check.log" 2>&1 || echo "   gpu-run.sh does not start (see gpu-run-check.log)"

# (a) tests
for t in cuda_kernels_test core_test kernels_test; do
  if have_bin "$t"; then
    stage "test:$t" 120 "tests/$t.log" "$GPU_RUN" "$t"
  else
    record "test:$t" missing - 0 "-"
    echo "== test:$t: not in the bundle"
    FAILED=1
  fi
done
if have_bin models_test; then
  stage "test:models_test(Cuda,Gpu)" 120 tests/models_test.log "$GPU_RUN" models_test '--gtest_filter=*Cuda*:*Gpu*'
else
  record "test:models_test(Cuda,Gpu)" absent - 0 "-"
  echo "== test:models_test: not in the bundle (not required)"
fi

# (b) the oracle: small checkpoints first, then the 0.6b shapes
SEAM_CMD="$(printf '%q' "$GPU_RUN") seam-bench-gpu"
stage oracle-small 150 oracle-small.log "$PY" -u tools/gpu_oracle.py --work "$WORK" --only small \
  --json "$OUT_DIR/oracle-small.json" --seam-bin "$SEAM_CMD"
stage oracle-0.6b 300 oracle-0.6b.log "$PY" -u tools/gpu_oracle.py --work "$WORK" --only 0.6b \
  --json "$OUT_DIR/oracle-0.6b.json" --seam-bin "$SEAM_CMD"
# long prompts: bf16 top-1 against the f32 reference, seam's beside transformers' own bf16
stage oracle-long 300 oracle-long.log "$PY" -u tools/gpu_oracle.py --work "$WORK" --only 0.6b \
  --prompt-lengths 2048,4100 --json "$OUT_DIR/oracle-long.json" --seam-bin "$SEAM_CMD"

# (c) seam's benchmarks on the 0.6b-shaped dense checkpoint
if have_bin seam-bench-gpu; then
  stage seam-norm 90 seam-norm.log "$GPU_RUN" seam-bench-gpu norm --json "$OUT_DIR/seam-norm.json"
  if [ -f "$CKPT/config.json" ]; then
    stage seam-decode 180 seam-decode.log "$GPU_RUN" seam-bench-gpu decode --checkpoint "$CKPT" --dtype bf16 \
      --batches 1,8,64 --prompt-len 128 --steps 64 --json "$OUT_DIR/seam-decode.json"
    stage seam-prefill 120 seam-prefill.log "$GPU_RUN" seam-bench-gpu prefill --checkpoint "$CKPT" --dtype bf16 \
      --seqs 8 --len 1024 --json "$OUT_DIR/seam-prefill.json"
  else
    for s in seam-decode seam-prefill; do
      record "$s" "no-checkpoint" - 0 "-"
    done
    echo "== seam-decode, seam-prefill: $CKPT/config.json missing (oracle-0.6b did not build it)"
    FAILED=1
  fi
else
  for s in seam-norm seam-decode seam-prefill; do
    record "$s" missing - 0 "-"
  done
  echo "== seam-bench-gpu: not in the bundle"
  FAILED=1
fi

# (d) PyTorch / transformers baselines (the norm part needs no checkpoint)
stage torch-baselines 200 torch-baselines.log "$PY" -u bench/gpu/torch_baselines.py --checkpoint "$CKPT" \
  --json "$OUT_DIR/torch-baselines.json"

# (e) the report, outside the stage budget (it has REPORT_RESERVE seconds)
if timeout -k 5 30 "$PY" bench/gpu/report.py "$OUT_DIR" > "$OUT_DIR/report.log" 2>&1; then
  cat "$OUT_DIR/report.md"
else
  echo "report.py failed:"
  tail -n 20 "$OUT_DIR/report.log"
  FAILED=1
fi
echo
echo "total $(( $(date +%s) - START ))s; everything is in $OUT_DIR"
exit "$FAILED"
