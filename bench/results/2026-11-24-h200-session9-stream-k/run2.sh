#!/bin/bash
# Session 9, device call 2: the verification (scripts/device-check.sh: build, every CTest test,
# sanitizers, the C++ standard suite, the Python package and pytest) at the commit under test, then
# A/B 2 of the stream-K tail on the head dims where it is on by default (same binary, three rounds,
# FLASHCORE_SM90_STREAM_K=off against the launcher's rule).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT/verify"
OUT=$OUT/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard --python \
  > "$OUT/verify.log" 2>&1
tail -25 "$OUT/verify.log"
BENCH=build/device/tools/bench/flashcore-bench
row() { $BENCH "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "16 1024 64 fp16" "8 2048 64 fp16" "4 4096 64 fp16" "2 8192 64 fp16" "1 16384 64 fp16" \
             "16 1024 128 fp16" "8 2048 128 fp16" "4 4096 128 fp16" "2 8192 128 fp16" "4 16384 128 fp16" \
             "16 1024 128 bf16" "8 2048 128 bf16" "4 4096 128 bf16" "2 8192 128 bf16" "4 16384 128 bf16"; do
    set -- $cfg
    a=$(FLASHCORE_SM90_STREAM_K=off row --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $4)
    b=$(row --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $4)
    echo "r$r d$3 $4 B$1 S$2: off=$a on=$b"
  done
done | tee "$OUT/ab2.txt"
