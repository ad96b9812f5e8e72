#!/usr/bin/env bash
# Device run 10: sm80 d64 (fp16 + bf16) at the final table tile vs FA2, two rounds.
set -u
cmake -S . -B build/t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_BUILD_TESTS=OFF "-DFLASHCORE_HEAD_DIMS=64;128" "-DFLASHCORE_DTYPES=fp16;bf16" > $OUT/cfg.log 2>&1 &&
  cmake --build build/t -j16 --target sm80-timing > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for r in 1 2; do build/t/tools/bench/sm80-timing --d64 --no-tune > $OUT/sm80-$r.csv; python3 tools/bench/sdpa_baseline.py $OUT/sm80-$r.csv > $OUT/fa2-$r.md 2>&1; done
grep -hE '^\| *(fp16|bf16) .* 64 \|' $OUT/fa2-1.md $OUT/fa2-2.md
