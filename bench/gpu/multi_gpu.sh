#!/usr/bin/env bash
# The multi-GPU run (two or four GPUs of one host): NCCL tensor parallelism
# under the boundary, the one-shot IPC all-reduce + add + RMSNorm against NCCL
# + the fused add+norm, and pipelines across GPUs, with the handoff latency.
#
# Run it plainly from the repo root with the bundle of scripts/gpu-bundle.sh
# in bundle/ (it calls scripts/gpu-run.sh for every seam binary):
#
#     bash bench/gpu/multi_gpu.sh [OUT_DIR] [PART]
#
# PART picks one part (each fits the 10 minutes one device command may take at
# four GPUs); without it every part runs:
#   tests     comm_test (NCCL), ipc_allreduce_test, boundary_ipc_fusion_gpu_test
#   check     seam check --device cuda, Qwen3 and Qwen3-MoE, TP 2 (and 4) x
#             attention DP 1, 2 x every policy, f32 and bf16 (fusion auto),
#             and bf16 with --allreduce-fusion always (policy ar)
#   fusion    seam-bench-gpu allreduce-norm: 1..256 tokens x hidden 4096, 8192
#             at TP 2 (and 4): fused vs NCCL + FusedAddRmsNorm, and the choice
#   pipeline  seam run --device cuda at PP 1, 2 x TP 1, 2 (TP as the GPUs
#             allow; with fewer GPUs than PP x TP the stages share them),
#             f32 and bf16, and seam-bench-handoff latency (host vs GPU-staged)
#   tbo       models_two_batch_test's CUDA case (two streams on one GPU), then
#             seam-bench-gpu tbo: a Qwen3-MoE prefill of 2 x 4096 tokens at TP 2
#             with and without two-batch overlap, and the time in collectives
#             without it (a 4-layer model of Qwen3-30B-A3B's layer shape, 32
#             experts); tbo.log (the table) and tbo.json
#   cp        seam-bench-gpu cp: one prompt of 32768 tokens prefilled at CP 1
#             (one GPU, the ordinary forward) and at CP 2 (two GPUs, every
#             prefill context-parallel) on the served path's model shape
#             (Qwen3, 8 layers, hidden 4096, 32 heads, 8 KV heads of 128,
#             intermediate 12288, vocab 32000, bf16): the speedup (goal 1.6)
#             and the last row's logits of both; with one GPU CP 1 only (the
#             log says CP 2 was not run); cp.log and cp.json
# OUT_DIR (default $OUT, else bench/results/<date>-gpu<N>) gets one log per
# run, summary.txt (one line per run) and tables.md (the README's tables).
# NCCL_NVLS_ENABLE=0 throughout: no NVLink multicast objects are created.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
R=scripts/gpu-run.sh
N=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
OUT_DIR="${1:-${OUT:-bench/results/$(date +%Y-%m-%d)-gpu$N}}"
PART="${2:-all}"
mkdir -p "$OUT_DIR"
WORK="${SEAM_GPU_WORK:-/tmp/seam-multi-gpu}"
mkdir -p "$WORK"
SUMMARY="$OUT_DIR/summary.txt"
TABLES="$OUT_DIR/tables.md"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$OUT_DIR/gpus.txt" 2>&1
nvidia-smi topo -m > "$OUT_DIR/topology.txt" 2>&1
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $N GPUs, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), part $PART" >> "$SUMMARY"
TPS="2"
[ "$N" -ge 4 ] && TPS="2 4"
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
multi() {  # parts that need a TP group of GPUs
  [ "$N" -ge 2 ] && return 0
  echo "$1: skipped, $N GPU visible (needs 2 or more)" >> "$SUMMARY"
  return 1
}

model() {  # name, then seam model init flags
  local name=$1; shift
  [ -f "$WORK/$name/config.json" ] || $R seam model init "$@" --out "$WORK/$name" > "$WORK/$name.init.log" 2>&1
}
model qwen3 --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 --vocab 8192 --seed 1
model qwen3_moe --arch qwen3_moe --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 \
  --moe-intermediate 512 --experts 8 --top-k 2 --vocab 8192 --seed 2
