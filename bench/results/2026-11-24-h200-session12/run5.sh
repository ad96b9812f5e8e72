#!/bin/bash
# Session 12, device call 5: (a) the softmax experiment binary (scripts/softmax-exp.sh): the
# library's step 6 at 2af473c (one barrier per reduction, redux max) against step6_old and the
# experiment's variants, three rounds; (b) verification of 2af473c (sm90 release change aa700de +
# softmax step 6): every GPU test, memcheck and racecheck, the C++ standard suite
# (scripts/device-check.sh --bench standard).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
bash scripts/softmax-exp.sh > /tmp/softmax-exp.log 2>&1; echo "softmax-exp rc=$?"
cp "$OUT/softmax-exp.txt" /tmp/verify/ 2>/dev/null
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
cp /tmp/verify/summary.txt "$OUT/"
grep -A12 "^summary" /tmp/softmax-exp.log
tail -14 /tmp/verify/summary.txt
grep -E "sm90 .* (8192|16384) " /tmp/verify/summary.txt | head -12
echo "total $SECONDS s"
