"""PyTorch SDPA FLASH_ATTENTION (FlashAttention-2) timing for the rows of sm80_timing.cu, same
protocol (10 warm-up calls, median of 30 CUDA-event timings, 3 rotated input sets), and the ratio
flashcore-sm80 / FA2 per row when the sm80-timing CSV is given:  sdpa_baseline.py [sm80.csv]"""
import csv, statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

def rows():
    for dt in ("fp16", "bf16"):
        for causal in (0, 1):
            for s in (1024, 2048, 4096, 8192, 16384):
                yield dt, causal, 4, 32, s, 128
            for s in (1024, 2048, 4096, 8192, 16384):
                yield dt, causal, 16384 // s, 32, s, 64

def time_row(dt, causal, b, h, s, d):
    dtype = torch.float16 if dt == "fp16" else torch.bfloat16
    sets = [[torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3)] for _ in range(3)]
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for it in range(40):
            q, k, v = sets[it % 3]
            start.record()
            F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            stop.record()
            stop.synchronize()
            if it >= 10:
                times.append(start.elapsed_time(stop))
    ms = statistics.median(times)
    return ms, 4.0 * b * h * s * s * d * (0.5 if causal else 1.0) / (ms * 1e-3) / 1e12

ours = {}
if len(sys.argv) > 1:
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            if r["impl"] == "flashcore-sm80":
                ours[(r["dtype"], int(r["causal"]), int(r["seqlen"]), int(r["dim"]))] = float(r["tflops"])
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
print("| dtype | causal | B | H | S | D | FA2 ms | FA2 TFLOPS | sm80 TFLOPS | sm80/FA2 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for row in rows():
    ms, tf = time_row(*row)
    mine = ours.get((row[0], row[1], row[4], row[5]))
    ratio = f"{mine / tf:.2f}" if mine else "-"
    print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} | {row[4]} | {row[5]} | {ms:.3f} | {tf:.1f} | "
          f"{mine if mine else '-'} | {ratio} |", flush=True)
