#!/usr/bin/env bash
# Session 4 device run 6: third V stage (d128) x cluster kernel, same-run A/B (2 builds x FLASHCORE_SM90_CLUSTER).
set -u
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF "${@:2}"; }
( cfg build/v2 > $OUT/cfg2.log 2>&1 && cmake --build build/v2 -j8 --target flashcore-bench > $OUT/build2.log 2>&1 ) &
( cfg build/v3 -DCMAKE_CUDA_FLAGS=-DFC_PROBE_V_STAGES=3 > $OUT/cfg3.log 2>&1 && cmake --build build/v3 -j8 --target flashcore-bench > $OUT/build3.log 2>&1 ) &
wait
ls build/v2/tools/bench/flashcore-bench build/v3/tools/bench/flashcore-bench > /dev/null || { tail -20 $OUT/build*.log; exit 1; }
for v in v2 v3; do for cl in off on; do
  FLASHCORE_SM90_CLUSTER=$cl timeout 30 build/$v/tools/bench/flashcore-bench --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 2>&1 | tail -1 | sed "s/^/check $v cluster=$cl: /"
done; done
run() { FLASHCORE_SM90_CLUSTER=$2 timeout 30 build/$1/tools/bench/flashcore-bench --path sm90 $3 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  echo "r$r | ${CFGS[$i]} | v2 $(run v2 off "${CFGS[$i]}") | v2+cluster $(run v2 on "${CFGS[$i]}") | v3 $(run v3 off "${CFGS[$i]}") | v3+cluster $(run v3 on "${CFGS[$i]}")" >> $OUT/ab.txt
done; done
cd $OUT && tar czf logs.tar.gz *.log && rm -f cfg*.log build*.log
cat $OUT/ab.txt
