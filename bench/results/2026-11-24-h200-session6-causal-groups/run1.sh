#!/usr/bin/env bash
# Session 6: causal head groups that hold whole waves of tiles. Candidate rule: the smallest group
# size >= the two-wave minimum whose tiles fill whole waves (groups_fill_waves), so the order stays
# longest-first with aligned snake waves, instead of the L2-budget size (whose groups cut waves, so
# the tiles go in pairs). Same binary (.ab/sm90/bf, the 12ff123 kernels), the rule (0) against the
# candidate's size forced with FLASHCORE_SM90_HEADS_PER_GROUP, three rotating rounds.
set -u
B=.ab/sm90/bf
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 env FLASHCORE_SM90_HEADS_PER_GROUP=$1 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("44|--batch 16 --heads 32 --dim 64 --seqlen 1024" "31|--batch 2 --heads 32 --dim 64 --seqlen 8192" "17|--batch 1 --heads 32 --dim 64 --seqlen 16384"
      "33|--batch 4 --heads 32 --dim 128 --seqlen 1024" "17|--batch 4 --heads 32 --dim 128 --seqlen 2048" "21|--batch 4 --heads 32 --dim 128 --seqlen 4096")
for r in 1 2 3; do for e in "${CFGS[@]}"; do
  h=${e%%|*}; c=${e#*|}
  for dt in fp16 bf16; do
    echo "r$r | $c --causal --dtype $dt | rule $(run 0 "$c --causal --dtype $dt") | whole-wave($h) $(run $h "$c --causal --dtype $dt")" >> $OUT/ab.txt
  done
done; done
cat $OUT/ab.txt
