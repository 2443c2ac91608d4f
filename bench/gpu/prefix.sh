#!/usr/bin/env bash
# Prefix caching on one H200, served (seam-stage behind seam-coordinator),
# caching off (the baseline) against on in one invocation of seam bench load
# (--variant), on the 8-layer hidden-4096 bf16 Qwen3 of bench/gpu/served.sh:
#   shared     256 requests of one shared 2,048-token prefix + 64 unique
#              tokens, 64 new tokens each, all in flight (goals: TTFT p50 at
#              least 5x lower, throughput at least 2x higher with caching)
#   multiturn  64 conversations of 8 turns, each turn 128 user tokens + 128
#              generated, replaying the history (goal: total time 3x lower)
#   plain      256 requests of uniform 64-1,024 token prompts with no shared
#              prefix, 128 new tokens (goal: no regression, within noise)
#   tokens     seam run --device cuda --shared-prefix: greedy tokens of a
#              cached prefix against the single-process run, PP 1 (and PP 2
#              where the host has two GPUs: stage r runs on GPU r)
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh:
#     bash bench/gpu/prefix.sh OUT_DIR [PART]
# OUT_DIR gets each run's log and JSON and summary.txt (the variants' rows
# and their ratios to the baseline).
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-prefix "$@"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), part $PART" >> "$SUMMARY"

M="$WORK/qwen3-8l-4096"
[ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
  --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out "$M" > "$OUT_DIR/model_init.log" 2>&1

load() {  # name, then the workload's flags
  local name=$1; shift
  timeout 560 $R seam bench load --model "$M" --device cuda --dtype bf16 --transport grpc --timeout 500 --progress 30 \
    --variant 'cache_off:coordinator:--prefix-caching=off' --variant 'cache_on:coordinator:--prefix-caching=on' \
    --json "$OUT_DIR/$name.json" "$@" > "$OUT_DIR/$name.log" 2>&1
  echo "bench load $name rc=$?" >> "$SUMMARY"
  sed -n '/^variant  *transport  *load  *requests/,$p' "$OUT_DIR/$name.log" >> "$SUMMARY"
}

if want shared; then
  load shared --workload shared-prefix:2048 --sessions 256 --prompt-len 64 --output-len 64 --concurrency 256
fi
if want multiturn; then
  load multiturn --workload multi-turn:8 --sessions 64 --prompt-len 128 --output-len 128 --concurrency 64
fi
if want plain; then
  load plain --workload plain --sessions 256 --prompt-len uniform:64:1024 --output-len 128 --concurrency 256
fi
if want tokens; then
  for pp in 1 2; do
    [ "$pp" -le "$N" ] || continue
    timeout 200 $R seam run --device cuda --pp $pp --tp 1 --prompts 5 --shared-prefix 40 --max-new-tokens 16 \
      --coordinator-arg=--prefix-caching=on --coordinator-arg=--prefill-chunk-tokens=16 \
      > "$OUT_DIR/tokens_pp$pp.log" 2>&1
    echo "seam run --shared-prefix pp$pp rc=$? $(grep -E 'prefix cache:|tokens match|MISMATCH' "$OUT_DIR/tokens_pp$pp.log" | tr '\n' ' ')" >> "$SUMMARY"
  done
fi
cat "$SUMMARY"
