#!/bin/bash
# Session 13, device call 13: after the review's simplifications (the small-block kernel's sum slots
# are scratch[8, 16) instead of a second array; the sm90 units are byte-identical), softmax GPU tests,
# memcheck and racecheck over step 6's cases, and one ladder run of row_per_block at 4096x4096.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cmake -S . -B build/rev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > /tmp/cfg.log 2>&1 &&
  cmake --build build/rev -j16 --target flashcore_gpu_tests flashcore-softmax-bench > /tmp/build.log 2>&1; echo "build rc=$?"
T=build/rev/tests/flashcore_gpu_tests
timeout 200 $T --gtest_filter='*Softmax*' > /tmp/tests.log 2>&1; echo "softmax gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/tests.log | tee "$OUT/gpu-tests.txt"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 1 $T \
    --gtest_filter='SoftmaxGpu.RowPerBlockSmallBlock*:Softmax/SoftmaxVariantTest.*/row_per_block' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
build/rev/tools/bench/flashcore-softmax-bench --runs 30 --dtypes bf16,fp16 --shapes 4096x4096 --variants row_per_block,auto | tee "$OUT/bench.txt"
echo "total $SECONDS s"
