#!/usr/bin/env bash
# One H200: runtime_test whole; seam run tokens at PP {1,2} x TP 1 (f32, bf16), and PP 2 with device handoffs.
set -u
export SEAM_GPU_WORK=/tmp/seam-work BUNDLE_DIR=bundle-a NCCL_NVLS_ENABLE=0
R=scripts/gpu-run.sh
D=$OUT/t; mkdir -p $D; echo "tree $(cat TREE)" > $D/commit.txt
S=$D/summary.txt
timeout 200 $R runtime_test > $D/runtime_test.log 2>&1
echo "runtime_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/runtime_test.log | tr '\n' ' ')" >> $S
timeout 200 bash bench/gpu/served.sh $D tokens
M=$SEAM_GPU_WORK/small
for dt in f32 bf16; do
  log=$D/run_pp2_tp1_dev_$dt.log
  timeout 120 $R seam run --device cuda --model $M --pp 2 --tp 1 --dtype $dt --prompts 8 --max-new-tokens 32 \
    --stage-arg=--handoff-transport=auto > $log 2>&1
  rc=$?
  echo "seam run pp2_tp1_dev $dt rc=$rc $(grep -o 'tokens match the single-process run' $log | head -1) $(grep -o 'throughput: .*' $log) $(grep -o 'handoff link from pipeline rank 0: [a-z_]*' $log | head -1)" >> $S
done
tar czf $OUT/t.tgz -C $OUT t
