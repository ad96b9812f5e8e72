#!/usr/bin/env python3
"""Decode (attention over a KV cache) : flashcore vs PyTorch SDPA's cuDNN backend, in one process.

What is measured (pass = "decode"): one step of batched decoding, q [B, Sq = 1 or 4, Hq, D] against
a cache of Sk tokens per entry, bf16, d128, GQA 64/8 and 32/8:
  flashcore           flash_attn_with_kvcache on a dense cache [B, Sk, Hkv, D]
  flashcore-paged16   the same on a paged cache (page_block_size 16, shuffled block table)
  flashcore-paged256  page_block_size 256
  sdpa-cudnn          scaled_dot_product_attention(enable_gqa=True) pinned to the cuDNN backend, on
                      contiguous [B, Hkv, Sk, D] K/V (its native layout), the same dense shape
Time: each implementation's calls are captured in a CUDA graph (how serving engines run a decode
step: no host overhead), `--calls` calls per graph rotating over enough cache copies that a call does
not find its K/V in L2; the median over >= 10 replays, divided by the calls. `eager_ms` is the median
of plain calls (CUDA events per call; host overhead included when it exceeds the GPU time).
Bandwidth: gbps = bytes of K and V read / time; pct_copy = gbps / the device-to-device copy rate
measured in the same run (a 1 GiB tensor copy; bytes read + written per second), the ceiling a
memory-bound kernel can approach. vs_cudnn = sdpa-cudnn ms / this ms on the same (B, Sq, Hq, Sk).
max_err: max |out - fp32 reference| over batch entry 0.

Prefill over a cache (pass = "prefill", `--prefill-impls`): flash_attn_varlen_func, causal, bf16, d128,
GQA 32/8, B sequences whose last Sq tokens attend to Sk cached keys, on a dense packed K/V
(`flashcore`) and on shuffled paged caches (`flashcore-paged16` / `-paged256`); tflops counts the
visible (query, key) pairs, vs_dense = the dense call's ms / this ms in the same run. A prefill call
runs ~1 ms, so it is timed as plain calls (CUDA events around each; the host enqueues ahead), the
implementations of a shape taking turns call by call (median per implementation), so a drift of the
GPU's clocks over the run weighs on all alike. (On an H200 both plain and graph timings of the same
~1 ms call drifted by up to 15% between repetitions, so what a row can state is its ratio to the
dense call timed alongside it.)

`--decode-rows-from REPORT_JSON` takes the decode rows and the copy rate from an earlier report of the
same commit instead of measuring them (to re-time the prefill rows alone).

Writes DIR/report.json {device, date, commit, command, torch, copy_gbps, rows: [...]}, DIR/report.md
and DIR/decode.png.   python3 tools/bench/decode_compare.py --out bench/reports/h200/decode [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys

import torch

L2_BYTES = 64 << 20  # at least the largest L2 of the GPUs we run on (H100 50 MB, H200 50 MB)


def suite(quick: bool):
    shapes = [(1, 8192), (1, 32768), (1, 131072), (8, 32768), (8, 131072), (32, 32768), (128, 32768), (64, 131072)]
    if quick:
        shapes = [(1, 8192), (1, 131072), (8, 32768), (128, 32768)]
    for sq in (1, 4):
        for hq, hkv in ((64, 8), (32, 8)):
            for b, sk in shapes:
                yield dict(B=b, Sq=sq, Hq=hq, Hkv=hkv, Sk=sk, D=128)


def prefill_suite(quick: bool):
    shapes = [(4, 4096, 4096), (8, 512, 8192)] if not quick else [(4, 4096, 4096)]
    for b, sq, sk in shapes:
        yield dict(B=b, Sq=sq, Hq=32, Hkv=8, Sk=sk, D=128)


def prefill_flops(c) -> float:
    """QK^T and PV over the visible pairs of bottom-right causal rows (row i sees Sk - Sq + i + 1 keys)."""
    sq, sk = c["Sq"], c["Sk"]
    pairs = sum(min(sk, sk - sq + i + 1) for i in range(sq))
    return 4.0 * c["B"] * c["Hq"] * c["D"] * pairs


def prepare_prefill_row(c, impl: str):
    """(run, max_err) of one prefill implementation: run(None) makes the call on inputs it owns."""
    import flashcore

    B, Sq, Hq, Hkv, Sk, D = c["B"], c["Sq"], c["Hq"], c["Hkv"], c["Sk"], c["D"]
    dt = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B * Sq, Hq, D, device="cuda", dtype=dt, generator=gen)
    k = torch.randn(B * Sk, Hkv, D, device="cuda", dtype=dt, generator=gen)
    v = torch.randn(B * Sk, Hkv, D, device="cuda", dtype=dt, generator=gen)
    cu_q = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * Sq
    cu_k = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * Sk
    page = {"flashcore": None, "flashcore-paged16": 16, "flashcore-paged256": 256}[impl]
    table = None
    if page is not None:
        # The same keys, scattered over a shuffled pool: sequence b's row r at page table[b][r // page].
        pages_per_seq = math.ceil(Sk / page)
        table = torch.randperm(B * pages_per_seq, device="cuda", generator=gen).to(torch.int32).reshape(B, pages_per_seq)
        kp = torch.zeros(B * pages_per_seq, page, Hkv, D, device="cuda", dtype=dt)
        vp = torch.zeros_like(kp)
        padded = pages_per_seq * page
        for b in range(B):
            rows_k = torch.zeros(padded, Hkv, D, device="cuda", dtype=dt)
            rows_v = torch.zeros_like(rows_k)
            rows_k[:Sk] = k[b * Sk:(b + 1) * Sk]
            rows_v[:Sk] = v[b * Sk:(b + 1) * Sk]
            kp[table[b].long()] = rows_k.reshape(pages_per_seq, page, Hkv, D)
            vp[table[b].long()] = rows_v.reshape(pages_per_seq, page, Hkv, D)
        kv = (kp, vp)
    else:
        kv = (k, v)

    def run(_):
        return flashcore.flash_attn_varlen_func(q, kv[0], kv[1], cu_q, cu_k, Sq, Sk, causal=True, block_table=table)

    out = run(None)
    max_err = (out[:Sq].float() - reference(q[:Sq], k[:Sk], v[:Sk])).abs().max().item()
    return run, max_err


def time_eager_interleaved(runs: dict, rounds: int) -> dict:
    """ms of one plain call of each run in `runs` (name -> run(None)), the runs taking turns call by call
    for `rounds` rounds (CUDA events around each call, one synchronization at the end); median per run."""
    for run in runs.values():
        for _ in range(3):
            run(None)
    events = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            run(None)
            e.record()
            events[name].append((s, e))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in ev) for name, ev in events.items()}


def copy_gbps() -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    del src, dst
    return 2 * (1 << 30) / (statistics.median(times) * 1e-3) / 1e9


def kv_bytes(c) -> int:
    return 2 * c["B"] * c["Sk"] * c["Hkv"] * c["D"] * 2  # K and V, bf16


def n_sets(c, free_bytes: int, copies_per_set: int = 1) -> int:
    per_set = kv_bytes(c) * copies_per_set
    want = max(1, math.ceil(4 * L2_BYTES / per_set))
    fit = max(1, int(0.7 * free_bytes // per_set))
    return min(want, fit, 8)


def time_graph(run, sets, calls: int, replays: int = 12) -> float:
    """Per-call ms of `calls` calls (rotating over sets) captured in one CUDA graph, median of replays."""
    graph = capture_graph(run, sets, calls)
    times = [replay_ms(graph) for _ in range(replays)]
    del graph
    return statistics.median(times) / calls


def capture_graph(run, sets, calls: int):
    """`calls` calls of run (rotating over sets) captured in one CUDA graph, after a warm-up, replayed once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            run(sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            run(sets[i % len(sets)])
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_ms(graph) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    graph.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def time_eager(run, sets, iters: int = 30) -> float:
    for i in range(5):
        run(sets[i % len(sets)])
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (s, e) in enumerate(events):
        s.record()
        run(sets[i % len(sets)])
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def reference(q0, k0, v0):
    """fp32 attention of one batch entry: q0 [Sq, Hq, D], k0/v0 [Sk, Hkv, D]; bottom-right causal."""
    sq, hq, d = q0.shape
    g = hq // k0.shape[1]
    k = k0.float().repeat_interleave(g, dim=1).transpose(0, 1)  # [Hq, Sk, D]
    v = v0.float().repeat_interleave(g, dim=1).transpose(0, 1)
    s = torch.einsum("qhd,hkd->hqk", q0.float(), k) / math.sqrt(d)
    sk = k.shape[1]
    allowed = torch.arange(sk, device=q0.device)[None, :] <= (sk - sq + torch.arange(sq, device=q0.device))[:, None]
    s = s.masked_fill(~allowed[None], float("-inf"))
    return torch.einsum("hqk,hkd->qhd", torch.softmax(s, dim=-1), v)


def bench_row(c, impl: str, calls: int):
    import flashcore
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    B, Sq, Hq, Hkv, Sk, D = c["B"], c["Sq"], c["Hq"], c["Hkv"], c["Sk"], c["D"]
    dt = torch.bfloat16
    free, _ = torch.cuda.mem_get_info()
    sets_n = n_sets(c, free)
    causal = Sq > 1  # speculative tokens see each other causally
    gen = torch.Generator(device="cuda").manual_seed(0)
    qs = [torch.randn(B, Sq, Hq, D, device="cuda", dtype=dt, generator=gen) for _ in range(sets_n)]
    seqlens = torch.full((B,), Sk, dtype=torch.int32, device="cuda")
    max_err = None
    if impl == "sdpa-cudnn":
        sets = [(q.transpose(1, 2).contiguous(), torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dt, generator=gen),
                 torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dt, generator=gen)) for q in qs]

        def run(x):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return scaled_dot_product_attention(x[0], x[1], x[2], enable_gqa=True, is_causal=False)

        if causal:
            # Bottom-right causal for Sq > 1 (SDPA's is_causal is top-left): an explicit boolean mask.
            mask = (torch.arange(Sk, device="cuda")[None, :] <= (Sk - Sq + torch.arange(Sq, device="cuda"))[:, None])

            def run(x):  # noqa: F811
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return scaled_dot_product_attention(x[0], x[1], x[2], attn_mask=mask, enable_gqa=True)
        out = run(sets[0]).transpose(1, 2)
        max_err = (out[0].float() - reference(qs[0][0], sets[0][1][0].transpose(0, 1),
                                               sets[0][2][0].transpose(0, 1))).abs().max().item()
    else:
        page = {"flashcore": None, "flashcore-paged16": 16, "flashcore-paged256": 256}[impl]
        if page is None:
            sets = [(q, torch.randn(B, Sk, Hkv, D, device="cuda", dtype=dt, generator=gen),
                     torch.randn(B, Sk, Hkv, D, device="cuda", dtype=dt, generator=gen), None) for q in qs]
        else:
            pages_per_seq = math.ceil(Sk / page)
            num_pages = B * pages_per_seq
            sets = []
            for q in qs:
                table = torch.randperm(num_pages, device="cuda", generator=gen).to(torch.int32).reshape(B, pages_per_seq)
                sets.append((q, torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt, generator=gen),
                             torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt, generator=gen), table))

        def run(x):
            return flashcore.flash_attn_with_kvcache(x[0], x[1], x[2], cache_seqlens=seqlens, block_table=x[3],
                                                     causal=causal)
        out = run(sets[0])
        q0, k0, v0, table = sets[0]
        if table is not None:
            k0 = k0[table[0].long()].reshape(-1, Hkv, D)[:Sk]
            v0 = v0[table[0].long()].reshape(-1, Hkv, D)[:Sk]
        else:
            k0, v0 = k0[0], v0[0]
        max_err = (out[0].float() - reference(q0[0], k0, v0)).abs().max().item()
    ms = time_graph(run, sets, calls)
    eager = time_eager(run, sets)
    del sets, qs
    torch.cuda.empty_cache()
    return ms, eager, max_err


