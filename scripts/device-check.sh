#!/usr/bin/env bash
# One call on the GPU machine: build (-j16), run every test (gpu label included), run
# compute-sanitizer memcheck and racecheck over the GPU tests, run the benchmark, print a short
# summary table last. Full logs go to $OUT (or ./device-out).
#
#   scripts/device-check.sh [--bench standard|quick|none] [--sanitize-filter GTEST_FILTER]
#                           [--python | --python-only]
#                           [--compare quick|standard|backward|decode|headdims|wide|backward-headdims]
#                           [--softmax]
#                           [--no-pytest] [--reuse-install]
#
# --python installs the Python package (pip, pruned to 90a), runs its pytest suite, and with
# --compare runs tools/bench/compare.py (flashcore paths vs SDPA backends and FlexAttention);
# --compare backward runs its backward suite (sm90 backward, default and deterministic, and the sm80
# backward, vs SDPA's FlashAttention-2 and cuDNN backward; backward and forward + backward);
# --compare decode runs tools/bench/decode_compare.py (the decode suite: flashcore's KV-cache call,
# dense and paged, vs SDPA's cuDNN backend, in CUDA graphs);
# --compare headdims runs its head-dim suite (d40/80/160 and the padding proxies d64/96/192 vs SDPA's
# FlashAttention-2, cuDNN and memory-efficient backends); --compare wide the sm90 wide forward (head
# dims 384..1024 vs SDPA's memory-efficient backend); --compare backward-headdims the d192 / d256
# backward (the sm90 and sm80 backwards vs SDPA's FlashAttention-2, cuDNN and memory-efficient backwards).
#
# --no-pytest skips the Python tests; --reuse-install skips `pip install` when flashcore already
# imports (a warm machine from the previous call of the same commit), to fit the comparison in one call.
# --softmax also runs the softmax ladder benchmark and tools/bench/softmax_torch.py (torch.softmax on
# the same shapes, one Markdown table: softmax.md).
#
# Set FLASHCORE_COMMIT to the commit being checked (the device copy has no .git).
# The GPU machine has no GoogleTest: copy its sources into the ignored .deps/ first and carry them
# with the call (device tool: carry [".deps/googletest"]):  cp -r /usr/src/googletest .deps/googletest
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BENCH=standard
# Sanitizers run on a representative subset of each suite (they slow kernels 10-100x): every
# naive-reference and device-validation test, the sm80 backward's sanitizer case (every feature at d64,
# d128 and d256, fp16, both dQ modes), the sm90 wide kernels' own tiles (every feature), the sm80 sanitizer case (every feature, small
# shapes, fp32 and Dqk != Dv included; fp32 d192/d256 as two half-V launches; the wide tiles 512/256 and 1024/256 over every Dv part), the sm90 varlen sanitizer cases, sm90 sweep cases with tails (Sq 65/Sk 300 causal, Sq 7/Sk 1, all head dims and dtypes),
# the mask-free main loop of calls whose rows see every key over eight KV blocks (Sq = Sk = 1023, non-causal),
# the long and short tile shapes (cases forced through flashcore::ForwardOverrides), NaN rows on both fused paths,
# and the softmax ladder's correctness sweep.
SAN_FILTER='Sm90Wide.TilesMatch*:NaiveGpu.*:NaiveGpuBackward.*:Sm80BackwardSanitizer.*:Sm90BackwardSanitizer.*:NanRows.*:ValidationDevice.*:Sm80Sanitizer.*:Sm80Fp32SplitV.*:Sm80Supports.*:Sm90Supports.*:Sm90Sanitizer.*:All/Sm90Sweep.*Sq65_*:All/Sm90Sweep.*Sq7_*:All/Sm90Sweep.*Sq1023_Sk1023_x1:All/Sm90Sweep.*_long_on:All/Sm90Sweep.*_short_o*:Softmax/SoftmaxVariantTest.MatchesFp64*:SoftmaxGpu.*-*Large*:SoftmaxGpu.OneVeryLong*'
PYTHON=0
CPP=1
COMPARE=none
SOFTMAX=0
PYTEST=1
REUSE_INSTALL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) BENCH=$2; shift 2 ;;
    --sanitize-filter) SAN_FILTER=$2; shift 2 ;;
    --python) PYTHON=1; shift ;;
    --python-only) PYTHON=1; CPP=0; shift ;;
    --compare) COMPARE=$2; shift 2 ;;
    --softmax) SOFTMAX=1; shift ;;
    --no-pytest) PYTEST=0; shift ;;
    --reuse-install) REUSE_INSTALL=1; shift ;;
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

if [ $CPP = 1 ]; then
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

# ---- SASS: no memory descriptor in an odd uniform register ---------------------------------------
# ptxas (CUDA 13.0) once gave an LDGSTS with an L2 cache-policy descriptor `desc[UR1]`, which
# faults as an illegal instruction (src/sm80/decode/kernel.cuh, load_kv_block); cheap to rule out.
if cuobjdump -sass "$BUILD/tests/flashcore_gpu_tests" > "$OUT/sass.txt" 2>/dev/null; then
  odd_desc=$(grep -cE 'desc\[UR[0-9]*[13579]\]' "$OUT/sass.txt" || true)
else
  odd_desc="cuobjdump failed"
fi
rm -f "$OUT/sass.txt"
add "sass odd desc registers" "$odd_desc"

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
    limit=180; [ $tool = racecheck ] && limit=300  # racecheck runs the same tests 3-5x slower
    timeout $limit compute-sanitizer --tool $tool --error-exitcode 99 "$GPU_TESTS" --gtest_filter="$SAN_FILTER" \
      > "$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)
    add "compute-sanitizer $tool" "rc=$rc ${errs:-no summary} ($(( $(date +%s) - t2 )) s)"
  done
