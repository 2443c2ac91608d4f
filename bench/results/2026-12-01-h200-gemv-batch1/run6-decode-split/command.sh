#!/usr/bin/env bash
# One H200: the decode attention's split choice. In-process decode (served-path model) with
# SEAM_DECODE_SPLIT_BLOCKS unset (split while blocks <= SMs*16/8), 64, 32 and 0 (never split),
# two rounds alternated; the attention kernel tests under 32 and 0.
set -u
O=$OUT/r; mkdir -p $O; R=scripts/gpu-run.sh
start=$(date +%s); el() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a $O/times.txt; }
M=/tmp/m; el init
timeout 120 $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out $M > $O/init.log 2>&1
D="--checkpoint $M --batches 1,2,4,8,16,32 --prompt-len 128 --steps 64"
for round in 1 2; do
  el "round $round"
  for v in def 64 32 0; do
    if [ $v = def ]; then unset SEAM_DECODE_SPLIT_BLOCKS; else export SEAM_DECODE_SPLIT_BLOCKS=$v; fi
    timeout 40 $R seam-bench-gpu decode $D --json $O/decode_${v}_$round.json > $O/decode_${v}_$round.log 2>&1; echo "$v rc=$?" >> $O/times.txt
  done
done
unset SEAM_DECODE_SPLIT_BLOCKS
el tests
for v in 32 0; do SEAM_DECODE_SPLIT_BLOCKS=$v timeout 40 $R cuda_kernels_test --gtest_brief=1 --gtest_filter='*ttention*:*Decode*' > $O/attn_test_$v.log 2>&1; echo "attn tests $v rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/attn_test_$v.log | tr '\n' ' ')" >> $O/times.txt; done
el done
tar czf $OUT/r.tgz -C $OUT r
