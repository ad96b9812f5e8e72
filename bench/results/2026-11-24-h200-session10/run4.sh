#!/bin/bash
# Session 10, device call 4: the rescale threshold in the sm90 softmax (softmax.cuh: the running max
# moves only when a block's max exceeds it by more than 4 in log2 units, the sm80 path's rule).
# Two builds of one tree: build/device (threshold 4, full build, GPU tests) and build/thr0
# (-DFLASHCORE_SM90_RESCALE_THRESHOLD_LOG2=0.0f: the max moves on every increase, as before).
# (a) the sm90 GPU tests on the new build; (b) a same-call A/B, three rounds, order alternating;
# d64 also with FLASHCORE_SM90_RESCALE=vote (its config rescales after every block).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device "${G[@]}" > /tmp/cfg-new.log 2>&1 && cmake --build build/device -j10 > /tmp/build-new.log 2>&1; echo "new build rc=$?" ) &
( cmake --preset device -B build/thr0 "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFLASHCORE_SM90_RESCALE_THRESHOLD_LOG2=0.0f > /tmp/cfg-thr0.log 2>&1 &&
  cmake --build build/thr0 -j6 --target flashcore-bench > /tmp/build-thr0.log 2>&1; echo "thr0 build rc=$?" ) &
wait
tail -3 /tmp/build-new.log
timeout 300 build/device/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests ran' /tmp/gpu-tests.log | head -20
grep -E 'FAILED|PASSED|tests ran' /tmp/gpu-tests.log | tail -5 > "$OUT/gpu-tests-summary.txt"
grep -B2 -A12 'Failure' /tmp/gpu-tests.log | head -80 >> "$OUT/gpu-tests-summary.txt"
NEW=build/device/tools/bench/flashcore-bench
OLD=build/thr0/tools/bench/flashcore-bench
row() { local bin=$1; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "16 1024 128 fp16" "4 4096 128 fp16" "4 16384 128 fp16" "4 16384 128 bf16" "16 1024 128 fp16 --causal" "4 16384 128 fp16 --causal" \
             "16 1024 64 fp16" "2 8192 64 fp16" "2 8192 64 fp16 --causal" "16 1024 64 fp16 --causal" \
             "2 8192 256 fp16" "2 8192 256 fp16 --causal"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    if [ $((r % 2)) = 1 ]; then a=$(row $OLD "${args[@]}"); b=$(row $NEW "${args[@]}"); else b=$(row $NEW "${args[@]}"); a=$(row $OLD "${args[@]}"); fi
    extra=""
    if [ $3 = 64 ]; then extra=" new+vote=$(FLASHCORE_SM90_RESCALE=vote row $NEW "${args[@]}") old+vote=$(FLASHCORE_SM90_RESCALE=vote row $OLD "${args[@]}")"; fi
    echo "r$r d$3 $4 B$1 H$H S$2 ${5:-}: thr0=$a thr4=$b$extra"
  done
done | tee "$OUT/ab-threshold.txt"
