#!/usr/bin/env bash
# Session 7: d64 on two consumer warpgroups (kBlockM 128, ping-pong, 240 registers) instead of three
# (kBlockM 192): the short and causal rows pay for 192-row tiles (the last tile of S=1k holds 64 valid
# rows of 192; lower warpgroups of a causal tile iterate over blocks only the top one needs).
# H = 4f9897f (three warpgroups, kBlockN 128); S128 / S192 = TileConfig<64,64> rewritten to two
# warpgroups at kBlockN 128 / 192 (3 K/V stages, 2 Q buffers, vote rescale; spill-free). d64 fp16
# builds in .ab/s7; B*S = 16k, H = 32. Three rotating rounds; first lines check S128/S192.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for b in S128 S192; do for c in "--batch 3 --heads 16 --seqlen 1500" "--batch 3 --heads 16 --seqlen 1500 --causal"; do
  echo "$b $c: $(timeout 60 .ab/s7/$b --path sm90 --dim 64 $c --dtype fp16 2>&1 | tail -1)" >> $OUT/check.txt
done; done
cat $OUT/check.txt
run() { timeout 30 env $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
for r in 1 2 3; do for cz in "" "--causal"; do for s in 1024 2048 4096 8192; do
  c="--batch $((16384 / s)) --heads 32 --dim 64 --seqlen $s $cz --dtype fp16"
  echo "r$r | S=$s $cz | H $(run .ab/s7/H "$c") | S128 $(run .ab/s7/S128 "$c") | S128-always $(run "FLASHCORE_SM90_RESCALE=always .ab/s7/S128" "$c") | S192 $(run .ab/s7/S192 "$c")" >> $OUT/ab.txt
done; done; done
cat $OUT/ab.txt
