#!/usr/bin/env bash
# Device run 3: softmax A/B 3 + sm90 d64 with 3 consumer warpgroups (build C) vs current (build A).
set -u
G=-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF $G"
( cmake -S . -B build/sm $common -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=bf16 > $OUT/cfg-sm.log 2>&1 &&
  cmake --build build/sm -j6 --target flashcore-softmax-bench flashcore_gpu_tests > $OUT/build-sm.log 2>&1 ) &
( cmake -S . -B build/a $common -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_HEAD_DIMS=64 > $OUT/cfg-a.log 2>&1 &&
  cmake --build build/a -j5 --target flashcore-bench > $OUT/build-a.log 2>&1 ) &
rm -rf /tmp/c && mkdir -p /tmp/c && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md .deps /tmp/c/ && (cd /tmp/c && patch -s -p1 < $OLDPWD/bench/results/2026-11-22-h200-sm90-tuning2/d64-3wg.patch)
( cd /tmp/c && cmake -S . -B build/c $common -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_GTEST_SOURCE_DIR=/tmp/c/.deps/googletest > $OUT/cfg-c.log 2>&1 &&
  cmake --build build/c -j5 --target flashcore-bench flashcore_gpu_tests > $OUT/build-c.log 2>&1 ) &
wait
ls build/sm/tools/bench/flashcore-softmax-bench build/a/tools/bench/flashcore-bench /tmp/c/build/c/tools/bench/flashcore-bench /tmp/c/build/c/tests/flashcore_gpu_tests
# correctness of the 3-warpgroup d64 configs (every schedule / block N variant the tests cover)
/tmp/c/build/c/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > $OUT/tests-c.log 2>&1; echo "sm90 d64 3WG tests: $(tail -1 $OUT/tests-c.log)"; grep -E '^\[  FAILED' $OUT/tests-c.log | head -5
compute-sanitizer --tool racecheck /tmp/c/build/c/tests/flashcore_gpu_tests --gtest_filter='All/Sm90Sweep.*Sq65_*' > $OUT/racecheck-c.log 2>&1; grep -E 'RACECHECK SUMMARY|PASSED' $OUT/racecheck-c.log
{
for b in a c; do
  BIN=build/a/tools/bench/flashcore-bench; [ $b = c ] && BIN=/tmp/c/build/c/tools/bench/flashcore-bench
  for env in "X=1" "FLASHCORE_SM90_SCHEDULE=serial" "FLASHCORE_SM90_BLOCK_N=128"; do
    for dt in fp16 bf16; do for S in 2048 8192; do for c in "" "--causal"; do
      B=$((16384 / S))
      echo "$b $env $dt S=$S $c: $(env $env $BIN --path sm90 --batch $B --heads 32 --dim 64 --seqlen $S --dtype $dt $c --no-check 2>/dev/null | tail -1)"
    done; done; done
  done
done
} > $OUT/d64.txt 2>&1
B=build/sm/tools/bench/flashcore-softmax-bench
{
for env in "X=1" "FLASHCORE_SOFTMAX_PDL=0" "FLASHCORE_SOFTMAX_STREAMING=1" "FLASHCORE_SOFTMAX_THREADS=128" "FLASHCORE_SOFTMAX_THREADS=128 FLASHCORE_SOFTMAX_STREAMING=1" "X=2"; do
  echo "== $env"; env $env $B --runs 40 --dtypes bf16,fp16 --shapes 4096x4096 --variants row_per_block,row_in_smem
done
} > $OUT/softmax-ab3.txt 2>&1
cat $OUT/d64.txt; grep -E '==|4096|copy' $OUT/softmax-ab3.txt
