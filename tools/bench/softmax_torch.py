#!/usr/bin/env python3
"""torch.softmax on the shapes of flashcore-softmax-bench, timed the same way (docs/softmax.md).

Each timed run replays a CUDA graph holding one torch.softmax per input set (the sets together are
>= 3x the L2, so every call reads x from DRAM); warm-up, then the median over --runs replays with
CUDA events. Bytes = read x + write y (torch writes no LSE). Also measures the copy bandwidth
(y.copy_(x) of 1 GiB, read + write) in the same process.

With --ours PATH (flashcore-softmax-bench --json output) prints one combined Markdown table:
GB/s of every ladder step, % of copy bandwidth, and torch time / our time.
"""
import argparse
import json
import math

import torch

from ceilings import median_ms  # same directory: CUDA events per call, median

SHAPES = [(1024, 1024), (4096, 4096), (8192, 32000), (16, 1 << 20)]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
WARMUP = 3
L2_MULTIPLE = 3.0


def copy_gbs(runs):
    n = 1 << 30
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iters=runs, warmup=WARMUP)
    return 2 * n / (ms * 1e-3) / 1e9


def bench_torch(rows, cols, dtype, runs, l2_bytes):
    elem = torch.tensor([], dtype=dtype).element_size()
    set_bytes = 2 * rows * cols * elem
    sets = int(min(64, max(2, math.ceil(L2_MULTIPLE * l2_bytes / set_bytes))))
    gen = torch.Generator(device="cuda").manual_seed(cols)
    xs = [(torch.rand(rows, cols, device="cuda", generator=gen) * 8 - 4).to(dtype) for _ in range(sets)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            [torch.softmax(x, dim=-1) for x in xs]
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = [torch.softmax(x, dim=-1) for x in xs]
    ms = median_ms(graph.replay, iters=runs, warmup=WARMUP)
    ok = bool(torch.allclose(ys[0].float().sum(-1), torch.ones(rows, device="cuda"), atol=2e-2))
    seconds = ms * 1e-3 / sets
    del xs, ys, graph
    torch.cuda.empty_cache()
    return {"us": seconds * 1e6, "gbs": set_bytes / seconds / 1e9, "rows_sum_to_one": ok}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--json", default="")
    parser.add_argument("--ours", default="", help="flashcore-softmax-bench --json output to compare with")
    args = parser.parse_args()

    props = torch.cuda.get_device_properties(0)
    l2_bytes = props.L2_cache_size
    copy = copy_gbs(args.runs)
    print(f"torch {torch.__version__} on {props.name}: copy {copy:.1f} GB/s")
    results = []
    for rows, cols in SHAPES:
        for name in args.dtypes.split(","):
            r = bench_torch(rows, cols, DTYPES[name], args.runs, l2_bytes)
            r.update(shape=f"{rows}x{cols}", dtype=name, copy_fraction=r["gbs"] / copy)
            results.append(r)
            print(f"{r['shape']:<12} {name:<6} torch.softmax {r['us']:10.2f} us {r['gbs']:8.1f} GB/s "
                  f"{100 * r['copy_fraction']:5.1f}% of copy{'' if r['rows_sum_to_one'] else '  ROW SUMS WRONG'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "torch": torch.__version__, "copy_gbs": copy, "results": results}, f, indent=1)

    if args.ours:
        with open(args.ours) as f:
            ours = json.load(f)
        torch_by_key = {(r["shape"], r["dtype"]): r for r in results}
        variants = []
        for r in ours["results"]:
            if r["variant"] not in variants:
                variants.append(r["variant"])
        print(f"\nGB/s (read x + write y [+ lse]); copy bandwidth: ours {ours['copy_gbs']:.0f}, torch's {copy:.0f} GB/s")
        print("| shape | dtype | torch.softmax | " + " | ".join(variants) +
              " | same-size copy | best % of copy | best % of same-size copy | best vs torch (time) |")
        print("|---" * (len(variants) + 7) + "|")
        for (shape, dtype), t in torch_by_key.items():
            row = [r for r in ours["results"] if r["shape"] == shape and r["dtype"] == dtype]
            if not row:
                continue
            cells, best = [], None
            for v in variants:
                r = next((r for r in row if r["variant"] == v), None)
                if r is None or r["gbs"] == 0:
                    cells.append("n/a")
                    continue
                label = f"{r['gbs']:.0f}" + (f" ({r['chosen']})" if v == "auto" else "")
                cells.append(label)
                if v != "auto" and (best is None or r["us"] < best["us"]):
                    best = r
            same_size = best.get("same_size_copy_gbs", 0.0)
            same_size_cell = f"{100 * best['gbs'] / same_size:.1f}%" if same_size > 0 else "n/a"
            print(f"| {shape} | {dtype} | {t['gbs']:.0f} | " + " | ".join(cells) +
                  f" | {same_size:.0f} | {100 * best['copy_fraction']:.1f}% ({best['variant']}) | {same_size_cell} "
                  f"| {t['us'] / best['us']:.2f}x |")


if __name__ == "__main__":
    main()
