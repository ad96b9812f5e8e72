#!/bin/bash
# Session 11, device call 7: the review commit 3442263 (sm90 finalize: only a zero sum is an empty
# row; block max from each row's first two scores): every GPU test, memcheck and racecheck, the C++
# standard suite (scripts/device-check.sh --bench standard, no Python).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
cp /tmp/verify/summary.txt "$OUT/"
tail -14 /tmp/verify/summary.txt
grep -E "sm90 .* (8192|16384) " /tmp/verify/summary.txt | head -12
