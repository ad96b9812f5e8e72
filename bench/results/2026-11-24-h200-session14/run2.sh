#!/bin/bash
# Session 14, device call 5: split wgmma descriptors for S = Q K^T (ptx::SplitDesc: one 32-bit add per
# operand and k-step instead of a carry add + UMOV for Q and a 64-bit add for K). base = HEAD
# (.ab/base), sm = the working tree (tests + bench). sm90 GPU tests; memcheck and racecheck over the
# tail cases; same-call A/B, rotating order, three rounds.
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
F='Sm90Sanitizer.*:All/Sm90Sweep.*Sq65_*:All/Sm90Sweep.*Sq7_*:All/Sm90Sweep.*_long_on*:All/Sm90Sweep.*_short_o*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 1 $T --gtest_filter="$F" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
declare -A BIN=([base]=build/ab-base [sm]=build/ab-sm)
V=(base sm)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal" "4 16384 128 bf16 --causal" \
             "4 1024 128 fp16" "4 1024 128 fp16 --causal" "4 4096 128 fp16" "2 8192 64 fp16" "16 1024 64 fp16" "2 8192 256 fp16" "16 1024 256 fp16"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    for i in 0 1; do v=${V[$(( (i + r) % 2 ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} sm=${res[sm]}"
  done
done | tee "$OUT/ab.txt"
echo "total $SECONDS s"
