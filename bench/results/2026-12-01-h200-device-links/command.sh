#!/usr/bin/env bash
# seam run PP 2 on one GPU with device links between the stages
# (--handoff-transport auto) and with the host path, f32 and bf16.
set -u
O=$1; mkdir -p $O; R=scripts/gpu-run.sh; export NCCL_NVLS_ENABLE=0
S=/tmp/s; timeout 40 $R seam model init --layers 4 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 3072 --vocab 8192 --seed 3 --out $S > $O/init_s.log 2>&1
for t in ${TRANSPORTS:-auto host}; do for dt in f32 bf16; do
  log=$O/run_pp2_${t}_$dt.log
  timeout 90 $R seam run --device cuda --model $S --pp 2 --tp 1 --dtype $dt --prompts 8 --max-new-tokens 32 --stage-arg=--handoff-transport=$t --stage-arg=--log-level=debug > $log 2>&1
  rc=$?; w=$(grep -o 'logs in [^)]*' $log | head -1 | cut -d' ' -f3); for f in $w/*.log; do [ -f "$f" ] && grep -i "transport\|device link\|cuda_ipc" "$f" | head -5 > $O/links_${t}_${dt}_$(basename $f); done
  grep "^stage: handoff" $log >> $O/summary.txt
  echo "pp2 $t $dt rc=$rc $(grep -o 'tokens match the single-process run' $log | head -1) $(grep -o 'throughput: [^(]*' $log)" >> $O/summary.txt
done; done
