#!/bin/bash
# Session 11, device call 6: the same families as call 5's report at the steady state of the power cap:
# compare.py --warmup-seconds 1 (each measurement follows one second of the same call), flashcore
# against cuDNN (the best peer on these rows), two rotating rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
FAM="--family d128-fp16 --family d128-fp16-causal --family d128-bf16 --family d128-bf16-causal --family d64-fp16 --family d256-fp16"
OUT=/tmp/cmp FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} COMPARE_LIMIT=280 \
  COMPARE_ARGS="--rounds 2 --warmup-seconds 1 --impls flashcore-sm90,sdpa-cudnn $FAM" \
  bash scripts/device-check.sh --python-only --no-pytest --reuse-install --compare standard > /tmp/cmp-summary.txt 2>&1
cp /tmp/cmp/report/report.md /tmp/cmp/report/report.json "$OUT/" 2>/dev/null; cp /tmp/cmp/compare.log "$OUT/" 2>/dev/null
tail -4 /tmp/cmp-summary.txt
grep -E '^\| d(128|64|256)' "$OUT/report.md" | head -30
