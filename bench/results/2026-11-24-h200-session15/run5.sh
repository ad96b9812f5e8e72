#!/bin/bash
# Session 15, device call 5: call 4 put the step-2 code after the wait for P V at -2 % (d1 -> d2).
# d128 fp16 builds, timing only (--no-check): base = 54dd7fb (exact update), sm0 = c85dca9, sm = the
# working tree (step 2 before the wait for P V, only step 3 after it), d2 = call 4's step 1 alone
# (no settling; the bound), d3 = sm without step 2 (every failed block recomputed; exact).
# Two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16)
( cmake --preset device -B build/sm "${C[@]}" > /tmp/cfg-sm.log 2>&1 && cmake --build build/sm -j3 --target flashcore-bench > /tmp/b-sm.log 2>&1; echo "sm rc=$?" ) &
for d in base sm0 d2 d3; do
  ( cmake --preset device -S .ab/$d -B build/$d "${C[@]}" > /tmp/cfg-$d.log 2>&1 && cmake --build build/$d -j3 --target flashcore-bench > /tmp/b-$d.log 2>&1; echo "$d rc=$?" ) &
done
wait
echo "builds done at $SECONDS s"
declare -A BIN=([base]=build/base [sm0]=build/sm0 [sm]=build/sm [d2]=build/d2 [d3]=build/d3)
V=(base sm0 sm d2 d3)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16384" "16384 --causal" "4096" "1024" "1024 --causal"; do
    set -- $cfg
    line="r$r d128 fp16 S$1 ${2:-}:"
    declare -A res=()
    for i in 0 1 2 3 4; do v=${V[$(( (i + r) % 5 ))]}; res[$v]=$(row $v --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $1 --dtype fp16 ${2:-}); done
    for v in "${V[@]}"; do line="$line $v=${res[$v]}"; done
    echo "$line"
  done
done | tee "$OUT/diag5.txt"
echo "total $SECONDS s"
