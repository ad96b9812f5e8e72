#!/bin/bash
# Session 14, device call 6: what the softmax costs at the power cap. The d128 fp16 kernels built
# five ways (softmax-ablation.patch, FC_ABLATE bits: 1 no row sums, 2 no block max (first score of
# each row instead), 4 no exponentials (the exponent itself); 7 all three), timed without checking
# (results are wrong by design), two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
V=(0 1 2 4 7)
for a in "${V[@]}"; do
  ( cmake --preset device -B build/abl$a -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 \
      -DCMAKE_CUDA_FLAGS=-DFC_ABLATE=$a > /tmp/cfg$a.log 2>&1 &&
    cmake --build build/abl$a -j4 --target flashcore-bench > /tmp/build$a.log 2>&1; echo "abl$a build rc=$?"; grep -m3 error /tmp/build$a.log ) &
done
wait
echo "builds done at $SECONDS s"
row() { local bin=build/abl$1/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16384" "16384 --causal" "4096"; do
    set -- $cfg
    line="r$r d128 fp16 S$1 ${2:-}:"
    declare -A res=()
    for i in 0 1 2 3 4; do a=${V[$(( (i + r) % 5 ))]}; res[$a]=$(row $a --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $1 --dtype fp16 ${2:-}); done
    for a in "${V[@]}"; do line="$line abl$a=${res[$a]}"; done
    echo "$line"
  done
done | tee "$OUT/ablation.txt"
echo "total $SECONDS s"
