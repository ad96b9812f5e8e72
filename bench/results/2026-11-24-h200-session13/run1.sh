#!/bin/bash
# Session 13, device call 1: step 6 on sm_90 splits rows of 4-16 KiB over a cluster of blocks
# holding 4 KiB each (src/softmax/row_per_cluster.cuh). Builds (softmax only, sm80/sm90 attention
# paths off): base = HEAD (git archive in .ab/base), new = the working tree (tests + bench),
# t128 = the working tree with 128-thread blocks of 2 KiB (clusters of 2/4/8). Softmax GPU tests,
# memcheck + racecheck over them on new; then a same-call A/B, rotating order, four rounds, of
# row_per_block and auto on 4096x4096 (the target shape) and 1024x1024 / 8192x32000 (unchanged rows).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF
   -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake -S . -B build/ab-new "${C[@]}" > /tmp/cfg-new.log 2>&1 &&
  cmake --build build/ab-new -j8 --target flashcore_gpu_tests flashcore-softmax-bench > /tmp/build-new.log 2>&1; echo "new build rc=$?"; grep -m3 error /tmp/build-new.log ) &
( cmake -S .ab/base -B build/ab-base "${C[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j4 --target flashcore-softmax-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
( cmake -S .ab/t128 -B build/ab-t128 "${C[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-t128.log 2>&1 &&
  cmake --build build/ab-t128 -j4 --target flashcore-softmax-bench > /tmp/build-t128.log 2>&1; echo "t128 build rc=$?"; grep -m3 error /tmp/build-t128.log ) &
wait
echo "builds done at $SECONDS s"
T=build/ab-new/tests/flashcore_gpu_tests
timeout 240 $T --gtest_filter='*Softmax*' > /tmp/tests.log 2>&1; echo "softmax gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' /tmp/tests.log | head -20 | tee "$OUT/gpu-tests.txt"
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 1 $T \
    --gtest_filter='SoftmaxGpu.RowPerBlockClusterSplitEdges:Softmax/SoftmaxVariantTest.MatchesFp64*/row_per_block' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
declare -A BIN=([base]=build/ab-base [new]=build/ab-new [t128]=build/ab-t128)
V=(base new t128)
for r in 1 2 3 4; do
  n=${#V[@]}
  for i in $(seq 0 $((n - 1))); do
    v=${V[$(( (i + r) % n ))]}
    ${BIN[$v]}/tools/bench/flashcore-softmax-bench --runs 30 --dtypes bf16,fp16,fp32 --shapes 4096x4096,1024x1024,8192x32000 \
      --variants row_per_block,auto 2>&1 | sed "s/^/r$r $v /"
  done
done > "$OUT/ab-raw.txt"
grep -m1 "D2D copy" "$OUT/ab-raw.txt"
# median % of copy per (shape, dtype, variant, build)
awk '/of copy/ {key=$3" "$4" "$5" "$2; for(i=1;i<=NF;i++) if($i ~ /%$/ && $(i+1)=="of") v=$i; sub("%","",v); a[key]=a[key]" "v}
     END {for (k in a) print k ":" a[k]}' "$OUT/ab-raw.txt" | sort | tee "$OUT/ab.txt"
echo "total $SECONDS s"
