#!/usr/bin/env bash
# The decode step's matmuls and argmax on one GPU, in one command:
#   tests    cuda_kernels_test's matmul, argmax and sampling tests
#            (KERNEL_TEST_FILTER narrows or widens it)
#   kernels  seam-bench-gpu matmul (the model's q|k|v, o, gate|up, down and
#            lm_head at M = 1-512, cuBLASLt's first pick vs autotuned, against
#            max(bytes, FLOPs)) and seam-bench-gpu argmax (1-256 rows x 32000
#            and 151936, f32 and bf16, against the bytes), this tree's binary
#   decode   seam-bench-gpu decode on the issue's model (Qwen3, 8 layers,
#            hidden 4096, 32 / 8 heads of 128, intermediate 12288, vocab
#            32000, bf16): batch 64 / 128 / 256 at 1024-token prompts, and
#            batch 1 / 8 / 32 at 128, for this tree's binary autotuned (new),
#            the same with --matmul-candidates 1 (new-heuristic: the new
#            argmax alone) and, when BASE names a baseline seam-bench-gpu, it
#   profile  seam-bench-gpu profile of one decode step at batch 256 x 1088 and
#            64 x 1088 with each op's floor, the same binaries
#   ncu      each kernel of one decode step (graph fed on the device) at
#            batch 256 and 64 x 1,024-token prompts under Nsight Compute,
#            each timed alone (ncu_step in script_prelude.sh), against the
#            decode part's step time when it ran first
#   pdl      programmatic dependent launch: cuda_kernels_test's
#            ProgrammaticLaunch tests, then seam-bench-gpu decode --pdl both
#            (graph and fed steps with it on, then captured again with it
#            off) at the decode part's shapes: ms per step and off / on
# Usage from the repo root, the bundle of scripts/gpu-bundle.sh in bundle/
# (BUNDLE_DIR for another): bash bench/gpu/decode_kernels.sh OUT_DIR [PART]
set -uo pipefail
source "$(dirname "$0")/script_prelude.sh" /tmp/seam-decode-kernels "$@"
BASE="${BASE:-}"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" >> "$SUMMARY"
# tag:binary:extra flags
runs="new:seam-bench-gpu:--matmul-candidates_16 new-heuristic:seam-bench-gpu:--matmul-candidates_1"
[ -n "$BASE" ] && runs="$runs base:$BASE:"

if want tests; then
  $R cuda_kernels_test --gtest_filter="${KERNEL_TEST_FILTER:-*Matmul*:*Argmax*:*Sampling*:*TopK*:*Sample*}" \
    > "$OUT_DIR/cuda_kernels_test.log" 2>&1
  echo "cuda_kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT_DIR/cuda_kernels_test.log" | tr '\n' ' ')" >> "$SUMMARY"
fi

if want kernels; then
  M="$WORK/qwen3-8l-4096"
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 3 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
  $R seam-bench-gpu matmul --checkpoint "$M" --json "$OUT_DIR/matmul.json" > "$OUT_DIR/matmul.log" 2>&1
  echo "matmul rc=$?" >> "$SUMMARY"
  $R seam-bench-gpu argmax --json "$OUT_DIR/argmax.json" > "$OUT_DIR/argmax.log" 2>&1
  echo "argmax rc=$?" >> "$SUMMARY"
  python3 - "$OUT_DIR" >> "$SUMMARY" <<'PY'
import json, sys
out = sys.argv[1]
try:
    j = json.load(open(f"{out}/matmul.json"))
    print(f"== matmul (copy {j['copy_gbps']:.0f} GB/s, peak {j['peak_tflops']:.0f} TFLOP/s): us [x floor]")
    rows = {}
    for r in j["results"]:
        rows.setdefault((r["op"], r["m"]), {})[r["mode"]] = r
    for (op, m), by in rows.items():
        h, t = by.get("heuristic", {}), by.get("tuned", {})
        print(f"{op:12s} M={m:4d} heuristic {h.get('us', 0):8.1f} [{h.get('floor_ratio', 0):5.2f}]  tuned "
              f"{t.get('us', 0):8.1f} [{t.get('floor_ratio', 0):5.2f}]  floor {t['floor']['floor_us']:7.1f} "
              f"{t['floor']['bound']:5s} {t.get('kernel', '')} {t.get('algorithm', '')}")
except Exception as e:
    print("matmul missing", e)
try:
    j = json.load(open(f"{out}/argmax.json"))
    print("== argmax: graph us [x floor]")
    for r in j["results"]:
        print(f"argmax {r['dtype']:4s} {r['rows']:4d} x {r['n']:6d} {r['graph_us']:7.1f} [{r['floor_ratio']:5.2f}] floor {r['floor_us']:.1f}")
except Exception as e:
    print("argmax missing", e)
PY
fi

M="$WORK/qwen3-8l-4096"
if want decode || want profile || want pdl || want ncu; then
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 3 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
fi

