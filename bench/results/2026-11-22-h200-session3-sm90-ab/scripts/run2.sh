#!/usr/bin/env bash
# Session 3 device run 2: d128 fp16 producer order / K ring depth / softmax tree (2 rotating rounds) + ncu of k3.
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 -DCMAKE_CUDA_FLAGS=-lineinfo"
VARS="desc kord k3 k3tree"
for v in $VARS; do
  rm -rf /tmp/v$v && mkdir -p /tmp/v$v && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$v/
  case $v in
    desc) cp .dev/s3/desc_mainloop.cuh /tmp/v$v/src/sm90/mainloop.cuh; cp .dev/s3/desc_wgmma.hpp /tmp/v$v/src/ptx/wgmma.hpp
          for f in tile_config.hpp kernel_traits.cuh kernel.cuh launch.cu; do cp .dev/s3/head/$f /tmp/v$v/src/sm90/$f; done ;;
    kord) python3 - /tmp/v$v/src/sm90/tile_config.hpp <<'P'
import sys; p=sys.argv[1]; s=open(p).read(); i=s.index('struct TileConfig<128, 128>'); j=s.index('kKStages = 3;', i)
open(p,'w').write(s[:j]+'kKStages = 2;'+s[j+13:])
P
    ;;
    k3) ;;
    k3tree) python3 .dev/s3/xform.py /tmp/v$v tree ;;
  esac
  ( cd /tmp/v$v && cmake -S . -B b $common > /tmp/cfg-$v.log 2>&1 && cmake --build b -j4 --target flashcore-bench > $OUT/build-$v.log 2>&1 || tail -5 $OUT/build-$v.log ) &
done
wait
echo "built $(date +%T)"
run() { /tmp/v$1/b/tools/bench/flashcore-bench --path sm90 --batch $2 --heads 32 --dim 128 --seqlen $3 --dtype fp16 $4 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
cfgs="4:1024: 4:4096: 4:16384: 4:16384:--causal 4:1024:--causal"
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
mkdir -p /tmp/p && cd /tmp/p && timeout 200 ncu --clock-control none -k regex:forward_kernel -s 3 -c 1 --set full --import-source yes -o prof \
  /tmp/vk3/b/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 8192 --dtype fp16 --iters 1 --warmup 3 --no-check > ncu.log 2>&1
ncu --import prof.ncu-rep --page details > details.txt 2>&1
ncu --import prof.ncu-rep --page source --csv --print-source sass > source.csv 2>&1
tar czf $OUT/prof.tgz details.txt source.csv ncu.log
grep -E "Issue Slots Busy|Tensor is|Eligible Warps|No Eligible|SM Frequency|L2 Cache Throughput|Duration" details.txt | head -12
