#!/bin/bash
# Session 10, device call 2 (committed kernels, 8d-free tree = HEAD): (a) Nsight Compute of the
# kernels whose targets are missed: details page and the raw stall / pipe metrics; (b) what the clock
# and power do under sustained load: nvidia-smi samples every 20 ms, and `nvidia-smi -q -d
# PERFORMANCE` (the clock-event reasons) in the middle of a 2000-call d256 run; cuDNN (torch SDPA)
# timed the same two ways (30 calls after 3 warm-ups, and 2000 calls); (c) SASS counts per kernel.
# At most 8 files come back: everything small goes into one text file per topic.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 20 > "$OUT/smi.csv" 2>&1 &
SMI=$!
cmake --preset device -DFLASHCORE_GTEST_SOURCE_DIR=$PWD/.deps/googletest > /tmp/cfg.log 2>&1 &&
  cmake --build build/device -j16 --target flashcore-bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
A=build/device/tools/bench/flashcore-bench
row() { $A "$@" --no-check 2>&1 | awk '/flashcore-sm90/ {for(i=1;i<=NF;i++) if($i=="yes"||$i=="no") {print $(i+2); exit}}'; }
L=$OUT/sustained.txt
stamp() { echo "$(date +%T.%N) $*" >> $L; }
sleep 2; stamp idle
for i in 1 2 3; do stamp "d256 S8k 30 calls: $(row --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16)"; done
stamp "d256 S8k 2000 calls start"
( sleep 2; nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE > /tmp/perf-mid.txt 2>&1 ) &
stamp "d256 S8k 2000 calls: $(row --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16 --iters 2000)"
for i in 1 2 3; do stamp "d256 S8k 30 calls (after): $(row --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16)"; done
sleep 5; stamp "after 5 s idle, d256 S8k 30 calls: $(row --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16)"
stamp "d128 S16k 300 calls start"
stamp "d128 S16k 300 calls: $(row --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --iters 300)"
sleep 5
cat > /tmp/cudnn_sustained.py <<'PY'
import torch, sys, time
from torch.nn.attention import sdpa_kernel, SDPBackend
def run(b, h, s, d, n, warm=3):
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(warm): torch.nn.functional.scaled_dot_product_attention(q, k, v)
        for e0, e1 in ev:
            e0.record(); torch.nn.functional.scaled_dot_product_attention(q, k, v); e1.record()
    torch.cuda.synchronize()
    t = sorted(e0.elapsed_time(e1) for e0, e1 in ev)[n // 2]
    return 4 * b * h * s * s * d / t / 1e9
for label, n in (("30", 30), ("30", 30), ("2000", 2000), ("30 after", 30)):
    print(time.strftime("%T"), f"cuDNN d256 S8k {label} calls: {run(2, 8, 8192, 256, n):.1f}", flush=True)
time.sleep(5)
for label, n in (("30", 30), ("300", 300)):
    print(time.strftime("%T"), f"cuDNN d128 S16k {label} calls: {run(4, 32, 16384, 128, n):.1f}", flush=True)
PY
python3 /tmp/cudnn_sustained.py >> $L 2>&1
kill $SMI
cat /tmp/perf-mid.txt >> $L
# SASS: per kernel, HGMMA / LDL / STL counts
cuobjdump --dump-sass $A 2>/dev/null | awk '/Function :/ {if (f) print f, h, l, s; f=$3; h=l=s=0} /HGMMA/ {h++} /LDL/ {l++} /STL/ {s++} END {print f, h, l, s}' \
  | grep sm90 > "$OUT/sass-counts.txt"
echo "kernels with HGMMA: $(awk '$2>0' "$OUT/sass-counts.txt" | wc -l), with LDL/STL: $(awk '$3+$4>0' "$OUT/sass-counts.txt" | wc -l)"
# Nsight Compute, one launch each
P=$OUT/ncu.txt
prof() { local name=$1; shift; echo "######## $name: $*" >> $P
  timeout 150 ncu --clock-control none -k regex:forward_kernel -c 1 --set full -o /tmp/$name $A "$@" --iters 1 --warmup 0 --no-check > /tmp/$name.log 2>&1
  ncu --import /tmp/$name.ncu-rep --page details >> $P 2>&1
  ncu --import /tmp/$name.ncu-rep --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
names, units, vals = rows[0], rows[1], rows[2]
keep = ("stall", "pipe_tensor", "inst_executed_pipe", "pipe_alu", "pipe_fma", "pipe_xu", "pipe_lsu", "cycles_active.avg", "warps_active", "shared")
for n, u, v in zip(names, units, vals):
    if any(k in n for k in keep): print(n, u, v)' >> $P 2>&1; }
prof d128-long-16k --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16
prof d256-8k --path sm90 --batch 2 --heads 8 --dim 256 --seqlen 8192 --dtype fp16
prof d128-causal-16k --path sm90 --batch 4 --heads 32 --dim 128 --seqlen 16384 --dtype fp16 --causal
prof d64-8k --path sm90 --batch 2 --heads 32 --dim 64 --seqlen 8192 --dtype fp16
grep -E '########|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Eligible Warps' $P
cat $L | grep -v '^ *$' | head -60
