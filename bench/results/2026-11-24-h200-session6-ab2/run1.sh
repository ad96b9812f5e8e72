#!/usr/bin/env bash
# Session 6, second A/B call (binaries built on the CPU machine, carried in .ab):
# 1. head groups in bf16: the verification suite at 12ff123 read d128 bf16 S=1k 457 (498 at
#    98149ce) and S=2k 573 (591). Same binary (.ab/sm90/bf: 12ff123, fp16 + bf16, d64/d128), the
#    old rule's group size set by FLASHCORE_SM90_HEADS_PER_GROUP (48 heads at S=1k and d64 S=2k,
#    24 at d128 S=2k, 3 at d128 S=16k) against the new rule (0 = one head), three rotating rounds.
# 2. softmax 4096x4096 16-bit: a row prefetch one wave ahead (row + 1056 or + 2112 into L2, in the
#    step 6 kernel, EXPERIMENT build flag FLASHCORE_SOFTMAX_LOOKAHEAD) against the committed kernels.
set -u
B=.ab/sm90/bf
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
run() { timeout 30 env FLASHCORE_SM90_HEADS_PER_GROUP=$1 $B --path sm90 $2 --no-check 2>/dev/null | tail -1 | awk '{for(i=1;i<=NF;i++) if($i=="yes"||$i=="no"){print $(i+2); exit}}'; }
CFGS=("48|--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype bf16" "24|--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype bf16"
      "3|--batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype bf16" "48|--batch 4 --heads 32 --dim 128 --seqlen 1024 --dtype fp16"
      "24|--batch 4 --heads 32 --dim 128 --seqlen 2048 --dtype fp16" "48|--batch 8 --heads 32 --dim 64 --seqlen 2048 --dtype fp16")
for r in 1 2 3; do for e in "${CFGS[@]}"; do
  old=${e%%|*}; c=${e#*|}
  echo "r$r | $c | old(hpg$old) $(run $old "$c") | new $(run 0 "$c")" >> $OUT/hpg.txt
done; done
cat $OUT/hpg.txt
S=.ab/softmax
for r in 1 2 3; do for v in on la1056 la2112; do
  $S/$v --runs 30 --shapes 4096x4096,8192x32000 --variants row_per_block,auto > $OUT/sm-$v-$r.log 2>&1
done; done
for r in 1 2 3; do for v in on la1056 la2112; do
  grep -E "^4096x4096 +(bf16|fp16) +(row_per_block|auto|\(same)|^8192x32000 +bf16 +auto" $OUT/sm-$v-$r.log | sed "s/^/r$r $v /"
done; done | tee $OUT/softmax.txt
cd $OUT && tar czf logs.tar.gz sm-*.log && rm -f sm-*.log
