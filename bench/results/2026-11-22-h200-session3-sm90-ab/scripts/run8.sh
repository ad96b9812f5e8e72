#!/usr/bin/env bash
# Session 3 device run 8: d128 with three consumer warpgroups (wg3nNsS), d64 with four (d64wg4...), vs cur. Was run 7: part of the exponentials on the FMA pipe (polyN = N of 8 column groups) vs cur. Was run 4: wait<0> pinned after the softmax by a shared store (pin, pinall) vs none (nopin)
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=64;128 -DFLASHCORE_DTYPES=fp16"
VARS="cur wg3n64s3 wg3n64s4 wg3n80s3 d64wg4n64s4r120"
for v in $VARS; do
  rm -rf /tmp/v$v && mkdir -p /tmp/v$v && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$v/
  [ $v != cur ] && python3 .dev/s3/xform.py /tmp/v$v $v
  ( cd /tmp/v$v && cmake -S . -B b $common > /tmp/cfg-$v.log 2>&1 && cmake --build b -j3 --target flashcore-bench > /tmp/build-$v.log 2>&1 || tail -5 /tmp/build-$v.log ) &
done
wait
echo "built $(date +%T)"
run() { /tmp/v$1/b/tools/bench/flashcore-bench --path sm90 --batch $2 --heads $3 --dim $4 --seqlen $5 --dtype fp16 $6 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
cfgs="4:32:128:1024: 4:32:128:4096: 4:32:128:16384: 4:32:128:16384:--causal 4:32:128:1024:--causal 8:32:64:2048: 2:32:64:8192: 2:32:64:8192:--causal 1:32:64:16384:--causal"
{
for r in 1 2; do
  for c in $cfgs; do IFS=: read B H D S C <<< "$c"
    line="r$r d$D S=$S $C"
    order="$VARS"; [ $r = 2 ] && order=$(echo $VARS | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $order; do line="$line $v=$(run $v $B $H $D $S "$C")"; done
    echo "$line"
  done
done
} 2>&1 | tee $OUT/bench.txt
for v in $VARS; do for d in 64 128; do echo "$v d$d: $(/tmp/v$v/b/tools/bench/flashcore-bench --path sm90 --batch 2 --heads 8 --dim $d --seqlen 3000 --dtype fp16 --causal 2>&1 | tail -1 | cut -c90-)"; done; done
