#!/usr/bin/env bash
# Issue 30's load goals on one GPU, served (seam-stage behind
# seam-coordinator, PP 1 TP 1) on the 8-layer hidden-4096 Qwen3 of the
# other load results, the load of 256 requests of uniform 64-1,024 token-id
# prompts and 128 new tokens:
#   closed    all 256 in flight, over gRPC and the OpenAI HTTP API (one
#             pipeline, both transports), with the stages' busy time
#   unloaded  one request at a time (the unloaded ITL)
#   open      open loop at LOAD_RATES req/s (default 152: 80 % of the
#             closed-loop peak measured before), both transports
#   goals     unloaded, closed and open (LOAD_RATES) points in one invocation
#   tokens    the same prompts all in flight through `seam run --device
#             cuda` against the single-process run: f32 (every token
#             equal) and bf16 (the agreement)
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh (seam,
# seam-stage, seam-coordinator): bash bench/gpu/load_goals.sh OUT_DIR [PART]
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-load "$@"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $N GPUs, part $PART" >> "$SUMMARY"
M="$WORK/qwen3-8l-4096"
init() {  # dir dtype
  [ -f "$1/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype "$2" --seed 5 --out "$1" >> "$OUT_DIR/model_init.log" 2>&1
}
init "$M" bf16
# LOAD_VARIANTS: --variant flags of seam bench load, space separated (default: one, the defaults);
# LOAD_TRANSPORT: grpc,http (default) or one of them; LOAD_LOGS=1 keeps the
# pipelines' logs under OUT_DIR/logs-PART (with a variant of
# stage:--log-level=debug, each microbatch's time in the stage and between)
# (separated by ';' instead of spaces when a variant has several flags, e.g.
# "--variant=a;--variant=b:coordinator:--itl-target-ms=5 coordinator:--overlap-steps=off")
if [[ "${LOAD_VARIANTS:-}" == *";"* ]]; then
  IFS=';' read -r -a variants <<< "$LOAD_VARIANTS"
else
  read -r -a variants <<< "${LOAD_VARIANTS:-}"
fi
T="${LOAD_TRANSPORT:-grpc,http}"
load() {  # name, then the load's flags
  local name=$1; shift
  timeout 280 $R seam bench load --model "$M" --device cuda --dtype bf16 --prompt-len uniform:64:1024 \
    --output-len 128 --timeout 200 ${variants[@]+"${variants[@]}"} ${LOAD_LOGS:+--logs-dir "$OUT_DIR/logs-$name"} \
    "$@" --json "$OUT_DIR/$name.json" --svg "$OUT_DIR/$name.svg" \
    > "$OUT_DIR/$name.log" 2>&1
  echo "bench load $name rc=$?" >> "$SUMMARY"
  sed -n '/^variant  *transport  *load  *requests/,$p' "$OUT_DIR/$name.log" >> "$SUMMARY"
}
want closed && load closed --transport "$T" --sessions 256 --concurrency 256
want unloaded && load unloaded --transport grpc --sessions 24 --concurrency 1
# The open loop after a closed-loop point on the same pipeline: a fresh
# pipeline's first point pays warm-up costs the two warm-up requests miss.
want open && load open --transport "$T" --sessions 256 --concurrency 256 --rates "${LOAD_RATES:-152}"
# All three goals' points in one invocation, each variant on one pipeline:
# one request at a time (the unloaded ITL), all 256 in flight (the peak
# rate) and the open loop at LOAD_RATES (80 % of a peak measured before).
want goals && load goals --transport "$T" --sessions 256 --concurrency 1,256 --rates "${LOAD_RATES:-152}"
if want tokens; then
  for dtype in f32 bf16; do
    init "$WORK/qwen3-8l-4096-$dtype" "$dtype"
    timeout 280 $R seam run --model "$WORK/qwen3-8l-4096-$dtype" --device cuda --dtype "$dtype" --pp 1 --tp 1 \
      --prompts 256 --prompt-len uniform:64:1024 --max-new-tokens 128 > "$OUT_DIR/tokens_$dtype.log" 2>&1
    echo "seam run $dtype rc=$? $(grep -E '^agreement|tokens match|MISMATCH' "$OUT_DIR/tokens_$dtype.log" | tr '\n' ' ')" \
      >> "$SUMMARY"
  done
fi
cat "$SUMMARY"
