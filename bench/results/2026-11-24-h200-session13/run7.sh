#!/bin/bash
# Session 13, device call 7: the comparison report at the session's final kernels (FLASHCORE_COMMIT) (flashcore sm90 against SDPA's FA2 and
# cuDNN backends and FlexAttention, two rotating rounds, default warm-up): pip install of the
# Python package, then tools/bench/compare.py on the d128/d64/d256 families. (The C++ verification
# of the same kernels is call 6.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
FAM="--family d128-fp16 --family d128-fp16-causal --family d128-bf16 --family d128-bf16-causal --family d64-fp16 --family d256-fp16"
OUT=/tmp/cmp FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} COMPARE_LIMIT=300 \
  COMPARE_ARGS="--rounds 2 --impls flashcore-sm90,sdpa-flash,sdpa-cudnn,flex $FAM" \
  bash scripts/device-check.sh --python-only --no-pytest --compare standard > /tmp/cmp-summary.txt 2>&1
mkdir -p /tmp/report-out
cp /tmp/cmp/report/report.md /tmp/cmp/report/report.json /tmp/cmp/report/tflops.png /tmp/cmp/compare.log /tmp/report-out/ 2>/dev/null
tar czf "$OUT/report.tgz" -C /tmp/report-out .
tail -5 /tmp/cmp-summary.txt
grep -E '^\| d(128|64|256)' /tmp/report-out/report.md | head -60
echo "total $SECONDS s"
