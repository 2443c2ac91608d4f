#!/usr/bin/env bash
# One H200: served PP 1 TP 1 at batch 1, 8, 32 on this tree (after the decode-attention split limit).
set -u
export SEAM_GPU_WORK=/tmp/seam-work
D=$OUT/serve; mkdir -p $D
echo "tree $(cat TREE 2>/dev/null)" > $D/commit.txt
SERVE_LAYOUTS="pp1_tp1" bash bench/gpu/served.sh $D serve
tar czf $OUT/r.tgz -C $OUT serve
