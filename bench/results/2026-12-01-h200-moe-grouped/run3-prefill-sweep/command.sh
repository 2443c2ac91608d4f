#!/usr/bin/env bash
# One H200: a Qwen3-MoE prefill of one prompt of T tokens with the experts
# grouped on the device (--moe-experts grouped, up to 65536 routes) and per
# expert (--moe-experts per-expert), alternately, to choose where auto stops
# grouping; then a served run's stage log (the graph buckets it captured).
set -u
export SEAM_GPU_WORK=/tmp/seam-served
R=scripts/gpu-run.sh
D=$OUT/sweep; mkdir -p $D
M=$SEAM_GPU_WORK/qwen3-moe-4l-2048
[ -f "$M/config.json" ] || $R seam model init --arch qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 \
  --head-dim 128 --intermediate 6144 --experts 128 --top-k 8 --moe-intermediate 768 --vocab 32000 --dtype bf16 \
  --seed 5 --out "$M" > $D/model_init.log 2>&1
for t in 128 256 512 1024 2048 4096 8192; do
  for e in grouped per-expert; do
    timeout 60 $R seam-bench-gpu prefill --checkpoint $M --dtype bf16 --seqs 1 --len $t --repeats 3 \
      --moe-experts $e --json $D/prefill_${t}_$e.json > $D/prefill_${t}_$e.log 2>&1
    echo "prefill $t $e rc=$? $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ms'])" $D/prefill_${t}_$e.json 2>&1)" >> $D/summary.txt
  done
done
timeout 120 $R seam bench serve --model $M --device cuda --dtype bf16 --batch 8 --prompt-len 128 --new-tokens 64 \
  --logs-dir $D/logs > $D/serve_b8.log 2>&1
echo "serve rc=$?" >> $D/summary.txt
grep -h "CUDA graph decode" $D/logs/*.log >> $D/summary.txt
cat $D/summary.txt
tar czf $OUT/sweep.tgz -C $OUT sweep
