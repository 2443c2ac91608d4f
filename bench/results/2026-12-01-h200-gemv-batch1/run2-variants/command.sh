#!/usr/bin/env bash
# One H200: GEMV variants (old e5ecea2; m0 preload at every M; m1 preload at M<=2; m2 double buffer at M<=2)
# in-process decode, three rounds alternated; then bench serve of the tree (m1), the device handoff breakdown.
set -u
O=$OUT/r; mkdir -p $O; R=scripts/gpu-run.sh; export NCCL_NVLS_ENABLE=0
start=$(date +%s); el() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a $O/times.txt; }
git log --oneline -1 > $O/commit.txt 2>&1
for v in old m1 m2; do gunzip -kf bundle-old/seam-bench-gpu-$v.gz; done
el tests
timeout 150 $R cuda_kernels_test --gtest_brief=1 > $O/cuda_kernels_test.log 2>&1; echo "cuda_kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/cuda_kernels_test.log | tr '\n' ' ')" >> $O/times.txt
M=/tmp/m; el init
[ -f $M/config.json ] || timeout 150 $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out $M > $O/init.log 2>&1
D="--checkpoint $M --batches 1,2,8,32 --prompt-len 128 --steps 64"
for round in 1 2 3; do
  el "decode round $round"
  for v in old m1 m2; do timeout 60 $R $PWD/bundle-old/seam-bench-gpu-$v decode $D --json $O/decode_${v}_$round.json > $O/decode_${v}_$round.log 2>&1; echo "$v rc=$?" >> $O/times.txt; done
done
el serve
timeout 120 $R seam bench serve --model $M --device cuda --dtype bf16 --batch 1,8,32 --prompt-len 128 --new-tokens 64 --json $O/serve.json > $O/serve.log 2>&1; echo "serve rc=$?" >> $O/times.txt
el handoff
timeout 60 $R device_handoff_test --gtest_brief=1 > $O/device_handoff_test.log 2>&1; echo "device_handoff_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/device_handoff_test.log | tr '\n' ' ')" >> $O/times.txt
for mode in shm tcp; do
  timeout 100 $R seam-bench-handoff device $mode 8,32,128 4096 2000 200 $O/device_handoff_$mode.json > $O/device_handoff_$mode.log 2>&1; echo "handoff $mode rc=$?" >> $O/times.txt
done
el done
tar czf $OUT/r.tgz -C $OUT r
