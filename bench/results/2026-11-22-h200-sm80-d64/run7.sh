#!/usr/bin/env bash
# Device run 7: sm80 d64 128x96x4s1 (table now, spill-free) vs 128x128 (8-byte spill) vs 128x64x4s2 (old) + FA2.
set -u
cmake -S . -B build/s80 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_CUDA_ARCHS=90a \
  -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS="64;128" > $OUT/cfg.log 2>&1 && cmake --build build/s80 -j16 --target sm80-timing > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for round in 1 2; do build/s80/tools/bench/sm80-timing --d64 --tune-all > $OUT/sm80-$round.csv 2> $OUT/sm80.err; done
python3 tools/bench/sdpa_baseline.py $OUT/sm80-1.csv > $OUT/fa2.md 2>&1
grep -E '^\| *(fp16|bf16) .* 64 \|' $OUT/fa2.md
grep -hE '^flashcore-sm80' $OUT/sm80-1.csv $OUT/sm80-2.csv | sort -t, -k3,3 -k6,6n -k1,1 | grep fp16
