#!/bin/bash
# Session 10, device call 8 (right after call 7, on the same machine: the Python package installed
# there is reused): the comparison report through the Python op, flashcore vs SDPA's FlashAttention-2
# and cuDNN backends and FlexAttention in one process, two rotating rounds, on the families whose
# targets issue 4 names (d128 fp16/bf16 dense and causal, d64, d256), with the default warm-up.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
FAM="--family d128-fp16 --family d128-fp16-causal --family d128-bf16 --family d128-bf16-causal --family d64-fp16 --family d256-fp16"
OUT=/tmp/cmp FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} COMPARE_LIMIT=520 \
  COMPARE_ARGS="--rounds 2 --impls flashcore-sm90,sdpa-flash,sdpa-cudnn,flex $FAM" \
  bash scripts/device-check.sh --python-only --no-pytest --reuse-install --compare standard > /tmp/cmp-summary.txt 2>&1
cp /tmp/cmp/report/report.md /tmp/cmp/report/report.json "$OUT/" 2>/dev/null
cp /tmp/cmp/report/tflops.png "$OUT/" 2>/dev/null
cp /tmp/cmp/compare.log "$OUT/" 2>/dev/null
tail -5 /tmp/cmp-summary.txt
grep -E '^\| d(128|64|256)' "$OUT/report.md" | head -60
