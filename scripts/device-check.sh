#!/usr/bin/env bash
# One call on the GPU machine: build (-j16), run every test (gpu label included), run
# compute-sanitizer memcheck and racecheck over the GPU tests, run the benchmark, print a short
# summary table last. Full logs go to $OUT (or ./device-out).
#
#   scripts/device-check.sh [--bench standard|quick|none] [--sanitize-filter GTEST_FILTER]
#
# Set FLASHCORE_COMMIT to the commit being checked (the device copy has no .git).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BENCH=standard
SAN_FILTER='-*Large*'
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) BENCH=$2; shift 2 ;;
    --sanitize-filter) SAN_FILTER=$2; shift 2 ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
export FLASHCORE_COMMIT=${FLASHCORE_COMMIT:-unknown}
BUILD=build/device
summary=()
add() { summary+=("$(printf '%-28s %s' "$1" "$2")"); }

t0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -2; } \
  > "$OUT/device.txt" 2>&1
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)

# ---- ceilings: copy bandwidth and matmul rate, measured in this run ------------------------------
python3 tools/bench/ceilings.py --out "$OUT/ceilings.json" > "$OUT/ceilings.log" 2>&1 &&
  add ceilings "$(grep -E 'copy|bfloat16' "$OUT/ceilings.log" | sed 's/ceiling //' | tr '\n' ' ')"

# ---- build -------------------------------------------------------------------------------------
gtest_args=()
if [ -d .deps/googletest ]; then gtest_args+=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest); fi
if cmake --preset device "${gtest_args[@]}" > "$OUT/configure.log" 2>&1 &&
   cmake --build "$BUILD" -j16 > "$OUT/build.log" 2>&1; then
  add build "ok ($(( $(date +%s) - t0 )) s)"
else
  add build "FAILED (see build.log)"
  tail -40 "$OUT/build.log" "$OUT/configure.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

# ---- tests -------------------------------------------------------------------------------------
t1=$(date +%s)
ctest --test-dir "$BUILD" --output-on-failure -j4 > "$OUT/ctest.log" 2>&1
ctest_rc=$?
add tests "$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1) ($(( $(date +%s) - t1 )) s)"
add "tests skipped" "$(grep -c 'Skipped' "$OUT/ctest.log" || true)"
[ $ctest_rc -ne 0 ] && grep -E '^\s*[0-9]+ - ' "$OUT/ctest.log" | head -20 > "$OUT/failed-tests.txt"

# ---- sanitizers --------------------------------------------------------------------------------
GPU_TESTS=$BUILD/tests/flashcore_gpu_tests
if [ -x "$GPU_TESTS" ]; then
  for tool in memcheck racecheck; do
    t2=$(date +%s)
    compute-sanitizer --tool $tool --error-exitcode 99 "$GPU_TESTS" --gtest_filter="$SAN_FILTER" \
      > "$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)
    add "compute-sanitizer $tool" "rc=$rc ${errs:-no summary} ($(( $(date +%s) - t2 )) s)"
  done
fi

# ---- benchmark ---------------------------------------------------------------------------------
if [ "$BENCH" != none ]; then
  t3=$(date +%s)
  "$BUILD/tools/bench/flashcore-bench" --suite "$BENCH" --json "$OUT/bench.json" --md "$OUT/bench.md" \
    --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
  add benchmark "rc=$? ($(( $(date +%s) - t3 )) s)"
fi

{
  echo "==== flashcore device check: $DEVICE, commit $FLASHCORE_COMMIT, $(date -u +%FT%TZ) ===="
  [ -f "$OUT/failed-tests.txt" ] && { echo "failed tests:"; cat "$OUT/failed-tests.txt"; }
  [ -f "$OUT/bench.log" ] && sed -n '/^flashcore-bench on/,$p' "$OUT/bench.log"
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
# The device tool returns at most 8 files: keep the summary and the reports, bundle the logs.
( cd "$OUT" && tar czf logs.tar.gz --remove-files ./*.log device.txt failed-tests.txt 2>/dev/null ; true )
