#!/usr/bin/env bash
# LongCat-Flash on one H200 (issue 34):
#   compare  tools/compare_longcat_transformers.py: seam's logits (host and
#            GPU, f32 and bf16) against transformers' LongcatFlashForCausalLM
#            on prompts of 1, 7, 512, 2,048 and 4,096 tokens and greedy
#            decoding (goals: f32 within 1e-4 relative, same greedy tokens;
#            bf16 top-1 agreement with f32 within 1 point of transformers')
#   decode   seam-bench-gpu decode on a random checkpoint of LongCat-Flash's
#            attention and expert shapes with 64 routed experts (hidden 6144,
#            64 heads, MLA q_lora_rank 1536 / kv_lora_rank 512 / nope 128 /
#            rope 64 / v 128, dense MLPs of 12288, experts of 2048, 64 routed
#            + 32 zero experts, top-12, routed scaling 6, vocab 131072, 2
#            layers, bf16) at batch 1 and 32 after a 1,024-token prompt,
#            against the floor of the weights a step reads (dense parts and
#            the routed experts its tokens touch under uniform routing, zero
#            experts reading nothing) plus the latent KV bytes
#            (runtime/step_floor.h). Each batch runs eagerly, then replayed
#            from a CUDA graph (the MoE routes and runs its experts on the
#            device); the ratio is the graph's.
#   kernels  each kernel of one decode step at batch 1 and 32 (graph fed on the
#            device, as served) under Nsight Compute (ncu, its clocks left
#            alone), each kernel timed alone: tools/ncu_step_kernels.py finds
#            the step and sums it, against the step's own time from decode
#            (LONGCAT_KERNEL_BATCHES, default "1 32")
#   serve    seam bench serve (batch 1 and 32, 1,024-token prompts, 32 new
#            tokens) and a short seam bench load (32 requests of 128-1,024
#            tokens, concurrency 1 and 16) on the same checkpoint through
#            real seam-stage / seam-coordinator processes
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh, run
# plainly (not under scripts/gpu-run.sh), one part at a time (each ends
# within about 9 minutes; the checkpoint in WORK is reused while it lasts):
#     bash bench/gpu/longcat.sh OUT_DIR compare
#     bash bench/gpu/longcat.sh OUT_DIR decode
# (LONGCAT_DECODE_FLAGS: more seam-bench-gpu decode flags, e.g. --moe-experts grouped; under the
# default auto the summary holds the fused-or-grouped table the experts timed at load. auto, fused
# and grouped in one command, each in a folder of its own:
#     for m in auto fused grouped; do mkdir -p OUT_DIR/$m
#       LONGCAT_DECODE_FLAGS="--moe-experts $m" bash bench/gpu/longcat.sh OUT_DIR/$m decode; done)
#     bash bench/gpu/longcat.sh OUT_DIR serve
# Everything goes under OUT_DIR: each part's log and JSON, compare/ (the
# comparison's summary.txt and results.json) and summary.txt.
# A check on a machine without a GPU (the script's paths; decode needs CUDA):
#     SEAM_GPU_RUN=/path/to/wrapper LONGCAT_MODEL_FLAGS="--layers 2 --hidden 64 ..." LONGCAT_DEVICE=cpu \
#       bash bench/gpu/longcat.sh OUT serve
# where the wrapper execs build/bin/"$@".
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-longcat "$@"
R="${SEAM_GPU_RUN:-$R}"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
DEVICE="${LONGCAT_DEVICE:-cuda}"
MODEL_FLAGS="${LONGCAT_MODEL_FLAGS:---layers 2 --hidden 6144 --heads 64 --intermediate 12288 --vocab 131072 \
--experts 64 --zero-experts 32 --top-k 12 --moe-intermediate 2048 --routed-scaling 6 --q-lora-rank 1536 \
--kv-lora-rank 512 --nope-dim 128 --rope-dim 64 --v-head-dim 128 --dtype bf16 --seed 7}"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), part $PART," \
     "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" >> "$SUMMARY"

M="$WORK/longcat-$(echo "$MODEL_FLAGS" | tr -cd '[:alnum:]' | cut -c1-80)"
model() {  # writes the checkpoint once
  [ -f "$M/config.json" ] && return 0
  local t0=$SECONDS
  # shellcheck disable=SC2086
  $R seam model init --arch longcat_flash $MODEL_FLAGS --out "$M" --force > "$OUT_DIR/model_init.log" 2>&1 ||
    { echo "model init failed: $(tail -3 "$OUT_DIR/model_init.log")" >> "$SUMMARY"; return 1; }
  echo "model init: $M ($((SECONDS - t0)) s)" >> "$SUMMARY"
}

