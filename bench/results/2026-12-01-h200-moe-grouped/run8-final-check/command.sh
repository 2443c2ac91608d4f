#!/usr/bin/env bash
# One H200, the tree as committed after run7 (run1-6's expert kernel with the
# GEMV's shared last step, the ops' pair limit raised to 2^24): the kernel
# and MoE model tests, MoE decode at batch 1 / 8 / 32 / 128 (a prefill of
# 131072 routes, which run7 refused), seam run's MoE tokens at PP 1 and 2.
set -u
export SEAM_GPU_WORK=/tmp/seam-served
R=scripts/gpu-run.sh
D=$OUT/run8; mkdir -p $D
echo "tree $(cat TREE 2>/dev/null)" > $D/commit.txt
S=$D/summary.txt
$R cuda_kernels_test --gtest_filter='*Expert*:*SortRoutes*:*MoeFinalize*:*Pairs*:*Matmul*:*MoeRoute*:*Gather*' > $D/kernels_test.log 2>&1
echo "kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/kernels_test.log | tr '\n' ' ')" >> $S
$R runtime_test --gtest_filter='*CudaModel.*:*GraphDecode*' > $D/runtime_test.log 2>&1
echo "runtime_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/runtime_test.log | tr '\n' ' ')" >> $S
T=$SEAM_GPU_WORK/moe-small
$R seam model init --arch qwen3_moe --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --head-dim 64 --intermediate 3072 \
  --experts 16 --top-k 4 --moe-intermediate 256 --vocab 8192 --seed 3 --out $T > /dev/null 2>&1
for pp in 1 2; do
  timeout 100 $R seam run --device cuda --model $T --pp $pp --tp 1 --dtype bf16 --prompts 8 --max-new-tokens 32 > $D/run_pp$pp.log 2>&1
  echo "seam run moe pp$pp bf16 rc=$? $(grep -o 'tokens match the single-process run' $D/run_pp$pp.log | head -1)" >> $S
done
M=$SEAM_GPU_WORK/qwen3-moe-4l-2048
$R seam model init --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 --intermediate 6144 \
  --experts 128 --top-k 8 --moe-intermediate 768 --vocab 32000 --dtype bf16 --seed 5 --out $M > /dev/null 2>&1
timeout 120 $R seam-bench-gpu decode --checkpoint $M --dtype bf16 --batches 1,8,32,128 --prompt-len 128 --steps 64 \
  --json $D/decode.json > $D/decode.log 2>&1
echo "decode rc=$? $(python3 -c "import json,sys; print([(r['batch'], round(r['graph_ms_per_step'],3)) for r in json.load(open(sys.argv[1]))['results']])" $D/decode.json 2>&1)" >> $S
cat $S
tar czf $OUT/run8.tgz -C $OUT run8
