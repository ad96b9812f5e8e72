#!/usr/bin/env bash
# Device run 6: sm80 d64 tile candidates vs the table + FA2 (SDPA) in the same run; racecheck on the
# merged sm80 fp32 / pair sanitizer cases.
set -u
G=-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest
cmake -S . -B build/s80 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_CUDA_ARCHS=90a \
  -DFLASHCORE_BUILD_PYTHON=OFF $G > $OUT/cfg.log 2>&1 && cmake --build build/s80 -j16 --target sm80-timing flashcore_gpu_tests > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
T=build/s80/tests/flashcore_gpu_tests
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 $T --gtest_filter='Sm80Sanitizer.*' > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $OUT/$tool.log | head -3 | tr '\n' ' ')"
done
build/s80/tools/bench/sm80-timing --d64 --tune-all > $OUT/sm80.csv 2> $OUT/sm80.err
python3 tools/bench/sdpa_baseline.py $OUT/sm80.csv > $OUT/fa2.md 2>&1
grep -E '^\| *(fp16|bf16) .* 64 \|' $OUT/fa2.md
grep -E '^flashcore-sm80-' $OUT/sm80.csv
