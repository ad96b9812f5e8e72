#!/usr/bin/env bash
# Session 4 device run 2: the two-CTA cluster kernel (K/V multicast) for d128/d256 — sm90 tests,
# sanitizers on the cluster case, and a same-binary A/B (FLASHCORE_SM90_CLUSTER=off vs default).
set -u
cmake -S . -B build/c -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM80=OFF "-DFLASHCORE_HEAD_DIMS=128;256" "-DFLASHCORE_DTYPES=fp16;bf16" \
  -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > $OUT/cfg.log 2>&1 &&
  cmake --build build/c -j16 --target flashcore_gpu_tests flashcore-bench > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
T=build/c/tests/flashcore_gpu_tests
B=build/c/tools/bench/flashcore-bench
timeout 120 $B --path sm90 --batch 2 --heads 16 --dim 128 --seqlen 2048 --dtype fp16 > $OUT/smoke.log 2>&1; echo "smoke rc=$?"; tail -2 $OUT/smoke.log
timeout 240 $T --gtest_filter='*Sm90*' > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/tests.log | head -20
timeout 120 compute-sanitizer --tool memcheck $T --gtest_filter='Sm90Sanitizer.ClusterKernel' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 120 compute-sanitizer --tool racecheck $T --gtest_filter='Sm90Sanitizer.ClusterKernel' > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { $B --path sm90 $1 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype bf16"
      "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype bf16"
      "--batch 2 --heads 8 --dim 256 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  off=$(FLASHCORE_SM90_CLUSTER=off run "${CFGS[$i]}"); on=$(run "${CFGS[$i]}")
  echo "r$r | ${CFGS[$i]} | off $off | cluster $on" | tee -a $OUT/ab.txt
done; done > /dev/null
$B --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype bf16 > $OUT/check.log 2>&1; tail -1 $OUT/check.log
cd $OUT && tar czf logs.tar.gz *.log && rm -f cfg.log build.log smoke.log
cat $OUT/ab.txt
