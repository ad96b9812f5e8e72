#!/usr/bin/env bash
# Device run 2 (branch sm80-spill): the whole sm80 GPU test set (sweep included) + compute-sanitizer
# memcheck / racecheck on the small all-feature cases, d64/d128 build.
set -u
R=$(cd ../.. && pwd)  # run from .dev/sm80-spill inside the device copy of the repo
cmake -S . -B build/t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM90=OFF "-DFLASHCORE_HEAD_DIMS=64;128" "-DFLASHCORE_DTYPES=fp16;bf16;fp32" \
  -DFLASHCORE_GTEST_SOURCE_DIR=$R/.deps/googletest > $OUT/build.log 2>&1 &&
  cmake --build build/t -j16 --target flashcore_gpu_tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
T=$(find build/t -name flashcore_gpu_tests -type f | head -1)
timeout 200 $T --gtest_filter='*Sm80*' > $OUT/tests.log 2>&1; echo "== tests rc=$?"
grep -cE '^\[       OK ' $OUT/tests.log; grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests ran' $OUT/tests.log | tail -6; grep -E '^\[  FAILED' $OUT/tests.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
  timeout 90 $CS --tool $tool $T --gtest_filter='Sm80Sanitizer*' > $OUT/san-$tool.log 2>&1; echo "== $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/san-$tool.log | tail -3
done
