#!/usr/bin/env bash
# Session 4 device run 17: d256 kBlockN 80 (committed) vs 64 (2 stages, spill-free), same-run A/B.
set -u
rm -rf /tmp/vbase && mkdir -p /tmp/vbase && tar xf .dev/s4/base-tree.tar -C /tmp/vbase
cfg() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA_ARCHS=90a -DFLASHCORE_BUILD_PYTHON=OFF -DFLASHCORE_BUILD_SM80=OFF \
  -DFLASHCORE_HEAD_DIMS=256 -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_TESTS=OFF; }
( cfg /tmp/vbase /tmp/vbase/b > /dev/null 2>&1 && cmake --build /tmp/vbase/b -j8 --target flashcore-bench > $OUT/build-base.log 2>&1 ) &
( cfg . build/n64 > /dev/null 2>&1 && cmake --build build/n64 -j8 --target flashcore-bench > $OUT/build-new.log 2>&1 ) &
wait
A=/tmp/vbase/b/tools/bench/flashcore-bench; N=build/n64/tools/bench/flashcore-bench
ls $A $N > /dev/null || { tail -20 $OUT/build-*.log; exit 1; }
timeout 30 $N --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 4096 --dtype fp16 2>&1 | tail -1
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16" "--batch 1 --heads 8 --dim 256 --seqlen 16384 --dtype fp16"
      "--batch 4 --heads 8 --dim 256 --seqlen 4096 --dtype fp16" "--batch 16 --heads 8 --dim 256 --seqlen 1024 --dtype fp16"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --causal" "--batch 16 --heads 8 --dim 256 --seqlen 1024 --dtype fp16 --causal")
for r in 1 2 3; do for i in "${!CFGS[@]}"; do
  if [ $r = 2 ]; then b=$(run $N "${CFGS[$i]}"); a=$(run $A "${CFGS[$i]}"); else a=$(run $A "${CFGS[$i]}"); b=$(run $N "${CFGS[$i]}"); fi
  echo "r$r | ${CFGS[$i]} | kBlockN80 $a | kBlockN64 $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
