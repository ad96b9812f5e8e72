#!/bin/bash
# Session 14, device call 1: where the d128 long kernels spend instructions at HEAD (248b6db).
# Nsight Compute source counters of one launch each: the dense long kernel (two-CTA cluster) and the
# long shape's masked kernel, B=1 H=32 S=16k fp16; SASS of every d128 fp16 kernel.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cmake --preset device -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest -DFLASHCORE_BUILD_TESTS=OFF \
  -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 > /tmp/cfg.log 2>&1 &&
  cmake --build build/device -j16 --target flashcore-bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build done at $SECONDS s"
A=build/device/tools/bench/flashcore-bench
cuobjdump --dump-sass $A 2>/dev/null | awk '/Function :/ {f=$3} f ~ /128ELi128E6__half/ {print}' | gzip > "$OUT/sass-d128-fp16.txt.gz"
src() { local name=$1; shift
  timeout 200 ncu --clock-control none -k regex:forward_kernel -c 1 --section SourceCounters --section WarpStateStats \
    --section InstructionStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SpeedOfLight -o /tmp/$name $A "$@" --iters 1 --warmup 0 --no-check > /tmp/$name.log 2>&1 || tail -5 /tmp/$name.log
  ncu --import /tmp/$name.ncu-rep --page details > /tmp/$name-details.txt 2>&1
  ncu --import /tmp/$name.ncu-rep --page source --csv --print-source sass > /tmp/$name.csv 2>/tmp/$name.err || head -5 /tmp/$name.err
  python3 tools/bench/sass_profile.py /tmp/$name.csv 40 > /tmp/$name.txt 2>&1
  { cat /tmp/$name-details.txt; echo; cat /tmp/$name.txt; } | gzip > "$OUT/$name.txt.gz"
  gzip -c /tmp/$name.csv > "$OUT/$name.csv.gz"
  grep -E "Duration|SM Frequency|Issue Slots Busy|Eligible Warps|No Eligible|Warp Cycles Per Issued" /tmp/$name-details.txt | head -12
  sed -n 2,30p /tmp/$name.txt; }
src dense-b1 --path sm90 --batch 1 --heads 32 --dim 128 --seqlen 16384 --dtype fp16
src causal-b1 --path sm90 --batch 1 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal
row() { $A "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "16384 fp16" "16384 fp16 --causal"; do
    set -- $cfg
    echo "r$r d128 $2 S$1 ${3:-}: $(row --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $1 --dtype $2 ${3:-})"
  done
done | tee "$OUT/baseline.txt"
echo "total $SECONDS s"
