#!/bin/bash
# softmax2 helper: one device run (build, softmax GPU tests, bench, torch, memcheck).
cd "$(dirname "$0")"
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
DEADLINE=240  # seconds after start; each stage gets min(its own limit, what is left)
lim() { local left=$(( DEADLINE - ($(date +%s) - T0) )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
G=$(realpath ../../.deps/googletest)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/device.txt 2>&1
ts configure
cmake -S . -B build -G Ninja -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_CUDA_ARCHS=90a \
  -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=bf16 -DFLASHCORE_GTEST_SOURCE_DIR=$G > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
ts build
cmake --build build -j16 --target flashcore_gpu_tests flashcore-softmax-bench > $OUT/build.log 2>&1 || { grep -B2 -A10 error $OUT/build.log | head -60; exit 1; }
ts gpu tests
timeout $(lim 45) ./build/tests/flashcore_gpu_tests --gtest_filter='*Softmax*' > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
ts bench
timeout $(lim 70) ./build/tools/bench/flashcore-softmax-bench --runs 30 --dtypes fp32,bf16,fp16 --json $OUT/ours.json > $OUT/bench.log 2>&1; echo "bench rc=$?"
ts torch
timeout $(lim 50) python3 tools/bench/softmax_torch.py --runs 30 --dtypes fp32,bf16,fp16 --ours $OUT/ours.json --json $OUT/torch.json > $OUT/torch.log 2>&1; echo "torch rc=$?"
ts memcheck
timeout $(lim 40) compute-sanitizer --tool memcheck ./build/tests/flashcore_gpu_tests --gtest_filter='*Softmax*row_in_smem*:*Softmax*warp_shuffle*:*Softmax*vectorized*:*SoftmaxGpu*-*CoversMoreRowsThanOneGrid*' > $OUT/memcheck_changed.log 2>&1; echo "memcheck (changed) rc=$?"
ts memcheck rest
timeout $(lim 60) compute-sanitizer --tool memcheck ./build/tests/flashcore_gpu_tests --gtest_filter='*SoftmaxVariantTest*-*CoversMoreRowsThanOneGrid*:*row_in_smem*:*warp_shuffle*:*vectorized*' > $OUT/memcheck_rest.log 2>&1; echo "memcheck (rest) rc=$?"
ts done
echo "== summary"; cat $OUT/device.txt
grep -E "^\[  (PASSED|FAILED) |tests ran" $OUT/gpu_tests.log
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) |tests ran" $OUT/memcheck_changed.log $OUT/memcheck_rest.log
grep -E "row_in_smem|row_per_block|auto|copy" $OUT/bench.log | grep -E "4096x4096|8192x32000|copy" | cut -c1-110
grep -A20 "^| shape" $OUT/torch.log | cut -c1-400
