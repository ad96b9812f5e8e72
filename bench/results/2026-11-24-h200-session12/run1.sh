#!/bin/bash
# Session 12, device call 1. (a) sm90: K/V stage releases with the peer CTA's barrier address kept
# as one shift (mainloop.cuh release_stage; was mapa of both ranks per release). Builds: base = HEAD
# (git archive in .ab/base, bench only); sm = the working tree (tests + bench). sm90 GPU tests on
# sm; same-call A/B, rotating order, three rounds; SASS instruction counts of the d128 long cluster
# kernel. (b) the softmax experiment binary (scripts/softmax-exp.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake --preset device -B build/ab-sm "${G[@]}" > /tmp/cfg-sm.log 2>&1 &&
  cmake --build build/ab-sm -j11 --target flashcore_gpu_tests flashcore-bench > /tmp/build-sm.log 2>&1; echo "sm build rc=$?"; grep -m3 error /tmp/build-sm.log ) &
( cmake --preset device -S .ab/base -B build/ab-base "${G[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j5 --target flashcore-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
wait
echo "builds done at $SECONDS s"
timeout 200 build/ab-sm/tests/flashcore_gpu_tests --gtest_filter='*Sm90*' > /tmp/gpu-tests.log 2>&1; echo "sm90 gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' /tmp/gpu-tests.log | head -20 | tee "$OUT/gpu-tests.txt"
declare -A BIN=([base]=build/ab-base [sm]=build/ab-sm)
V=(base sm)
row() { local bin=${BIN[$1]}/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal" "16 1024 128 fp16" "2 8192 256 fp16"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    n=${#V[@]}
    for i in $(seq 0 $((n - 1))); do v=${V[$(( (i + r) % n ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} sm=${res[sm]}"
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
if [ -f scripts/softmax-exp.sh ]; then bash scripts/softmax-exp.sh > /tmp/softmax-exp.log 2>&1; echo "softmax-exp rc=$?"; tail -30 /tmp/softmax-exp.log; fi
echo "total $SECONDS s"
