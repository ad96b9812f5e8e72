#!/usr/bin/env bash
# Session 7, second call: the committed kernels (A = 7aac460) against the new ones (C: dense calls
# on the kAllKeysVisible kernel with the mask-free loop, d64 at kBlockN 128 there; masked calls with
# the loop split into masked/unmasked runs; the cluster kernel only from Sk >= 8192), fp16 builds of
# d64/d128/d256 carried in .ab/s7. Also: C's GPU tests (fp16 d64/128/256 build) and memcheck /
# racecheck over the cases that reach the changed loop.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
.ab/s7/gpu_tests --gtest_filter='*Sm90*' > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?" | tee $OUT/summary.txt
grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests ran" $OUT/gpu_tests.log | head -5 | tee -a $OUT/summary.txt
F='*Sanitizer*:*d64_fp16_H2x2_B1_Sq1023_Sk1023_x1*:*win700*:*d128_fp16_H2x2_B1_Sq1023_Sk1023_causal*:*d256_fp16_H4x2_B2_Sq256_Sk1000*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 .ab/s7/gpu_tests --gtest_filter="$F" > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
run() { timeout 30 env $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=()
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch 4 --heads 32 --dim 128 --seqlen $s"); done
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch 4 --heads 32 --dim 128 --seqlen $s --causal"); done
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch $((16384 / s)) --heads 32 --dim 64 --seqlen $s"); done
for s in 1024 2048 8192; do CFGS+=("--batch $((16384 / s)) --heads 32 --dim 64 --seqlen $s --causal"); done
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch $((16384 / s)) --heads 8 --dim 256 --seqlen $s"); done
for s in 1024 8192; do CFGS+=("--batch $((16384 / s)) --heads 8 --dim 256 --seqlen $s --causal"); done
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run ".ab/s7/A" "$c --dtype fp16"); n=$(run ".ab/s7/C" "$c --dtype fp16")
  line="r$r | $c | A $a | C $n"
  if [[ "$c" != *causal* && "$c" != *"dim 64"* ]]; then
    on=$(run "FLASHCORE_SM90_CLUSTER=on .ab/s7/C" "$c --dtype fp16"); off=$(run "FLASHCORE_SM90_CLUSTER=off .ab/s7/C" "$c --dtype fp16")
    line="$line | C-on $on | C-off $off"
  fi
  echo "$line" >> $OUT/ab.txt
done; done
cat $OUT/summary.txt
cat $OUT/ab.txt
