#!/bin/bash
# Session 11, device call 4.
# (a) Softmax ladder step 9 (row_pipelined: persistent blocks, TMA bulk loads/stores through a ring
#     of rows): the softmax GPU tests, memcheck and racecheck of them, the softmax bench (all
#     variants) of the tree, and two more tunings of step 9 at 4096x4096 / 8192x32000 (-D macros).
# (b) sm90: d64 rows (whose level moves with the clock the previous work left) against the base,
#     five rounds: base = HEAD 7cf388d (.ab/base), new = HEAD plus the session's ptx/sm90 files
#     (.ab/new: running max in exp2 units, 20 us suspend hint on every mbarrier wait).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
S=(-DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_CUDA_ARCHS=90a)
( cmake -S . -B build/soft -G Ninja "${S[@]}" "${G[@]}" > /tmp/cfg-soft.log 2>&1 &&
  cmake --build build/soft -j4 --target flashcore_gpu_tests flashcore-softmax-bench > /tmp/build-soft.log 2>&1; echo "soft build rc=$?"; grep -m5 -B2 error /tmp/build-soft.log ) &
( cmake -S . -B build/soft128 -G Ninja "${S[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS="-DFLASHCORE_SOFTMAX_PIPE_THREADS=128 -DFLASHCORE_SOFTMAX_PIPE_BLOCKS_PER_SM=4" > /tmp/cfg-s128.log 2>&1 &&
  cmake --build build/soft128 -j2 --target flashcore-softmax-bench > /tmp/build-s128.log 2>&1; echo "soft128 build rc=$?" ) &
( cmake -S . -B build/softs4 -G Ninja "${S[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS="-DFLASHCORE_SOFTMAX_PIPE_STAGES=4" > /tmp/cfg-s4.log 2>&1 &&
  cmake --build build/softs4 -j2 --target flashcore-softmax-bench > /tmp/build-s4.log 2>&1; echo "softs4 build rc=$?" ) &
( cmake --preset device -S .ab/base -B build/ab-base "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j4 --target flashcore-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?" ) &
( cmake --preset device -S .ab/new -B build/ab-new "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-new.log 2>&1 &&
  cmake --build build/ab-new -j4 --target flashcore-bench > /tmp/build-new.log 2>&1; echo "new build rc=$?" ) &
wait
T=build/soft/tests/flashcore_gpu_tests
timeout 200 $T --gtest_filter='*oftmax*' > /tmp/soft-tests.log 2>&1; echo "softmax gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|Failure|error' /tmp/soft-tests.log | head -30
cp /tmp/soft-tests.log "$OUT/softmax-tests.log"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_filter='*RowPipelined*:*row_pipelined*' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ' | cut -c1-300)"
done
timeout 150 build/soft/tools/bench/flashcore-softmax-bench --runs 30 --json "$OUT/softmax-all.json" > "$OUT/softmax-all.txt" 2>&1; echo "bench rc=$?"
for b in soft soft128 softs4 soft soft128 softs4; do
  echo "== $b"
  timeout 60 build/$b/tools/bench/flashcore-softmax-bench --runs 30 --shapes 4096x4096,8192x32000 --dtypes bf16,fp16 --variants row_per_block,row_in_smem,row_pipelined,auto 2>&1 | tail -n +1
done > "$OUT/softmax-tunings.txt" 2>&1
cat "$OUT/softmax-all.txt" | tail -45
grep -E "==|4096x4096|8192x32000|copy" "$OUT/softmax-tunings.txt" | head -60
row() { local bin=build/ab-$1/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3 4 5; do
  for cfg in "2 8192 64 fp16" "16 1024 64 fp16" "2 8192 64 fp16 --causal" "2 8192 64 bf16"; do
    set -- $cfg
    args=(--path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $4 ${5:-})
    if [ $((r % 2)) = 1 ]; then a=$(row base "${args[@]}"); b=$(row new "${args[@]}"); else b=$(row new "${args[@]}"); a=$(row base "${args[@]}"); fi
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=$a new=$b"
  done
done | tee "$OUT/ab-d64.txt"
