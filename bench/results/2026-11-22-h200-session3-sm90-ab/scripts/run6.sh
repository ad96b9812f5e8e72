#!/usr/bin/env bash
# Session 3 device run 6: Q in registers (diag qrs), softmax tree, vs cur (d128 fp16)
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 -DCMAKE_CUDA_FLAGS=-lineinfo"
VARS="cur qrs tree"
for v in $VARS; do
  rm -rf /tmp/v$v && mkdir -p /tmp/v$v && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$v/
  [ $v != cur ] && python3 .dev/s3/xform.py /tmp/v$v $v
  ( cd /tmp/v$v && cmake -S . -B b $common > /tmp/cfg-$v.log 2>&1 && cmake --build b -j4 --target flashcore-bench > $OUT/build-$v.log 2>&1 || tail -5 $OUT/build-$v.log ) &
done
wait
echo "built $(date +%T)"
run() { /tmp/v$1/b/tools/bench/flashcore-bench --path sm90 --batch $2 --heads 32 --dim 128 --seqlen $3 --dtype fp16 $4 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
cfgs="4:1024: 4:4096: 4:16384: 4:16384:--causal"
{
for r in 1 2; do
  for c in $cfgs; do IFS=: read B S C <<< "$c"
    line="r$r S=$S $C"
    order="$VARS"; [ $r = 2 ] && order=$(echo $VARS | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $order; do line="$line $v=$(run $v $B $S "$C")"; done
    echo "$line"
  done
done
} 2>&1 | tee $OUT/bench.txt
for v in $VARS; do echo "$v: $(/tmp/v$v/b/tools/bench/flashcore-bench --path sm90 --batch 2 --heads 16 --dim 128 --seqlen 3000 --dtype fp16 --causal 2>&1 | tail -1)"; done
