#!/usr/bin/env bash
# Softmax A/B 2: prefetch (persistent grid) in row_per_block and double-buffered row_in_smem.
set -u
cmake -S . -B build/sm -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF \
  -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=bf16 \
  -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > $OUT/cfg.log 2>&1
cmake --build build/sm -j16 --target flashcore-softmax-bench flashcore_gpu_tests > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
T=build/sm/tests/flashcore_gpu_tests
$T --gtest_filter='*Softmax*' > $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 $T --gtest_filter='Softmax/SoftmaxVariantTest.MatchesFp64*:SoftmaxGpu.*-SoftmaxGpu.OneVeryLong*' > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1) $(grep -E 'PASSED' $OUT/$tool.log)"
done
B=build/sm/tools/bench/flashcore-softmax-bench
{
for combo in "0 0" "1 0" "0 1" "1 1" "1 8" "1 12" "1 16"; do
  set -- $combo
  echo "== PREFETCH=$1 BLOCKS_PER_SM=$2"
  FLASHCORE_SOFTMAX_PREFETCH=$1 FLASHCORE_SOFTMAX_BLOCKS_PER_SM=$2 $B --runs 40 --dtypes fp32,bf16,fp16 --shapes 4096x4096 --variants row_per_block,row_in_smem
done
echo "== all shapes, defaults"
$B --runs 30 --dtypes fp32,bf16,fp16 --json $OUT/ours.json
} > $OUT/softmax-ab2.txt 2>&1
grep -E '==|4096x4096|copy' $OUT/softmax-ab2.txt
