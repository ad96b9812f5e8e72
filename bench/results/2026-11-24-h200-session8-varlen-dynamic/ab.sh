#!/bin/bash
# Session 8 A/B: varlen on the dynamic tile handout (N) vs the static waves (H, HEAD 717a7dd).
row() { "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
declare -A V
V[V1]=4096,512,2048,1000,3000,777,4049,1000
V[V2]=300,5000,120,7000,2500,64,1100
V[V3]=8192,8192
V[V4]=1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024,1024
V[V5]=200,3000,50,1500,800,2600,128,900,4000,333,70,1800
for r in 1 2 3; do
  for v in V1 V2 V3 V4 V5; do
    for c in "--causal" ""; do
      for d in "128 bf16" "64 fp16"; do
        set -- $d
        a=$(row .ab/p8/H --path sm90 --heads 32 --dim $1 --dtype $2 $c --varlen ${V[$v]})
        b=$(row .ab/p8/N --path sm90 --heads 32 --dim $1 --dtype $2 $c --varlen ${V[$v]})
        echo "r$r $v d$1 ${c:-dense}: static=$a dynamic=$b"
      done
    done
  done
done
echo "== dense rows (unchanged code path)"
for r in 1 2; do
  for b in .ab/p8/H .ab/p8/N; do
    echo "r$r $b d128 S4k: $(row $b --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype bf16) causal $(row $b --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 4096 --dtype bf16 --causal)"
  done
done
