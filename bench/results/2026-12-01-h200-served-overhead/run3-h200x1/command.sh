#!/usr/bin/env bash
# One device command: GPU tests of the merged tree, seam bench serve with
# the new defaults against the old behaviour, and the token check.
set -u
O=$1; mkdir -p $O; R=scripts/gpu-run.sh; export NCCL_NVLS_ENABLE=0
start=$(date +%s); el() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a $O/times.txt; }
el tests
timeout 100 $R runtime_test --gtest_filter='*Fed*:*GraphDecode*:CudaModel*' > $O/runtime_test.log 2>&1; echo "runtime_test rc=$?" >> $O/times.txt
timeout 60 $R models_two_batch_test > $O/two_batch.log 2>&1; echo "two_batch rc=$?" >> $O/times.txt
M=/tmp/m; el init
timeout 170 $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12288 --vocab 32000 --dtype bf16 --seed 5 --out $M > $O/init.log 2>&1
el after
B="$R seam bench serve --model $M --device cuda --dtype bf16 --batch 1,8,32 --prompt-len 128 --new-tokens 64"
timeout 110 $B --json $O/after.json --logs-dir $O/after_logs --stage-arg=--log-level=debug > $O/after.log 2>&1; echo "after rc=$?" >> $O/times.txt
el before
timeout 110 $B --json $O/before.json --coordinator-arg=--decode-ramp-start=1 --coordinator-arg=--max-batch-tokens=2048 --stage-arg=--run-ahead=off > $O/before.log 2>&1; echo "before rc=$?" >> $O/times.txt
el tokens
S=/tmp/s; timeout 40 $R seam model init --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 --vocab 4096 --out $S > $O/init_s.log 2>&1
for l in "1 f32" "1 bf16" "2 bf16"; do set -- $l; timeout 60 $R seam run --device cuda --model $S --pp $1 --tp 1 --dtype $2 --prompts 8 --max-new-tokens 32 > $O/tokens_pp$1_$2.log 2>&1; echo "tokens pp$1 $2 rc=$? $(grep -o "tokens match the single-process run" $O/tokens_pp$1_$2.log | head -1)" >> $O/times.txt; done
el done
