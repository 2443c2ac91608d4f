#!/usr/bin/env bash
# One H200: the device handoff's host-free producer (tests, and the bench
# alternately against the tree before it), fed decode at TP 1 on this tree.
set -u
export NCCL_NVLS_ENABLE=0
R=scripts/gpu-run.sh
D=$OUT/r; mkdir -p $D
echo "tree 6607970 (new) vs becc7de (old: bundle-old/seam-bench-handoff)" > $D/commit.txt
nvidia-smi > $D/nvidia-smi.txt 2>&1
gunzip -f bundle-old/*.gz 2>/dev/null; chmod +x bundle-old/* 2>/dev/null
S=$D/summary.txt
$R handoff_test --gtest_filter='*DeviceHandoffGpu*' > $D/handoff_test.log 2>&1; echo "handoff_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $D/handoff_test.log | tr '\n' ' ')" >> $S
$R runtime_test --gtest_filter='*Fed*:*GraphDecode*' > $D/runtime_fed.log 2>&1; echo "runtime_test fed+graph rc=$? $(grep -E '^\[  (PASSED|FAILED) |SKIPPED \]' $D/runtime_fed.log | tr '\n' ' ')" >> $S
for i in 1 2 3; do
  for side in old new; do
    bin=seam-bench-handoff; [ $side = old ] && bin=$PWD/bundle-old/seam-bench-handoff
    timeout 240 $R $bin device shm 8,32,128 4096 2000 200 $D/${side}_shm_$i.json > $D/${side}_shm_$i.log 2>&1
    echo "bench $side shm round $i rc=$?" >> $S
  done
done
timeout 240 $R seam-bench-handoff device tcp 8,128 4096 2000 200 $D/new_tcp.json > $D/new_tcp.log 2>&1; echo "bench new tcp rc=$?" >> $S
tar czf $OUT/r.tgz -C $OUT r
