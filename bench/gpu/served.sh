#!/usr/bin/env bash
# The served path on GPUs (one or two of one host), in one command:
#   tests   the GPU tests of what the server now runs: stream-ordered NCCL
#           (capture included), graph decode vs eager (runtime_test), token
#           choice on the device, the IPC fusion and the attention kernels
#   serve   seam bench serve on the model of the served-path issue (Qwen3,
#           8 layers, hidden 4096, 32 heads, 8 KV heads of 128, intermediate
#           12288, vocab 32000, bf16): prompts of 128, 64 new tokens, batch 1,
#           8 and 32, at PP 1 TP 1 with one decode step per microbatch and
#           with the coordinator's default, and, with two GPUs, TP 2 and PP 2
#   tokens  seam run --device cuda: the pipeline's tokens against the
#           single-process run at PP {1,2} x TP {1,2}, f32 and bf16
#   fusion  seam-bench-gpu allreduce-norm at TP 2 (fused vs NCCL + add-norm),
#           each call host-waited and as device time in a CUDA graph
#   handoff device links between stages: the two-process GPU tests (one GPU,
#           two GPUs, a corrupted payload), then seam-bench-handoff device:
#           8/32/128 tokens x 4096 bf16 hidden + residual one way, against
#           cudaMemcpyPeer of the same bytes and the host path; where a hop
#           goes (send_us, take_us, other_us) and the floors of the same two
#           processes (ucx_pingpong_us, kernel_alone_us, kernel_pingpong_us);
#           JSON per UCX mode (bench/README.md, "Device handoff latency")
#   moe     Qwen3-MoE with its experts grouped on the device: the kernel
#           tests of the grouped experts, the MoE graph-vs-eager model tests,
#           seam run's tokens at PP 1 and 2, f32 and bf16; then, on a random
#           Qwen3-MoE checkpoint of Qwen3-30B-A3B's layer shape (4 layers,
#           hidden 2048, 32 heads, 4 KV heads of 128, 128 experts, top 8,
#           moe_intermediate 768, vocab 32000, bf16), seam-bench-gpu decode
#           with the experts grouped (graph and eager) and one by one
#           (--moe-experts per-expert: eager, the group offsets read on the
#           host), batch 1, 8 and 32
#   moe-serve  seam bench serve on that checkpoint with the stages' default
#           (experts grouped, decode graphs) and with --moe-experts
#           per-expert, batch 1, 8 and 32
#   load    seam bench load on the serve part's model: 256 requests of
#           uniform 64-1,024 token-id prompts and 128 new tokens each, all in
#           flight, over gRPC and the OpenAI HTTP API, against the ideal of
#           the same load (prefill at the measured matmul peak + decode
#           steps at weights + KV bytes / copy bandwidth); JSON and SVG
#   mamba   Nemotron-H on CUDA: the Mamba2 / squared-ReLU kernel tests, the
#           device column-block copy, the tiny hybrid model against the CPU
#           (f32, bf16) and graph vs eager decode, then seam-bench-gpu
#           mamba on a random Nemotron-H-shaped checkpoint (16 layers
#           M-M-M*-M-M-M*-M-, hidden 4096, Mamba 128 heads of 64, 8 groups,
#           state 128, attention 32 / 8 heads of 128, MLP 12288, bf16): eager
#           decode at batch 1 and 32 vs the weight + state bytes floor, and
#           the Mamba prefill kernels over 8192 tokens vs copy bandwidth
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh:
#     bash bench/gpu/served.sh OUT_DIR [PART]
# OUT_DIR gets one log per run, the JSON of every bench serve run and
# summary.txt. NCCL_NVLS_ENABLE=0 throughout.
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-served "$@"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$OUT_DIR/gpus.txt" 2>&1
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $N GPUs, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), part $PART" >> "$SUMMARY"
result() { echo "$1 rc=$2 $(grep -E '^\[  (PASSED|FAILED) ' "$3" | tr '\n' ' ')" >> "$SUMMARY"; }

if want tests; then
  $R runtime_test > "$OUT_DIR/runtime_test.log" 2>&1; result runtime_test $? "$OUT_DIR/runtime_test.log"
  $R comm_test --gtest_filter='*Nccl*' > "$OUT_DIR/comm_test_nccl.log" 2>&1; result comm_test_nccl $? "$OUT_DIR/comm_test_nccl.log"
  $R cuda_kernels_test > "$OUT_DIR/cuda_kernels_test.log" 2>&1; result cuda_kernels_test $? "$OUT_DIR/cuda_kernels_test.log"
  $R ipc_allreduce_test > "$OUT_DIR/ipc_allreduce_test.log" 2>&1; result ipc_allreduce_test $? "$OUT_DIR/ipc_allreduce_test.log"
  $R boundary_ipc_fusion_gpu_test > "$OUT_DIR/ipc_fusion_gpu_test.log" 2>&1
  result boundary_ipc_fusion_gpu_test $? "$OUT_DIR/ipc_fusion_gpu_test.log"
  $R boundary_mhc_gpu_test > "$OUT_DIR/mhc_gpu_test.log" 2>&1; result boundary_mhc_gpu_test $? "$OUT_DIR/mhc_gpu_test.log"
