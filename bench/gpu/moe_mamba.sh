#!/usr/bin/env bash
# The MoE and Mamba kernels on one GPU (issue 31), old and new in the same
# run, within about four minutes (each stage under a timeout; the caps add
# up to seven, a stage that hits one is recorded with rc=124):
#   tests   the CUDA kernel tests of the fused expert kernels (GEMV and
#           tensor-core, uniform / hot / skewed routing, decode and prefill
#           sizes), the expert grouping and the chunked SSD scan (chunk sizes,
#           ragged sequences, a prompt split over two calls); the MoE and
#           Nemotron-H models on CUDA against the CPU and graph decode
#           against eager (runtime_test), the chunked scan inside the model
#   moe     seam-bench-gpu moe-kernels on Qwen3-30B-A3B's layer (hidden 2048,
#           128 experts, top 8, moe_intermediate 768, bf16): classic, gemv,
#           tensor_core and per_expert at 1, 8, 32 and 128 rows with uniform,
#           skewed and hot routing, and 512 / 1024 rows uniform (the
#           crossover), each against max(bytes / copy, FLOPs / peak)
#   decode  seam-bench-gpu decode on a 4-layer checkpoint of that shape at
#           batch 1, 8, 32 and 128: --moe-experts auto (the fused kernels,
#           graphs at every batch) against classic (the earlier default)
#   mamba   seam-bench-gpu mamba on the Nemotron-H-shaped checkpoint (16
#           layers M-M-M*-M-M-M*-M-, hidden 4096, Mamba 128 heads of 64, 8
#           groups, state 128, bf16): the 8k-token scan sequential and
#           chunked (32, 64) against its bytes and FLOPs, the decode scan and
#           eager decode at batch 1 and 32, the 8k prefill with each scan
# And, only when asked for by name (PART tokens; about four minutes more):
#   tokens  seam run --device cuda on a small Qwen3-MoE checkpoint and on a
#           small Nemotron-H one whose Mamba heads the chunked scan tiles
#           (heads of 32, state 64): the pipeline's greedy tokens against the
#           single-process run at PP 1 and 2, f32 and bf16, with the stages'
#           defaults (fused experts; chunked prefill scan)
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh:
#     bash bench/gpu/moe_mamba.sh OUT_DIR [PART]
# OUT_DIR gets one log (and JSON) per stage and summary.txt; PART runs one
# stage. Checkpoints go to SEAM_GPU_WORK (default /tmp/seam-served, shared
# with bench/gpu/served.sh, whose checkpoints of the same shapes it reuses).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
R=scripts/gpu-run.sh
OUT_DIR="${1:?OUT_DIR}"
PART="${2:-all}"
mkdir -p "$OUT_DIR"
WORK="${SEAM_GPU_WORK:-/tmp/seam-served}"
mkdir -p "$WORK"
SUMMARY="$OUT_DIR/summary.txt"
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), part $PART" \
  >> "$SUMMARY"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$OUT_DIR/gpus.txt" 2>&1
result() { echo "$1 rc=$2 $(grep -E '^\[  (PASSED|FAILED) ' "$3" | tr '\n' ' ')" >> "$SUMMARY"; }
elapsed() { echo "  ($(( $(date +%s) - START ))s so far)" >> "$SUMMARY"; }
START=$(date +%s)

if want tests; then
  timeout 60 $R cuda_kernels_test \
    --gtest_filter='*FusedExperts*:*GroupByExpert*:*ExpertMatmul*:*SortRoutes*:*MoeFinalize*:*ChunkedScan*:*SelectiveScan*' \
    > "$OUT_DIR/kernels_test.log" 2>&1
  result kernels_test $? "$OUT_DIR/kernels_test.log"
  timeout 45 $R runtime_test \
    --gtest_filter='*CudaModel.*:*GraphDecode*Moe*:*CudaModelNemotronH*' > "$OUT_DIR/runtime_test.log" 2>&1
  result runtime_test $? "$OUT_DIR/runtime_test.log"
  elapsed
fi

if want moe; then
  timeout 50 $R seam-bench-gpu moe-kernels --batches 1,8,32,128 --routings uniform,skewed,hot \
    --json "$OUT_DIR/moe_kernels.json" > "$OUT_DIR/moe_kernels.log" 2>&1
  echo "moe-kernels rc=$?" >> "$SUMMARY"
  timeout 25 $R seam-bench-gpu moe-kernels --batches 512,1024 --routings uniform \
    --json "$OUT_DIR/moe_kernels_large.json" > "$OUT_DIR/moe_kernels_large.log" 2>&1
  echo "moe-kernels large rc=$?" >> "$SUMMARY"
  python3 - "$OUT_DIR/moe_kernels.json" "$OUT_DIR/moe_kernels_large.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.load(open(path))
    except Exception as e:
        print(f"  {path}: {e}")
        continue
    print(f"  copy {j['copy_gbps']:.0f} GB/s, bf16 peak {j['bf16_peak_tflops']:.0f} TFLOP/s")
    for c in j["cases"]:
        ways = ", ".join(f"{k} {v['us']:.1f} us (x{v['floor_ratio']:.2f})" for k, v in c["ways"].items())
        print(f"  {c['rows']} rows {c['routing']} ({c['active_experts']} experts, floor {c['floor_us']:.1f} us, "
              f"auto {c['auto_kernel']}): {ways}")
PY
  elapsed
fi

