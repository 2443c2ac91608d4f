#!/usr/bin/env bash
# One H200: where a MoE decode step's time goes (seam-bench-gpu profile: each
# op alone at the shapes of run1-5's checkpoint, config/config.json, eager and
# replayed from a CUDA graph), 1 and 32 sequences with a 192-token context.
set -u
R=scripts/gpu-run.sh
D=$OUT/run6; mkdir -p $D
C=bench/results/2026-12-01-h200-moe-grouped/run6-profile/config
for s in 1 32; do
  $R seam-bench-gpu profile --checkpoint $C --dtype bf16 --seqs $s --context 192 --json $D/profile_$s.json > $D/profile_$s.log 2>&1
  echo "profile $s rc=$?" >> $D/summary.txt
done
python3 - $D/profile_1.json $D/profile_32.json >> $D/summary.txt <<'PY'
import json, sys
for f in sys.argv[1:]:
    j = json.load(open(f))
    print(f"seqs {j['seqs']}: sum of ops {j['sum_graph_ms']:.3f} ms graph, {j['sum_eager_ms']:.3f} ms eager")
    for o in j["ops"]:
        print(f"  {o['op']:24s} {o['graph_us']:8.2f} us graph  x{o['calls_per_step']:.0f} = {o['graph_us_per_step']:8.1f} us")
PY
cat $D/summary.txt
tar czf $OUT/run6.tgz -C $OUT run6
