#!/usr/bin/env bash
# One H200: the GEMV's dependent-launch test, decode old (e5ecea2) vs new with SEAM_PDL=0/1 alternated,
# the per-op profile at the shape, and seam-bench-gpu cp at CP 1 (32768 tokens).
set -u
O=$OUT/r; mkdir -p $O; R=scripts/gpu-run.sh; export NCCL_NVLS_ENABLE=0
start=$(date +%s); el() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a $O/times.txt; }
git log --oneline -1 > $O/commit.txt 2>&1; (which nsys ncu; ls /usr/local/cuda*/bin 2>/dev/null | head -50; nvidia-smi -q -d CLOCK | head -40) > $O/tools.txt 2>&1
el tests
timeout 150 $R cuda_kernels_test --gtest_brief=1 > $O/cuda_kernels_test.log 2>&1; echo "cuda_kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/cuda_kernels_test.log | tr '\n' ' ')" >> $O/times.txt
[ -f bundle-old/seam-bench-gpu-old ] || gunzip -k bundle-old/seam-bench-gpu-old.gz
M=/tmp/m; el init
[ -f $M/config.json ] || timeout 150 $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out $M > $O/init.log 2>&1
D="--checkpoint $M --batches 1,8,32 --prompt-len 128 --steps 64"
for round in 1 2 3; do
  el "decode round $round"
  timeout 60 $R $PWD/bundle-old/seam-bench-gpu-old decode $D --json $O/decode_old_$round.json > $O/decode_old_$round.log 2>&1; echo "old rc=$?" >> $O/times.txt
  SEAM_PDL=0 timeout 60 $R seam-bench-gpu decode $D --json $O/decode_pdl0_$round.json > $O/decode_pdl0_$round.log 2>&1; echo "pdl0 rc=$?" >> $O/times.txt
  SEAM_PDL=1 timeout 60 $R seam-bench-gpu decode $D --json $O/decode_pdl1_$round.json > $O/decode_pdl1_$round.log 2>&1; echo "pdl1 rc=$?" >> $O/times.txt
done
el profile
for pdl in 0 1; do SEAM_PDL=$pdl timeout 60 $R seam-bench-gpu profile --checkpoint $M --context 192 --json $O/profile_pdl$pdl.json > $O/profile_pdl$pdl.log 2>&1; done
el cp
timeout 240 $R seam-bench-gpu cp --checkpoint $M --cp 2 --len 32768 --dtype bf16 --json $O/cp.json > $O/cp.log 2>&1; echo "cp rc=$?" >> $O/times.txt
el done
tar czf $OUT/r.tgz -C $OUT r
