#!/bin/bash
# Session 13, device call 3: step 6's small-block kernel (row_in_registers.cuh kSmallBlock: 16-bit
# rows of <= 4096 columns on multi-wave grids, 256 threads at 32 registers, one barrier per
# reduction). Builds (softmax only): base = HEAD (.ab/base), new = the working tree (tests + bench);
# ptxas -v of both step 6 units; softmax GPU tests, memcheck and racecheck over step 6's cases; a
# same-call A/B, rotating order, five rounds, of row_per_block and auto on the ladder's shapes.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
nvcc --version | tail -1
C=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF
   -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake -S . -B build/ab-new "${C[@]}" > /tmp/cfg-new.log 2>&1 &&
  cmake --build build/ab-new -j10 --target flashcore_gpu_tests flashcore-softmax-bench > /tmp/build-new.log 2>&1; echo "new build rc=$?"; grep -m3 error /tmp/build-new.log ) &
( cmake -S .ab/base -B build/ab-base "${C[@]}" -DFLASHCORE_BUILD_TESTS=OFF > /tmp/cfg-base.log 2>&1 &&
  cmake --build build/ab-base -j4 --target flashcore-softmax-bench > /tmp/build-base.log 2>&1; echo "base build rc=$?"; grep -m3 error /tmp/build-base.log ) &
for tree in . .ab/base; do
  nvcc -I $tree/include -I $tree/src -O3 --expt-relaxed-constexpr -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
    -c $tree/src/softmax/step6_row_per_block.cu -o /tmp/s6.o 2>&1 | grep -A3 "Compiling entry" \
    | grep -o "entry function '[^']*'\|Used [0-9]* registers\|[0-9]* bytes spill stores" | paste - - - \
    | sed "s|_ZN9flashcore7softmax23row_in_registers_kernelI|$tree |" | grep "Li8ELi[12]E\|Li4ELi[124]E"
done > "$OUT/ptxas.txt" 2>&1
wait
cat "$OUT/ptxas.txt"
echo "builds done at $SECONDS s"
T=build/ab-new/tests/flashcore_gpu_tests
timeout 240 $T --gtest_filter='*Softmax*' > /tmp/tests.log 2>&1; echo "softmax gpu tests rc=$?"
grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]' /tmp/tests.log | head -20 | tee "$OUT/gpu-tests.txt"
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 1 $T \
    --gtest_filter='Softmax/SoftmaxVariantTest.*/row_per_block:Softmax/SoftmaxVariantTest.MatchesFp64*/auto' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ')" | tee -a "$OUT/gpu-tests.txt"
done
declare -A BIN=([base]=build/ab-base [new]=build/ab-new)
V=(base new)
for r in 1 2 3 4 5; do
  for i in 0 1; do
    v=${V[$(( (i + r) % 2 ))]}
    ${BIN[$v]}/tools/bench/flashcore-softmax-bench --runs 30 --dtypes bf16,fp16,fp32 --shapes 4096x4096,1024x1024,8192x32000 \
      --variants row_per_block,auto 2>&1 | sed "s/^/r$r $v /"
  done
done > "$OUT/ab-raw.txt"
grep -m2 "D2D copy" "$OUT/ab-raw.txt"
awk '/of copy/ {key=$3" "$4" "$5" "$2; for(i=1;i<=NF;i++) if($i ~ /%$/ && $(i+1)=="of") v=$i; sub("%","",v); a[key]=a[key]" "v}
     END {for (k in a) print k ":" a[k]}' "$OUT/ab-raw.txt" | sort | tee "$OUT/ab.txt"
echo "total $SECONDS s"
