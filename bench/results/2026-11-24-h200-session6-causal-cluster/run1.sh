#!/usr/bin/env bash
# Session 6: causal calls on the two-CTA cluster kernel (K/V multicast for pairs of query blocks;
# the lower CTA skips the block only the upper one reads). One fp16 d128/d256 build of the change
# carried in .ab/cc (flashcore-bench + the GPU tests); the A/B is FLASHCORE_SM90_CLUSTER=off
# (the one-CTA kernel, as before the change) against the default, three rotating rounds.
set -u
B=.ab/cc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
F='*Sm90*d128_fp16*:*Sm90*d256_fp16*:Sm90Sanitizer.ClusterKernel'
timeout 300 $B/gpu_tests --gtest_filter="$F" > $OUT/gtest.log 2>&1; echo "gtest rc=$?"; grep -E "^\[  (PASSED|FAILED) " $OUT/gtest.log | head -3; grep -E "^\[  FAILED  \]" $OUT/gtest.log | head
timeout 200 compute-sanitizer --tool memcheck $B/gpu_tests --gtest_filter=Sm90Sanitizer.ClusterKernel > $OUT/memcheck.log 2>&1; tail -1 $OUT/memcheck.log
timeout 200 compute-sanitizer --tool racecheck $B/gpu_tests --gtest_filter=Sm90Sanitizer.ClusterKernel > $OUT/racecheck.log 2>&1; tail -1 $OUT/racecheck.log
run() { timeout 30 env FLASHCORE_SM90_CLUSTER=$1 $B/bench --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024" "--batch 4 --heads 32 --dim 128 --seqlen 2048" "--batch 4 --heads 32 --dim 128 --seqlen 4096"
      "--batch 4 --heads 32 --dim 128 --seqlen 8192" "--batch 4 --heads 32 --dim 128 --seqlen 16384"
      "--batch 8 --heads 8 --dim 256 --seqlen 2048" "--batch 2 --heads 8 --dim 256 --seqlen 8192" "--batch 1 --heads 8 --dim 256 --seqlen 16384")
for r in 1 2 3; do for c in "${CFGS[@]}"; do
  echo "r$r | $c --causal | one-CTA $(run off "$c --causal --dtype fp16") | cluster $(run on "$c --causal --dtype fp16")" >> $OUT/ab.txt
done; done
for c in "--batch 4 --heads 32 --dim 128 --seqlen 16384" "--batch 2 --heads 8 --dim 256 --seqlen 8192"; do
  echo "non-causal | $c | cluster $(run on "$c --dtype fp16")" >> $OUT/ab.txt
done
cat $OUT/ab.txt
cd $OUT && gzip -9 gtest.log
