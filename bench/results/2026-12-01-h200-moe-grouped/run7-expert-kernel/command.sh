#!/usr/bin/env bash
# One H200: the grouped expert matmul with its weight rows' first chunk
# requested before the pairs are read, predicated partial chunks, 8 warps a
# block and 4 pairs a pass (this tree) against the kernel of run1-6
# (old/seam-bench-gpu, built from 6573d48), alternately in this run: the
# kernel tests, the MoE model tests, the op profile at 1 and 32 sequences,
# decode steps at batch 1 / 8 / 32 / 128, and the dense GEMV (its last step
# now shared with the expert kernel) on the served-path issue's dense model
# at batch 1 and 8; then the served MoE figures.
set -u
export SEAM_GPU_WORK=/tmp/seam-served
R=scripts/gpu-run.sh
D=$OUT/run7; mkdir -p $D
echo "tree $(cat TREE 2>/dev/null); old: 6573d48" > $D/commit.txt
gunzip -c old/seam-bench-gpu.gz > /tmp/old-bench && chmod +x /tmp/old-bench
S=$D/summary.txt
$R cuda_kernels_test --gtest_filter='*Expert*:*SortRoutes*:*MoeFinalize*:*Pairs*:*Matmul*:*MoeRoute*' > $D/kernels_test.log 2>&1
echo "kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/kernels_test.log | tr '\n' ' ')" >> $S
$R runtime_test --gtest_filter='*CudaModel.*Moe*:*GraphDecode.Moe*' > $D/runtime_test.log 2>&1
echo "runtime_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/runtime_test.log | tr '\n' ' ')" >> $S
C=bench/results/2026-12-01-h200-moe-grouped/run6-profile/config
for round in 1 2; do
  for side in old new; do
    bin=seam-bench-gpu; [ $side = old ] && bin=/tmp/old-bench
    for s in 1 32; do
      $R $bin profile --checkpoint $C --dtype bf16 --seqs $s --context 192 --json $D/profile_${side}_${s}_$round.json > /dev/null 2>&1
    done
  done
done
M=$SEAM_GPU_WORK/qwen3-moe-4l-2048
[ -f "$M/config.json" ] || $R seam model init --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 \
  --head-dim 128 --intermediate 6144 --experts 128 --top-k 8 --moe-intermediate 768 --vocab 32000 --dtype bf16 \
  --seed 5 --out "$M" > $D/model_init.log 2>&1
for side in old new; do
  bin=seam-bench-gpu; [ $side = old ] && bin=/tmp/old-bench
  timeout 120 $R $bin decode --checkpoint $M --dtype bf16 --batches 1,8,32,128 --prompt-len 128 --steps 64 \
    --json $D/decode_$side.json > $D/decode_$side.log 2>&1
  echo "decode $side rc=$?" >> $S
done
Q=$SEAM_GPU_WORK/qwen3-8l-4096
[ -f "$Q/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
  --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out "$Q" > $D/dense_init.log 2>&1
for side in old new; do
  bin=seam-bench-gpu; [ $side = old ] && bin=/tmp/old-bench
  timeout 90 $R $bin decode --checkpoint $Q --dtype bf16 --batches 1,8 --prompt-len 128 --steps 64 \
    --json $D/dense_decode_$side.json > $D/dense_decode_$side.log 2>&1
  echo "dense decode $side rc=$?" >> $S
done
python3 - $D >> $S 2>&1 <<'PY'
import json, sys, os
d = sys.argv[1]
for s in (1, 32):
    for side in ("old", "new"):
        for rnd in (1, 2):
            j = json.load(open(os.path.join(d, f"profile_{side}_{s}_{rnd}.json")))
            ops = {o["op"]: o["graph_us"] for o in j["ops"]}
            print(f"profile seqs {s} {side} round {rnd}: ops sum {j['sum_graph_ms']:.3f} ms; gate_up {ops['moe_expert_gate_up']:.2f} us, down {ops['moe_expert_down']:.2f} us")
old, new = (json.load(open(os.path.join(d, f"decode_{x}.json")))["results"] for x in ("old", "new"))
for name in ("dense_decode",):
    o, n = (json.load(open(os.path.join(d, f"{name}_{x}.json")))["results"] for x in ("old", "new"))
    for a, b in zip(o, n):
        print(f"dense decode batch {a['batch']}: graph {a['graph_ms_per_step']:.3f} -> {b['graph_ms_per_step']:.3f} ms ({b['graph_ms_per_step'] / a['graph_ms_per_step']:.3f}x)")
for a, b in zip(old, new):
    print(f"decode batch {a['batch']}: graph {a['graph_ms_per_step']:.3f} -> {b['graph_ms_per_step']:.3f} ms ({b['graph_ms_per_step'] / a['graph_ms_per_step']:.3f}x), floor {b['floor_ms']:.3f} ms")
PY
SERVE_LAYOUTS=none bash bench/gpu/served.sh $D moe-serve > /dev/null 2>&1
cat $S
tar czf $OUT/run7.tgz -C $OUT run7
