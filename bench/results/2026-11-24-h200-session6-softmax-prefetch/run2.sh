#!/usr/bin/env bash
# Session 6 device run 2 (after run 1: prologue only in block mode and step 8, 16-byte rows of <= 64 KiB only, register cap for 4096-column blocks): softmax PDL prologue A/B. "on" = prefetch of the block's first row into L2
# (cp.async.bulk.prefetch.L2) and griddepcontrol.launch_dependents before griddepcontrol.wait, in the
# register (steps 5/6) and shared-memory (step 8) kernels; "off" = the tree before (392c0db).
# Binaries built on the CPU machine (-DFLASHCORE_CUDA_ARCHS=90a, SM80/SM90 attention off) and carried in .ab/softmax.
set -u
B=.ab/softmax
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
$B/gpu_tests --gtest_filter='*Softmax*' > $OUT/gtest.log 2>&1; tail -3 $OUT/gtest.log
compute-sanitizer --tool memcheck $B/gpu_tests --gtest_filter='*Softmax*' > $OUT/memcheck.log 2>&1; tail -2 $OUT/memcheck.log
compute-sanitizer --tool racecheck $B/gpu_tests --gtest_filter='*Softmax*' > $OUT/racecheck.log 2>&1; tail -2 $OUT/racecheck.log
V=row_per_block,row_in_smem,row_per_warp,auto
for r in 1 2 3; do
  for v in off on; do
    $B/$v --runs 30 --shapes 4096x4096,8192x32000,1024x1024 --variants $V > $OUT/$v-$r.log 2>&1
  done
done
python3 bench/results/2026-11-24-h200-session6-softmax-prefetch/summarize.py $OUT
