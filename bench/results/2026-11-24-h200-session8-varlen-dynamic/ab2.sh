#!/bin/bash
# Session 8 A/B 2: dense one-CTA kernels on the dynamic handout (D) vs static waves (H, 717a7dd).
row() { "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
for r in 1 2; do
  for cfg in "4 1024 128" "4 2048 128" "4 4096 128" "4 8192 128" "4 16384 128" "16 1024 64" "8 2048 64" "4 4096 64" "2 8192 64"; do
    set -- $cfg
    for c in "" "--causal"; do
      for dt in fp16 bf16; do
        [ $3 = 64 ] && [ $dt = bf16 ] && continue
        a=$(row .ab/p8/H --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $dt $c)
        b=$(row .ab/p8/D --path sm90 --batch $1 --heads 32 --dim $3 --seqlen $2 --dtype $dt $c)
        echo "r$r d$3 $dt B$1 S$2 ${c:-dense}: static=$a dynamic=$b"
      done
    done
  done
done
