#!/usr/bin/env bash
# Session 5 diagnostic (wrong results, timing only): how much of the sm90 time is the softmax's
# row-sum FADDs and its fp32 exponentials? Three fp16 builds (d64/d128/d256) of the kernels of commit 50d34d5 (unchanged since); the patch is diag.patch:
#   base  = the committed kernels;
#   diag1 = no row-sum accumulation (softmax.cuh, FC_DIAG=1): what computing the row sums on the
#           tensor cores (a ones column appended to V) could save at most;
#   diag2 = diag1 + exponentials as ex2.approx.f16x2 on packed pairs, P left packed (FC_DIAG=2).
set -u
run() { timeout 30 $1 --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("--batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16" "--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype fp16"
      "--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16" "--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal"
      "--batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do for c in "${CFGS[@]}"; do
  a=$(run build/abd/base "$c"); b=$(run build/abd/diag1 "$c"); d=$(run build/abd/diag2 "$c")
  echo "r$r | $c | base $a | no-rowsum $b | f16x2+no-rowsum $d" >> $OUT/ab.txt
done; done
cat $OUT/ab.txt
