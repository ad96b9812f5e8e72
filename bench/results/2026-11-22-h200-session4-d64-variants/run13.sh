#!/usr/bin/env bash
# Session 4 device run 13: d64 tuning variants already built (no code change): default (3 WGs,
# kBlockN 96, overlap) vs FLASHCORE_SM90_BLOCK_N=128 (3 WGs, serial) vs FLASHCORE_SM90_SCHEDULE=serial (kBlockN 96).
set -u
cmake -S . -B build/d64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg.log 2>&1 &&
  cmake --build build/d64 -j16 --target flashcore-bench > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
B=build/d64/tools/bench/flashcore-bench
run() { env $1 timeout 30 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16 --causal" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 64 --seqlen 4096 --dtype fp16 --causal" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16 --causal"
      "--batch 1 --heads 32 --dim 64 --seqlen 16384 --dtype fp16 --causal" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16"
      "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16")
for r in 1 2; do for i in "${!CFGS[@]}"; do
  echo "r$r | ${CFGS[$i]} | default $(run X=1 "${CFGS[$i]}") | blockN128-serial $(run FLASHCORE_SM90_BLOCK_N=128 "${CFGS[$i]}") | serial96 $(run FLASHCORE_SM90_SCHEDULE=serial "${CFGS[$i]}")" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