if want decode; then
  for run in $runs; do
    IFS=: read -r tag bin extra <<< "$run"
    extra="${extra//_/ }"
    $R $bin decode --checkpoint "$M" --prompt-len 1024 --batches 64,128,256 --steps 32 --cache-mib 10240 $extra \
      --json "$OUT_DIR/decode_1024_$tag.json" > "$OUT_DIR/decode_1024_$tag.log" 2>&1
    $R $bin decode --checkpoint "$M" --prompt-len 128 --batches 1,8,32 --steps 64 $extra \
      --json "$OUT_DIR/decode_128_$tag.json" > "$OUT_DIR/decode_128_$tag.log" 2>&1
    echo "== decode $tag" >> "$SUMMARY"
    python3 - "$OUT_DIR" "$tag" >> "$SUMMARY" <<'PY'
import json, sys
out, tag = sys.argv[1], sys.argv[2]
for name in ("decode_1024", "decode_128"):
    try:
        j = json.load(open(f"{out}/{name}_{tag}.json"))
    except Exception as e:
        print(name, "missing", e); continue
    for r in j["results"]:
        print(name, "batch", r["batch"], "graph_ms", round(r.get("graph_ms_per_step", -1), 3),
              "floor_ms", round(r["floor_ms"], 3), "x_floor", round(r["floor_ratio"], 3),
              "equal", r.get("graph_tokens_equal_eager"))
PY
  done
fi

if want profile; then
  for run in $runs; do
    IFS=: read -r tag bin extra <<< "$run"
    extra="${extra//_/ }"
    for seqs in 256 64; do
      $R $bin profile --checkpoint "$M" --seqs $seqs --context 1088 $extra \
        --json "$OUT_DIR/profile_${seqs}_$tag.json" > "$OUT_DIR/profile_${seqs}_$tag.log" 2>&1
      echo "== profile $seqs $tag" >> "$SUMMARY"
      python3 - "$OUT_DIR/profile_${seqs}_$tag.json" >> "$SUMMARY" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for o in j["ops"]:
    floor = f' floor_us {o["floor_us"]:8.2f} ({o["bound"]}) x {o["floor_ratio"]:5.2f}' if "floor_us" in o else ""
    print(f'{o["op"]:24s} graph_us {o["graph_us"]:9.2f} per_step_us {o["graph_us_per_step"]:10.1f}{floor}')
print("sum_graph_ms", round(j["sum_graph_ms"], 3))
PY
    done
  done
fi
if want pdl; then
  $R cuda_kernels_test --gtest_filter='*ProgrammaticLaunch*' > "$OUT_DIR/cuda_pdl_test.log" 2>&1
  echo "cuda_pdl_test rc=$? $(grep -E '^\[  (PASSED|FAILED) |programmatic edges' "$OUT_DIR/cuda_pdl_test.log" | tr '\n' ' ')" >> "$SUMMARY"
  $R seam-bench-gpu decode --checkpoint "$M" --prompt-len 1024 --batches 64,128,256 --steps 32 --cache-mib 10240 \
    --pdl both --json "$OUT_DIR/pdl_1024.json" > "$OUT_DIR/pdl_1024.log" 2>&1
  $R seam-bench-gpu decode --checkpoint "$M" --prompt-len 128 --batches 1,8,32 --steps 64 \
    --pdl both --json "$OUT_DIR/pdl_128.json" > "$OUT_DIR/pdl_128.log" 2>&1
  echo "== pdl: fed ms per step on / off" >> "$SUMMARY"
  python3 - "$OUT_DIR" >> "$SUMMARY" <<'PY'
import json, sys
for name in ("pdl_1024", "pdl_128"):
    try:
        j = json.load(open(f"{sys.argv[1]}/{name}.json"))
    except Exception as e:
        print(name, "missing", e); continue
    for r in j["results"]:
        print(name, "batch", r["batch"], "fed_on", round(r.get("graph_fed_ms_per_step", -1), 3),
              "fed_off", round(r.get("pdl_off_graph_fed_ms_per_step", -1), 3),
              "off/on", round(r.get("pdl_fed_speedup", -1), 3), "x_floor_on", round(r.get("graph_fed_floor_ratio", -1), 3),
              "graph_on", round(r.get("graph_ms_per_step", -1), 3), "graph_off", round(r.get("pdl_off_graph_ms_per_step", -1), 3),
              "tokens_equal", r.get("pdl_off_tokens_equal_pdl_on"), r.get("graph_fed_tokens_equal_eager"))
PY
fi
if want ncu; then
  for b in ${NCU_BATCHES:-256 64}; do
    step_ms=$(python3 -c "import json,sys; print(next((r.get('graph_fed_ms_per_step', 0) for r in
      json.load(open(sys.argv[1]))['results'] if r['batch'] == int(sys.argv[2])), 0))" \
      "$OUT_DIR/decode_1024_new.json" "$b" 2>/dev/null || echo 0)
    ncu_step "kernels_b$b" "$step_ms" seam-bench-gpu decode --checkpoint "$M" --batches "$b" --prompt-len 1024 \
      --cache-mib 10240 \
      --steps 3 --json "$OUT_DIR/ncu_decode_b$b.json"
  done
fi
cat "$SUMMARY"
