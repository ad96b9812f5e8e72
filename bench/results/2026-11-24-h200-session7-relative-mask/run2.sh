#!/usr/bin/env bash
# Session 7, second call: E = the committed candidate (relative mask for every head dim, d64 masked
# calls at kBlockN 128, d64 varlen at 96) against C = 8dd8de9 kernels; fp16 d64/d128/d256 builds in
# .ab/s7, three rotating rounds over the causal rows. Also E's GPU tests (fp16 d64/128/256 build) and
# memcheck / racecheck over the d64 causal, window and varlen cases.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
.ab/s7/gpu_tests --gtest_filter='*Sm90Sweep*fp16*' > $OUT/gpu_tests.log 2>&1; echo "gpu sweep fp16 rc=$?" | tee $OUT/summary.txt
grep -E "^\[  (PASSED|FAILED) \]" $OUT/gpu_tests.log | head -5 | tee -a $OUT/summary.txt
F='*Sm90Sweep*d64_fp16*causal*:*Sm90Sweep*d64_fp16*win*:*Sm90Sweep*d64_fp16*varlen*:*Sm90Sweep*d128_fp16*Sq1023_Sk1023_causal*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 .ab/s7/gpu_tests --gtest_filter="$F" > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
run() { timeout 30 env $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=()
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch $((16384 / s)) --heads 32 --dim 64 --seqlen $s --causal"); done
for s in 1024 4096 8192 16384; do CFGS+=("--batch 4 --heads 32 --dim 128 --seqlen $s --causal"); done
CFGS+=("--batch 2 --heads 8 --dim 256 --seqlen 8192 --causal")
for r in 1 2 3; do for c in "${CFGS[@]}"; do
  a=$(run .ab/s7/C "$c --dtype fp16"); b=$(run .ab/s7/E "$c --dtype fp16")
  echo "r$r | $c | C $a | E $b" >> $OUT/ab.txt
done; done
cat $OUT/summary.txt
cat $OUT/ab.txt
