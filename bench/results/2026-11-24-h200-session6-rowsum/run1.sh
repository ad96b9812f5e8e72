#!/usr/bin/env bash
# Session 6 device run: the softmax's row sums on the tensor cores (an m64n8 wgmma of P against a
# column of ones with each O += P V; kRowSumOnTensorCores) against the committed kernels (392c0db).
# Two fp16 builds (-DFLASHCORE_HEAD_DIMS="64;128;256" -DFLASHCORE_DTYPES=fp16 -DFLASHCORE_BUILD_SM80=OFF)
# made on the CPU machine and carried in .ab/sm90: base (392c0db) and new (this change).
set -u
B=.ab/sm90
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
# Correctness of the new kernels: the sm90 GPU tests of the built (head dim, dtype) units.
timeout 300 $B/gpu_tests --gtest_filter='*Sm90*' > $OUT/gtest.log 2>&1; echo "gtest rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/gtest.log | sort | uniq -c | head; grep -E "^\[  FAILED  \]" $OUT/gtest.log | head -20
# SASS of the new d128 overlap kernel: where the P V wait sits relative to the exponentials.
cuobjdump -sass -fun '_ZN9flashcore4sm9014forward_kernelINS0_12KernelTraitsILi128ELi128E6__halfLNS0_8ScheduleE1ELi128ELb0ELi1EEEEEv14CUtensorMap_stS6_S6_S6_NS0_12KernelParamsE' $B/new > $OUT/d128.sass 2>&1
grep -nE "MUFU.EX2|WARPGROUP.DEPBAR|HGMMA.64x8x16|HGMMA.64x128x16|STS.64" $OUT/d128.sass | awk '{print $1, $2, $3, $4, $5}' > $OUT/d128.order.txt; wc -l $OUT/d128.order.txt
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --causal")
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run $B/base "$c"); b=$(run $B/new "$c")
  echo "r$r | $c | base $a | new $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
