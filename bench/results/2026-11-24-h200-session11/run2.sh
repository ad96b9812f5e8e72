#!/bin/bash
# Session 11, device call 2: four builds of one tree (bench only), same-call A/B, three rounds in
# rotating order. base = as committed; desc32 = -DFLASHCORE_AB_DESC32 (Q K^T descriptors advanced in
# their low 32 bits, the upper half a constant); psusp = -DFLASHCORE_AB_PRODUCER_SUSPEND_NS=1000000
# (the producer's stage waits ask try_wait for a 1 ms suspend instead of the default, so the waiting
# warp issues fewer spin instructions); asusp = every mbarrier wait with a 20 us hint. SASS opcode
# counts of the d128 long dense kernel of base and desc32.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
G=(-DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest -DFLASHCORE_BUILD_TESTS=OFF)
declare -A FLAGS=([base]="" [desc32]="-DFLASHCORE_AB_DESC32" [psusp]="-DFLASHCORE_AB_PRODUCER_SUSPEND_NS=1000000" [asusp]="-DFLASHCORE_AB_ALL_SUSPEND_NS=20000")
V=(base desc32 psusp asusp)
for v in "${V[@]}"; do
  ( cmake --preset device -B build/ab-$v "${G[@]}" -DCMAKE_CUDA_FLAGS="${FLAGS[$v]}" > /tmp/cfg-$v.log 2>&1 &&
    cmake --build build/ab-$v -j4 --target flashcore-bench > /tmp/build-$v.log 2>&1; echo "$v build rc=$?"; tail -3 /tmp/build-$v.log | grep -i error ) &
done
wait
K='KernelTraitsILi128ELi128E6__halfLNS0_8ScheduleE1ELi80ELb0ELi2ELb1ELNS0_9TileShapeE1E'
for v in base desc32; do
  echo "== $v"
  cuobjdump --dump-sass build/ab-$v/tools/bench/flashcore-bench 2>/dev/null | awk -v k=$K '/Function :/ {f=$3} index(f, k) {print}' \
    | grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[T0-9]+\s+)?[A-Z0-9]+' | awk '{print $NF}' | sort | uniq -c | sort -rn | head -30 | tr '\n' ' '
  echo
done > "$OUT/sass-counts.txt"
cat "$OUT/sass-counts.txt"
row() { local bin=build/ab-$1/tools/bench/flashcore-bench; shift; $bin "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2 3; do
  for cfg in "4 16384 128 fp16" "4 16384 128 bf16" "4 16384 128 fp16 --causal" "16 1024 128 fp16" "16 1024 128 fp16 --causal" "2 8192 64 fp16" "2 8192 256 fp16"; do
    set -- $cfg
    H=$(( $3 == 128 ? 32 : 2048 / $3 ))
    args=(--path sm90 --batch $1 --heads $H --dim $3 --seqlen $2 --dtype $4 ${5:-})
    declare -A res=()
    n=${#V[@]}
    for i in $(seq 0 $((n - 1))); do v=${V[$(( (i + r) % n ))]}; res[$v]=$(row $v "${args[@]}"); done
    echo "r$r d$3 $4 B$1 S$2 ${5:-}: base=${res[base]} desc32=${res[desc32]} psusp=${res[psusp]} asusp=${res[asusp]}"
  done
done | tee "$OUT/ab.txt"
