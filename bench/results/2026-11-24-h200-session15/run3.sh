#!/bin/bash
# Session 15, device call 3: verification of the session's final kernels (FLASHCORE_COMMIT): every
# GPU test, memcheck and racecheck, the C++ standard suite and the softmax ladder
# (scripts/device-check.sh --bench standard --softmax); then, on the same machine, the comparison
# report (flashcore sm90 against SDPA's FA2 and cuDNN backends and FlexAttention, two rotating
# rounds; tools/bench/compare.py through the Python op).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard --softmax > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
tail -9 /tmp/verify/summary.txt
grep -E "^d128-(fp16|bf16)(-causal)? .* 16384 |^d64-fp16 .* 8192 |^d256-fp16 .* 8192 " /tmp/verify/summary.txt | head -8
grep -E "^\| 4096x4096" /tmp/verify/summary.txt
FAM="--family d128-fp16 --family d128-fp16-causal --family d128-bf16 --family d128-bf16-causal --family d64-fp16 --family d256-fp16"
OUT=/tmp/cmp FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} COMPARE_LIMIT=300 \
  COMPARE_ARGS="--rounds 2 --impls flashcore-sm90,sdpa-flash,sdpa-cudnn,flex $FAM" \
  bash scripts/device-check.sh --python-only --no-pytest --compare standard > /tmp/cmp-summary.txt 2>&1
mkdir -p /tmp/report-out
cp /tmp/cmp/report/report.md /tmp/cmp/report/report.json /tmp/cmp/report/tflops.png /tmp/cmp/compare.log /tmp/report-out/ 2>/dev/null
tar czf "$OUT/report.tgz" -C /tmp/report-out .
tail -3 /tmp/cmp-summary.txt
grep -E '^\| d(128|64|256)-[a-z0-9-]* B=[0-9]+ S=(1024|8192|16384) ' /tmp/report-out/report.md | head -24
echo "total $SECONDS s"
