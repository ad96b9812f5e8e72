#!/bin/bash
# Session 10, device call 1: (a) a same-call A/B of the three-warpgroup GEMM-turn ring
# (FLASHCORE_SM90_RING3=1: the three consumer warpgroups of d64 and of d128's long shape issue their
# GEMMs in turn, 0 -> 1 -> 2 -> 0, as the two-warpgroup kernels' ping-pong does) against the
# committed kernels (free issue), two binaries of one tree; (b) Nsight Compute profiles of the
# current kernels on the rows whose targets are missed; (c) SASS opcode counts per kernel;
# (d) clock and power samples (nvidia-smi, 20 ms) over the whole call.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 20 > "$OUT/smi.csv" 2>&1 &
SMI=$!
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device "${G[@]}" > "$OUT/cfg-base.log" 2>&1 && cmake --build build/device -j8 --target flashcore-bench > "$OUT/build-base.log" 2>&1; echo "base rc=$?" ) &
( cmake --preset device -B build/ring3 "${G[@]}" -DCMAKE_CUDA_FLAGS=-DFLASHCORE_SM90_RING3=1 > "$OUT/cfg-ring3.log" 2>&1 && cmake --build build/ring3 -j8 --target flashcore-bench > "$OUT/build-ring3.log" 2>&1; echo "ring3 rc=$?" ) &
wait %2 %3
A=build/device/tools/bench/flashcore-bench
B=build/ring3/tools/bench/flashcore-bench
row() { local bin=$1; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
# correctness of the ring variant (each row checks its last (batch, head) against the naive GPU path)
for cfg in "16 1024 64 fp16" "2 8192 64 fp16 --causal" "4 8192 128 fp16" "4 8192 128 bf16 --causal" "2 1000 64 bf16 --causal"; do
  set -- $cfg
  $B --path sm90 --batch $1 --heads 8 --dim $3 --seqlen $2 --dtype $4 ${5:-} 2>&1 | grep -E 'sm90|max|FAIL|error' | head -3
done > "$OUT/ring3-check.txt" 2>&1
for r in 1 2 3; do
  for cfg in "16 1024 64 fp16" "4 4096 64 fp16" "2 8192 64 fp16" "8 2048 64 fp16 --causal" "2 8192 64 fp16 --causal" \
             "4 8192 128 fp16" "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal"; do
    set -- $cfg
    a=$(row $A --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $4 ${5:-})
    b=$(row $B --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $4 ${5:-})
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: free=$a ring3=$b"
  done
done | tee "$OUT/ab-ring3.txt"
# d256 S=8k and d64 S=8k in six separate processes each (the two-level rows)
for r in 1 2 3 4 5 6; do
  echo "r$r d256 S8k $(row $A --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16) d64 S8k $(row $A --path sm90 --batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16) $(date +%T.%N)"
done | tee "$OUT/levels.txt"
# the steady state under sustained load: 2000 back-to-back calls
echo "d256 S8k iters2000 start $(date +%T.%N)" >> "$OUT/levels.txt"
echo "d256 S8k iters2000 $(row $A --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --iters 2000) end $(date +%T.%N)" | tee -a "$OUT/levels.txt"
echo "d128 S16k iters200 start $(date +%T.%N)" >> "$OUT/levels.txt"
echo "d128 S16k iters200 $(row $A --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --iters 200) end $(date +%T.%N)" | tee -a "$OUT/levels.txt"
kill $SMI
# SASS: per kernel, HGMMA / LDL / STL / BAR counts
cuobjdump --dump-sass $A 2>/dev/null | awk '/Function :/ {if (f) print f, h, l, s; f=$3; h=l=s=0} /HGMMA/ {h++} /LDL/ {l++} /STL/ {s++} END {print f, h, l, s}' \
  | grep sm90 > "$OUT/sass-counts.txt"
echo "kernels with HGMMA: $(awk '$2>0' "$OUT/sass-counts.txt" | wc -l), with LDL/STL: $(awk '$3+$4>0' "$OUT/sass-counts.txt" | wc -l)"
# Nsight Compute, one launch each, current kernels
prof() { local name=$1; shift; timeout 150 ncu --clock-control none -k regex:forward_kernel -c 1 --set full -o "$OUT/$name" $A "$@" --iters 1 --warmup 0 --no-check > "$OUT/$name.log" 2>&1
  ncu --import "$OUT/$name.ncu-rep" --page details > "$OUT/$name.txt" 2>&1; }
prof ncu-d128-long-16k --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16
prof ncu-d256-8k --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16
prof ncu-d128-causal-16k --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal
for f in "$OUT"/ncu-*.txt; do
  echo "== $f"; grep -E 'SM Frequency|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Eligible Warps|No Eligible|L2 Cache Throughput|DRAM Throughput|Registers Per|Local Memory' "$f" | head -14
done
