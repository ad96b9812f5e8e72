#!/usr/bin/env bash
# Session 6: d64 with two Q buffers, again. Session 5 kept one because d64 S=8k was lower with two
# in five rounds (490-501 -> 455-490), but this session showed that row jumping between ~455 and
# ~490 with any one binary. Two fp16 d64 builds carried in .ab/d64: base (d6d4508, kQStages 1) and
# q2 (the same with kQStages 2), four rotating rounds over the d64 rows of the standard suite.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 16 --heads 32 --dim 64 --seqlen 1024" "--batch 8 --heads 32 --dim 64 --seqlen 2048" "--batch 4 --heads 32 --dim 64 --seqlen 4096"
      "--batch 2 --heads 32 --dim 64 --seqlen 8192" "--batch 1 --heads 32 --dim 64 --seqlen 16384"
      "--batch 16 --heads 32 --dim 64 --seqlen 1024 --causal" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --causal" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --causal")
for r in 1 2 3 4; do for c in "${CFGS[@]}"; do
  a=$(run .ab/d64/base "$c --dtype fp16"); b=$(run .ab/d64/q2 "$c --dtype fp16")
  echo "r$r | $c | base $a | q2 $b" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
# Causal short rows against the head-group size (the tile order's groups and pairs; same binary
# .ab/sm90/bf = 12ff123 kernels): the rule (0) against forced sizes, two rounds.
hrun() { timeout 30 env FLASHCORE_SM90_HEADS_PER_GROUP=$1 .ab/sm90/bf --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
declare -A HPG=(["--batch 16 --heads 32 --dim 64 --seqlen 1024 --causal"]="0 11 22 44 88 176 512"
                ["--batch 8 --heads 32 --dim 64 --seqlen 2048 --causal"]="0 11 22 44 88 256"
                ["--batch 4 --heads 32 --dim 128 --seqlen 1024 --causal"]="0 8 17 33 66 128")
for r in 1 2; do for c in "${!HPG[@]}"; do
  line="r$r | $c |"; for h in ${HPG[$c]}; do line="$line hpg$h $(hrun $h "$c --dtype fp16")"; done
  echo "$line" >> $OUT/hpg-causal.txt
done; done
cat $OUT/hpg-causal.txt
