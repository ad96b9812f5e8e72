#!/usr/bin/env bash
# Device run 4: d64 3-WG config correctness (full build, all sm90 tests + sanitizers on d64) and
# d256 overlap (N64 / N80, small spills) vs the serial N80 default.
set -u
G=-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF"
for n in 64 80; do
  rm -rf /tmp/v$n && mkdir -p /tmp/v$n && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$n/ && (cd /tmp/v$n && patch -s -p1 < $OLDPWD/bench/results/2026-11-22-h200-sm90-tuning2/d256-overlap-n$n.patch)
  ( cd /tmp/v$n && cmake -S . -B b $common -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=256 > $OUT/cfg-v$n.log 2>&1 && cmake --build b -j4 --target flashcore-bench > $OUT/build-v$n.log 2>&1 ) &
done
cmake -S . -B build/m $common $G > $OUT/cfg-m.log 2>&1 && cmake --build build/m -j8 --target flashcore-bench flashcore_gpu_tests > $OUT/build-m.log 2>&1 || tail -20 $OUT/build-m.log
wait
T=build/m/tests/flashcore_gpu_tests
$T --gtest_filter='*Sm90*' > $OUT/tests-m.log 2>&1; echo "sm90 tests: $(grep -E '^\[  PASSED|FAILED TEST' $OUT/tests-m.log | tr '\n' ' ')"; grep -E '^\[  FAILED' $OUT/tests-m.log | head -8
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 $T --gtest_filter='All/Sm90Sweep.*d64*Sq65_*:All/Sm90Sweep.*d64*Sq7_*' > $OUT/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1) $(grep PASSED $OUT/$tool.log)"
done
{
for b in m v64 v80; do
  BIN=build/m/tools/bench/flashcore-bench; [ $b != m ] && BIN=/tmp/$b/b/tools/bench/flashcore-bench
  for dt in fp16 bf16; do for S in 2048 8192; do for c in "" "--causal"; do
    echo "$b d256 $dt S=$S $c: $($BIN --path sm90 --batch $((16384 / S)) --heads 8 --dim 256 --seqlen $S --dtype $dt $c --no-check 2>/dev/null | tail -1)"
  done; done; done
done
for S in 1024 4096 16384; do for c in "" "--causal"; do
  echo "m d64 fp16 S=$S $c: $(build/m/tools/bench/flashcore-bench --path sm90 --batch $((16384 / S)) --heads 32 --dim 64 --seqlen $S --dtype fp16 $c --no-check 2>/dev/null | tail -1)"
done; done
} > $OUT/bench.txt 2>&1
cat $OUT/bench.txt | sed 's/custom *flashcore-sm90 *//'
