#!/usr/bin/env bash
# Device run 9: sm80 d128 before (e695c1a, before the fp32 merge) vs now (HEAD): sm80-timing --d128, 2 rounds, + FA2.
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=64;128 -DFLASHCORE_DTYPES=fp16;bf16"
( cd .dev/old && cmake -S . -B b $common > $OUT/cfg-old.log 2>&1 && cmake --build b -j8 --target sm80-timing > $OUT/build-old.log 2>&1 || tail -5 $OUT/build-old.log ) &
cmake -S . -B build/t $common > $OUT/cfg-new.log 2>&1 && cmake --build build/t -j8 --target sm80-timing > $OUT/build-new.log 2>&1 || tail -5 $OUT/build-new.log
wait
for r in 1 2; do
  .dev/old/b/tools/bench/sm80-timing --d128 --no-tune | sed 's/^flashcore-sm80/old/' > $OUT/old-$r.csv
  build/t/tools/bench/sm80-timing --d128 --no-tune | sed 's/^flashcore-sm80/new/' > $OUT/new-$r.csv
done
build/t/tools/bench/sm80-timing --d128 --no-tune > $OUT/new-3.csv
python3 tools/bench/sdpa_baseline.py $OUT/new-3.csv > $OUT/fa2.md 2>&1
paste -d, $OUT/old-1.csv $OUT/new-1.csv $OUT/old-2.csv $OUT/new-2.csv | awk -F, 'NR>1{printf "%s %s c=%s S=%s  old %s %s  new %s %s\n",$2,$7,$3,$6,$9,$27,$18,$36}'
grep -E '^\| *(fp16|bf16)' $OUT/fa2.md
