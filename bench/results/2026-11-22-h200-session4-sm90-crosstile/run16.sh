#!/usr/bin/env bash
# Session 4 device run 16: cross-tile overlap v2 (P V first, epilogue under the next Q K^T), double-buffered Q (a tile's last P V issued with the next tile's first
# Q K^T; epilogue after) vs the committed schedule (drain, epilogue, prologue). Same-run A/B, plus the
# sm90 tests and sanitizers on the new kernel.
set -u
rm -rf /tmp/vbase && mkdir -p /tmp/vbase && tar xf .dev/s4/base-tree.tar -C /tmp/vbase
cfg() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  "-DFLASHCORE_HEAD_DIMS=64;128;256" -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest "${@:3}"; }
( cfg /tmp/vbase /tmp/vbase/b -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg-base.log 2>&1 && cmake --build /tmp/vbase/b -j8 --target flashcore-bench > $OUT/build-base.log 2>&1 ) &
( cfg . build/x > $OUT/cfg-new.log 2>&1 && cmake --build build/x -j8 --target flashcore-bench flashcore_gpu_tests > $OUT/build-new.log 2>&1 ) &
wait
ls /tmp/vbase/b/tools/bench/flashcore-bench build/x/tools/bench/flashcore-bench build/x/tests/flashcore_gpu_tests > /dev/null || { tail -30 $OUT/build-*.log; exit 1; }
T=build/x/tests/flashcore_gpu_tests
timeout 30 build/x/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 --causal > $OUT/smoke.log 2>&1; rc=$?; echo "smoke rc=$rc"; tail -1 $OUT/smoke.log
[ $rc = 0 ] || { cd $OUT && tar czf logs.tar.gz *.log; exit 1; }
timeout 200 $T --gtest_filter='*Sm90*-*d96*:*d192*:*bf16*' > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/tests.log | head -20
F='Sm90Sanitizer.*:All/Sm90Sweep.*Sq65_*:All/Sm90Sweep.*Sq7_*:All/Sm90Sweep.*H16x4_varlen*'
timeout 150 compute-sanitizer --tool memcheck $T --gtest_filter="$F-*d96*:*d192*:*bf16*" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
timeout 150 compute-sanitizer --tool racecheck $T --gtest_filter="$F-*d96*:*d192*:*bf16*" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 --causal" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
      "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16 --causal" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 --causal"
      "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16" "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 --causal"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --causal")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  if [ $r = 1 ]; then a=$(run /tmp/vbase/b/tools/bench/flashcore-bench "${CFGS[$i]}"); b=$(run build/x/tools/bench/flashcore-bench "${CFGS[$i]}");
  else b=$(run build/x/tools/bench/flashcore-bench "${CFGS[$i]}"); a=$(run /tmp/vbase/b/tools/bench/flashcore-bench "${CFGS[$i]}"); fi
  echo "r$r | ${CFGS[$i]} | base $a | cross-tile $b" >> $OUT/ab.txt
done; done
for c in "${CFGS[1]}" "${CFGS[7]}"; do timeout 30 build/x/tools/bench/flashcore-bench --path sm90 $c 2>&1 | tail -1; done
cd $OUT && tar czf logs.tar.gz *.log && rm -f cfg-*.log build-*.log smoke.log
cat $OUT/ab.txt
