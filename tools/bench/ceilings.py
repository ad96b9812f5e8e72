"""Measures the two ceilings of the benchmark protocol on this GPU: device-to-device copy bandwidth
(bytes read + written) and dense fp16/bf16 matrix-product rate on random data. CUDA events, warm-up,
median of 30. Prints one line per ceiling and writes ceilings.json when --out is given."""
import argparse
import json
import statistics

import torch


def median_ms(fn, iters=30, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = {"device": torch.cuda.get_device_name()}
    n_bytes = 4 << 30
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    result["copy_tb_s"] = 2 * n_bytes / (ms * 1e-3) / 1e12
    del src, dst
    n = 8192
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = median_ms(lambda: a @ b)
        result[f"matmul_{str(dtype).split('.')[-1]}_tflops"] = 2 * n**3 / (ms * 1e-3) / 1e12
    for key, value in result.items():
        print(f"ceiling {key}: {value:.2f}" if isinstance(value, float) else f"ceiling {key}: {value}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
