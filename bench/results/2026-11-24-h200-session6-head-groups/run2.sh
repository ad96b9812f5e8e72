#!/usr/bin/env bash
# Session 6 run 2: run 1 found smaller head groups no worse and often better for dense (non-causal)
# calls. Same binary (.ab/sm90/base, 392c0db, fp16), the non-causal rows of every length, groups of
# the rule (0) against 1, 2 and 4 heads, three rotating rounds.
set -u
B=.ab/sm90/base
run() { timeout 30 env FLASHCORE_SM90_HEADS_PER_GROUP=$1 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 16 --heads 32 --dim 64 --seqlen 1024" "--batch 4 --heads 32 --dim 64 --seqlen 4096" "--batch 2 --heads 32 --dim 64 --seqlen 8192" "--batch 1 --heads 32 --dim 64 --seqlen 16384"
      "--batch 16 --heads 32 --dim 128 --seqlen 1024" "--batch 4 --heads 32 --dim 128 --seqlen 4096" "--batch 4 --heads 32 --dim 128 --seqlen 8192" "--batch 4 --heads 32 --dim 128 --seqlen 16384"
      "--batch 16 --heads 8 --dim 256 --seqlen 1024" "--batch 4 --heads 8 --dim 256 --seqlen 4096" "--batch 2 --heads 8 --dim 256 --seqlen 8192" "--batch 1 --heads 8 --dim 256 --seqlen 16384")
for r in 1 2 3; do for c in "${CFGS[@]}"; do
  line="r$r | $c |"
  for h in 0 1 2 4; do line="$line hpg$h $(run $h "$c --dtype fp16")"; done
  echo "$line" >> $OUT/hpg2.txt
done; done
cat $OUT/hpg2.txt
