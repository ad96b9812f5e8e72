#!/bin/bash
# Session 10, device call 3: where the instructions of d128's long dense kernel go. Nsight Compute
# source counters (per SASS instruction: executions, warp-stall samples) of one launch
# (B=1 H=32 S=16k fp16: the same kernel as the suite's B=4 row), aggregated per opcode, and the hot
# loop's SASS in address order with each instruction's count and samples.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cmake --preset device -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > /tmp/cfg.log 2>&1 &&
  cmake --build build/device -j16 --target flashcore-bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
A=build/device/tools/bench/flashcore-bench
src() { local name=$1; shift
  timeout 200 ncu --clock-control none -k regex:forward_kernel -c 1 --section SourceCounters --section WarpStateStats \
    --section InstructionStats -o /tmp/$name $A "$@" --iters 1 --warmup 0 --no-check > /tmp/$name.log 2>&1 || tail -5 /tmp/$name.log
  ncu --import /tmp/$name.ncu-rep --page source --csv --print-source sass > /tmp/$name.csv 2>/tmp/$name.err || head -5 /tmp/$name.err
  gzip -c /tmp/$name.csv > "$OUT/$name.csv.gz"
  python3 tools/bench/sass_profile.py /tmp/$name.csv > "$OUT/$name.txt" 2>&1
  head -60 "$OUT/$name.txt"; }
src d128-long-b1 --path sm90 --batch 1 --heads 32 --dim 128 --seqlen 16384 --dtype fp16
src d128-b4-s4k --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16
