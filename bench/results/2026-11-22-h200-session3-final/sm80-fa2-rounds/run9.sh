#!/usr/bin/env bash
# Session 3 device run 9: sm80 d64 + d128 fp16/bf16 table tiles vs FA2 on merged main (cf85b75), two more rounds.
set -u
cmake -S . -B build/t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_BUILD_TESTS=OFF "-DFLASHCORE_HEAD_DIMS=64;128" "-DFLASHCORE_DTYPES=fp16;bf16" > $OUT/build.log 2>&1 &&
  cmake --build build/t -j16 --target sm80-timing >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for r in 3 4; do
  build/t/tools/bench/sm80-timing --no-tune > $OUT/sm80-$r.csv 2>/dev/null
  python3 tools/bench/sdpa_baseline.py $OUT/sm80-$r.csv > $OUT/fa2-$r.md 2>&1
done
rm -f $OUT/build.log
grep -hE '^\| *(fp16|bf16) ' $OUT/fa2-3.md | awk -F'|' '{print $(NF-1)}' | sort -n | head -3
grep -hE '^\| *(fp16|bf16) ' $OUT/fa2-4.md | awk -F'|' '{print $(NF-1)}' | sort -n | head -3
