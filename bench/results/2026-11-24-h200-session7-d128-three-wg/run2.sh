#!/usr/bin/env bash
# Session 7, second call: the long-dense tile shape as committed (d128 calls whose rows see every
# key take three consumer warpgroups at kBlockN 80 from Sk >= 8192). One binary G (d128 fp16 + bf16
# build of the candidate), same-binary A/B: the rule against FLASHCORE_SM90_LONG_TILES=off (the
# two-warpgroup kernel) and =on (the long shape at every length). Three rotating rounds. Also the GPU
# test binary (fp16 d64/d128/d256 build): the sm90 sweep's fp16 cases, and memcheck / racecheck over
# the long-shape cases.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
.ab/s7/gpu_tests --gtest_filter='*Sm90Sweep*d64_fp16*:*Sm90Sweep*d128_fp16*:*Sm90Sweep*d256_fp16*:*Sm90Sweep*d128_bf16_H2x2_B1_Sq384_Sk8192*' > $OUT/gpu_tests.log 2>&1
echo "gpu sweep rc=$?" | tee $OUT/summary.txt
grep -E "^\[  (PASSED|FAILED) \]" $OUT/gpu_tests.log | head -8 | tee -a $OUT/summary.txt
F='*Sm90Sweep*d128_fp16*_long_on*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 .ab/s7/gpu_tests --gtest_filter="$F" > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
run() { timeout 30 env $1 .ab/s7/G --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
for r in 1 2 3; do for dt in fp16 bf16; do for s in 2048 4096 8192 16384; do
  c="--batch 4 --heads 32 --dim 128 --seqlen $s --dtype $dt"
  echo "r$r | $dt S=$s | rule $(run X=1 "$c") | off $(run FLASHCORE_SM90_LONG_TILES=off "$c") | on $(run FLASHCORE_SM90_LONG_TILES=on "$c")" >> $OUT/ab.txt
done; done; done
c="--batch 2 --dim 128 --seqlen 8192 --heads-q 32 --heads-kv 8 --dtype bf16"
for r in 1 2; do echo "r$r | gqa32x8 bf16 S=8k | rule $(run X=1 "$c") | off $(run FLASHCORE_SM90_LONG_TILES=off "$c")" >> $OUT/ab.txt; done
cat $OUT/summary.txt
cat $OUT/ab.txt
