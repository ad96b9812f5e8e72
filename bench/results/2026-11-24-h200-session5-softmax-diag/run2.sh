#!/usr/bin/env bash
# Session 5 diagnostic 2 (wrong results, timing only): where the per-tile cost of short sequences
# goes. fp16 builds (d64/d128/d256) of the committed kernels (base) and of diag2.patch with
#   FC_DIAG=3: the producer loads Q for a CTA's first tile only (later tiles: a plain arrival on
#              q_full right after q_empty): the cost of waiting for Q at each tile;
#   FC_DIAG=4: the epilogue stores nothing (no staging writes, no TMA store, no LSE).
set -u
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal"
      "--batch 16 --heads 32 --dim 64 --seqlen 1024 --dtype fp16" "--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16"
      "--batch 16 --heads 8 --dim 256 --seqlen 1024 --dtype fp16" "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16")
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run build/abd/base "$c"); b=$(run build/abd/diag3 "$c"); d=$(run build/abd/diag4 "$c")
  echo "r$r | $c | base $a | Q-once $b | no-O-store $d" >> $OUT/ab2.txt
done; done
cat $OUT/ab2.txt
