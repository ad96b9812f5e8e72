#!/usr/bin/env bash
# Device run 8: sm90 scheduler groups >= 2 waves for causal/window (A/B vs .dev/base = HEAD before),
# sm90 + softmax GPU tests on the new tree (incl. the sm_90-only PDL guard).
set -u
G=-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF"
( cd .dev/base && cmake -S . -B b $common -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg-base.log 2>&1 && cmake --build b -j6 --target flashcore-bench > $OUT/build-base.log 2>&1 || tail -5 $OUT/build-base.log ) &
cmake -S . -B build/n $common $G > $OUT/cfg-new.log 2>&1 && cmake --build build/n -j10 --target flashcore-bench flashcore_gpu_tests > $OUT/build-new.log 2>&1 || tail -20 $OUT/build-new.log
wait
build/n/tests/flashcore_gpu_tests --gtest_filter='*Sm90*:*Softmax*' > $OUT/tests.log 2>&1; echo "tests: $(grep -E '^\[  PASSED|FAILED TEST' $OUT/tests.log | tr '\n' ' ')"
{
for round in 1 2; do for b in base new; do
  BIN=build/n/tools/bench/flashcore-bench; [ $b = base ] && BIN=.dev/base/b/tools/bench/flashcore-bench
  for spec in "256 8 8192 fp16" "256 8 16384 fp16" "128 32 16384 fp16" "64 32 16384 fp16" "64 32 8192 fp16"; do
    set -- $spec
    B=$((16384 / $3)); [ $1 = 128 ] && B=4
    echo "r$round $b d$1 S=$3 causal: $($BIN --path sm90 --batch $B --heads $2 --dim $1 --seqlen $3 --dtype $4 --causal --no-check 2>/dev/null | tail -1)"
  done
  for S in 2048 8192; do
    echo "r$round $b d192x128 S=$S causal: $($BIN --path sm90 --batch $((16384 / S)) --heads 16 --dqk 192 --dv 128 --seqlen $S --dtype bf16 --causal --no-check 2>/dev/null | tail -1)"
  done
  echo "r$round $b d256 S=16384 noncausal: $($BIN --path sm90 --batch 1 --heads 8 --dim 256 --seqlen 16384 --dtype fp16 --no-check 2>/dev/null | tail -1)"
done; done
} > $OUT/bench.txt 2>&1
sed 's/custom *flashcore-sm90 *//' $OUT/bench.txt
