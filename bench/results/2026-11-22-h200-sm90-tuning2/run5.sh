#!/usr/bin/env bash
# Device run 5: d128 with three consumer warpgroups (kBlockN 64 / 80, overlap) vs the current 2-WG ping-pong.
set -u
common="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_TESTS=OFF -DFLASHCORE_HEAD_DIMS=128"
for v in cur 64 80; do
  rm -rf /tmp/v$v && mkdir -p /tmp/v$v && cp -r CMakeLists.txt CMakePresets.json cmake include src tests tools python pyproject.toml README.md /tmp/v$v/
  [ $v != cur ] && (cd /tmp/v$v && patch -s -p1 < $OLDPWD/bench/results/2026-11-22-h200-sm90-tuning2/d128-3wg-n$v.patch)
  ( cd /tmp/v$v && cmake -S . -B b $common > $OUT/cfg-$v.log 2>&1 && cmake --build b -j5 --target flashcore-bench > $OUT/build-$v.log 2>&1 || tail -5 $OUT/build-$v.log ) &
done
wait
{
for v in cur 64 80; do
  BIN=/tmp/v$v/b/tools/bench/flashcore-bench
  for dt in fp16 bf16; do for S in 1024 4096 16384; do for c in "" "--causal"; do
    echo "$v d128 $dt S=$S $c: $($BIN --path sm90 --batch 4 --heads 32 --dim 128 --seqlen $S --dtype $dt $c --no-check 2>/dev/null | tail -1)"
  done; done; done
done
} > $OUT/bench.txt 2>&1
sed 's/custom *flashcore-sm90 *//' $OUT/bench.txt