if want compare; then
  timeout 540 python3 tools/compare_longcat_transformers.py --work "$WORK/compare" --out "$OUT_DIR/compare" \
    --seam "$R seam" --seam-devices "${LONGCAT_COMPARE_DEVICES:-cpu,cuda}" --timeout 240 > "$OUT_DIR/compare.log" 2>&1
  echo "compare rc=$? (0: every goal met, 1: an f32 goal failed or a run failed, 3: only bf16 missed)" >> "$SUMMARY"
  [ -f "$OUT_DIR/compare/summary.txt" ] && cat "$OUT_DIR/compare/summary.txt" >> "$SUMMARY"
  [ -d "$WORK/compare/seam" ] && tar -C "$WORK/compare" -czf "$OUT_DIR/compare/seam-logs.tar.gz" \
    --exclude='*.bin' seam 2>/dev/null
fi

if want decode; then
  if model; then
    timeout 420 $R seam-bench-gpu decode --checkpoint "$M" --dtype bf16 --batches 1,32 --prompt-len 1024 \
      --steps 32 ${LONGCAT_DECODE_FLAGS:-} --json "$OUT_DIR/decode.json" > "$OUT_DIR/decode.log" 2>&1
    echo "seam-bench-gpu decode rc=$? $(grep -m1 -iE 'error|failed|no CUDA' "$OUT_DIR/decode.log")" >> "$SUMMARY"
    # --moe-experts auto: the routed experts' fused-or-grouped table timed at load (once per shape)
    sed -n '/fused or grouped per batch rows, timed at load/,/^\[/{/^rows /p;/timed at load/p}' "$OUT_DIR/decode.log" \
      >> "$SUMMARY"
    [ -s "$OUT_DIR/decode.json" ] && python3 - "$OUT_DIR/decode.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"decode ({d.get('architecture')}, graph_max_rows {d.get('graph_max_rows')}): weights {d['weight_bytes'] / 1e9:.2f} GB "
      f"at batch 1, latent KV {d['kv_bytes_per_token']:.0f} B/token, copy {d['copy_gbps']:.0f} GB/s; goal: within 1.5x")
for r in d["results"]:
    ms = r.get("graph_ms_per_step", r["eager_ms_per_step"])
    print(f"  batch {r['batch']:>3} context {r['context']}: {ms:.3f} ms/step, floor {r['floor_ms']:.3f} ms "
          f"({r['floor_bytes'] / 1e9:.2f} GB, {r.get('floor_routed_experts_per_layer', 0):.1f} routed experts "
          f"per MoE layer), ratio {r['floor_ratio']:.2f}"
          f"{' (eager: ' + r['eager_only'] + ')' if 'eager_only' in r else ''}")
PY
  fi
fi

if want kernels; then
  if model; then
    for b in ${LONGCAT_KERNEL_BATCHES:-1 32}; do
      # the fed graph's step time from the decode part (run it first), 0 if absent
      step_ms=$(python3 -c "import json,sys; print(next((r.get('graph_fed_ms_per_step', 0) for r in
        json.load(open(sys.argv[1]))['results'] if r['batch'] == int(sys.argv[2])), 0))" \
        "$OUT_DIR/decode.json" "$b" 2>/dev/null || echo 0)
      ncu_step "kernels_b$b" "$step_ms" seam-bench-gpu decode --checkpoint "$M" --dtype bf16 --batches "$b" \
        --prompt-len 1024 --steps 3 ${LONGCAT_DECODE_FLAGS:-} --json "$OUT_DIR/ncu_decode_b$b.json"
    done
  fi
fi

if want serve; then
  if model; then
    timeout 300 $R seam bench serve --model "$M" --device "$DEVICE" --dtype bf16 --batch 1,32 --prompt-len 1024 \
      --new-tokens 32 --logs-dir "$OUT_DIR/serve-logs" --json "$OUT_DIR/serve.json" > "$OUT_DIR/serve.log" 2>&1
    echo "seam bench serve rc=$?" >> "$SUMMARY"
    sed -n '/^ *batch  *context/,$p' "$OUT_DIR/serve.log" >> "$SUMMARY"
    timeout 240 $R seam bench load --model "$M" --device "$DEVICE" --dtype bf16 --transport grpc --timeout 200 \
      --progress 30 --workload plain --sessions 32 --prompt-len uniform:128:1024 --output-len 32 \
      --concurrency 1,16 --logs-dir "$OUT_DIR/load-logs" --json "$OUT_DIR/load.json" > "$OUT_DIR/load.log" 2>&1
    echo "seam bench load rc=$?" >> "$SUMMARY"
    sed -n '/^variant  *transport  *load  *requests/,$p' "$OUT_DIR/load.log" >> "$SUMMARY"
    for d in serve-logs load-logs; do
      [ -d "$OUT_DIR/$d" ] && tar -C "$OUT_DIR" -czf "$OUT_DIR/$d.tar.gz" "$d" && rm -rf "${OUT_DIR:?}/$d"
    done
  fi
fi
cat "$SUMMARY"
