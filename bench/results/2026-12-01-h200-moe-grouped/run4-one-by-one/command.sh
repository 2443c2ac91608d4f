#!/usr/bin/env bash
# One H200, after the one-by-one path moved onto the device's grouping (the
# pairs' rows gathered in group order, one host read of the offsets, each
# expert's slice through its own matmuls): the grouped experts' tests,
# seam run's tokens and decode grouped vs one by one (served.sh moe); the
# prefill sweep of run3 again; served batch 1 / 8 / 32 both ways
# (served.sh moe-serve).
set -u
export SEAM_GPU_WORK=/tmp/seam-served
R=scripts/gpu-run.sh
D=$OUT/run4; mkdir -p $D/sweep
echo "tree $(cat TREE 2>/dev/null)" > $D/commit.txt
bash bench/gpu/served.sh $D moe > $D/served_moe.log 2>&1
M=$SEAM_GPU_WORK/qwen3-moe-4l-2048
for t in 128 256 512 1024 2048 4096 8192; do
  for e in grouped per-expert; do
    timeout 60 $R seam-bench-gpu prefill --checkpoint $M --dtype bf16 --seqs 1 --len $t --repeats 3 \
      --moe-experts $e --json $D/sweep/prefill_${t}_$e.json > $D/sweep/prefill_${t}_$e.log 2>&1
    echo "prefill $t $e rc=$? $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ms'])" $D/sweep/prefill_${t}_$e.json 2>&1)" >> $D/sweep/summary.txt
  done
done
bash bench/gpu/served.sh $D moe-serve > $D/served_moe_serve.log 2>&1
cat $D/summary.txt $D/sweep/summary.txt
tar czf $OUT/run4.tgz -C $OUT run4
