#!/bin/bash
# Session 13, device call 10: call 9's short-query-block-first change restricted to the long tile
# shape's masked kernel (the other kernels byte-identical to HEAD's): sm90 GPU tests; a same-call
# A/B, rotating order, four rounds, on the causal rows it touches (S = 8k, 12000, 16k) and S=2k.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device -B build/ab-sm "${G[@]}" > /tmp/cfg-sm.log 2>&1 &&
  cmake --build build/ab-sm -j11 --target flashcore_gpu_tests flashcore-bench > /tmp/build-sm.log 2>&1; echo "sm build rc=$?"; grep -m3 error /tmp/build-sm.log ) &
( cmake --preset device -S .ab/base -B build/ab-base "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j5 --target flashcore-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
wait
echo "builds done at $SECONDS s"
T=build/ab-sm/tests/flashcore_gpu_tests
timeout 200 $T --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/gpu-tests.log | head -20 | tee "$OUT/gpu-tests.txt"
declare -A BIN=([base]=build/ab-base [sm]=build/ab-sm)
V=(base sm)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3 4; do
  for cfg in "4 16384 128 fp16 --causal" "4 16384 128 bf16 --causal" "4 8192 128 fp16 --causal" "4 8192 128 bf16 --causal" \
             "4 12000 128 fp16 --causal" "4 2048 128 fp16 --causal"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    for i in 0 1; do v=${V[$(( (i + r) % 2 ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} sm=${res[sm]}"
  done
done | tee "$OUT/ab.txt"
echo "total $SECONDS s"
