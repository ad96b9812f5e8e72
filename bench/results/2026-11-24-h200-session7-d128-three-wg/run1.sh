#!/usr/bin/env bash
# Session 7: d128 dense calls with three consumer warpgroups (kBlockM 192, 160 registers each, 3 K/V
# stages, one Q buffer, overlap without ping-pong, as d64) now that the mask-free loop frees registers.
# H = 4f9897f (2 warpgroups, ping-pong, kBlockN 128); F64 / F80 = TileConfig<128,128> with 3
# warpgroups and kDenseBlockN 64 / 80 (spill-free per ptxas -v; 96 spills 48 bytes). fp16 d128
# builds in .ab/s7 (F: d128 only). Three rotating rounds; the first lines check F's results.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for b in F64 F80; do
  echo "$b: $(timeout 60 .ab/s7/$b --path sm90 --batch 2 --heads 16 --dim 128 --seqlen 3000 --dtype fp16 2>&1 | tail -1)" >> $OUT/check.txt
done
cat $OUT/check.txt
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
for r in 1 2 3; do for s in 1024 2048 4096 8192 16384; do
  c="--batch 4 --heads 32 --dim 128 --seqlen $s --dtype fp16"
  echo "r$r | S=$s | H $(run .ab/s7/H "$c") | F64 $(run .ab/s7/F64 "$c") | F80 $(run .ab/s7/F80 "$c")" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