fi

if want serve; then
  M="$WORK/qwen3-8l-4096"
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
  serve() {  # name, then layout flags
    local name=$1; shift
    timeout 300 $R seam bench serve --model "$M" --device cuda --dtype bf16 --batch 1,8,32 --prompt-len 128 \
      --new-tokens 64 --json "$OUT_DIR/serve_$name.json" "$@" > "$OUT_DIR/serve_$name.log" 2>&1
    echo "bench serve $name rc=$?" >> "$SUMMARY"
    grep -E '^ +(1|8|32) ' "$OUT_DIR/serve_$name.log" | sed "s/^/  $name /" >> "$SUMMARY"
  }
  # A layout is ppP_tpT, with _sK for --decode-steps K on the coordinator
  # (default: the coordinator's own, 8); pp1_tp1_s1 is one step per
  # microbatch, the round trip a step that multi-step decode removes.
  # _fed (before any _sK) lets a TP group feed its decode steps on the
  # device (seam-stage --fed-decode-max-tp T); _dev sends handoffs between
  # stages GPU to GPU (seam-stage --handoff-transport auto).
  for layout in ${SERVE_LAYOUTS:-pp1_tp1_s1 pp1_tp1 pp1_tp2 pp1_tp2_fed pp2_tp1 pp2_tp1_dev}; do
    steps=()
    case $layout in *_s*) steps=(--coordinator-arg=--decode-steps=${layout##*_s}) ;; esac
    base=${layout%_s*}
    case $base in *_fed) base=${base%_fed}; steps+=(--stage-arg=--fed-decode-max-tp=${base##*tp}) ;; esac
    case $base in *_dev) base=${base%_dev}; steps+=(--stage-arg=--handoff-transport=auto) ;; esac
    pp=${base#pp}; pp=${pp%%_*}; tp=${base##*tp}
    [ $((pp * tp)) -le "$N" ] || { echo "bench serve $layout: skipped, $N GPU" >> "$SUMMARY"; continue; }
    serve "$layout" --pp "$pp" --tp "$tp" "${steps[@]}"
  done
fi

# Where a served step's time goes at PP 1 TP 1: the stage's own time per
# microbatch against the gap between its answer and the next descriptor.
if want profile; then
  M="$WORK/qwen3-8l-4096"
  for b in 1 32; do
    logs="$OUT_DIR/profile_b$b"
    timeout 200 $R seam bench serve --model "$M" --device cuda --dtype bf16 --batch $b --prompt-len 128 --new-tokens 64 \
      --logs-dir "$logs" --stage-arg=--log-level=debug > "$OUT_DIR/profile_b$b.log" 2>&1
    awk -v b=$b '/us in the stage/ { for (i = 1; i <= NF; i++) { if ($(i+1) == "us" && $(i+2) == "in") s = $i;
                                        if ($(i+1) == "us" && $(i+2) == "since") g = $i }
                                      if ($0 ~ / 1 sequences| '"$b"' sequences/ && g > 0) { n++; ts += s; tg += g } }
         END { if (n) printf "profile batch %d: %d decode microbatches, %.0f us in the stage, %.0f us between answer and next descriptor\n", b, n, ts / n, tg / n }' \
      "$logs/stage0.log" >> "$SUMMARY"
  done
fi

if want tokens; then
  S="$WORK/small"
  [ -f "$S/config.json" ] || $R seam model init --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 \
    --vocab 8192 --seed 3 --out "$S" > /dev/null 2>&1
  # "1 2 fed": TP 2 with its decode steps fed on the device (--fed-decode-max-tp 2).
  for layout in "1 1" "2 1" "1 2" "1 2 fed" "2 2"; do
    set -- $layout
    [ "$2" -le "$N" ] || { echo "seam run pp$1 tp$2: skipped, $N GPU" >> "$SUMMARY"; continue; }
    fed=(); name="pp$1_tp$2"
    [ "${3:-}" = fed ] && { fed=(--stage-arg=--fed-decode-max-tp=$2); name="${name}_fed"; }
    for dt in f32 bf16; do
      log="$OUT_DIR/run_${name}_$dt.log"
      timeout 240 $R seam run --device cuda --model "$S" --pp $1 --tp $2 --dtype $dt --prompts 8 \
        --max-new-tokens 32 "${fed[@]}" > "$log" 2>&1
      rc=$?
      echo "seam run $name $dt rc=$rc $(grep -o 'tokens match the single-process run' "$log" | head -1) $(grep -o 'throughput: .*' "$log")" >> "$SUMMARY"
    done
  done
fi

if want handoff; then
  $R handoff_test --gtest_filter='*DeviceHandoffGpu*:*DeviceLink*:*TransportChoice*:*DeviceChecksum*:*SlotPlacement*' \
    > "$OUT_DIR/device_handoff_test.log" 2>&1
  result device_handoff_test $? "$OUT_DIR/device_handoff_test.log"
  for mode in shm tcp; do
    timeout 300 $R seam-bench-handoff device $mode 8,32,128 4096 2000 200 "$OUT_DIR/device_handoff_$mode.json" \
      > "$OUT_DIR/device_handoff_$mode.log" 2>&1
    echo "seam-bench-handoff device $mode rc=$?" >> "$SUMMARY"
    grep -E '^ +(tokens|8|32|128) ' "$OUT_DIR/device_handoff_$mode.log" | sed "s/^/  $mode /" >> "$SUMMARY"
  done
fi

# The MoE checkpoint of parts moe and moe-serve (Qwen3-30B-A3B's layer shape), made once.
MOE="$WORK/qwen3-moe-4l-2048"
moe_model() {
  [ -f "$MOE/config.json" ] || $R seam model init --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 \
    --head-dim 128 --intermediate 6144 --experts 128 --top-k 8 --moe-intermediate 768 --vocab 32000 --dtype bf16 \
    --seed 5 --out "$MOE" > "$OUT_DIR/moe_model_init.log" 2>&1
}

if want moe; then
  $R cuda_kernels_test --gtest_filter='*Expert*:*SortRoutes*:*MoeFinalize*:*MoeRoute*:*Matmul*' \
    > "$OUT_DIR/moe_kernels_test.log" 2>&1
  result moe_kernels_test $? "$OUT_DIR/moe_kernels_test.log"
  $R runtime_test --gtest_filter='*CudaModel.*:*GraphDecode*' > "$OUT_DIR/moe_runtime_test.log" 2>&1
  result moe_runtime_test $? "$OUT_DIR/moe_runtime_test.log"
  T="$WORK/moe-small"
  [ -f "$T/config.json" ] || $R seam model init --arch qwen3_moe --layers 4 --hidden 1024 --heads 16 --kv-heads 8 \
    --head-dim 64 --intermediate 3072 --experts 16 --top-k 4 --moe-intermediate 256 --vocab 8192 --seed 3 \
    --out "$T" > /dev/null 2>&1
  for pp in 1 2; do
    for dt in f32 bf16; do
      log="$OUT_DIR/moe_run_pp${pp}_$dt.log"
      timeout 200 $R seam run --device cuda --model "$T" --pp $pp --tp 1 --dtype $dt --prompts 8 \
        --max-new-tokens 32 > "$log" 2>&1
      echo "seam run moe pp$pp $dt rc=$? $(grep -o 'tokens match the single-process run' "$log" | head -1)" >> "$SUMMARY"
    done
  done
  moe_model
  for experts in auto per-expert; do
    timeout 150 $R seam-bench-gpu decode --checkpoint "$MOE" --dtype bf16 --batches 1,8,32 --prompt-len 128 --steps 64 \
      --moe-experts $experts --json "$OUT_DIR/moe_decode_$experts.json" > "$OUT_DIR/moe_decode_$experts.log" 2>&1
    echo "seam-bench-gpu decode moe $experts rc=$?" >> "$SUMMARY"
  done
  python3 - "$OUT_DIR"/moe_decode_auto.json "$OUT_DIR"/moe_decode_per-expert.json >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
g, p = (json.load(open(f))["results"] for f in sys.argv[1:3])
for a, b in zip(g, p):
    print(f"  decode batch {a['batch']}: grouped graph {a.get('graph_ms_per_step', 0):.3f} ms, grouped eager "
          f"{a['eager_ms_per_step']:.3f} ms, per-expert eager {b['eager_ms_per_step']:.3f} ms "
          f"(graph / per-expert {a.get('graph_ms_per_step', 0) / b['eager_ms_per_step']:.3f}x), "
          f"floor {a['floor_ms']:.3f} ms, graph tokens = eager {a.get('graph_tokens_equal_eager')}")
PY
fi

if want moe-serve; then
  moe_model
  for experts in auto per-expert; do
    timeout 240 $R seam bench serve --model "$MOE" --device cuda --dtype bf16 --batch 1,8,32 --prompt-len 128 \
      --new-tokens 64 --stage-arg=--moe-experts=$experts --json "$OUT_DIR/moe_serve_$experts.json" \
      > "$OUT_DIR/moe_serve_$experts.log" 2>&1
    echo "bench serve moe $experts rc=$?" >> "$SUMMARY"
    grep -E '^ +(1|8|32) ' "$OUT_DIR/moe_serve_$experts.log" | sed "s/^/  moe $experts /" >> "$SUMMARY"
  done
fi

if want mamba; then
  $R cuda_kernels_test --gtest_filter='*ReluSquared*:*GatedRmsNorm*:*CausalConv1d*:*SelectiveScan*' \
    > "$OUT_DIR/mamba_kernels_test.log" 2>&1
  result mamba_kernels_test $? "$OUT_DIR/mamba_kernels_test.log"
  $R core_test --gtest_filter='TensorCopy.*' > "$OUT_DIR/mamba_copy_test.log" 2>&1
  result mamba_copy_test $? "$OUT_DIR/mamba_copy_test.log"
  $R runtime_test --gtest_filter='*CudaModelNemotronH*' > "$OUT_DIR/mamba_model_test.log" 2>&1
  result mamba_model_test $? "$OUT_DIR/mamba_model_test.log"
  H="$WORK/nemotron-h-16l-4096"
  [ -f "$H/config.json" ] || $R seam model init --arch nemotron_h --layers 16 --pattern 'M-M-M*-M-M-M*-M-' \
    --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --mamba-heads 128 \
    --mamba-head-dim 64 --groups 8 --state 128 --conv-kernel 4 --dtype bf16 --seed 7 --out "$H" \
    > "$OUT_DIR/mamba_model_init.log" 2>&1
  timeout 500 $R seam-bench-gpu mamba --checkpoint "$H" --dtype bf16 --batches 1,32 --scan-tokens 8192 \
    --json "$OUT_DIR/mamba.json" > "$OUT_DIR/mamba.log" 2>&1
  echo "seam-bench-gpu mamba rc=$?" >> "$SUMMARY"
  python3 - "$OUT_DIR/mamba.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"  copy {j['copy_gbps']:.0f} GB/s")
for r in j["decode"]["results"]:
    print(f"  decode batch {r['batch']}: {r['eager_ms_per_step']:.3f} ms/step, floor {r['floor_ms']:.3f} ms, "
          f"x{r['floor_ratio']:.2f}, {r['tokens_per_s']:.0f} tok/s")
for k in j["kernels"]:
    for o in k["ops"]:
        print(f"  {o['op']} {k['tokens']} tokens / {k['sequences']} seqs: {o['us']:.0f} us, {o['gbps']:.0f} GB/s, "
              f"x{o['floor_ratio']:.1f} of the copy floor")
p = j["prefill"]
print(f"  model prefill {p['tokens']} tokens: {p['ms']:.1f} ms, {p['tokens_per_s']:.0f} tok/s")
PY
fi

if want load; then
  M="$WORK/qwen3-8l-4096"
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
  timeout 560 $R seam bench load --model "$M" --device cuda --dtype bf16 --sessions 256 --prompt-len uniform:64:1024 \
    --output-len 128 --concurrency 256 --transport grpc,http --timeout 300 --progress 15 ${LOAD_ARGS:-} \
    --json "$OUT_DIR/load.json" --svg "$OUT_DIR/load.svg" > "$OUT_DIR/load.log" 2>&1
  echo "bench load rc=$?" >> "$SUMMARY"
  sed -n '/^variant  *transport  *load  *requests/,$p' "$OUT_DIR/load.log" >> "$SUMMARY"
fi

if want fusion && [ "$N" -ge 2 ]; then
  timeout 200 $R seam-bench-gpu allreduce-norm --tp 2 --json "$OUT_DIR/fusion.json" > "$OUT_DIR/fusion.log" 2>&1
  echo "allreduce-norm rc=$?" >> "$SUMMARY"
  # Per call: host-waited latency and device time (graph-replayed), fused and NCCL + add-norm.
  python3 - "$OUT_DIR/fusion.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"  TP {r['tp']} {r['tokens']} x {r['hidden']}: fused {r['fused_us']:.1f} us waited, "
          f"{r['fused_device_us']:.1f} us device; NCCL + add-norm {r['unfused_us']:.1f} / {r['unfused_device_us']:.1f} us")
PY
fi
cat "$SUMMARY"
