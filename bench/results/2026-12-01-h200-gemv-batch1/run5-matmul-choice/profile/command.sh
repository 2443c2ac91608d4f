#!/usr/bin/env bash
# One H200: each matmul of a decode step alone (seam-bench-gpu profile, the served-path model's shapes)
# at 2-32 sequences, for five builds: vA the tree (GEMV to 8 rows, cuBLASLt beyond), vB cuBLASLt from 2 rows,
# vC-vE a tensor-core skinny kernel for 2-32 rows (8 warps x 1 chunk set, 8 x 2, 4 x 2).
set -u
O=$OUT/r; mkdir -p $O; R=scripts/gpu-run.sh
mkdir -p /tmp/cfg && cat > /tmp/cfg/config.json <<'J'
{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 0, "eos_token_id": 1, "head_dim": 128,
 "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 32768,
 "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 8, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 32000}
J
for v in vA vB vC vD vE; do gunzip -kf bundle-old/seam-bench-gpu-$v.gz; done
for round in 1 2; do
for s in 2 4 8 16 32; do
  for v in vA vB vC vD vE; do
    timeout 30 $R $PWD/bundle-old/seam-bench-gpu-$v profile --checkpoint /tmp/cfg --seqs $s --context 192 --json $O/p_${v}_s${s}_r$round.json > /dev/null 2>> $O/err.txt || echo "$v s$s rc=$?" >> $O/err.txt
  done
done
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, os
o = sys.argv[1]
ops = ["matmul_qkv", "matmul_o", "matmul_gate_up", "matmul_down", "lm_head_f32"]
for s in (2, 4, 8, 16, 32):
    for v in ("vA", "vB", "vC", "vD", "vE"):
        vals = {}
        for r in (1, 2):
            f = f"{o}/p_{v}_s{s}_r{r}.json"
            if not os.path.exists(f): continue
            for op in json.load(open(f))["ops"]:
                vals.setdefault(op["op"], []).append(op["graph_us"])
        print(s, v, " ".join(f"{op}={min(vals.get(op, [-1])):.2f}" for op in ops))
PY
tar czf $OUT/r.tgz -C $OUT r
