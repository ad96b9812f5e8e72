#!/usr/bin/env bash
# sm90-varlen device run (H200): build main (_main, bench only, d64/d128/d256 fp16) and this branch
# (all sm90 head dims, fp16+bf16, tests), time dense shapes alternating main/branch (ABBA), varlen
# shapes on the branch, then the sm90 GPU tests and compute-sanitizer memcheck/racecheck.
# Run from the branch root with $OUT set; main's tree in ./_main.
set -u
ROOT=$(cd ../.. && pwd)
T0=$(date +%s)
left() { echo $(( 285 - ($(date +%s) - T0) )); }
( cd _main && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a \
    -DFLASHCORE_HEAD_DIMS="64;128;256" -DFLASHCORE_DTYPES="fp16" -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF \
    > $OUT/main-configure.log 2>&1 && ninja -C build -j5 flashcore-bench > $OUT/main-build.log 2>&1; echo "main build rc=$?" >> $OUT/main-build.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a \
  -DFLASHCORE_HEAD_DIMS="64;96;128;192;256" -DFLASHCORE_DTYPES="fp16;bf16" -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_GTEST_SOURCE_DIR=$ROOT/.deps/googletest > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
ninja -C build -j12 flashcore_gpu_tests flashcore-bench > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -60; exit 1; }
wait
T1=$(date +%s)
echo "build $((T1-T0)) s" > $OUT/times.txt
NEW="build/tools/bench/flashcore-bench --path sm90 --iters 30 --warmup 3 --no-check"
BASE="_main/build/tools/bench/flashcore-bench --path sm90 --iters 30 --warmup 3 --no-check"
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024" "--batch 4 --heads 32 --dim 128 --seqlen 1024 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 4096" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --causal"
      "--batch 2 --heads 32 --dim 64 --seqlen 8192" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --causal"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --causal")
{
nvidia-smi -L; $NEW --batch 1 --heads 1 --dim 128 --seqlen 128 | grep -E "flashcore-bench on|family"
for round in 1 2; do
  for cfg in "${CFGS[@]}"; do
    if [ $round = 1 ]; then order="main branch"; else order="branch main"; fi
    for who in $order; do
      if [ $who = main ]; then B=$BASE; else B=$NEW; fi
      echo "r$round $who | $cfg | $($B $cfg --dtype fp16 | grep -E '^\|? *sm90|sm90' | tail -1)"
    done
  done
done
for v in "--varlen 4096,4096,4096,4096" "--varlen 4096,4096,4096,4096 --causal" \
         "--varlen 4096,512,2048,1000,3000,777,4049,1000" "--varlen 4096,512,2048,1000,3000,777,4049,1000 --causal"; do
  echo "varlen branch | --heads 32 --dim 128 $v fp16 | $($NEW --heads 32 --dim 128 $v --dtype fp16 | grep sm90 | tail -1)"
done
} > $OUT/bench.txt 2>&1
T2=$(date +%s)
echo "bench $((T2-T1)) s" >> $OUT/times.txt
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
G=build/tests/flashcore_gpu_tests
DENSE='*Sm90Sweep*/d128_fp16_H2x2_B1_Sq65_Sk300_causalBR_x1:*Sm90Sweep*/d64_bf16_H2x2_B1_Sq1023_Sk1023_x1:*Sm90Sweep*/d256_fp16_H8x2_B1_Sq7_Sk1_x1'
L=$(left); TS=$(( L > 40 ? L - 10 : 30 ))
( timeout $TS $CS --tool memcheck --error-exitcode 9 $G --gtest_filter="Sm90Sanitizer.*:Sm90Varlen.*:$DENSE" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck.log ) &
( timeout $TS $CS --tool racecheck --error-exitcode 9 $G --gtest_filter="Sm90Sanitizer.*:$DENSE" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?" >> $OUT/racecheck.log ) &
timeout $TS ctest --test-dir build -j14 -L gpu -R 'Sm90' --timeout $TS -V > $OUT/ctest.log 2>&1
wait
T3=$(date +%s)
echo "tests+sanitizers $((T3-T2)) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -1 $OUT/main-build.log
echo "== ctest"; grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run" $OUT/ctest.log | head -30
echo "== sanitizers"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|PASSED|FAILED" $OUT/memcheck.log $OUT/racecheck.log | head -20
echo "== bench"; cut -c1-220 $OUT/bench.txt