fi

# ---- benchmark ---------------------------------------------------------------------------------
if [ "$BENCH" != none ]; then
  t3=$(date +%s)
  timeout 200 "$BUILD/tools/bench/flashcore-bench" --suite "$BENCH" --json "$OUT/bench.json" --md "$OUT/bench.md" \
    --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
  add benchmark "rc=$? ($(( $(date +%s) - t3 )) s)"
fi

# ---- softmax ladder vs torch.softmax ------------------------------------------------------------
if [ $SOFTMAX = 1 ]; then
  t7=$(date +%s)
  timeout 120 "$BUILD/tools/bench/flashcore-softmax-bench" --runs 30 --dtypes fp32,bf16,fp16 --json "$OUT/softmax.json" \
    > "$OUT/softmax-bench.log" 2>&1 &&
  timeout 120 python3 tools/bench/softmax_torch.py --runs 30 --dtypes fp32,bf16,fp16 --ours "$OUT/softmax.json" \
    > "$OUT/softmax-torch.log" 2>&1
  add softmax "rc=$? ($(( $(date +%s) - t7 )) s)"
  sed -n '/^| shape/,$p' "$OUT/softmax-torch.log" > "$OUT/softmax.md"
fi

fi  # CPP

# ---- Python package, its tests, the comparison report --------------------------------------------
if [ $PYTHON = 1 ]; then
  t4=$(date +%s)
  if [ $REUSE_INSTALL = 1 ] && (cd /tmp && python3 -c "import flashcore" 2>/dev/null); then
    add "python install" "reused (already importable)"
    installed=1
  elif CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 240 python3 -m pip install -q --no-build-isolation --no-deps . \
       --config-settings=cmake.define.FLASHCORE_CUDA_ARCHS=90a > "$OUT/pip.log" 2>&1; then
    # (Every head dim is built: a pruned package makes the comparison report n/a on d256, 192/128.)
    add "python install" "ok ($(( $(date +%s) - t4 )) s)"
    installed=1
  else
    add "python install" "FAILED (see pip.log)"
    installed=0
  fi
  if [ $installed = 1 ]; then
    if [ $PYTEST = 1 ]; then
      t5=$(date +%s)
      (cd /tmp && timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider "$OLDPWD/tests/python") > "$OUT/pytest.log" 2>&1
      add pytest "$(grep -E '[0-9]+ (passed|failed)' "$OUT/pytest.log" | tail -1) ($(( $(date +%s) - t5 )) s)"
    fi
    if [ "$COMPARE" != none ]; then
      t6=$(date +%s)
      # report.json is rewritten after every row, so a run cut by the time limit keeps its rows.
      flag=""; limit=450; [ "$COMPARE" = quick ] && { flag="--quick"; limit=240; }
      script=tools/bench/compare.py
      [ "$COMPARE" = decode ] && { script=tools/bench/decode_compare.py; flag="${DECODE_ARGS:-}"; }
      [ "$COMPARE" = backward ] && flag="--backward-suite --pass bwd,fwd+bwd --impls flashcore-sm90,flashcore-sm90-det,flashcore-sm80,sdpa-flash,sdpa-cudnn"
      [ "$COMPARE" = headdims ] && flag="--headdim-suite --impls flashcore-sm90,sdpa-flash,sdpa-cudnn,sdpa-efficient"
      [ "$COMPARE" = wide ] && flag="--wide-suite --impls flashcore-sm90,sdpa-efficient"
      [ "$COMPARE" = backward-headdims ] && flag="--backward-headdim-suite --pass bwd --impls flashcore-sm90,flashcore-sm80,sdpa-flash,sdpa-cudnn,sdpa-efficient"
      mkdir -p "$OUT/report"
      [ -n "${COMPARE_LIMIT:-}" ] && limit=$COMPARE_LIMIT
      # COMPARE_ARGS: extra compare.py arguments, e.g. "--family d128-fp16 --impls ...".
      timeout $limit python3 $script $flag ${COMPARE_ARGS:-} --out "$OUT/report" > "$OUT/compare.log" 2>&1
      add compare "rc=$? ($(( $(date +%s) - t6 )) s)"
      if [ "$COMPARE" != decode ] && [ ! -f "$OUT/report/report.md" ] && [ -f "$OUT/report/report.json" ]; then  # cut short: render what ran
        python3 - "$OUT/report" <<'PY' >> "$OUT/compare.log" 2>&1
import json, sys
sys.path.insert(0, "tools/bench")
import compare
out = sys.argv[1]
report = json.load(open(out + "/report.json"))
impls = [i for i in compare.ALL_IMPLS if any(r["impl"] == i for r in report["rows"])]
compare.write_markdown(report, out + "/report.md", impls)
compare.write_plots(report, out, impls)
PY
      fi
    fi
  fi
fi

{
  echo "==== flashcore device check: $DEVICE, commit $FLASHCORE_COMMIT, $(date -u +%FT%TZ) ===="
  [ -f "$OUT/failed-tests.txt" ] && { echo "failed tests:"; cat "$OUT/failed-tests.txt"; }
  [ -f "$OUT/bench.log" ] && sed -n '/^flashcore-bench on/,$p' "$OUT/bench.log"
  [ -f "$OUT/report/report.md" ] && head -40 "$OUT/report/report.md"
  [ -s "$OUT/softmax.md" ] && cat "$OUT/softmax.md"
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
# The device tool returns at most 8 files: keep the summary and the reports, bundle the logs.
( cd "$OUT" && tar czf logs.tar.gz --remove-files ./*.log bench.csv device.txt failed-tests.txt softmax.json 2>/dev/null ; true )
