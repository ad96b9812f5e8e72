#!/bin/bash
# Session 8 probe: (1) varlen causal balance vs head-group size; (2) d64 causal kBlockN 96 vs 128;
# (3) clock history: d128 causal S=1k cold / after a heavy run / with a long warm-up.
H=.ab/p8/H
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
row() { "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
V1=4096,512,2048,1000,3000,777,4049,1000
V2=300,5000,120,7000,2500,64,1100
V3=8192,8192
echo "== varlen causal bf16 d128 H32, TFLOPS by FLASHCORE_SM90_HEADS_PER_GROUP (0 = rule)"
for r in 1 2 3; do
  for v in V1 V2 V3; do
    line="r$r $v:"
    for g in 0 1 32 4; do
      t=$(FLASHCORE_SM90_HEADS_PER_GROUP=$g row $H --path sm90 --heads 32 --dim 128 --dtype bf16 --causal --varlen ${!v})
      line="$line g$g=$t"
    done
    echo "$line"
  done
done
echo "== d64 causal fp16 (B*S=16k, H32): kBlockN 128 (default) vs 96 (FLASHCORE_SM90_BLOCK_N=96)"
for r in 1 2 3; do
  for s in 2048 4096; do
    b=$((16384/s))
    a=$(row $H --path sm90 --batch $b --heads 32 --dim 64 --seqlen $s --dtype fp16 --causal)
    c=$(FLASHCORE_SM90_BLOCK_N=96 row $H --path sm90 --batch $b --heads 32 --dim 64 --seqlen $s --dtype fp16 --causal)
    echo "r$r S=$s: 128=$a 96=$c"
  done
done
echo "== clock history: d128 causal fp16 B4 H32 S=1k"
c1() { row $H --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16 --causal "$@"; }
heavy() { $H --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --no-check --iters 40 >/dev/null 2>&1; }
sleep 2; echo "cold: $(c1)"
heavy; echo "after heavy: $(c1)"
heavy; echo "after heavy, warmup 2000: $(c1 --warmup 2000)"
sleep 2; echo "cold, warmup 2000: $(c1 --warmup 2000)"
heavy; echo "after heavy: $(c1)"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
