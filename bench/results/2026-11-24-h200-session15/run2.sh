#!/bin/bash
# Session 15, device call 2: is the stale-max softmax worth it at d64 and d256? Call 1 read d64 S=8k
# -0.7/-2 % and d256 S=8k -2.8/-0.6 % (two rounds, both rows known to sit on two clock levels).
# base = HEAD (.ab/base), sm = the working tree; d64 + d256 fp16 only, timing only, four rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-DFLASHCORE_BUILD_TESTS=OFF "-DFLASHCORE_HEAD_DIMS=64;256" -DFLASHCORE_DTYPES=fp16)
( cmake --preset device -S .ab/base -B build/base "${C[@]}" > /tmp/cfg-base.log 2>&1 && cmake --build build/base -j8 --target flashcore-bench > /tmp/b-base.log 2>&1; echo "base rc=$?" ) &
( cmake --preset device -B build/sm "${C[@]}" > /tmp/cfg-sm.log 2>&1 && cmake --build build/sm -j8 --target flashcore-bench > /tmp/b-sm.log 2>&1; echo "sm rc=$?" ) &
wait
echo "builds done at $SECONDS s"
declare -A BIN=([base]=build/base [sm]=build/sm)
V=(base sm)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3 4; do
  for cfg in "64 1 16384" "64 2 8192" "64 4 4096" "64 16 1024" "64 2 8192 --causal" \
             "256 1 16384" "256 2 8192" "256 4 4096" "256 16 1024" "256 2 8192 --causal"; do
    set -- $cfg
    H=$(( 2048 / $1 ))
    args=(--path sm90 --batch $2 --heads $H --dim $1 --seqlen $3 --dtype fp16 ${4:-})
    declare -A res=()
    for i in 0 1; do v=${V[$(( (i + r) % 2 ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$1 fp16 B$2 S$3 ${4:-}: base=${res[base]} sm=${res[sm]}"
  done
done | tee "$OUT/ab-d64-d256.txt"
echo "total $SECONDS s"
