#!/usr/bin/env bash
# Session 6, causal cluster run 2: run 1's kernel plus the paired tile order in the cluster kernel,
# made room for by moving 8 registers per thread from the consumers to the producer (d128/d256:
# 32 / 232 / 232 instead of 24 / 240 / 240; ptxas: no spills). Two fp16 d128/d256 builds carried in
# .ab: base (16824fd) and new; the GPU tests of new; three rotating rounds of base / new.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
F='*Sm90*d128_fp16*:*Sm90*d256_fp16*:Sm90Sanitizer.ClusterKernel'
timeout 300 .ab/new/gpu_tests --gtest_filter="$F" > $OUT/gtest.log 2>&1; echo "gtest rc=$?"; grep -E "^\[  (PASSED|FAILED) " $OUT/gtest.log | head -3; grep -E "^\[  FAILED  \]" $OUT/gtest.log | head -4
timeout 200 compute-sanitizer --tool memcheck .ab/new/gpu_tests --gtest_filter=Sm90Sanitizer.ClusterKernel > $OUT/memcheck.log 2>&1; tail -1 $OUT/memcheck.log
timeout 200 compute-sanitizer --tool racecheck .ab/new/gpu_tests --gtest_filter=Sm90Sanitizer.ClusterKernel > $OUT/racecheck.log 2>&1; tail -1 $OUT/racecheck.log
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384 --causal" "--batch 8 --heads 8 --dim 256 --seqlen 2048 --causal" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --causal"
      "--batch 1 --heads 8 --dim 256 --seqlen 16384 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 1024" "--batch 4 --heads 32 --dim 128 --seqlen 16384" "--batch 2 --heads 8 --dim 256 --seqlen 8192")
for r in 1 2 3; do for c in "${CFGS[@]}"; do
  echo "r$r | $c | base $(run .ab/base "$c --dtype fp16") | new $(run .ab/new/bench "$c --dtype fp16")" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
cd $OUT && gzip -9 gtest.log
