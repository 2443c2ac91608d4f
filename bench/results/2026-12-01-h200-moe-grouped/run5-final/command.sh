#!/usr/bin/env bash
# One H200, the committed threshold (auto groups up to 1024 routes): the
# grouped experts' tests, seam run's tokens, decode grouped vs one by one
# (served.sh moe) and served batch 1 / 8 / 32 both ways (served.sh moe-serve).
set -u
export SEAM_GPU_WORK=/tmp/seam-served
D=$OUT/run5; mkdir -p $D
echo "tree $(cat TREE 2>/dev/null)" > $D/commit.txt
bash bench/gpu/served.sh $D moe > /dev/null 2>&1
bash bench/gpu/served.sh $D moe-serve > /dev/null 2>&1
cat $D/summary.txt
tar czf $OUT/run5.tgz -C $OUT run5
