#!/bin/bash
# Session 11, device call 3: the softmax's running max kept in exp2 units (softmax.cuh: one multiply
# per row and block, no per-block "no key yet" test), with and without suspend hints on the
# mbarrier waits. Builds: base = HEAD 7cf388d (git archive in .ab/base); sm = HEAD plus this
# session's ptx/sm90 files (.ab/sm, a snapshot of the tree); smp = the
# snapshot with -DFLASHCORE_AB_PRODUCER_SUSPEND_NS=1000000; sma = the snapshot with
# -DFLASHCORE_AB_ALL_SUSPEND_NS=20000. The snapshot's full build runs the sm90 GPU tests. Same-call A/B,
# rotating order, three rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device -S .ab/sm -B build/ab-sm "${G[@]}" > /tmp/cfg-sm.log 2>&1 && cmake --build build/ab-sm -j7 > /tmp/build-sm.log 2>&1; echo "sm build rc=$?"; grep -m3 error /tmp/build-sm.log ) &
( cmake --preset device -S .ab/base -B build/ab-base "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j3 --target flashcore-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
( cmake --preset device -S .ab/sm -B build/ab-smp "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFLASHCORE_AB_PRODUCER_SUSPEND_NS=1000000 > /tmp/cfg-smp.log 2>&1 &&
  cmake --build build/ab-smp -j3 --target flashcore-bench > /tmp/build-smp.log 2>&1; echo "smp build rc=$?" ) &
( cmake --preset device -S .ab/sm -B build/ab-sma "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFLASHCORE_AB_ALL_SUSPEND_NS=20000 > /tmp/cfg-sma.log 2>&1 &&
  cmake --build build/ab-sma -j3 --target flashcore-bench > /tmp/build-sma.log 2>&1; echo "sma build rc=$?" ) &
wait
timeout 240 build/ab-sm/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/gpu-tests.log | head -20 | tee "$OUT/gpu-tests.txt"
declare -A BIN=([base]=build/ab-base [sm]=build/ab-sm [smp]=build/ab-smp [sma]=build/ab-sma)
V=(base sm smp sma)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal" "16 1024 128 fp16" "2 8192 64 fp16" "2 8192 256 fp16"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    n=${#V[@]}
    for i in $(seq 0 $((n - 1))); do v=${V[$(( (i + r) % n ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} sm=${res[sm]} smp=${res[smp]} sma=${res[sma]}"
  done
done | tee "$OUT/ab.txt"
K='KernelTraitsILi128ELi128E6__halfLNS0_8ScheduleE1ELi80ELb0ELi2ELb1ELNS0_9TileShapeE1E'
for v in base sm; do
  echo "== $v"
  cuobjdump --dump-sass ${BIN[$v]}/tools/bench/flashcore-bench 2>/dev/null | awk -v k=$K '/Function :/ {f=$3} index(f, k) {print}' \
    | grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[T0-9]+\s+)?[A-Z0-9]+' | awk '{print $NF}' | sort | uniq -c | sort -rn | head -30 | tr '\n' ' '
  echo
done > "$OUT/sass-counts.txt"
cat "$OUT/sass-counts.txt"
