#!/usr/bin/env bash
# Session 4 device run 7: cluster kernel with CTA-scope remote arrives.
set -u
cmake -S . -B build/v2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  "-DFLASHCORE_HEAD_DIMS=128;256" -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg.log 2>&1
cmake --build build/v2 -j16 --target flashcore-bench > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
B=build/v2/tools/bench/flashcore-bench
for cl in off on; do FLASHCORE_SM90_CLUSTER=$cl timeout 30 $B --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16 2>&1 | tail -1 | sed "s/^/check cluster=$cl: /"; done
run() { FLASHCORE_SM90_CLUSTER=$1 timeout 30 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16"
      "--batch 2 --heads 8 --dim 256 --seqlen 16384 --dtype fp16")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  echo "r$r | ${CFGS[$i]} | off $(run off "${CFGS[$i]}") | cluster $(run on "${CFGS[$i]}")" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
