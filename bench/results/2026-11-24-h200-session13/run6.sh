#!/bin/bash
# Session 13, device call 6: verification of the session's final kernels (commit in
# FLASHCORE_COMMIT): every GPU test, memcheck and racecheck, the C++ standard suite and the softmax
# ladder against torch.softmax (scripts/device-check.sh --bench standard --softmax).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard --softmax > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
cp /tmp/verify/summary.txt /tmp/verify/bench.md /tmp/verify/softmax.md "$OUT/" 2>/dev/null
tail -40 /tmp/verify/summary.txt
echo "total $SECONDS s"
