#!/bin/bash
# Session 13, device call 2: cluster-exp/cluster_exp.cu (copies of 4 KiB blocks plain / in clusters,
# with block or cluster barriers, persistent grids; the library's cluster kernel; an st.async +
# mbarrier exchange), three rounds; and what racecheck reported on the cluster kernel in call 1.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_SM80=OFF -DFLASHCORE_BUILD_SM90=OFF
   -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest)
( cmake -S . -B build/ab-new "${C[@]}" > /tmp/cfg-new.log 2>&1 &&
  cmake --build build/ab-new -j12 --target flashcore_gpu_tests > /tmp/build-new.log 2>&1; echo "new build rc=$?" ) &
nvcc -O3 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I include -I src \
  bench/results/2026-11-24-h200-session13/cluster-exp/cluster_exp.cu -o /tmp/cluster_exp; echo "exp build rc=$?"
wait
/tmp/cluster_exp 2>&1 | tee "$OUT/cluster-exp.txt"
compute-sanitizer --tool racecheck --print-limit 4 build/ab-new/tests/flashcore_gpu_tests \
  --gtest_filter='Softmax/SoftmaxVariantTest.MatchesFp64*/row_per_block' > /tmp/race.log 2>&1
head -60 /tmp/race.log > "$OUT/racecheck-head.txt"; tail -5 /tmp/race.log >> "$OUT/racecheck-head.txt"
head -30 "$OUT/racecheck-head.txt"
echo "total $SECONDS s"
