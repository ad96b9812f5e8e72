#!/usr/bin/env bash
# Session 5 device run 1: the paired tile order (src/sm90/tile_order.hpp) for causal calls.
# Binaries built on the development machine (build/dev90: sm_90a, SM80 off, every sm90 head dim and
# dtype) and carried. sm90 GPU tests, sanitizers on the new tile-order cases, then a same-binary
# A/B: FLASHCORE_SM90_TILE_ORDER=longest (the old order) vs the default (pairs), two rounds.
set -u
T=build/dev90/tests/flashcore_gpu_tests
B=build/dev90/tools/bench/flashcore-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
timeout 30 $B --path sm90 --batch 2 --heads 32 --dim 64 --seqlen 2048 --causal --dtype fp16 > $OUT/smoke.log 2>&1; echo "smoke rc=$?"; tail -1 $OUT/smoke.log
timeout 300 $T --gtest_filter='*Sm90*' > $OUT/tests.log 2>&1; echo "sm90 tests rc=$?"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" $OUT/tests.log | head -12
F='*hpg*-*d96*:*d192*:*bf16*'
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { timeout 30 $B --path sm90 $1 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=(
  "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 --causal" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16 --causal"
  "--batch 4 --heads 32 --dim 64 --seqlen 4096 --dtype fp16 --causal" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 --causal"
  "--batch 1 --heads 32 --dim 64 --seqlen 16384 --dtype fp16 --causal"
  "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 --causal"
  "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 8192 --dtype fp16 --causal"
  "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
  "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype bf16 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype bf16 --causal"
  "--batch 16 --heads 8 --dim 256 --seqlen 1024 --dtype fp16 --causal" "--batch 8 --heads 8 --dim 256 --seqlen 2048 --dtype fp16 --causal"
  "--batch 4 --heads 8 --dim 256 --seqlen 4096 --dtype fp16 --causal" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --causal"
  "--batch 1 --heads 8 --dim 256 --seqlen 16384 --dtype fp16 --causal"
  "--batch 8 --heads 16 --dqk 192 --dv 128 --seqlen 2048 --dtype bf16 --causal" "--batch 2 --heads 16 --dqk 192 --dv 128 --seqlen 8192 --dtype bf16 --causal"
  "--batch 8 --heads-q 32 --heads-kv 8 --dim 128 --seqlen 2048 --dtype bf16 --causal" "--batch 2 --heads-q 32 --heads-kv 8 --dim 128 --seqlen 8192 --dtype bf16 --causal"
)
for r in 1 2; do for i in "${!CFGS[@]}"; do
  old=$(FLASHCORE_SM90_TILE_ORDER=longest run "${CFGS[$i]}"); new=$(run "${CFGS[$i]}")
  echo "r$r | ${CFGS[$i]} | longest $old | paired $new" >> $OUT/ab.txt
done; done
timeout 30 $B --path sm90 --batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 --causal > $OUT/check.log 2>&1; tail -2 $OUT/check.log
cat $OUT/ab.txt
