#!/bin/bash
# Session 10, device call 5: warpgroup / warp index broadcast from lane 0 (kernel.cuh), so the
# compiler keeps the Q descriptor in uniform registers. Two builds of one tree: build/device (the
# broadcast, full build: sm90 GPU tests) and build/nobc (-DFLASHCORE_SM90_NO_WG_BROADCAST: as
# before). SASS opcode counts of each build's d128 long dense kernel; same-call A/B, three rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device "${G[@]}" > /tmp/cfg-new.log 2>&1 && cmake --build build/device -j10 > /tmp/build-new.log 2>&1; echo "new build rc=$?" ) &
( cmake --preset device -B build/nobc "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFLASHCORE_SM90_NO_WG_BROADCAST > /tmp/cfg-nobc.log 2>&1 &&
  cmake --build build/nobc -j6 --target flashcore-bench > /tmp/build-nobc.log 2>&1; echo "nobc build rc=$?" ) &
wait
NEW=build/device/tools/bench/flashcore-bench
OLD=build/nobc/tools/bench/flashcore-bench
for b in $OLD $NEW; do
  echo "== $b"
  cuobjdump --dump-sass $b 2>/dev/null | awk '/Function :/ {f=$3} f ~ /KernelTraitsILi128ELi128E6__halfLNS0_8ScheduleE1ELi80ELb0ELi2ELb1ELNS0_9TileShapeE1E/ {print}' \
    | grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[T0-9]+\s+)?[A-Z0-9]+' | awk '{print $NF}' | sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
  echo
done > "$OUT/sass-d128-long.txt"
cat "$OUT/sass-d128-long.txt"
timeout 300 build/device/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/gpu-tests.log | head -20
row() { local bin=$1; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "16 1024 128 fp16" "4 4096 128 fp16" "4 16384 128 fp16" "4 16384 128 bf16" "16 1024 128 fp16 --causal" "4 16384 128 fp16 --causal" \
             "16 1024 64 fp16" "2 8192 64 fp16" "2 8192 64 fp16 --causal" "2 8192 256 fp16" "2 8192 256 fp16 --causal"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    if [ $((r % 2)) = 1 ]; then a=$(row $OLD "${args[@]}"); b=$(row $NEW "${args[@]}"); else b=$(row $NEW "${args[@]}"); a=$(row $OLD "${args[@]}"); fi
    echo "r$r d$3 $4 B$1 H$H S$2 ${5:-}: nobc=$a bcast=$b"
  done
done | tee "$OUT/ab-broadcast.txt"
