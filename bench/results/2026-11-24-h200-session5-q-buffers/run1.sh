#!/usr/bin/env bash
# Session 5: two Q buffers (tile_config.hpp kQStages = 2 for d64/d96/d128): the producer loads the
# next tile's Q while the current tile still reads its own. sm90 GPU tests and sanitizers on the
# full build (build/dev90, every sm90 head dim and dtype), then an A/B of two fp16 builds
# (d64/d128/d256): build/abd/base = the kernels of commit 50d34d5 (one Q buffer), build/abd/q2 = this tree.
set -u
T=build/dev90/tests/flashcore_gpu_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 30 build/dev90/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal > $OUT/smoke.log 2>&1; echo "smoke rc=$?"; tail -1 $OUT/smoke.log
timeout 300 $T --gtest_filter='*Sm90*' > $OUT/tests.log 2>&1; echo "sm90 tests rc=$?"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" $OUT/tests.log | head -12
F='Sm90Sanitizer.*:*hpg*-*d96*:*d192*:*bf16*:All/Sm90Sweep.*Sq65_*:All/Sm90Sweep.*H32x8_B2_Sq700*'
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
      "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16" "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 --causal"
      "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 --causal"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16")
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run build/abd/base "$c"); b=$(run build/abd/q2 "$c")
  echo "r$r | $c | one Q $a | two Q $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
