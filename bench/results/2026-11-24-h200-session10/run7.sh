#!/bin/bash
# Session 10, device call 7: the verification of the session's kernels (scripts/device-check.sh:
# build, every CTest test, memcheck + racecheck over the sanitizer subset, the C++ standard suite,
# the Python package and pytest). Everything device-check writes is packed into verify.tgz (at most
# 8 files come back), the summary table and the suite's Markdown beside it.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/verify
OUT=/tmp/verify FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown} bash scripts/device-check.sh --bench standard --python > /tmp/verify/summary.txt 2>&1
tar czf "$OUT/verify.tgz" -C /tmp/verify .
cp /tmp/verify/summary.txt "$OUT/"
ls /tmp/verify/*.md 2>/dev/null | head -3 | xargs -r -I{} cp {} "$OUT/"
tail -30 /tmp/verify/summary.txt
