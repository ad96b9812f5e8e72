#!/usr/bin/env bash
# Session 4 device run 1: softmax early PDL trigger A/B (griddepcontrol.launch_dependents) + softmax GPU tests.
set -u
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF \
  -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest "${@:2}"; }
( cfg build/on > $OUT/cfg-on.log 2>&1 && cmake --build build/on -j8 > $OUT/build-on.log 2>&1 ) &
( cfg build/off -DCMAKE_CUDA_FLAGS=-DFLASHCORE_SOFTMAX_NO_EARLY_TRIGGER -DFLASHCORE_BUILD_TESTS=OFF > $OUT/cfg-off.log 2>&1 && cmake --build build/off -j8 --target flashcore-softmax-bench > $OUT/build-off.log 2>&1 ) &
wait
ls build/on/tools/bench/flashcore-softmax-bench build/off/tools/bench/flashcore-softmax-bench || { tail -30 $OUT/build-*.log; exit 1; }
(cd build/on && ctest -R Softmax --output-on-failure > $OUT/ctest.log 2>&1; tail -3 $OUT/ctest.log)
V=row_per_block,row_in_smem,row_per_warp,auto
for r in 1 2 3; do
  for v in off on; do
    build/$v/tools/bench/flashcore-softmax-bench --runs 30 --shapes 4096x4096,8192x32000,1024x1024 --variants $V > $OUT/$v-$r.log 2>&1
  done
done
cd $OUT && tar czf logs.tar.gz *.log && rm -f cfg-*.log build-*.log
for f in off-1 on-1 off-2 on-2 off-3 on-3; do echo "== $f"; grep -E "copy|row_per_block|row_in_smem|row_per_warp|auto" $f.log | grep -E "4096x4096|^device|1024x1024 +bf16|8192x32000 +bf16"; done
