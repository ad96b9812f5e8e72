#!/usr/bin/env bash
# Session 5 device run 2: (a) the launcher pairs tiles only where head groups cut waves
# (tile_order.hpp groups_fill_waves), (b) a d64 warpgroup with no rows in a tile skips its GEMMs
# (mainloop.cuh idle_tile; ptxas: the d64 dense kernel spills 16 bytes with it).
# build/ab1 = run 1's flashcore-bench (pairs on every uneven call, no idle skip); build/dev90 = this tree.
set -u
T=build/dev90/tests/flashcore_gpu_tests
B=build/dev90/tools/bench/flashcore-bench
A=build/ab1/flashcore-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
timeout 30 $B --path sm90 --batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 > $OUT/smoke.log 2>&1; echo "smoke rc=$?"; tail -1 $OUT/smoke.log
timeout 300 $T --gtest_filter='*Sm90*' > $OUT/tests.log 2>&1; echo "sm90 tests rc=$?"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" $OUT/tests.log | head -12
F='*hpg*-*d96*:*d192*:*bf16*:All/Sm90Sweep.*d64_fp16*Sq1023*:All/Sm90Sweep.*d64_bf16_H4x2_varlen*'
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=()
for c in "" "--causal"; do
  CFGS+=("--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 $c" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16 $c"
         "--batch 4 --heads 32 --dim 64 --seqlen 4096 --dtype fp16 $c" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 $c"
         "--batch 1 --heads 32 --dim 64 --seqlen 16384 --dtype fp16 $c")
done
CFGS+=("--batch 16 --heads 8 --dim 256 --seqlen 1024 --dtype fp16 --causal" "--batch 8 --heads 8 --dim 256 --seqlen 2048 --dtype fp16 --causal"
       "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 --causal" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --causal")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  a=$(run $A "${CFGS[$i]}"); b=$(run $B "${CFGS[$i]}")
  echo "r$r | ${CFGS[$i]} | run1 $a | this $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
