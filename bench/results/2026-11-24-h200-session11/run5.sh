#!/bin/bash
# Session 11, device call 5: verification of the session's kernel commit and the comparison report
# in one call (the report reuses the verification's Python install).
#  1. scripts/device-check.sh --bench standard --python: build, every GPU test, memcheck and
#     racecheck, the C++ standard suite, pytest;
#  2. the comparison report, two rotating rounds, flashcore vs SDPA FA2 / cuDNN / flex (default warm-up).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard --python > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
cp /tmp/verify/summary.txt "$OUT/"
ls /tmp/verify/*.md 2>/dev/null | head -3 | xargs -r -I{} cp {} "$OUT/"
tail -30 /tmp/verify/summary.txt
FAM="--family d128-fp16 --family d128-fp16-causal --family d128-bf16 --family d128-bf16-causal --family d64-fp16 --family d256-fp16"
OUT=/tmp/cmp FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} COMPARE_LIMIT=240 \
  COMPARE_ARGS="--rounds 2 --impls flashcore-sm90,sdpa-flash,sdpa-cudnn,flex $FAM" \
  bash scripts/device-check.sh --python-only --no-pytest --reuse-install --compare standard > /tmp/cmp-summary.txt 2>&1
mkdir -p /tmp/report-out
cp /tmp/cmp/report/report.md /tmp/cmp/report/report.json /tmp/cmp/report/tflops.png /tmp/cmp/compare.log /tmp/report-out/ 2>/dev/null
tar czf "$OUT/report.tgz" -C /tmp/report-out .
tail -5 /tmp/cmp-summary.txt
grep -E '^\| d(128|64|256)' /tmp/report-out/report.md | head -60
