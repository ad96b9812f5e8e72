#!/bin/bash
# Session 15, device call 7: the settling moved to the end of overlap_step (settle_block), after P is
# converted (a branch at the end of the step). d128 fp16 builds, timing only: base = 54dd7fb, sm0 = c85dca9, sm = the
# working tree, d2 = call 4's step 1 alone (no settling; the bound). Two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16)
( cmake --preset device -B build/sm "${C[@]}" > /tmp/cfg-sm.log 2>&1 && cmake --build build/sm -j4 --target flashcore-bench > /tmp/b-sm.log 2>&1; echo "sm rc=$?" ) &
for d in base sm0 d2; do
  ( cmake --preset device -S .ab/$d -B build/$d "${C[@]}" > /tmp/cfg-$d.log 2>&1 && cmake --build build/$d -j4 --target flashcore-bench > /tmp/b-$d.log 2>&1; echo "$d rc=$?" ) &
done
wait
echo "builds done at $SECONDS s"
declare -A BIN=([base]=build/base [sm0]=build/sm0 [sm]=build/sm [d2]=build/d2)
V=(base sm0 sm d2)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16384" "16384 --causal" "4096" "1024" "1024 --causal"; do
    set -- $cfg
    line="r$r d128 fp16 S$1 ${2:-}:"
    declare -A res=()
    for i in 0 1 2 3; do v=${V[$(( (i + r) % 4 ))]}; res[$v]=$(row $v --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $1 --dtype fp16 ${2:-}); done
    for v in "${V[@]}"; do line="$line $v=${res[$v]}"; done
    echo "$line"
  done
done | tee "$OUT/diag6.txt"
echo "total $SECONDS s"
