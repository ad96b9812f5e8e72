#!/bin/bash
# Session 13, device call 5: a sweep of the sm90 launcher's tuning knobs (launch.cu) on the d128
# S=16k rows whose targets are missed (fp16 dense 700, fp16 causal 650), bf16 alongside; same
# binary (3bcc7b7's kernels), two rounds, configurations in rotating order within each row.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cmake --preset device -B build/tune -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg.log 2>&1 &&
  cmake --build build/tune -j16 --target flashcore-bench > /tmp/build.log 2>&1; echo "build rc=$? at $SECONDS s"
B=build/tune/tools/bench/flashcore-bench
row() { env "$@" $B --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype $DT $CAUSAL --no-check 2>&1 |
        awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
CAUSAL_CFGS=("X=0" "FLASHCORE_SM90_TILE_ORDER=longest" "FLASHCORE_SM90_TILE_ORDER=paired" "FLASHCORE_SM90_HEADS_PER_GROUP=2"
             "FLASHCORE_SM90_HEADS_PER_GROUP=3" "FLASHCORE_SM90_HEADS_PER_GROUP=6" "FLASHCORE_SM90_HEADS_PER_GROUP=8"
             "FLASHCORE_SM90_RESCALE=always" "FLASHCORE_SM90_LONG_TILES=off")
DENSE_CFGS=("X=0" "FLASHCORE_SM90_STREAM_K=off" "FLASHCORE_SM90_STREAM_K=on" "FLASHCORE_SM90_HEADS_PER_GROUP=2"
            "FLASHCORE_SM90_HEADS_PER_GROUP=4" "FLASHCORE_SM90_CLUSTER=off" "FLASHCORE_SM90_RESCALE=always")
for r in 1 2; do
  for DT in fp16 bf16; do
    for CAUSAL in --causal ""; do
      if [ -n "$CAUSAL" ]; then cfgs=("${CAUSAL_CFGS[@]}"); else cfgs=("${DENSE_CFGS[@]}"); fi
      n=${#cfgs[@]}
      for i in $(seq 0 $((n - 1))); do
        c=${cfgs[$(( (i + r * 3) % n ))]}
        echo "r$r $DT ${CAUSAL:-dense} $c $(row $c)"
      done
    done
  done
done | tee "$OUT/sweep-raw.txt"
awk '{k=$2" "$3" "$4; a[k]=a[k]" "$5} END {for (k in a) print k ":" a[k]}' "$OUT/sweep-raw.txt" | sort | tee "$OUT/sweep.txt"
echo "total $SECONDS s"