def git_commit() -> str:
    if os.environ.get("FLASHCORE_COMMIT", "unknown") != "unknown":
        return os.environ["FLASHCORE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return os.environ.get("FLASHCORE_COMMIT", "unknown")


def write_markdown(report, path):
    lines = [f"# Decode: flashcore vs SDPA cuDNN ({report['device']})", "",
             f"commit {report['commit']}, {report['date']}, torch {report['torch']}; command: `{report['command']}`", "",
             f"Device-to-device copy rate (bytes read + written per second): {report['copy_gbps']:.0f} GB/s. "
             "Times are per call inside a CUDA graph (eager_ms: plain calls). pct_copy = K/V bytes read per "
             "second / copy rate; vs cuDNN = cuDNN ms / ms.", "",
             "| Sq | Hq/Hkv | B | Sk | impl | ms | eager ms | GB/s | % copy | vs cuDNN | max err | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    for r in report["rows"]:
        if r["pass"] != "decode":
            continue
        lines.append(f"| {r['Sq']} | {r['Hq']}/{r['Hkv']} | {r['B']} | {r['Sk']} | {r['impl']} | {f(r['ms'], '.4f')} | "
                     f"{f(r['eager_ms'], '.4f')} | {f(r['gbps'], '.0f')} | {f(r['pct_copy'], '.1f')} | "
                     f"{f(r['vs_cudnn'], '.2f')} | {f(r['max_err'], '.1e')} | {r['note']} |")
    prefill = [r for r in report["rows"] if r["pass"] == "prefill"]
    if prefill:
        lines += ["", "## Prefill over a cache (flash_attn_varlen_func, causal, bf16, d128)", "",
                  "Plain calls, the implementations of a shape taking turns; vs dense = the dense-cache call's ms / "
                  "ms in the same run.", "",
                  "| B | Sq | Sk | Hq/Hkv | impl | ms | TFLOPS | vs dense | max err | note |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in prefill:
            lines.append(f"| {r['B']} | {r['Sq']} | {r['Sk']} | {r['Hq']}/{r['Hkv']} | {r['impl']} | "
                         f"{f(r['ms'], '.4f')} | {f(r['tflops'], '.0f')} | "
                         f"{f(r['vs_dense'], '.3f')} | {f(r['max_err'], '.1e')} | {r['note']} |")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def write_plot(report, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    groups = sorted({(r["Sq"], r["Hq"], r["Hkv"]) for r in report["rows"] if r["pass"] == "decode"})
    if not groups:
        return
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (sq, hq, hkv) in zip(axes[0], groups):
        rows = [r for r in report["rows"]
                if r["pass"] == "decode" and (r["Sq"], r["Hq"], r["Hkv"]) == (sq, hq, hkv) and r["pct_copy"]]
        labels = sorted({(r["B"], r["Sk"]) for r in rows})
        for impl in sorted({r["impl"] for r in rows}):
            ys = [next((r["pct_copy"] for r in rows if r["impl"] == impl and (r["B"], r["Sk"]) == lb), None)
                  for lb in labels]
            ax.plot(range(len(labels)), [y if y is not None else float("nan") for y in ys], marker="o", label=impl)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([f"B{b}\n{s // 1024}k" for b, s in labels], fontsize=7)
        ax.set_title(f"Sq={sq} GQA {hq}/{hkv}")
        ax.set_ylabel("% of D2D copy rate")
        ax.axhline(100, color="gray", lw=0.5)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(args, copy_rate, rows):
    report = dict(device=torch.cuda.get_device_name(), date=datetime.datetime.now().isoformat(timespec="seconds"),
                  commit=git_commit(), command=" ".join(["python3", "tools/bench/decode_compare.py"] + sys.argv[1:]),
                  torch=torch.__version__, copy_gbps=copy_rate, rows=rows)
    with open(os.path.join(args.out, "report.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    write_markdown(report, os.path.join(args.out, "report.md"))
    write_plot(report, os.path.join(args.out, "decode.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--impls", default="flashcore,flashcore-paged16,flashcore-paged256,sdpa-cudnn",
                    help="decode rows' implementations ('' for none)")
    ap.add_argument("--prefill-impls", default="flashcore,flashcore-paged16,flashcore-paged256",
                    help="prefill rows' implementations ('' for none; the first one is the vs_dense base)")
    ap.add_argument("--decode-rows-from", default=None,
                    help="an earlier report.json of the same commit: its decode rows and copy rate are kept, "
                         "not measured")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    impls = [i for i in args.impls.split(",") if i]
    prefill_impls = [i for i in args.prefill_impls.split(",") if i]
    kept = []
    if args.decode_rows_from:
        with open(args.decode_rows_from) as fh:
            earlier = json.load(fh)
        copy_rate = earlier["copy_gbps"]
        kept = [r for r in earlier["rows"] if r["pass"] == "decode"]
        impls = []
    else:
        copy_rate = copy_gbps()
    rows = []
    for c in prefill_suite(args.quick) if prefill_impls else []:
        results, runs = [], {}
        for impl in prefill_impls:
            row = dict(impl=impl, dtype="bf16", **c, page_size={"flashcore-paged16": 16, "flashcore-paged256": 256}.get(impl),
                       ms=None, eager_ms=None, tflops=None, vs_dense=None, max_err=None, note="")
            row["pass"] = "prefill"
            try:
                runs[impl], row["max_err"] = prepare_prefill_row(c, impl)
            except Exception as exc:
                row["note"] = str(exc).splitlines()[0][:160]
                torch.cuda.empty_cache()
            results.append(row)
        try:
            times = time_eager_interleaved(runs, rounds=30)
        except Exception as exc:
            times = {}
            for row in results:
                row["note"] = row["note"] or str(exc).splitlines()[0][:160]
        for row in results:
            if row["impl"] in times:
                row["ms"] = times[row["impl"]]
                row["tflops"] = prefill_flops(c) / (row["ms"] * 1e-3) / 1e12
            print(f"prefill B={c['B']} Sq={c['Sq']} Sk={c['Sk']} {row['impl']:20s} ms={row['ms']} "
                  f"tflops={row['tflops']} {row['note']}", flush=True)
        del runs
        torch.cuda.empty_cache()
        base = results[0]["ms"]
        for row in results:
            if base and row["ms"]:
                row["vs_dense"] = base / row["ms"]
            rows.append(row)
        write_report(args, copy_rate, rows)
    for c in suite(args.quick) if impls else []:
        results = {}
        for impl in impls:
            row = dict(impl=impl, pass_="decode", dtype="bf16", **c, page_size={"flashcore-paged16": 16,
                       "flashcore-paged256": 256}.get(impl), ms=None, eager_ms=None, gbps=None, pct_copy=None,
                       vs_cudnn=None, max_err=None, note="")
            try:
                ms, eager, err = bench_row(c, impl, args.calls)
                row.update(ms=ms, eager_ms=eager, max_err=err, gbps=kv_bytes(c) / (ms * 1e-3) / 1e9)
                row["pct_copy"] = 100 * row["gbps"] / copy_rate
            except Exception as exc:  # a backend that cannot run the row says why
                row["note"] = str(exc).splitlines()[0][:160]
                torch.cuda.empty_cache()
            results[impl] = row
            print(f"Sq={c['Sq']} {c['Hq']}/{c['Hkv']} B={c['B']} Sk={c['Sk']} {impl:20s} "
                  f"ms={row['ms'] if row['ms'] is None else round(row['ms'], 4)} "
                  f"pct={row['pct_copy'] if row['pct_copy'] is None else round(row['pct_copy'], 1)} {row['note']}",
                  flush=True)
        base = results.get("sdpa-cudnn", {}).get("ms")
        for row in results.values():
            if base and row["ms"]:
                row["vs_cudnn"] = base / row["ms"]
            row["pass"] = row.pop("pass_")
            rows.append(row)
        write_report(args, copy_rate, rows)  # after every shape: a run cut short keeps its rows
    if kept:
        write_report(args, copy_rate, rows + kept)
    print(f"copy rate {copy_rate:.0f} GB/s; report in {args.out}")


if __name__ == "__main__":
    main()