# The MoE checkpoint of Qwen3-30B-A3B's layer shape (4 layers), as served.sh makes it.
MOE="$WORK/qwen3-moe-4l-2048"
if want decode; then
  [ -f "$MOE/config.json" ] || timeout 60 $R seam model init --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 \
    --kv-heads 4 --head-dim 128 --intermediate 6144 --experts 128 --top-k 8 --moe-intermediate 768 --vocab 32000 \
    --dtype bf16 --seed 5 --out "$MOE" > "$OUT_DIR/moe_model_init.log" 2>&1
  for experts in auto classic; do
    timeout 35 $R seam-bench-gpu decode --checkpoint "$MOE" --dtype bf16 --batches 1,8,32,128 --prompt-len 128 \
      --steps 32 --moe-experts $experts --json "$OUT_DIR/moe_decode_$experts.json" \
      > "$OUT_DIR/moe_decode_$experts.log" 2>&1
    echo "seam-bench-gpu decode moe $experts rc=$?" >> "$SUMMARY"
  done
  python3 - "$OUT_DIR/moe_decode_auto.json" "$OUT_DIR/moe_decode_classic.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
new, old = (json.load(open(f))["results"] for f in sys.argv[1:3])
for a, b in zip(new, old):
    best_old = b.get("graph_ms_per_step", b["eager_ms_per_step"])
    print(f"  decode batch {a['batch']}: auto graph {a.get('graph_ms_per_step', 0):.3f} ms (x{a['floor_ratio']:.2f} "
          f"of the bench's routed floor {a['floor_ms']:.3f} ms), classic {best_old:.3f} ms, "
          f"auto / classic {a.get('graph_ms_per_step', a['eager_ms_per_step']) / best_old:.3f}, "
          f"graph tokens = eager {a.get('graph_tokens_equal_eager')}")
PY
  elapsed
fi

H="$WORK/nemotron-h-16l-4096"
if want mamba; then
  [ -f "$H/config.json" ] || timeout 60 $R seam model init --arch nemotron_h --layers 16 --pattern 'M-M-M*-M-M-M*-M-' \
    --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --mamba-heads 128 \
    --mamba-head-dim 64 --groups 8 --state 128 --conv-kernel 4 --dtype bf16 --seed 7 --out "$H" \
    > "$OUT_DIR/mamba_model_init.log" 2>&1
  timeout 70 $R seam-bench-gpu mamba --checkpoint "$H" --dtype bf16 --batches 1,32 --steps 16 --scan-tokens 8192 \
    --json "$OUT_DIR/mamba.json" > "$OUT_DIR/mamba.log" 2>&1
  echo "seam-bench-gpu mamba rc=$?" >> "$SUMMARY"
  python3 - "$OUT_DIR/mamba.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"  copy {j['copy_gbps']:.0f} GB/s, bf16 peak {j['bf16_peak_tflops']:.0f} TFLOP/s")
for k in j["kernels"]:
    for o in k["ops"]:
        extra = f", max rel diff vs sequential {o['max_rel_diff_vs_sequential']:.1e}" if "max_rel_diff_vs_sequential" in o else ""
        print(f"  {o['op']} {k['tokens']} tokens / {k['sequences']} seqs: {o['us']:.0f} us, "
              f"x{o['floor_ratio']:.2f} of its floor {o['floor_us']:.0f} us{extra}")
for o in j["decode_scan"]:
    print(f"  decode scan batch {o['batch']}: {o['us']:.1f} us, x{o['floor_ratio']:.2f} of its bytes' time")
for r in j["decode"]["results"]:
    print(f"  decode batch {r['batch']}: {r['eager_ms_per_step']:.3f} ms/step (eager), x{r['floor_ratio']:.2f} "
          f"of weights + state {r['floor_ms']:.3f} ms")
p = j["prefill"]
print(f"  prefill {p['auto']['tokens']} tokens: sequential scan {p['sequential']['ms']:.1f} ms, chunked "
      f"{p['auto']['ms']:.1f} ms ({p['speedup']:.2f}x)")
PY
  elapsed
fi
if [ "$PART" = tokens ]; then
  T="$WORK/moe-small"
  [ -f "$T/config.json" ] || $R seam model init --arch qwen3_moe --layers 4 --hidden 1024 --heads 16 --kv-heads 8 \
    --head-dim 64 --intermediate 3072 --experts 16 --top-k 4 --moe-intermediate 256 --vocab 8192 --seed 3 \
    --out "$T" > /dev/null 2>&1
  N="$WORK/nemotron-h-small-tiled"
  [ -f "$N/config.json" ] || $R seam model init --arch nemotron_h --layers 8 --pattern 'MM*--M*-' --hidden 1024 \
    --heads 16 --kv-heads 8 --head-dim 64 --intermediate 3072 --vocab 8192 --mamba-heads 32 --mamba-head-dim 32 \
    --groups 2 --state 64 --conv-kernel 4 --seed 3 --out "$N" > /dev/null 2>&1
  for model in "$T" "$N"; do
    for pp in 1 2; do
      for dt in f32 bf16; do
        log="$OUT_DIR/run_$(basename "$model")_pp${pp}_$dt.log"
        timeout 120 $R seam run --device cuda --model "$model" --pp $pp --tp 1 --dtype $dt --prompts 8 \
          --max-new-tokens 32 > "$log" 2>&1
        echo "seam run $(basename "$model") pp$pp $dt rc=$? $(grep -o 'tokens match the single-process run' "$log" \
          | head -1)" >> "$SUMMARY"
      done
    done
  done
  elapsed
fi
cat "$SUMMARY"
