#!/usr/bin/env bash
# Session 7: two run-time choices for d128's long tile shape (three consumer warpgroups, kBlockN 80),
# same binary L (b797de3 kernels, d128 fp16 + bf16 build in .ab/s7): O rescaled after every block
# (FLASHCORE_SM90_RESCALE=always; d64's three warpgroups use it) against the config's vote, and the
# cluster kernel off (FLASHCORE_SM90_CLUSTER=off). Three rotating rounds.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 env $1 .ab/s7/L --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
for r in 1 2 3; do for dt in fp16 bf16; do for c in "--seqlen 8192" "--seqlen 16384" "--seqlen 16384 --causal"; do
  a="--batch 4 --heads 32 --dim 128 $c --dtype $dt"
  echo "r$r | $dt $c | default $(run X=1 "$a") | always $(run FLASHCORE_SM90_RESCALE=always "$a") | nocluster $(run FLASHCORE_SM90_CLUSTER=off "$a")" >> $OUT/ab.txt
done; done; done
cat $OUT/ab.txt
