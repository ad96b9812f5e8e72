#!/usr/bin/env bash
# Session 7: dense non-causal calls without the per-block mask in the main loop. Two fp16 d64/d128
# builds carried in .ab/s7: A = 7aac460 (the committed kernels); B = the same with the mask test
# removed from the overlap loop (only the first block, the Sk tail, is masked: valid for non-causal
# calls only) and the kAltBlockN variant built with the overlap schedule (d128 kBlockN 176, d64 128;
# no cluster, no second Q buffer; d128 176 has no room for the O staging tile: direct stores).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 env $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
# Correctness of B's variants (last batch/head against the naive GPU path).
for c in "--batch 4 --heads 32 --dim 128 --seqlen 4000" "--batch 2 --heads 32 --dim 64 --seqlen 8100"; do
  for e in "X=1" "FLASHCORE_SM90_BLOCK_N=176" "FLASHCORE_SM90_BLOCK_N=128"; do
    echo "B $e $c: $(timeout 60 env $e .ab/s7/B --path sm90 $c --dtype fp16 2>&1 | tail -1)" >> $OUT/check.txt
  done
done
cat $OUT/check.txt
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024" "--batch 4 --heads 32 --dim 128 --seqlen 2048" "--batch 4 --heads 32 --dim 128 --seqlen 4096"
      "--batch 4 --heads 32 --dim 128 --seqlen 8192" "--batch 4 --heads 32 --dim 128 --seqlen 16384"
      "--batch 16 --heads 32 --dim 64 --seqlen 1024" "--batch 2 --heads 32 --dim 64 --seqlen 8192")
for r in 1 2; do for c in "${CFGS[@]}"; do
  alt=176; [[ "$c" == *"dim 64"* ]] && alt=128
  a=$(run ".ab/s7/A" "$c --dtype fp16"); ao=$(run "FLASHCORE_SM90_CLUSTER=off .ab/s7/A" "$c --dtype fp16")
  b=$(run ".ab/s7/B" "$c --dtype fp16"); bo=$(run "FLASHCORE_SM90_CLUSTER=off .ab/s7/B" "$c --dtype fp16")
  bn=$(run "FLASHCORE_SM90_BLOCK_N=$alt .ab/s7/B" "$c --dtype fp16")
  echo "r$r | $c | A $a | A-nocl $ao | B $b | B-nocl $bo | B-n$alt $bn" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
