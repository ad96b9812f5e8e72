#!/usr/bin/env python3
"""PyTorch SDPA peers (cuDNN, FLASH_ATTENTION) on the shapes tools/bench/sm90_timing times, same
protocol: CUDA events, warm-up, median of 30 runs over rotated inputs, FLOPs 4*B*H*S^2*D (/2 causal).
Inputs are [B, S, H, D] contiguous viewed as [B, H, S, D], like flashcore's layout."""
import argparse
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def time_backend(backend, b, h, s, d, causal, dtype, iters):
    elems = b * s * h * d
    sets = 1 if elems * 2 * 4 >= (512 << 20) else 3
    bufs = [[torch.randn(b, s, h, d, device="cuda", dtype=dtype).transpose(1, 2) for _ in range(3)] for _ in range(sets)]
    try:
        with sdpa_kernel([backend]):
            for w in range(3):
                q, k, v = bufs[w % sets]
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
            for i in range(iters):
                q, k, v = bufs[i % sets]
                ev[i].record()
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                ev[i + 1].record()
            torch.cuda.synchronize()
    except RuntimeError as e:
        return None, str(e).splitlines()[0][:80]
    ms = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(iters))[iters // 2]
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    return flops / (ms * 1e-3) / 1e12, ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    shapes = []
    for dtype in (torch.float16, torch.bfloat16):
        for s in (1024, 2048, 4096, 8192, 16384):
            if args.quick and s not in (1024, 16384):
                continue
            for causal in (False, True):
                shapes.append((4, 32, s, 128, causal, dtype))
        if args.quick and dtype == torch.bfloat16:
            continue
        for causal in (False, True):
            shapes.append((2, 32, 8192, 64, causal, dtype))
            shapes.append((2, 8, 8192, 256, causal, dtype))
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    for (b, h, s, d, causal, dtype) in shapes:
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            tf, ms = time_backend(backend, b, h, s, d, causal, dtype, args.iters)
            dt = "fp16" if dtype == torch.float16 else "bf16"
            tag = "causal" if causal else "non-causal"
            if tf is None:
                print(f"{name:6s} d{d:<3d} {dt} B={b} H={h} S={s:<5d} {tag:10s} unavailable: {ms}")
            else:
                print(f"{name:6s} d{d:<3d} {dt} B={b} H={h} S={s:<5d} {tag:10s} {tf:8.1f} TFLOPS {ms:9.3f} ms", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
