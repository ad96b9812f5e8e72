#!/usr/bin/env bash
# Session 6: does the L2 head-group size explain the bimodal d64 S=8k row (455-501 TFLOPS across
# calls)? The committed kernels (392c0db, fp16 build carried in .ab/sm90/base) with
# FLASHCORE_SM90_HEADS_PER_GROUP=<n> (0 = the rule of head_groups.hpp: 12 heads at d64 S=8k, 3 at
# d128 S=16k and at d256 S=8k), three rotating rounds.
set -u
B=.ab/sm90/base
run() { timeout 30 env FLASHCORE_SM90_HEADS_PER_GROUP=$1 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
declare -A HPG=(["--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16"]="0 2 4 8 16 24 64"
                ["--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16"]="0 1 2 6 12 32"
                ["--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16"]="0 1 2 6 16")
for r in 1 2 3; do for c in "${!HPG[@]}"; do
  line="r$r | $c |"
  for h in ${HPG[$c]}; do line="$line hpg$h $(run $h "$c")"; done
  echo "$line" >> $OUT/hpg.txt
done; done
cat $OUT/hpg.txt
