#!/usr/bin/env bash
set -u
[ -f build/c/build.ninja ] || cmake -S . -B build/c -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF "-DFLASHCORE_HEAD_DIMS=128;256" -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg.log 2>&1
cmake --build build/c -j16 --target flashcore-bench > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
B=build/c/tools/bench/flashcore-bench
run() { timeout 30 $B --path sm90 $1 --no-check 2>&1 | grep -E "probe|rotated|yes|no " | tail -2; }
for c in "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16"; do
  echo "== $c"; FLASHCORE_SM90_CLUSTER=off run "$c"; run "$c"; FC_PROBE_FULL_GRID=1 run "$c"
done
