#!/usr/bin/env bash
# Device run 1 (branch sm80-spill): build (90a, d64/d128, fp16/bf16/fp32, ptxas -v), sm80 GPU tests,
# then d64 + d128 fp16/bf16 table tiles vs PyTorch SDPA FLASH_ATTENTION (FA2), two rounds.
set -u
R=$(cd ../.. && pwd)  # run from .dev/sm80-spill inside the device copy of the repo
cmake -S . -B build/t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM90=OFF "-DFLASHCORE_HEAD_DIMS=64;128" "-DFLASHCORE_DTYPES=fp16;bf16;fp32" \
  -DFLASHCORE_PTXAS_VERBOSE=ON -DFLASHCORE_GTEST_SOURCE_DIR=$R/.deps/googletest > $OUT/build.log 2>&1 &&
  cmake --build build/t -j16 --target flashcore_gpu_tests sm80-timing >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "== ptxas (sm80 kernels): $(grep -A2 'attention_fwd_kernel' $OUT/build.log | grep -c 'bytes spill stores') reports, non-zero spills: $(grep -A2 'attention_fwd_kernel' $OUT/build.log | grep 'bytes spill stores' | grep -vc ' 0 bytes spill stores')"
T=$(find build/t -name flashcore_gpu_tests -type f | head -1)
timeout 120 $T --gtest_filter='Sm80*' > $OUT/tests.log 2>&1; echo "== tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests ran' $OUT/tests.log | tail -8; grep -E '^\[  FAILED' $OUT/tests.log | head
for r in 1 2; do
  build/t/tools/bench/sm80-timing --no-tune > $OUT/sm80-$r.csv 2>>$OUT/tests.log
  python3 tools/bench/sdpa_baseline.py $OUT/sm80-$r.csv > $OUT/fa2-$r.md 2>&1
done
echo "== round 1 / round 2 ratio rows"
grep -hE '^\| *(fp16|bf16) ' $OUT/fa2-1.md | head -50; echo; grep -hE '^\| *(fp16|bf16) ' $OUT/fa2-2.md | head -50
