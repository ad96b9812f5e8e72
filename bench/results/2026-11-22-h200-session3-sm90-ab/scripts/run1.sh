#!/usr/bin/env bash
# Session 3 device run 1: sm90 d128 fp16 variants (same run, 2 rotating rounds) + diagnostics + ncu of 'desc'.
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 -DCMAKE_CUDA_FLAGS=-lineinfo"
VARS="base desc fa3 n144 n160 nosm noload"
for v in $VARS; do
  rm -rf /tmp/v$v && mkdir -p /tmp/v$v && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$v/
  case $v in
    base) cp .dev/s3/base_mainloop.cuh /tmp/v$v/src/sm90/mainloop.cuh; cp .dev/s3/base_wgmma.hpp /tmp/v$v/src/ptx/wgmma.hpp ;;
    desc) ;;
    fa3) python3 .dev/s3/xform.py /tmp/v$v fa3ord ;;
    *) python3 .dev/s3/xform.py /tmp/v$v $v ;;
  esac
  ( cd /tmp/v$v && cmake -S . -B b $common > $OUT/cfg-$v.log 2>&1 && cmake --build b -j3 --target flashcore-bench > $OUT/build-$v.log 2>&1 || tail -5 $OUT/build-$v.log ) &
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
    for v in $order; do
      [ $r = 2 ] && { [ $v = nosm ] || [ $v = noload ]; } && continue
      line="$line $v=$(run $v $B $S "$C")"
    done
    echo "$line"
  done
done
} 2>&1 | tee $OUT/bench.txt
/tmp/vdesc/b/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16 2>&1 | tail -3
# ncu: one launch of the 'desc' kernel, full set with source counters
cd $OUT && timeout 200 ncu --clock-control none -k regex:forward_kernel -s 3 -c 1 --set full --import-source yes -o prof \
  /tmp/vdesc/b/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 8192 --dtype fp16 --iters 1 --warmup 3 --no-check > ncu.log 2>&1
ncu --import prof.ncu-rep --page details > details.txt 2>&1
ncu --import prof.ncu-rep --page source --csv --print-source sass > source.csv 2>&1
tar czf prof.tgz details.txt source.csv ncu.log && rm -f source.csv
ls -la $OUT; grep -E "Issue Slots Busy|Tensor|Eligible|Stall|One or More|No Eligible|SM Frequency|L2 Cache Throughput|DRAM Throughput" details.txt | head -30
