#!/bin/bash
# Session 14, device call 8: where the running-max fast path's gain went (running-max-fast-path-diag.patch).
# d128 fp16 builds: base = HEAD (.ab/base); diag1 = fast path on every fully visible block with no
# vote and no recompute (results exact only while no exponential exceeds the limit, true for these
# random inputs); diag2 = the warpgroup vote (bar.red.or) kept, recompute dropped; full = the
# patch as tested in call 7. Timing only (--no-check), two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16)
( cmake --preset device -S .ab/base -B build/base "${C[@]}" > /tmp/cfg-base.log 2>&1 && cmake --build build/base -j4 --target flashcore-bench > /tmp/b-base.log 2>&1; echo "base rc=$?" ) &
for d in 0 1 2; do
  ( cmake --preset device -B build/diag$d "${C[@]}" -DCMAKE_CUDA_FLAGS=-DFC_DIAG=$d > /tmp/cfg$d.log 2>&1 && cmake --build build/diag$d -j4 --target flashcore-bench > /tmp/b$d.log 2>&1; echo "diag$d rc=$?" ) &
done
wait
echo "builds done at $SECONDS s"
declare -A BIN=([base]=build/base [full]=build/diag0 [diag1]=build/diag1 [diag2]=build/diag2)
V=(base full diag1 diag2)
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