model mid --layers 8 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 --vocab 8192 --seed 3

if want tests; then
  $R comm_test --gtest_filter='*Nccl*' > "$OUT_DIR/comm_test_nccl.log" 2>&1
  echo "comm_test nccl rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT_DIR/comm_test_nccl.log" | tr '\n' ' ')" >> "$SUMMARY"
  for t in ipc_allreduce_test boundary_ipc_fusion_gpu_test; do
    $R $t > "$OUT_DIR/$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT_DIR/$t.log" | tr '\n' ' ')" >> "$SUMMARY"
  done
fi

if want check && multi check; then
  echo "| model | TP | attn DP | policy | dtype | fusion | prefill rel | decode rel | tokens | fused sums | result |" > "$OUT_DIR/check_table.md"
  echo "|---|---|---|---|---|---|---|---|---|---|---|" >> "$OUT_DIR/check_table.md"
  run_check() {  # model tp dp policy dtype fusion
    local log="$OUT_DIR/check_$1_tp$2_dp$3_$4_$5_$6.log" tol=1e-4
    [ "$5" = bf16 ] && tol=5e-2
    $R seam check --device cuda --model "$WORK/$1" --tp "$2" --attn-dp "$3" --policy "$4" --dtype "$5" \
      --allreduce-fusion "$6" --tolerance $tol > "$log" 2>&1
    local rc=$?
    local pre dec tok fused res
    pre=$(sed -n 's/^prefill logits:.*rel err \([^ ]*\).*/\1/p' "$log")
    dec=$(sed -n 's/^decode logits:.*rel err \([^ ]*\) (\([0-9]*\) of \([0-9]*\) rows.*/\1 (\2 of \3 rows over)/p' "$log")
    tok=$(sed -n 's/^greedy tokens: *//p' "$log")
    fused=$(sed -n 's/^all-reduce fusion: \([0-9]*\) sums.*/\1/p' "$log")
    res=$(tail -1 "$log")
    echo "check $1 tp$2 dp$3 $4 $5 fusion=$6 rc=$rc prefill_rel=$pre decode_rel=$dec fused=${fused:-0} tokens: $tok $res" >> "$SUMMARY"
    echo "| $1 | $2 | $3 | $4 | $5 | $6 | $pre | $dec | $tok | ${fused:-0} | $res |" >> "$OUT_DIR/check_table.md"
  }
  for tp in $TPS; do
    for m in qwen3 qwen3_moe; do
      for dp in 1 2; do
        for pol in ar rs rsv rs+rsv auto; do
          for dt in f32 bf16; do run_check $m $tp $dp $pol $dt auto; done
        done
        run_check $m $tp $dp ar bf16 always
      done
    done
  done
fi

if want fusion && multi fusion; then
  tp_list=$(echo $TPS | tr ' ' ',')
  $R seam-bench-gpu allreduce-norm --tp "$tp_list" --tokens 1,2,4,8,16,32,64,128,256 --hidden 4096,8192 \
    --iters 300 --json "$OUT_DIR/allreduce_norm.json" > "$OUT_DIR/allreduce_norm.log" 2>&1
  echo "allreduce-norm rc=$?" >> "$SUMMARY"
  python3 - "$OUT_DIR/allreduce_norm.json" > "$OUT_DIR/fusion_table.md" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("| TP | hidden | tokens | fused µs | NCCL + add-norm µs | ratio | chosen |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['tp']} | {r['hidden']} | {r['tokens']} | {r['fused_us']:.1f} | {r['unfused_us']:.1f} | "
          f"{r['ratio']:.2f} | {r['chosen']} |")
PY
fi

