#!/usr/bin/env bash
# Probe: cluster launch + pair scheduling WITHOUT multicast (each CTA loads its own K/V, local releases).
set -u
cmake -S . -B build/p -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  "-DFLASHCORE_HEAD_DIMS=128" -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DFC_PROBE_NO_MULTICAST > $OUT/cfg.log 2>&1
cmake --build build/p -j16 --target flashcore-bench > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
B=build/p/tools/bench/flashcore-bench
run() { timeout 30 $B --path sm90 $1 2>&1 | grep -E "rotated|yes|no " | tail -1; }
for c in "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16"; do
  echo "== $c"; FLASHCORE_SM90_CLUSTER=off run "$c"; run "$c"
done
