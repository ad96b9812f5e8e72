#!/bin/bash
# Session 15, device call 4: where the rest of session 14's diagnostic gain (+5-7 %) went. d128 fp16
# builds, timing only (--no-check): base = 54dd7fb (exact update), sm = c85dca9 (stale max), d1 = sm with
# K released right after S retires and no step 3 (exact only while no score jumps past 64 log2
# units: true for these random inputs), d2 = d1 without any settling (step 1 alone, as session 14's
# diagnostic but with the per-warp vote). Two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16)
( cmake --preset device -B build/sm "${C[@]}" > /tmp/cfg-sm.log 2>&1 && cmake --build build/sm -j4 --target flashcore-bench > /tmp/b-sm.log 2>&1; echo "sm rc=$?" ) &
for d in base d1 d2; do
  ( cmake --preset device -S .ab/$d -B build/$d "${C[@]}" > /tmp/cfg-$d.log 2>&1 && cmake --build build/$d -j4 --target flashcore-bench > /tmp/b-$d.log 2>&1; echo "$d rc=$?" ) &
done
wait
echo "builds done at $SECONDS s"
declare -A BIN=([base]=build/base [sm]=build/sm [d1]=build/d1 [d2]=build/d2)
V=(base sm d1 d2)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16384" "16384 --causal" "4096" "1024"; do
    set -- $cfg
    line="r$r d128 fp16 S$1 ${2:-}:"
    declare -A res=()
    for i in 0 1 2 3; do v=${V[$(( (i + r) % 4 ))]}; res[$v]=$(row $v --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $1 --dtype fp16 ${2:-}); done
    for v in "${V[@]}"; do line="$line $v=${res[$v]}"; done
    echo "$line"
  done
done | tee "$OUT/diag.txt"
echo "total $SECONDS s"
