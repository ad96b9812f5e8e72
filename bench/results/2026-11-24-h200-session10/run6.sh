#!/bin/bash
# Session 10, device call 6: the warpgroup broadcast A/B (run5.sh) again on d64 alone: call 5 read
# d64 B=2 S=8k at 498-523 with it against 556-566 without, a row that also jumps between two levels
# within one binary. Six rounds of d64 rows (dense S=2k-16k, causal S=8k), order alternating; SASS
# opcode counts of the d64 dense kernel of each build.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device "${G[@]}" > /tmp/cfg-new.log 2>&1 && cmake --build build/device -j8 --target flashcore-bench > /tmp/build-new.log 2>&1; echo "new build rc=$?" ) &
( cmake --preset device -B build/nobc "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFLASHCORE_SM90_NO_WG_BROADCAST > /tmp/cfg-nobc.log 2>&1 &&
  cmake --build build/nobc -j8 --target flashcore-bench > /tmp/build-nobc.log 2>&1; echo "nobc build rc=$?" ) &
wait
NEW=build/device/tools/bench/flashcore-bench
OLD=build/nobc/tools/bench/flashcore-bench
for b in $OLD $NEW; do
  echo "== $b"
  cuobjdump --dump-sass $b 2>/dev/null | awk '/Function :/ {f=$3} f ~ /KernelTraitsILi64ELi64E6__halfLNS0_8ScheduleE1ELi128ELb0ELi1ELb1ELNS0_9TileShapeE0E/ {print}' \
    | grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[T0-9]+\s+)?[A-Z0-9]+' | awk '{print $NF}' | sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
  echo
done > "$OUT/sass-d64-dense.txt"
cat "$OUT/sass-d64-dense.txt"
row() { local bin=$1; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3 4 5 6; do
  for cfg in "8 2048 64 fp16" "4 4096 64 fp16" "2 8192 64 fp16" "1 16384 64 fp16" "2 8192 64 fp16 --causal"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    if [ $((r % 2)) = 1 ]; then a=$(row $OLD "${args[@]}"); b=$(row $NEW "${args[@]}"); else b=$(row $NEW "${args[@]}"); a=$(row $OLD "${args[@]}"); fi
    echo "r$r d$3 $4 B$1 H$H S$2 ${5:-}: nobc=$a bcast=$b"
  done
done | tee "$OUT/ab-broadcast-d64.txt"
