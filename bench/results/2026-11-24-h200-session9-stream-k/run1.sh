#!/bin/bash
# Session 9, device call 1: build, the GPU tests, sanitizers over the stream-K tail, then a same-binary
# A/B of the stream-K tail (FLASHCORE_SM90_STREAM_K=off against the launcher's rule), fp16.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
B=build/device
t0=$(date +%s)
cmake --preset device -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > "$OUT/configure.log" 2>&1
cmake --build $B -j16 --target flashcore_gpu_tests flashcore-bench > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
$B/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t1 )) s)"
grep -E '^\[  FAILED' "$OUT/gpu-tests.log" | head
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $B/tests/flashcore_gpu_tests \
    --gtest_filter='Sm90Sanitizer.StreamKTail:All/Sm90Sweep.*streamk_on*' > "$OUT/sanitizer-$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)"
done
row() { $B/tools/bench/flashcore-bench "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16 1024 256 8" "8 2048 256 8" "4 4096 256 8" "2 8192 256 8" "1 16384 256 8" \
             "16 1024 128 32" "8 2048 128 32" "4 4096 128 32" "4 16384 128 32" \
             "16 1024 64 32" "8 2048 64 32" "4 4096 64 32" "2 8192 64 32"; do
    set -- $cfg
    a=$(FLASHCORE_SM90_STREAM_K=off row --path sm90 --batch $1 --heads $4 --dim $3 --seqlen $2 --dtype fp16)
    b=$(row --path sm90 --batch $1 --heads $4 --dim $3 --seqlen $2 --dtype fp16)
    echo "r$r d$3 B$1 H$4 S$2: off=$a on=$b"
  done
done | tee "$OUT/ab.txt"
echo "total $(( $(date +%s) - t0 )) s"
