#!/usr/bin/env bash
# Decode attention on one GPU, in one command (bench/results/
# 2026-12-02-h200-decode-attention has its results):
#   tests    cuda_kernels_test (ATTN_TEST_FILTER narrows it; default: all)
#   attn     seam-bench-gpu attention at the model's attention shapes (32
#            query heads, 8 kv heads of 128, bf16, blocks of 16): decode rows
#            at batch 1-256 x 1024, batch 1-8 x 32768 and 1-32 x 192 contexts, the same
#            with the block tables 32768 wide (as a server's decode graph),
#            and mixed steps (a 512-row chunk at 4096, a 64-row chunk at
#            32768, beside 64 decode rows), for this tree's kernels and, when
#            BASE names a baseline seam-bench-gpu, for its kernels too
#   decode   seam-bench-gpu decode on the issue's model (Qwen3, 8 layers,
#            hidden 4096, 32 / 8 heads of 128, intermediate 12288, vocab
#            32000, bf16): batch 64 / 128 / 256 at 1024-token prompts, batch
#            1 at 32768, this tree's binary and BASE's
#   profile  seam-bench-gpu profile of one decode step at batch 256 x 1088
# Usage from the repo root, the bundle of scripts/gpu-bundle.sh in
# BUNDLE_DIR: bash bench/gpu/decode_attention.sh OUT_DIR [PART]
set -uo pipefail
cd "$(dirname "$0")/../.."
R="bash ${BUNDLE_DIR:-bundle}/gpu-run.sh"
OUT_DIR="${1:?OUT_DIR}"
PART="${2:-all}"
BASE="${BASE:-}"
mkdir -p "$OUT_DIR"
WORK="${SEAM_GPU_WORK:-/tmp/seam-attn}"
mkdir -p "$WORK"
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
SUMMARY="$OUT_DIR/summary.txt"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" >> "$SUMMARY"
bins="seam-bench-gpu"
[ -n "$BASE" ] && bins="$bins $BASE"
# new for this tree's binary, else the name after seam-bench-gpu- (base).
tag_of() { local t; t=$(basename "$1"); t=${t#seam-bench-gpu}; t=${t#-}; echo "${t:-new}"; }

if want tests; then
  $R cuda_kernels_test --gtest_filter="${ATTN_TEST_FILTER:-*}" > "$OUT_DIR/cuda_kernels_test.log" 2>&1
  echo "cuda_kernels_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT_DIR/cuda_kernels_test.log" | tr '\n' ' ')" >> "$SUMMARY"
fi

if want attn; then
  for bin in $bins; do
    tag=$(tag_of "$bin")
    $R $bin attention --batches 1,8,32,64,128,256 --contexts 1024 --json "$OUT_DIR/attn_$tag.json" \
      > "$OUT_DIR/attn_$tag.log" 2>&1
    $R $bin attention --batches 1,8 --contexts 32768 --json "$OUT_DIR/attn_long_$tag.json" \
      > "$OUT_DIR/attn_long_$tag.log" 2>&1
    $R $bin attention --batches 1,8,32 --contexts 192 --json "$OUT_DIR/attn_short_$tag.json" \
      > "$OUT_DIR/attn_short_$tag.log" 2>&1
    $R $bin attention --batches 1,8,64,256 --contexts 1024 --table-context 32768 \
      --json "$OUT_DIR/attn_wide_$tag.json" > "$OUT_DIR/attn_wide_$tag.log" 2>&1
    $R $bin attention --batches 64 --contexts 1024 --prefill-rows 512 --prefill-context 4096 \
      --json "$OUT_DIR/attn_mixed_$tag.json" > "$OUT_DIR/attn_mixed_$tag.log" 2>&1
    $R $bin attention --batches 64 --contexts 1024 --prefill-rows 64 --prefill-context 32768 \
      --json "$OUT_DIR/attn_prefix_$tag.json" > "$OUT_DIR/attn_prefix_$tag.log" 2>&1
    for f in "$OUT_DIR"/attn*_"$tag".log; do
      echo "== $f" >> "$SUMMARY"; grep -E '^(decode|mixed|chunk) ' "$f" >> "$SUMMARY"
    done
  done
fi

M="$WORK/qwen3-8l-4096"
if want decode || want profile; then
  [ -f "$M/config.json" ] || $R seam model init --layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
    --intermediate 12288 --vocab 32000 --dtype bf16 --seed 3 --out "$M" > "$OUT_DIR/model_init.log" 2>&1
fi

if want decode; then
  for bin in $bins; do
    tag=$(tag_of "$bin")
    $R $bin decode --checkpoint "$M" --prompt-len 1024 --batches 64,128,256 --steps 32 --cache-mib 10240 \
      --json "$OUT_DIR/decode_1024_$tag.json" > "$OUT_DIR/decode_1024_$tag.log" 2>&1
    $R $bin decode --checkpoint "$M" --prompt-len 32768 --batches 1 --steps 32 --cache-mib 2048 \
      --json "$OUT_DIR/decode_32k_$tag.json" > "$OUT_DIR/decode_32k_$tag.log" 2>&1
    $R $bin decode --checkpoint "$M" --prompt-len 128 --batches 1,8,32 --steps 64 \
      --json "$OUT_DIR/decode_128_$tag.json" > "$OUT_DIR/decode_128_$tag.log" 2>&1
    echo "== decode $tag" >> "$SUMMARY"
    python3 - "$OUT_DIR" "$tag" >> "$SUMMARY" <<'EOF'
import json, sys
out, tag = sys.argv[1], sys.argv[2]
for name in ("decode_1024", "decode_32k", "decode_128"):
    try:
        j = json.load(open(f"{out}/{name}_{tag}.json"))
    except Exception as e:
        print(name, "missing", e); continue
    for r in j["results"]:
        print(name, "batch", r["batch"], "graph_ms", round(r.get("graph_ms_per_step", -1), 3),
              "fed_ms", round(r.get("graph_fed_ms_per_step", -1), 3), "fed_x_floor",
              round(r.get("graph_fed_floor_ratio", -1), 3), "fed_equal", r.get("graph_fed_tokens_equal_eager"),
              "weights_floor_ms", round(r["floor_ms"], 3), "copy_gbps", round(j["copy_gbps"], 1),
              "equal", r.get("graph_tokens_equal_eager"))
EOF
  done
fi

if want profile; then
  for bin in $bins; do
    tag=$(tag_of "$bin")
    $R $bin profile --checkpoint "$M" --seqs 256 --context 1088 --json "$OUT_DIR/profile_256_$tag.json" \
      > "$OUT_DIR/profile_256_$tag.log" 2>&1
    echo "== profile $tag" >> "$SUMMARY"
    python3 - "$OUT_DIR/profile_256_$tag.json" >> "$SUMMARY" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for o in j["ops"]:
    print(f'{o["op"]:24s} graph_us {o["graph_us"]:9.2f} per_step_us {o["graph_us_per_step"]:10.1f}')
print("sum_graph_ms", round(j["sum_graph_ms"], 3))
EOF
  done
fi
cat "$SUMMARY"
