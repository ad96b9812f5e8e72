#!/usr/bin/env bash
# Device run 1: full C++ check (refactors since last GPU run + softmax fused reduction/PDL), then softmax A/B.
set -u
bash scripts/device-check.sh --bench none > /dev/null 2>&1
cp $OUT/summary.txt $OUT/summary-check.txt
B=build/device/tools/bench/flashcore-softmax-bench
{
for combo in "0 0 256" "1 0 256" "0 1 256" "1 1 256" "1 1 128" "1 1 512"; do
  set -- $combo
  echo "== FUSED=$1 PDL=$2 THREADS=$3"
  FLASHCORE_SOFTMAX_FUSED=$1 FLASHCORE_SOFTMAX_PDL=$2 FLASHCORE_SOFTMAX_THREADS=$3 $B --runs 30 --dtypes fp32,bf16,fp16 --shapes 4096x4096 --variants row_per_block,row_in_smem,auto | grep -v '^device' 
done
for combo in "0 0" "1 1"; do
  set -- $combo
  echo "== all shapes FUSED=$1 PDL=$2"
  FLASHCORE_SOFTMAX_FUSED=$1 FLASHCORE_SOFTMAX_PDL=$2 $B --runs 30 --dtypes fp32,bf16,fp16 --variants row_per_warp,row_per_block,row_in_smem,auto
done
} > $OUT/softmax-ab.txt 2>&1
cat $OUT/softmax-ab.txt | grep -E '==|4096x4096|copy' | head -80
cat $OUT/summary-check.txt