if want pipeline; then
  echo "| PP | TP | GPUs | dtype | tokens/s | vs PP1 TP1 | tokens match |" > "$OUT_DIR/pipeline_table.md"
  echo "|---|---|---|---|---|---|---|" >> "$OUT_DIR/pipeline_table.md"
  for dt in f32 bf16; do
    base=""
    for layout in "1 1" "2 1" "1 2" "2 2"; do
      set -- $layout
      [ "$2" -gt "$N" ] && continue  # TP ranks need GPUs of their own (NCCL)
      gpus=$(($1 * $2))
      [ "$gpus" -gt "$N" ] && gpus="$N (stages share)"
      log="$OUT_DIR/run_pp$1_tp$2_$dt.log"
      $R seam run --device cuda --model "$WORK/mid" --pp $1 --tp $2 --dtype $dt --prompts 3 --max-new-tokens 32 \
        > "$log" 2>&1
      rc=$?
      tps=$(sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$log")
      [ -z "$base" ] && base=$tps
      ratio=$(python3 -c "print(f'{float(\"${tps:-0}\")/float(\"${base:-1}\"):.2f}')" 2>/dev/null)
      match=$(grep -q "tokens match" "$log" && echo yes || echo no)
      echo "seam run pp$1 tp$2 $dt rc=$rc tokens/s=$tps match=$match" >> "$SUMMARY"
      echo "| $1 | $2 | $gpus | $dt | $tps | $ratio | $match |" >> "$OUT_DIR/pipeline_table.md"
    done
  done
  echo "| transport | tokens | host median µs | host p99 µs | GPU-staged median µs | GPU-staged p99 µs |" > "$OUT_DIR/handoff_table.md"
  echo "|---|---|---|---|---|---|" >> "$OUT_DIR/handoff_table.md"
  for mode in shm tcp; do
    for t in 1 8 64 256; do
      h=$($R seam-bench-handoff latency $mode $t 4096 300 30 cpu 2>>"$OUT_DIR/handoff.err")
      g=$($R seam-bench-handoff latency $mode $t 4096 300 30 cuda 2>>"$OUT_DIR/handoff.err")
      echo "handoff $mode tokens=$t hidden=4096 bf16 host=[$h] gpu=[$g]" >> "$SUMMARY"
      set -- $h $g
      echo "| $mode | $t | ${1:-} | ${2:-} | ${3:-} | ${4:-} |" >> "$OUT_DIR/handoff_table.md"
    done
  done
fi

if want tbo && multi tbo; then
  $R models_two_batch_test --gtest_filter='*Cuda*' > "$OUT_DIR/models_two_batch_test_cuda.log" 2>&1
  echo "models_two_batch_test cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT_DIR/models_two_batch_test_cuda.log" | tr '\n' ' ')" >> "$SUMMARY"
  model qwen3_moe_a3b --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 \
    --intermediate 6144 --moe-intermediate 768 --experts 32 --top-k 8 --vocab 16384 --seed 4
  $R seam-bench-gpu tbo --checkpoint "$WORK/qwen3_moe_a3b" --tp 2 --dtype bf16 --seqs 2 --len 4096 \
    --json "$OUT_DIR/tbo.json" > "$OUT_DIR/tbo.log" 2>&1
  echo "seam-bench-gpu tbo rc=$? $(grep -E '^saved' "$OUT_DIR/tbo.log")" >> "$SUMMARY"
  { echo '```'; cat "$OUT_DIR/tbo.log"; echo '```'; } > "$OUT_DIR/tbo_table.md"
fi

if want cp; then  # CP 1 runs on one GPU too
  model qwen3-8l-4096 --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 \
    --vocab 32000 --dtype bf16 --seed 5
  $R seam-bench-gpu cp --checkpoint "$WORK/qwen3-8l-4096" --cp 2 --len 32768 --dtype bf16 \
    --json "$OUT_DIR/cp.json" > "$OUT_DIR/cp.log" 2>&1
  echo "seam-bench-gpu cp rc=$? $(grep -E '^(CP [0-9]|speedup)' "$OUT_DIR/cp.log" | tr -s ' ' | tr '\n' ';')" >> "$SUMMARY"
  # The table: the log without its JSON object.
  { echo '```'; awk '/^\{/ { j = 1 } !j { print } /^\}/ { j = 0 }' "$OUT_DIR/cp.log"; echo '```'; } > "$OUT_DIR/cp_table.md"
fi

for f in check_table fusion_table pipeline_table handoff_table tbo_table cp_table; do
  [ -f "$OUT_DIR/$f.md" ] && { echo "## $f"; cat "$OUT_DIR/$f.md"; echo; }
done > "$TABLES"
cat "$SUMMARY"
