#!/bin/bash
# Session 15, device call 1: the stale-max softmax (softmax.cuh, OnlineSoftmax steps 1-3; mainloop.cuh,
# overlap_step and recompute_scores). sm = the working tree (tests + bench), base = HEAD (.ab/base,
# bench only). Mutants of the working tree, d128 fp16 only, that must fail the key-gain tests:
#   mut_a: step 2 leaves the exponentials unscaled (the max, sums and O factor still move);
#   mut_b: step 3 skips the recompute (update() runs on the exponentials as if they were scores).
# Then: every sm90 GPU test, memcheck and racecheck over the sanitizer cases and the key-gain cases,
# and a same-call A/B, rotating order, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
for m in a b; do
  rm -rf .mut_$m && mkdir -p .mut_$m && cp -r CMakeLists.txt CMakePresets.json cmake include src tools tests python .mut_$m/
done
sed -i 's/for (int i = 0; i < kAcc; ++i) s\[i\] \*= o_factor\[acc_row(i)\];/;/' .mut_a/src/sm90/softmax.cuh
sed -i 's/^        recompute_scores(s);$/        ;/' .mut_b/src/sm90/mainloop.cuh
for m in a b; do echo "mut_$m differs in $(diff -r src .mut_$m/src | grep -c '^[<>]') lines"; done
( cmake --preset device -B build/ab-sm "${G[@]}" > /tmp/cfg-sm.log 2>&1 &&
  cmake --build build/ab-sm -j8 --target flashcore_gpu_tests flashcore-bench > /tmp/build-sm.log 2>&1; echo "sm build rc=$?"; grep -m3 error /tmp/build-sm.log ) &
( cmake --preset device -S .ab/base -B build/ab-base "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j4 --target flashcore-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
for m in a b; do
  ( cmake --preset device -S .mut_$m -B build/mut_$m "${G[@]}" -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 > /tmp/cfg-mut_$m.log 2>&1 &&
    cmake --build build/mut_$m -j2 --target flashcore_gpu_tests > /tmp/build-mut_$m.log 2>&1; echo "mut_$m build rc=$?"; grep -m3 error /tmp/build-mut_$m.log ) &
done
wait
echo "builds done at $SECONDS s"
T=build/ab-sm/tests/flashcore_gpu_tests
timeout 200 $T --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/gpu-tests.log | head -20 | tee "$OUT/gpu-tests.txt"
grep -E '^\[sm90\].*gain' /tmp/gpu-tests.log > "$OUT/gain-errors.txt"
for m in a b; do
  timeout 60 build/mut_$m/tests/flashcore_gpu_tests --gtest_filter='*gain*' > /tmp/mut_$m.log 2>&1
  echo "mut_$m rc=$? $(grep -cE '^\[  FAILED  \] All' /tmp/mut_$m.log) failed of $(grep -cE '^\[       OK \]|^\[  FAILED  \] All' /tmp/mut_$m.log): $(grep -E '^\[  FAILED  \] All' /tmp/mut_$m.log | sed 's/.*Error\///' | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
F='Sm90Sanitizer.*:All/Sm90Sweep.*Sq65_*:All/Sm90Sweep.*_gain_*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 1 $T --gtest_filter="$F" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
echo "tests done at $SECONDS s"
declare -A BIN=([base]=build/ab-base [sm]=build/ab-sm)
V=(base sm)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal" "4 16384 128 bf16 --causal" \
             "4 4096 128 fp16" "4 1024 128 fp16" "4 1024 128 fp16 --causal" "2 8192 64 fp16" "16 1024 64 fp16" \
             "2 8192 64 fp16 --causal" "2 8192 256 fp16" "16 1024 256 fp16" "2 8192 256 fp16 --causal"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    for i in 0 1; do v=${V[$(( (i + r) % 2 ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} sm=${res[sm]}"
  done
done | tee "$OUT/ab.txt"
echo "total $SECONDS s"
