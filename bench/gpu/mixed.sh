#!/usr/bin/env bash
# Steps holding prefill rows as CUDA graphs (mixed graphs) and the latency
# target of the scheduler, on one GPU, in one command:
#   tests   the GPU tests of the stage's graphs (runtime_test: mixed graphs
#           against eager, decode graphs, fed decode) and the attention
#           kernels (GQA decode/prefill, latent)
#   tokens  seam run --device cuda with every prompt cut into chunks of 3
#           beside decode rows (so nearly every step is a mixed graph): the
#           pipeline's tokens against the single-process run, PP 1 and 2,
#           f32 and bf16
#   load    seam bench load on the 8-layer hidden-4096 bf16 Qwen3 of
#           served.sh over gRPC: 256 requests of uniform 64-1,024 token-id
#           prompts and 128 new tokens, all in flight, then one at a time
#           (the unloaded ITL), then open loop at 96 / 128 / 160 req/s;
#           each point with mixed steps eager (--mixed-graph-rows=) and as
#           graphs (the default), plus the latency target variants where
#           the coordinator has --itl-target-ms; JSON and SVG per run.
#           LOAD_TRANSPORT (grpc, http or grpc,http), LOAD_RATES and
#           LOAD_VARIANTS (the --variant flags, space separated) override
#   latent  seam-bench-gpu latent-attention, batch 1 / 32 / 128 at 1k, 4k
#           and 32k (tight tables, and tables sized for 128k)
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh:
#     bash bench/gpu/mixed.sh OUT_DIR [PART]
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-mixed "$@"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $N GPUs, part $PART" >> "$SUMMARY"
result() { echo "$1 rc=$2 $(grep -E '^\[  (PASSED|FAILED) ' "$3" | tr '\n' ' ')" >> "$SUMMARY"; }

if want tests; then
  timeout 400 $R runtime_test > "$OUT_DIR/runtime_test.log" 2>&1; result runtime_test $? "$OUT_DIR/runtime_test.log"
  grep -E '^\[  FAILED  \]' "$OUT_DIR/runtime_test.log" | head -20 >> "$SUMMARY"
  timeout 300 $R cuda_kernels_test --gtest_filter='*Attention*:*Latent*:*Split*' > "$OUT_DIR/kernels_attention.log" 2>&1
  result cuda_kernels_attention $? "$OUT_DIR/kernels_attention.log"
  grep -E '^\[  FAILED  \]' "$OUT_DIR/kernels_attention.log" | head -20 >> "$SUMMARY"
fi

if want tokens; then
  S="$WORK/small"
  [ -f "$S/config.json" ] || $R seam model init --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 \
    --vocab 8192 --seed 3 --out "$S" > /dev/null 2>&1
  for pp in 1 2; do
    for dt in f32 bf16; do
      log="$OUT_DIR/run_chunked_pp${pp}_$dt.log"
      timeout 240 $R seam run --device cuda --model "$S" --pp $pp --tp 1 --dtype $dt --prompts 8 \
        --max-new-tokens 32 --coordinator-arg=--prefill-chunk-tokens=3 --stage-arg=--log-level=debug > "$log" 2>&1
      rc=$?
      echo "seam run chunked pp$pp $dt rc=$rc $(grep -o 'tokens match the single-process run' "$log" | head -1)" \
        "$(grep -c 'mixed graph of' "$log") mixed-graph steps logged;" \
        "$(grep -o 'CUDA graphs captured for mixed steps of \[[0-9, ]*\]' "$log" | head -1)" >> "$SUMMARY"
      grep -E 'mismatch|differ' "$log" | head -5 >> "$SUMMARY"
    done
  done
fi

if want load; then
  M="$WORK/qwen3-8l-4096"
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
  variants=(--variant 'mixed_eager:stage:--mixed-graph-rows=off' --variant 'mixed_graphs')
  [ -n "${LOAD_VARIANTS:-}" ] && read -r -a variants <<< "$LOAD_VARIANTS"
  if [ -z "${LOAD_VARIANTS:-}" ] && $R seam-coordinator --help 2>&1 | grep -q -- '--itl-target-ms'; then
    variants+=(--variant "itl${ITL_MS:-6}:coordinator:--itl-target-ms=${ITL_MS:-6}")
  fi
  load() {  # name, then the load's flags
    local name=$1; shift
    timeout 560 $R seam bench load --model "$M" --device cuda --dtype bf16 --prompt-len uniform:64:1024 \
      --output-len 128 --transport "${LOAD_TRANSPORT:-grpc}" --timeout 300 "${variants[@]}" "$@" \
      --json "$OUT_DIR/$name.json" --svg "$OUT_DIR/$name.svg" > "$OUT_DIR/$name.log" 2>&1
    echo "bench load $name rc=$?" >> "$SUMMARY"
    sed -n '/^variant  *transport  *load  *requests/,$p' "$OUT_DIR/$name.log" >> "$SUMMARY"
  }
  load closed --sessions 256 --concurrency 256
  load unloaded --sessions 24 --concurrency 1
  load open --sessions 384 --rates "${LOAD_RATES:-96,128,160}"
fi

if want latent; then
  timeout 200 $R seam-bench-gpu latent-attention --batches 1,32,128 --contexts 1024,4096,32768 \
    --json "$OUT_DIR/latent.json" > "$OUT_DIR/latent.log" 2>&1
  echo "latent-attention rc=$?" >> "$SUMMARY"; tail -12 "$OUT_DIR/latent.log" >> "$SUMMARY"
  timeout 200 $R seam-bench-gpu latent-attention --batches 1,32,128 --contexts 1024,32768 --table-context 131072 \
    > "$OUT_DIR/latent_wide.log" 2>&1
  echo "latent-attention wide tables rc=$?" >> "$SUMMARY"; tail -8 "$OUT_DIR/latent_wide.log" >> "$SUMMARY"
fi
cat "$SUMMARY"
