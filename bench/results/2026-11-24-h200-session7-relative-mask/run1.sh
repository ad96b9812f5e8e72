#!/usr/bin/env bash
# Session 7: the per-element mask as column offsets relative to the thread's first column (two ints
# per row, compared with compile-time constants) instead of absolute keys. With it ptxas fits the
# masked d64 overlap kernel at kBlockN 128 without spills (120 bytes before). C = 8dd8de9
# (the committed kernels), D = C + relative mask + d64 kBlockN 128 for masked calls; fp16
# d64/d128/d256 builds carried in .ab/s7. Two rotating rounds.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 env $1 --path sm90 $2 $3 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
# Correctness of D's masked kernels (last batch/head against the naive GPU path).
for c in "--batch 2 --heads 32 --dim 64 --seqlen 3000 --causal" "--batch 2 --heads 32 --dim 128 --seqlen 3000 --causal" "--batch 2 --heads 8 --dim 256 --seqlen 3000 --causal"; do
  echo "D $c: $(timeout 60 .ab/s7/D --path sm90 $c --dtype fp16 2>&1 | tail -1)" >> $OUT/check.txt
done
cat $OUT/check.txt
CFGS=()
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch 4 --heads 32 --dim 128 --seqlen $s --causal"); done
for s in 1024 2048 4096 8192 16384; do CFGS+=("--batch $((16384 / s)) --heads 32 --dim 64 --seqlen $s --causal"); done
for s in 1024 8192; do CFGS+=("--batch $((16384 / s)) --heads 8 --dim 256 --seqlen $s --causal"); done
CFGS+=("--batch 16 --heads 32 --dim 64 --seqlen 1024" "--batch 2 --heads 32 --dim 64 --seqlen 8192" "--batch 4 --heads 32 --dim 128 --seqlen 16384")
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run .ab/s7/C "$c --dtype fp16" --no-check); b=$(run .ab/s7/D "$c --dtype fp16" --no-check)
  echo "r$r | $c | C $a | D $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
