#!/usr/bin/env bash
# One H200, the tree with the tensor-core skinny matmul (2-32 rows): GPU tests, in-process decode old (e5ecea2) vs this tree alternated,
# seam bench serve, and seam run --device cuda tokens at PP 1/2 in f32 and bf16.
set -u
O=$OUT/r; mkdir -p $O; R=scripts/gpu-run.sh; export NCCL_NVLS_ENABLE=0
start=$(date +%s); el() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a $O/times.txt; }
git log --oneline -1 > $O/commit.txt 2>&1
gunzip -kf bundle-old/seam-bench-gpu-old.gz
el tests
t() { n=$1; shift; timeout 150 $R "$@" --gtest_brief=1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/$n.log | tr '\n' ' ')" >> $O/times.txt; }
t cuda_kernels_test cuda_kernels_test
t runtime_test runtime_test --gtest_filter='*Cuda*:*Fed*:*GraphDecode*'
t models_test models_test
M=/tmp/m; el init
[ -f $M/config.json ] || timeout 150 $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out $M > $O/init.log 2>&1
D="--checkpoint $M --batches 1,2,4,8,16,32 --prompt-len 128 --steps 64"
for round in 1 2 3; do
  el "decode round $round"
  timeout 60 $R $PWD/bundle-old/seam-bench-gpu-old decode $D --json $O/decode_old_$round.json > $O/decode_old_$round.log 2>&1; echo "old rc=$?" >> $O/times.txt
  timeout 60 $R seam-bench-gpu decode $D --json $O/decode_new_$round.json > $O/decode_new_$round.log 2>&1; echo "new rc=$?" >> $O/times.txt
done
el serve
timeout 120 $R seam bench serve --model $M --device cuda --dtype bf16 --batch 1,8,32 --prompt-len 128 --new-tokens 64 --json $O/serve.json > $O/serve.log 2>&1; echo "serve rc=$?" >> $O/times.txt
el tokens
S=/tmp/s; timeout 40 $R seam model init --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 --vocab 4096 --out $S > $O/init_s.log 2>&1
for l in "1 f32" "1 bf16" "2 f32" "2 bf16"; do set -- $l; timeout 60 $R seam run --device cuda --model $S --pp $1 --tp 1 --dtype $2 --prompts 8 --max-new-tokens 32 > $O/tokens_pp$1_$2.log 2>&1; echo "tokens pp$1 $2 rc=$? $(grep -o "tokens match the single-process run" $O/tokens_pp$1_$2.log | head -1)" >> $O/times.txt; done
el done
tar czf $OUT/r.tgz -C $OUT r
