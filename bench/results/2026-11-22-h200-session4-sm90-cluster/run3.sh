#!/usr/bin/env bash
# Session 4 device run 3 (run 2 hung: kProducerRegs 32 made setmaxnreg.inc wait forever): the two-CTA
# cluster kernel — smoke with timeouts first, then sm90 tests, sanitizers, same-binary A/B.
set -u
cmake -S . -B build/c -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM80=OFF "-DFLASHCORE_HEAD_DIMS=128;256" "-DFLASHCORE_DTYPES=fp16;bf16" \
  -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > $OUT/cfg.log 2>&1 &&
  cmake --build build/c -j16 --target flashcore_gpu_tests flashcore-bench > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
T=build/c/tests/flashcore_gpu_tests
B=build/c/tools/bench/flashcore-bench
FLASHCORE_SM90_CLUSTER=off timeout 20 $B --path sm90 --batch 2 --heads 16 --dim 128 --seqlen 2048 --dtype fp16 > $OUT/smoke-off.log 2>&1; echo "smoke off rc=$?"; tail -1 $OUT/smoke-off.log
timeout 20 $B --path sm90 --batch 2 --heads 16 --dim 128 --seqlen 2048 --dtype fp16 > $OUT/smoke.log 2>&1; rc=$?; echo "smoke cluster rc=$rc"; tail -1 $OUT/smoke.log
[ $rc = 0 ] || { cd $OUT && tar czf logs.tar.gz *.log; exit 1; }
timeout 200 $T --gtest_filter='*Sm90*-*d96*:*d64*:*d192*:Sm90Sanitizer.SmallVarlenCases:Sm90Varlen.*' > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/tests.log | head -20
timeout 100 compute-sanitizer --tool memcheck $T --gtest_filter='Sm90Sanitizer.ClusterKernel' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 100 compute-sanitizer --tool racecheck $T --gtest_filter='Sm90Sanitizer.ClusterKernel' > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { timeout 30 $B --path sm90 $1 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype bf16"
      "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype bf16"
      "--batch 2 --heads 8 --dim 256 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  off=$(FLASHCORE_SM90_CLUSTER=off run "${CFGS[$i]}"); on=$(run "${CFGS[$i]}")
  echo "r$r | ${CFGS[$i]} | off $off | cluster $on" >> $OUT/ab.txt
done; done
timeout 30 $B --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype bf16 > $OUT/check.log 2>&1; tail -1 $OUT/check.log
cd $OUT && tar czf logs.tar.gz *.log && rm -f cfg.log build.log smoke-off.log
cat $OUT/ab.txt
