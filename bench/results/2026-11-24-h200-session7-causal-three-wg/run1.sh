#!/usr/bin/env bash
# Session 7: d128 causal (masked) calls on the long tile shape too (three consumer warpgroups at
# kBlockN 80, the mask in the loop; spill-free in 160 registers with the relative mask). One binary K
# (882810b + the masked long kernel taken from Sk >= 8192, d128 fp16 + bf16 build in .ab/s7),
# same-binary A/B: the rule (long shape from 8k) against FLASHCORE_SM90_LONG_TILES=off and =on.
# Three rotating rounds; the first lines check K's causal results against the naive GPU path.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for c in "--batch 1 --heads 8 --seqlen 9000 --causal" "--batch 1 --heads-q 16 --heads-kv 4 --seqlen-q 3000 --seqlen-k 9100 --causal"; do
  echo "K $c: $(timeout 120 .ab/s7/K --path sm90 --dim 128 $c --dtype bf16 2>&1 | tail -1)" >> $OUT/check.txt
done
cat $OUT/check.txt
run() { timeout 30 env $1 .ab/s7/K --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
for r in 1 2 3; do for dt in fp16 bf16; do for s in 4096 8192 16384; do
  c="--batch 4 --heads 32 --dim 128 --seqlen $s --causal --dtype $dt"
  echo "r$r | $dt causal S=$s | rule $(run X=1 "$c") | off $(run FLASHCORE_SM90_LONG_TILES=off "$c") | on $(run FLASHCORE_SM90_LONG_TILES=on "$c")" >> $OUT/ab.txt
done; done
c="--batch 2 --dim 128 --seqlen 8192 --heads-q 32 --heads-kv 8 --causal --dtype bf16"
echo "r$r | gqa32x8 bf16 causal S=8k | rule $(run X=1 "$c") | off $(run FLASHCORE_SM90_LONG_TILES=off "$c")" >> $OUT/ab.txt
done
cat $OUT/ab.txt
