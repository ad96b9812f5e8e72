#!/usr/bin/env python3
"""flashcore vs its peers, in one process, on the same inputs (design.md's benchmark protocol).

Implementations (--impls, comma separated; default all):
  flashcore-sm90, flashcore-sm80, flashcore-naive   flashcore through its Python package, one kernel
                                                     path each (the private `_path=` keyword)
  sdpa-flash, sdpa-cudnn, sdpa-efficient             torch SDPA pinned to one backend
  flex                                               FlexAttention under torch.compile

Passes (--pass, comma separated; default fwd), one row per implementation and pass:
  fwd       the forward
  bwd       the backward alone: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) through
            the graph of one untimed forward, so every timed call reuses it
  fwd+bwd   a fresh forward and its backward per call (a training step's attention)
flashcore's backward follows the row's _path for sm80 and naive; the flashcore-sm90 rows' backward is
automatic selection, which is the sm90 backward for every 16-bit call with head dims up to 128;
-det rows call with deterministic=True.

Protocol: FLOPs = 2*B*Hq*Sq*Sk*(Dqk+Dv), halved for causal with Sq == Sk (varlen: summed per
sequence), times 2.5 for bwd and 3.5 for fwd+bwd (flash-attn's convention); CUDA events around each
call, warm-up, median of >= 30 timed calls, inputs rotated over enough buffers that a call does not find its inputs in L2; max error against a reference computed
once per configuration (fp64 when small, else fp32) on a slice of query rows of the first sequence
(bwd, fwd+bwd: the largest of the errors of dq on those query rows and of dk, dv on the key rows of the
same numbers, against gradients of the whole first sequence's attention, for one fixed random dout).
An implementation that cannot run a row shows "n/a" with the reason (flashcore's supports(), the
error torch raised, or a stated limit). --rounds N times every implementation N times per row in
rotating order and keeps the median round (rows then also carry `rounds_ms`): the H200's clock is
power-limited, so one 30-call window can land on a slow stretch. --warmup-seconds S measures the
steady state instead: each measurement follows S seconds of the same call, so the clock is the one
the 700 W cap allows under sustained load, not the one left by whatever ran before. Varlen rows time
flashcore with cu_seqlens trusted, as flash-attn always does (flashcore.set_check_device_metadata(
False)); the row's note gives the time of the default call, which validates them (one stream
synchronization).

Writes DIR/report.json (schema below), DIR/report.md and DIR/tflops.png (one panel per configuration
family, TFLOPS vs sequence length, one line per implementation).

report.json: {device, date, commit, command, torch[, warmup_seconds], rows: [{impl, pass, dtype, B, Hq,
Hkv, Sq, Sk, Dqk, Dv, causal, window, ms, tflops, max_err, note, family, varlen[, rounds_ms][, grad_max_err]}]};
pass is fwd, bwd or fwd+bwd; grad_max_err ({dq, dk, dv}) comes with the timed bwd and fwd+bwd rows;
ms/tflops/max_err are null when not measured (note then says why). --merge A.json B.json ... combines reports of one commit
(e.g. one device call per group of families) without measuring.

  python3 tools/bench/compare.py --quick --out bench-out
  python3 tools/bench/compare.py --quick --pass fwd,bwd,fwd+bwd --out bench-out
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

try:
    import torch
except ImportError:  # the suite, FLOP counts and report writers work without torch (tested in CI)
    torch = None

FLASHCORE_IMPLS = {"flashcore-sm90": "sm90", "flashcore-sm90-det": "sm90", "flashcore-sm80": "sm80",
                   "flashcore-sm80-det": "sm80", "flashcore-naive": "naive"}
# Rows that call with deterministic=True (the backward's bitwise-repeatable mode; the forward is the same).
FLASHCORE_DETERMINISTIC = {"flashcore-sm90-det", "flashcore-sm80-det"}
SDPA_IMPLS = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient")
ALL_IMPLS = (*FLASHCORE_IMPLS, *SDPA_IMPLS, "flex")
LADDER = ("flashcore-naive", "flashcore-sm80", "flashcore-sm90")
# FLOPs of a pass as a multiple of the forward's, flash-attn's benchmark convention: the backward's five
# GEMMs (QK^T recomputed, dP, dV, dQ, dK) against the forward's two.
PASS_FLOP_FACTORS = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}
PASSES = tuple(PASS_FLOP_FACTORS)
PASS_TITLES = {"fwd": "forward", "bwd": "backward", "fwd+bwd": "forward + backward"}

NAIVE_FLOP_LIMIT = 2e12     # the naive GPU path (fp32, materialized scores) is skipped above this
ROTATION_BYTES = 256 << 20  # rotate inputs over at least this many bytes (several times L2)
MAX_ROTATION_SETS = 8
REFERENCE_ROWS = 256        # query rows of the first sequence that the error is measured on
SLOW_CALL_BUDGET_S = 6.0    # an implementation whose timed calls would take longer gets fewer (noted)


# ------------------------------------------------------------------------------------------------
# Configurations: the standard suite of design.md (same rows and families as flashcore-bench)
# ------------------------------------------------------------------------------------------------

@dataclass
class Config:
    family: str
    B: int = 4
    Sq: int = 1024
    Sk: int = 1024
    Hq: int = 32
    Hkv: int = 32
    Dqk: int = 128
    Dv: int = 128
    dtype: str = "fp16"
    causal: bool = False
    varlen: List[int] = field(default_factory=list)  # query = key lengths of a varlen batch

    @property
    def window(self) -> Tuple[int, int]:
        return (-1, 0) if self.causal else (-1, -1)

    def label(self) -> str:
        lens = f" varlen[{len(self.varlen)}]" if self.varlen else ""
        return (f"{self.family} B={self.B} S={self.Sq} Hq={self.Hq} Hkv={self.Hkv} D={self.Dqk}/{self.Dv}"
                f"{' causal' if self.causal else ''}{lens}")

    def flops(self) -> float:
        lengths = [(s, s) for s in self.varlen] if self.varlen else [(self.Sq, self.Sk)] * self.B
        total = 0.0
        for sq, sk in lengths:
            pairs = sq * sk
            if self.causal:
                pairs = pairs / 2 if sq == sk else sum(min(sk, max(0, i + sk - sq + 1)) for i in range(sq))
            total += 2.0 * self.Hq * pairs * (self.Dqk + self.Dv)
        return total

    def pass_flops(self, pass_: str) -> float:
        return self.flops() * PASS_FLOP_FACTORS[pass_]


def standard_suite() -> List[Config]:
    suite = []
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            for s in (1024, 2048, 4096, 8192, 16384):
                suite.append(Config(f"d128-{dtype}{'-causal' if causal else ''}", Sq=s, Sk=s, dtype=dtype,
                                    causal=causal))
    for d in (64, 256):
        for causal in (False, True):
            for s in (1024, 2048, 4096, 8192, 16384):
                suite.append(Config(f"d{d}-fp16{'-causal' if causal else ''}", B=16384 // s, Sq=s, Sk=s,
                                    Hq=2048 // d, Hkv=2048 // d, Dqk=d, Dv=d, causal=causal))
    for s in (8192, 16384):
        suite.append(Config("d512-fp16", B=1, Sq=s, Sk=s, Hq=48, Hkv=48, Dqk=512, Dv=512))
    for s in (2048, 8192):
        suite.append(Config("d192x128-bf16-causal", B=16384 // s, Sq=s, Sk=s, Hq=16, Hkv=16, Dqk=192, Dv=128,
                            dtype="bf16", causal=True))
    for causal in (False, True):
        for s in (2048, 8192):
            suite.append(Config(f"gqa32x8-bf16{'-causal' if causal else ''}", B=16384 // s, Sq=s, Sk=s, Hq=32,
                                Hkv=8, dtype="bf16", causal=causal))
    lens = [4096, 512, 2048, 1000, 3000, 777, 4049, 1000]
    suite.append(Config("varlen-bf16-causal", B=len(lens), Sq=max(lens), Sk=max(lens), dtype="bf16", causal=True,
                        varlen=lens))
    return suite


def backward_suite() -> List[Config]:
    """The backward's report (--backward-suite): d64 and d128, fp16 and bf16, causal or not, S = 1k..16k
    at 16k tokens per row (B = 16384 / S, Hq = 2048 / d), then GQA 32/8 and a varlen batch."""
    suite = []
    for d in (64, 128):
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                for s in (1024, 2048, 4096, 8192, 16384):
                    suite.append(Config(f"d{d}-{dtype}{'-causal' if causal else ''}", B=16384 // s, Sq=s, Sk=s,
                                        Hq=2048 // d, Hkv=2048 // d, Dqk=d, Dv=d, dtype=dtype, causal=causal))
    for causal in (False, True):
        suite.append(Config(f"gqa32x8-bf16{'-causal' if causal else ''}", B=2, Sq=8192, Sk=8192, Hq=32, Hkv=8,
                            dtype="bf16", causal=causal))
    lens = [4096, 512, 2048, 1000, 3000, 777, 4049, 1000]
    suite.append(Config("varlen-bf16-causal", B=len(lens), Sq=max(lens), Sk=max(lens), dtype="bf16", causal=True,
                        varlen=lens))
    return suite


def headdim_suite() -> List[Config]:
    """The head-dim report (--headdim-suite): d40, d80 and d160 at B4 H32 S8k, fp16 and bf16, causal or
    not (their own kernels or padded ones, flashcore's kernel list), and the padding proxies d64, d96
    and d192 at the same shape (what a call padded to them costs)."""
    suite = []
    for d in (40, 80, 160, 64, 96, 192):
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                suite.append(Config(f"d{d}-{dtype}{'-causal' if causal else ''}", B=4, Sq=8192, Sk=8192, Hq=32,
                                    Hkv=32, Dqk=d, Dv=d, dtype=dtype, causal=causal))
    return suite


def wide_suite() -> List[Config]:
    """The large-head-dim forward report (--wide-suite; the sm90 wide kernels, head dims above 256):
    512/512 at B1 H48 S16k, fp16 and bf16, causal or not; 384/384, MLA's 576/512 and 1024/1024 (two
    Dv parts of 512) in bf16. SDPA's memory-efficient backend is the only peer that takes them."""
    suite = []
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            suite.append(Config(f"d512-{dtype}{'-causal' if causal else ''}", B=1, Sq=16384, Sk=16384, Hq=48,
                                Hkv=48, Dqk=512, Dv=512, dtype=dtype, causal=causal))
    for dqk, dv in ((384, 384), (576, 512), (1024, 1024)):
        for causal in (False, True):
            suite.append(Config(f"d{dqk}x{dv}-bf16{'-causal' if causal else ''}", B=1, Sq=16384, Sk=16384, Hq=48,
                                Hkv=48, Dqk=dqk, Dv=dv, dtype="bf16", causal=causal))
    return suite


def backward_headdim_suite() -> List[Config]:
    """The backward of head dims above 128 (--backward-headdim-suite: the sm90 backward's d256 kernel,
    which d192 runs padded on, and the sm80 backward's d192 and d256 kernels): B4 H16 at S 4k and 8k,
    fp16 and bf16, causal or not."""
    suite = []
    for d in (192, 256):
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                for s in (4096, 8192):
                    suite.append(Config(f"d{d}-{dtype}{'-causal' if causal else ''}", B=4, Sq=s, Sk=s, Hq=16,
                                        Hkv=16, Dqk=d, Dv=d, dtype=dtype, causal=causal))
    return suite


def quick_suite() -> List[Config]:
    suite = []
    for causal in (False, True):
        for s in (1024, 4096):
            suite.append(Config(f"d128-fp16{'-causal' if causal else ''}", Sq=s, Sk=s, causal=causal))
    suite.append(Config("gqa32x8-bf16-causal", B=2, Sq=2048, Sk=2048, Hq=32, Hkv=8, dtype="bf16", causal=True))
    lens = [1024, 100, 2048, 777]
    suite.append(Config("varlen-bf16-causal", B=len(lens), Sq=max(lens), Sk=max(lens), dtype="bf16", causal=True,
                        varlen=lens))
    return suite


# ------------------------------------------------------------------------------------------------
# Inputs and the reference
# ------------------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """One rotation set in flash-attn layout: q [B, S, Hq, Dqk] (varlen: [total, Hq, Dqk])."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


def input_shapes(cfg: Config):
    if cfg.varlen:
        total = sum(cfg.varlen)
        return ((total, cfg.Hq, cfg.Dqk), (total, cfg.Hkv, cfg.Dqk), (total, cfg.Hkv, cfg.Dv))
    return ((cfg.B, cfg.Sq, cfg.Hq, cfg.Dqk), (cfg.B, cfg.Sk, cfg.Hkv, cfg.Dqk), (cfg.B, cfg.Sk, cfg.Hkv, cfg.Dv))


@dataclass
class GradSet:
    """One rotation set for a backward pass: q, k, v of an Inputs as leaves that require grad (views of
    its memory, no copy), the fixed dout of that set and, for bwd, the output of one untimed forward
    whose graph every timed call differentiates again (retain_graph)."""
    inputs: Inputs
    dout: torch.Tensor
    out: Optional[torch.Tensor] = None


def output_shape(cfg: Config) -> tuple:
    """out (and dout) in flash layout: [B, Sq, Hq, Dv] (varlen: [total, Hq, Dv])."""
    return (sum(cfg.varlen), cfg.Hq, cfg.Dv) if cfg.varlen else (cfg.B, cfg.Sq, cfg.Hq, cfg.Dv)


def make_inputs(cfg: Config, generator: torch.Generator) -> Inputs:
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    return Inputs(*(torch.randn(s, device="cuda", dtype=dtype, generator=generator) for s in input_shapes(cfg)))


def rotation_sets(cfg: Config) -> int:
    bytes_per_set = sum(math.prod(s) for s in input_shapes(cfg)) * 2
    return max(2, min(MAX_ROTATION_SETS, math.ceil(ROTATION_BYTES / bytes_per_set)))


def first_sequence(cfg: Config, x: torch.Tensor) -> torch.Tensor:
    """[S, H, D] of the first sequence (varlen: packed rows [0, len0))."""
    return x[: cfg.varlen[0]] if cfg.varlen else x[0]


def reference_rows(cfg: Config) -> torch.Tensor:
    sq = cfg.varlen[0] if cfg.varlen else cfg.Sq
    head = torch.arange(min(sq, REFERENCE_ROWS // 4))
    tail = torch.arange(max(0, sq - (REFERENCE_ROWS - len(head))), sq)
    return torch.unique(torch.cat([head, tail])).cuda()


def reference_output(cfg: Config, inputs: Inputs, rows: torch.Tensor) -> torch.Tensor:
    """Attention of the given query rows of the first sequence: [rows, Hq, Dv], fp64 when small."""
    q, k, v = (first_sequence(cfg, x) for x in (inputs.q, inputs.k, inputs.v))
    sq, sk = q.shape[0], k.shape[0]
    small = len(rows) * sk * cfg.Hq <= 64 << 20
    acc = torch.float64 if small else torch.float32
    group = cfg.Hq // cfg.Hkv
    qr = q[rows].to(acc).transpose(0, 1)                                   # [Hq, r, D]
    kt = k.to(acc).repeat_interleave(group, dim=1).transpose(0, 1)         # [Hq, Sk, D]
    vt = v.to(acc).repeat_interleave(group, dim=1).transpose(0, 1)
    scores = (qr @ kt.transpose(1, 2)) / math.sqrt(cfg.Dqk)
    if cfg.causal:  # bottom-right == top-left here (Sq == Sk per sequence)
        visible = torch.arange(sk, device="cuda")[None, :] <= (rows[:, None] + sk - sq)
        scores = scores.masked_fill(~visible[None], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ vt                               # [Hq, r, Dv]
    return out.transpose(0, 1).contiguous()


def reference_key_rows(cfg: Config, rows: torch.Tensor) -> torch.Tensor:
    """The key rows of the first sequence whose dk, dv are checked: the query rows' numbers (the suite
    has Sq == Sk), so both ends of the causal mask are covered."""
    sk = cfg.varlen[0] if cfg.varlen else cfg.Sk
    return rows[rows < sk]


def reference_grads(cfg: Config, inputs: Inputs, dout: torch.Tensor,
                    rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq of the given query rows [rows, Hq, Dqk] and dk, dv of reference_key_rows [keys, Hkv, D] of the
    first sequence, for dout. dk and dv sum over every query row, so unlike reference_output this
    computes the whole first sequence's attention (per head, in chunks of query rows); fp64 when small.
    dS = P * (dP - rowsum(dO * O)), dq = dS K * scale, dk = dS^T Q * scale, dv = P^T dO; GQA: a key head
    sums over its group of query heads."""
    q, k, v, do = (first_sequence(cfg, x) for x in (inputs.q, inputs.k, inputs.v, dout))
    sq, sk = q.shape[0], k.shape[0]
    acc = torch.float64 if sq * sk * cfg.Hq <= 64 << 20 else torch.float32
    scale = 1 / math.sqrt(cfg.Dqk)
    group = cfg.Hq // cfg.Hkv
    key_rows = reference_key_rows(cfg, rows)
    dq = torch.empty(len(rows), cfg.Hq, cfg.Dqk, dtype=acc, device="cuda")
    dk = torch.zeros(len(key_rows), cfg.Hkv, cfg.Dqk, dtype=acc, device="cuda")
    dv = torch.zeros(len(key_rows), cfg.Hkv, cfg.Dv, dtype=acc, device="cuda")
    chunk = max(1, (32 << 20) // sk)  # query rows per step: a few [chunk, Sk] score-sized tensors live at once
    keys = torch.arange(sk, device="cuda")
    for h in range(cfg.Hq):
        kh, vh = k[:, h // group].to(acc), v[:, h // group].to(acc)            # [Sk, D]
        for start in range(0, sq, chunk):
            end = min(sq, start + chunk)
            qh, doh = q[start:end, h].to(acc), do[start:end, h].to(acc)        # [c, D]
            scores = (qh @ kh.T) * scale
            if cfg.causal:  # bottom-right aligned, as reference_output
                query = torch.arange(start, end, device="cuda")
                scores = scores.masked_fill(keys[None, :] > (query[:, None] + sk - sq), float("-inf"))
            probs = torch.softmax(scores, dim=-1)                                # [c, Sk]
            del scores
            dscores = probs * ((doh @ vh.T) - (doh * (probs @ vh)).sum(-1, keepdim=True))
            dv[:, h // group] += probs[:, key_rows].T @ doh
            dk[:, h // group] += (dscores[:, key_rows].T @ qh) * scale
            here = (rows >= start) & (rows < end)
            if here.any():
                dq[here, h] = (dscores[rows[here] - start] @ kh) * scale
    return dq, dk, dv


def max_error(cfg: Config, out: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> float:
    got = first_sequence(cfg, out)[rows].to(ref.dtype)
    if not torch.isfinite(got).all():
        return float("nan")
    return float((got - ref).abs().max())


def max_grad_errors(cfg: Config, grads, ref, rows: torch.Tensor) -> Dict[str, float]:
    """{dq, dk, dv: max error} of an implementation's gradients against reference_grads (nan: non-finite)."""
    key_rows = reference_key_rows(cfg, rows)
    return {name: max_error(cfg, grad, want, which)
            for name, grad, want, which in zip(("dq", "dk", "dv"), grads, ref, (rows, key_rows, key_rows))}


def backward_errors(cfg: Config, run, inputs: Inputs, dout: torch.Tensor, ref, rows: torch.Tensor) -> Dict[str, float]:
    """max_grad_errors of one untimed bwd call, as the bwd pass makes it, on one rotation set (its graph
    and gradients freed on return)."""
    prepared = grad_sets(run, [inputs], [dout], with_forward=True)[0]
    return max_grad_errors(cfg, pass_call(run, "bwd")(prepared), ref, rows)


# ------------------------------------------------------------------------------------------------
# Implementations: each returns a callable run(inputs) -> out [flash layout], or raises NotAvailable.
# A runner whose call depends on a setting read again by the backward (an SDPA backend, flashcore's
# cu_seqlens check) carries it as run.context, a context manager factory the backward passes enter.
# ------------------------------------------------------------------------------------------------

class NotAvailable(Exception):
    """The implementation cannot run this row; the message is the reason shown in the report."""


def _first_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).strip().split("\n")[0].split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def varlen_offsets(cfg: Config) -> torch.Tensor:
    offsets = [0]
    for s in cfg.varlen:
        offsets.append(offsets[-1] + s)
    return torch.tensor(offsets, dtype=torch.int32, device="cuda")


def flashcore_runner(cfg: Config, path: str, sample: Inputs,
                     deterministic: bool = False) -> Callable[[Inputs], torch.Tensor]:
    import flashcore
    if path == "naive" and cfg.flops() > NAIVE_FLOP_LIMIT:
        raise NotAvailable(f"naive path not timed above {NAIVE_FLOP_LIMIT:.0e} FLOPs (fp32 reference kernel, too slow)")
    if cfg.varlen:
        cu = varlen_offsets(cfg)
        support = flashcore.path_support(sample.q, sample.k, sample.v, causal=cfg.causal, cu_seqlens_q=cu,
                                         cu_seqlens_k=cu, max_seqlen_q=cfg.Sq, max_seqlen_k=cfg.Sk)
    else:
        support = flashcore.path_support(sample.q, sample.k, sample.v, causal=cfg.causal)
    if support.get(path):
        raise NotAvailable(_first_line(support[path]))
    if cfg.varlen:
        from flashcore import _params

        def checked(x):  # the default: cu_seqlens validated on every call (one stream synchronization)
            return flashcore.flash_attn_varlen_func(x.q, x.k, x.v, cu, cu, cfg.Sq, cfg.Sk, causal=cfg.causal,
                                                    deterministic=deterministic, _path=path)

        @contextlib.contextmanager
        def trusting_metadata():  # cu_seqlens trusted, as flash-attn always does
            previous = _params.check_device_metadata
            flashcore.set_check_device_metadata(False)
            try:
                yield
            finally:
                flashcore.set_check_device_metadata(previous)

        def trusted(x):
            with trusting_metadata():
                return checked(x)

        # The row times the call as flash-attn makes it; run_config times the default too, for the note.
        trusted.also_time = ("with the default per-call cu_seqlens check", checked)
        # flashcore::bwd reads the setting when it runs, not from its forward.
        trusted.context = trusting_metadata
        return trusted
    return lambda x: flashcore.flash_attn_func(x.q, x.k, x.v, causal=cfg.causal, deterministic=deterministic,
                                               _path=path)


def sdpa_runner(cfg: Config, impl: str, sample: Inputs) -> Callable[[Inputs], torch.Tensor]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    if cfg.varlen:
        raise NotAvailable("SDPA has no varlen (cu_seqlens) interface")
    backend = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION}[impl]
    gqa = cfg.Hq != cfg.Hkv

    def run(x: Inputs) -> torch.Tensor:
        # SDPA's [B, H, S, D] as views of the same flash-layout memory (how models call it): no copy.
        with sdpa_kernel(backend):
            out = scaled_dot_product_attention(x.q.transpose(1, 2), x.k.transpose(1, 2), x.v.transpose(1, 2),
                                               is_causal=cfg.causal, enable_gqa=gqa)
        return out.transpose(1, 2)

    # The backward runs the backend its forward chose; the backward passes enter the same one anyway.
    run.context = lambda: sdpa_kernel(backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run(sample)
            torch.cuda.synchronize()
        except RuntimeError as err:
            # torch warns "<backend> kernel not used because:" and then one warning per reason, each
            # followed by "(Triggered internally at <file>:<line>.)".
            messages = [re.sub(r"\s*\(Triggered internally at [^)]*\)\s*$", "", str(w.message)).strip()
                        for w in caught]
            reasons = [_first_line(m, 200) for m in messages if m and not m.endswith("because:")]
            raise NotAvailable("; ".join(reasons[:2]) if reasons else _first_line(err)) from None
    return run


_FLEX_COMPILED = None


def flex_runner(cfg: Config, sample: Inputs) -> Callable[[Inputs], torch.Tensor]:
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    # One fresh compile per configuration. A single compiled function reused across the suite
    # recompiles for every new shape and, past dynamo's recompile limit, silently falls back to
    # eager flex_attention, which materializes the scores (seen on the H200 2026-11-22: ~8 TFLOPS
    # and a 128 GiB allocation at S=16k after the eighth configuration).
    torch._dynamo.reset()
    # The bwd pass differentiates one forward's graph again and again (retain_graph=True), which a
    # backward compiled with donated buffers (inductor reusing saved tensors' memory) refuses.
    from torch._functorch import config as functorch_config
    if hasattr(functorch_config, "donated_buffer"):
        functorch_config.donated_buffer = False
    _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    gqa = cfg.Hq != cfg.Hkv
    if cfg.varlen:  # packed sequences as one batch entry with a document mask
        doc = torch.repeat_interleave(torch.arange(len(cfg.varlen), device="cuda"),
                                      torch.tensor(cfg.varlen, device="cuda"))
        total = doc.numel()

        def mask_mod(b, h, q_idx, kv_idx):
            same = doc[q_idx] == doc[kv_idx]
            return same & (q_idx >= kv_idx) if cfg.causal else same
        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=total, KV_LEN=total, device="cuda")

        def run(x: Inputs) -> torch.Tensor:
            out = _FLEX_COMPILED(x.q.unsqueeze(0).transpose(1, 2), x.k.unsqueeze(0).transpose(1, 2),
                                 x.v.unsqueeze(0).transpose(1, 2), block_mask=block_mask, enable_gqa=gqa)
            return out.transpose(1, 2)[0]
    else:
        block_mask = None
        if cfg.causal:
            def causal_mod(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            block_mask = create_block_mask(causal_mod, B=None, H=None, Q_LEN=cfg.Sq, KV_LEN=cfg.Sk, device="cuda")

        def run(x: Inputs) -> torch.Tensor:
            out = _FLEX_COMPILED(x.q.transpose(1, 2), x.k.transpose(1, 2), x.v.transpose(1, 2),
                                 block_mask=block_mask, enable_gqa=gqa)
            return out.transpose(1, 2)
    try:
        run(sample)
        torch.cuda.synchronize()
    except Exception as err:  # compile failures surface as many exception types
        raise NotAvailable("flex: " + _first_line(f"{type(err).__name__}: {err}")) from None
    return run


def make_runner(impl: str, cfg: Config, sample: Inputs):
    if impl in FLASHCORE_IMPLS:
        return flashcore_runner(cfg, FLASHCORE_IMPLS[impl], sample, impl in FLASHCORE_DETERMINISTIC)
    if impl in SDPA_IMPLS:
        return sdpa_runner(cfg, impl, sample)
    if impl == "flex":
        return flex_runner(cfg, sample)
    raise ValueError(f"unknown implementation {impl}")


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------

def time_calls(run, sets: list, iters: int, warmup: int, warmup_s: float = 0.0) -> Tuple[float, int]:
    """Median milliseconds of `iters` calls (fewer when one call is slow), CUDA events per call; the
    calls take the rotation sets in turn (Inputs, or GradSets for the backward passes).
    The warm-up is `warmup` calls and, with warmup_s > 0, goes on until the GPU has run this call for
    that many seconds (the steady state of a power-capped GPU, see --warmup-seconds)."""
    for i in range(warmup):
        run(sets[i % len(sets)])
    if warmup_s > 0:
        torch.cuda.synchronize()
        begin, i = time.perf_counter(), 0
        while time.perf_counter() - begin < warmup_s:
            for _ in range(8):  # calls between host checks (each check leaves the GPU idle a few us)
                run(sets[i % len(sets)])
                i += 1
            torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run(sets[0])
    end.record()
    end.synchronize()
    one_call_s = start.elapsed_time(end) / 1e3
    if one_call_s * iters > SLOW_CALL_BUDGET_S:
        iters = max(5, int(SLOW_CALL_BUDGET_S / max(one_call_s, 1e-9)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (s, e) in enumerate(events):
        s.record()
        run(sets[i % len(sets)])
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events), iters


def grad_sets(run, sets: List[Inputs], douts: List[torch.Tensor], with_forward: bool) -> List[GradSet]:
    """GradSets of the rotation sets; with_forward runs the (untimed) forward of each, under run's
    context, for the bwd pass to differentiate."""
    context = getattr(run, "context", contextlib.nullcontext)
    prepared = []
    for x, dout in zip(sets, douts):
        leaves = Inputs(*(t.detach().requires_grad_() for t in (x.q, x.k, x.v)))
        out = None
        if with_forward:
            with context():
                out = run(leaves)
        prepared.append(GradSet(leaves, dout, out))
    return prepared


def pass_call(run, pass_: str):
    """The call timed for a pass of a forward runner: run itself (fwd, on Inputs), or one on a GradSet:
    bwd differentiates the set's forward again; fwd+bwd runs a fresh forward and differentiates it."""
    if pass_ == "fwd":
        return run
    context = getattr(run, "context", contextlib.nullcontext)
    if pass_ == "bwd":
        def call(g: GradSet):
            with context():
                return torch.autograd.grad(g.out, (g.inputs.q, g.inputs.k, g.inputs.v), g.dout, retain_graph=True)
    else:
        def call(g: GradSet):
            with context():
                out = run(g.inputs)
                return torch.autograd.grad(out, (g.inputs.q, g.inputs.k, g.inputs.v), g.dout)
    return call


def time_pass(run, pass_: str, sets: List[Inputs], douts: List[torch.Tensor], iters: int, warmup: int,
              warmup_s: float = 0.0) -> Tuple[float, int]:
    """time_calls of one pass. A backward pass prepares its GradSets here and lets them go on return,
    so only the implementation being timed holds forward graphs."""
    if pass_ == "fwd":
        return time_calls(run, sets, iters, warmup, warmup_s)
    prepared = grad_sets(run, sets, douts, with_forward=pass_ == "bwd")
    return time_calls(pass_call(run, pass_), prepared, iters, warmup, warmup_s)


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def row_for(cfg: Config, impl: str, ms=None, err=None, note="", pass_: str = "fwd") -> dict:
    return dict(impl=impl, **{"pass": pass_}, dtype=cfg.dtype, B=cfg.B, Hq=cfg.Hq, Hkv=cfg.Hkv, Sq=cfg.Sq, Sk=cfg.Sk,
                Dqk=cfg.Dqk, Dv=cfg.Dv, causal=cfg.causal, window=list(cfg.window), ms=ms,
                tflops=None if ms is None else cfg.pass_flops(pass_) / (ms * 1e-3) / 1e12,
                max_err=None if err is None or math.isnan(err) else err, note=note, family=cfg.family,
                varlen=cfg.varlen or None)


def config_key(row: dict) -> tuple:
    return (row["family"], row["dtype"], row["B"], row["Hq"], row["Hkv"], row["Sq"], row["Sk"], row["Dqk"],
            row["Dv"], row["causal"], tuple(row["varlen"] or ()))


def table_key(row: dict) -> tuple:
    """A line of the Markdown tables: one configuration and one pass (ratios compare like with like)."""
    return config_key(row) + (row["pass"],)


def passes_of(rows: List[dict]) -> List[str]:
    return [p for p in PASSES if any(r["pass"] == p for r in rows)]


def _label(row: dict) -> str:
    lens = f" varlen{row['varlen']}" if row["varlen"] else ""
    return (f"{row['family']} B={row['B']} S={row['Sq']} H={row['Hq']}/{row['Hkv']} D={row['Dqk']}/{row['Dv']}"
            f"{lens}")


def _best(rows: List[dict], impls) -> Optional[dict]:
    timed = [r for r in rows if r["impl"] in impls and r["tflops"] is not None]
    return max(timed, key=lambda r: r["tflops"]) if timed else None


def write_markdown(report: dict, path: str, impls: List[str]) -> None:
    groups: Dict[tuple, List[dict]] = {}
    for row in report["rows"]:
        groups.setdefault(table_key(row), []).append(row)
    notes: List[str] = []

    def note_ref(reason: str) -> str:
        if reason not in notes:
            notes.append(reason)
        return f"n/a [{notes.index(reason) + 1}]"

    flashcore_impls = [i for i in impls if i in FLASHCORE_IMPLS]
    peer_impls = [i for i in impls if i not in FLASHCORE_IMPLS]
    passes = passes_of(report["rows"])
    backward = [p for p in passes if p != "fwd"]
    lines = [f"# flashcore vs peers — {' / '.join(PASS_TITLES[p] for p in passes) or 'forward'}", "",
             f"- device: {report['device']}", f"- date: {report['date']}", f"- commit: {report['commit']}",
             f"- torch: {report['torch']}", f"- command: `{report['command']}`",
             "- protocol: FLOPs 2·B·Hq·Sq·Sk·(Dqk+Dv), halved for causal (Sq == Sk); CUDA events, warm-up, "
             "median of >= 30 calls (fewer only where noted), inputs rotated beyond L2; max error vs an "
             "fp64/fp32 reference on a slice of query rows." + (
                 " Backward: FLOPs 2.5x the forward's (bwd: dq, dk, dv by torch.autograd.grad through the "
                 "graph of one untimed forward), 3.5x for fwd+bwd (a fresh forward per call); max error: the "
                 "largest of dq's on the query rows and dk's, dv's on the key rows of the same numbers, vs "
                 "the gradients of the whole first sequence for a fixed random dout; flashcore-sm80 / -naive "
                 "rows run their own path's backward, flashcore-sm90 rows automatic selection (the sm90 backward); -det "
                 "rows deterministic=True." if backward else "") + (
                 f" Steady state: each measurement follows {report['warmup_seconds']:g} s of the same call "
                 "(the power cap's clock)." if report.get("warmup_seconds") else ""), "",
             "## TFLOPS", "",
             "| config | pass | " + " | ".join(impls) + " | best flashcore / best peer |",
             "|---|---|" + "---:|" * (len(impls) + 1)]
    for key, rows in groups.items():
        by_impl = {r["impl"]: r for r in rows}
        cells = []
        for impl in impls:
            r = by_impl.get(impl)
            if r is None:
                cells.append("")
            elif r["tflops"] is None:
                cells.append(note_ref(f"{impl}: {r['note']}"))
            else:
                cells.append(f"{r['tflops']:.1f}" + (" *" if r["note"] else ""))
        best_fc, best_peer = _best(rows, flashcore_impls), _best(rows, peer_impls)
        ratio = (f"{best_fc['tflops'] / best_peer['tflops']:.2f} ({best_fc['impl']} / {best_peer['impl']})"
                 if best_fc and best_peer else "n/a")
        lines.append(f"| {_label(rows[0])} | {rows[0]['pass']} | " + " | ".join(cells) + f" | {ratio} |")
    lines += ["", "`*`: timed with a note (see report.json).", "", "## Max error vs reference", "",
              "| config | pass | " + " | ".join(impls) + " |", "|---|---|" + "---:|" * len(impls)]
    for key, rows in groups.items():
        by_impl = {r["impl"]: r for r in rows}
        cells = []
        for impl in impls:
            r = by_impl.get(impl)
            cells.append("" if r is None else ("n/a" if r["max_err"] is None else f"{r['max_err']:.2e}"))
        lines.append(f"| {_label(rows[0])} | {rows[0]['pass']} | " + " | ".join(cells) + " |")

    lines += ["", "## Kernel ladder (TFLOPS; speedup vs naive GPU / vs previous step)", "",
              "| config | pass | naive GPU | sm80 | sm90 | best peer |", "|---|---|---:|---:|---:|---:|"]
    for key, rows in groups.items():
        by_impl = {r["impl"]: r for r in rows}
        steps = [by_impl.get(i) for i in LADDER] + [_best(rows, peer_impls)]
        baseline = steps[0]["tflops"] if steps[0] and steps[0]["tflops"] else None
        previous = None
        cells = []
        for step in steps:
            if step is None or step["tflops"] is None:
                cells.append("n/a")
                continue
            t = step["tflops"]
            parts = [f"{t:.1f}"]
            extra = []
            if baseline and step is not steps[0]:
                extra.append(f"{t / baseline:.1f}x base")
            if previous and step is not steps[0]:
                extra.append(f"{t / previous:.2f}x prev")
            if step is steps[-1] and step["impl"] not in LADDER:
                parts.append(f"({step['impl']})")
            if extra:
                parts.append("[" + ", ".join(extra) + "]")
            cells.append(" ".join(parts))
            previous = t
        lines.append(f"| {_label(rows[0])} | {rows[0]['pass']} | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "## n/a reasons", ""] + [f"{n + 1}. {reason}" for n, reason in enumerate(notes)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_plots(report: dict, out_dir: str, impls: List[str]) -> List[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: matplotlib not installed, no plots", file=sys.stderr)
        return []
    passes = passes_of(report["rows"])
    families: Dict[str, List[dict]] = {}  # panel title -> its rows: a family, and its pass when there are several
    for row in report["rows"]:
        families.setdefault(row["family"] if len(passes) <= 1 else f"{row['family']} {row['pass']}", []).append(row)
    cols = min(3, len(families))
    nrows = math.ceil(len(families) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4 * nrows), squeeze=False)
    colors = {impl: plt.get_cmap("tab10")(n) for n, impl in enumerate(ALL_IMPLS)}  # same color in every panel
    for ax, (family, rows) in zip(axes.flat, families.items()):
        for impl in impls:
            pts = sorted((r["Sq"], r["tflops"]) for r in rows if r["impl"] == impl and r["tflops"] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl, color=colors[impl],
                        linestyle="-" if impl in FLASHCORE_IMPLS else "--")
        ax.set_xscale("log", base=2)
        ax.set_title(family)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOPS")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    titles = " / ".join(PASS_TITLES[p] for p in passes) or "forward"
    fig.suptitle(f"flashcore vs peers, {titles} — {report['device']}, {report['date']}")
    fig.tight_layout()
    path = os.path.join(out_dir, "tflops.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def git_commit() -> str:
    if os.environ.get("FLASHCORE_COMMIT"):
        return os.environ["FLASHCORE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def call_overhead_us(calls: int = 200) -> Dict[str, float]:
    """Host time per flashcore call on a tiny problem, CPU wall clock, split into layers:
      python_api: flashcore.flash_attn_func (eager fast path; Python checks, params, torch.empty, C++)
      custom_op:  torch.ops.flashcore.fwd through the dispatcher (what torch.compile and modes call)
      cpp_forward: _C.forward on prebuilt params (C++ validate + dispatch + launch)
      cpp_select_path: _C.select_path (the device/pointer queries of dispatch alone)
    The GPU hides this only when a call's kernels take longer."""
    import time
    import flashcore
    from flashcore import _C, ops
    from flashcore._params import build_params
    q = torch.randn(1, 16, 2, 64, device="cuda", dtype=torch.float16)
    out, lse = torch.empty_like(q), torch.empty(1, 2, 16, device="cuda", dtype=torch.float32)
    params = build_params(ops.describe("q", q), ops.describe("k", q), ops.describe("v", q), ops.describe("out", out),
                          ops.describe("lse", lse))
    stream = torch.cuda.current_stream().cuda_stream
    layers = {
        "python_api": lambda: flashcore.flash_attn_func(q, q, q),
        "custom_op": lambda: ops.fwd(q, q, q, None, None, None, None, 0, 0, 0.0, 0.0, False, 0, -1, -1, 0, False),
        "cpp_forward": lambda: _C.forward(params, stream),
        "cpp_select_path": lambda: _C.select_path(params),
    }
    result = {}
    for name, call in layers.items():
        for _ in range(10):
            call()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        result[name] = (time.perf_counter() - start) / calls * 1e6
        torch.cuda.synchronize()
    return result


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def run_config(cfg: Config, impls: List[str], iters: int, warmup: int, seed: int, rounds: int = 1,
               warmup_s: float = 0.0, passes: Sequence[str] = ("fwd",)) -> List[dict]:
    """One row per pass and implementation. With rounds > 1 every implementation is timed `rounds` times,
    the order rotating between rounds (so no implementation always follows the same one: the GPU's
    power-limited clock depends on what ran just before), and the row keeps the median round.
    An implementation that cannot run the forward has every pass's row n/a with the forward's reason;
    one whose backward fails has its bwd and fwd+bwd rows n/a with the backward's error."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    sets = [make_inputs(cfg, generator) for _ in range(rotation_sets(cfg))]
    backward_passes = [p for p in passes if p != "fwd"]
    # Drawn after the inputs, so a seed gives the same inputs whichever passes are asked for; one
    # dout per rotation set, shared by every implementation (their gradients are compared).
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[cfg.dtype]
    douts = ([torch.randn(output_shape(cfg), device="cuda", dtype=dtype, generator=generator) for _ in sets]
             if backward_passes else [])
    rows_idx = reference_rows(cfg)
    ref = reference_output(cfg, sets[0], rows_idx)
    grad_ref = reference_grads(cfg, sets[0], douts[0], rows_idx) if backward_passes else None
    runners, errors, grad_errors, failures = {}, {}, {}, {}
    timings = {(impl, p): [] for impl in impls for p in passes}
    for impl in impls:
        try:
            runners[impl] = make_runner(impl, cfg, sets[0])
            errors[impl] = max_error(cfg, runners[impl](sets[0]), ref, rows_idx)
        except NotAvailable as why:
            failures.update({(impl, p): str(why) for p in passes})
        except Exception as err:  # a failure of one implementation must not lose the others' rows
            failures.update({(impl, p): "failed: " + _first_line(f"{type(err).__name__}: {err}") for p in passes})
        torch.cuda.synchronize()
        if backward_passes and impl in runners and (impl, "fwd") not in failures:
            try:
                grad_errors[impl] = backward_errors(cfg, runners[impl], sets[0], douts[0], grad_ref, rows_idx)
                torch.cuda.synchronize()
            except Exception as err:  # e.g. a backend without a backward for this configuration
                failures.update({(impl, p): "backward failed: " + _first_line(f"{type(err).__name__}: {err}")
                                 for p in backward_passes})
    for r in range(max(1, rounds)):
        order = [i for i in impls if i in runners]
        order = order[r % len(order):] + order[:r % len(order)] if order else order
        for impl in order:
            for p in passes:
                if (impl, p) in failures:
                    continue
                try:
                    timings[(impl, p)].append(time_pass(runners[impl], p, sets, douts, iters, warmup, warmup_s))
                except Exception as err:
                    failures[(impl, p)] = "failed: " + _first_line(f"{type(err).__name__}: {err}")
                torch.cuda.synchronize()
    results = []
    for p in passes:
        for impl in impls:
            key = (impl, p)
            if key in failures or not timings[key]:
                results.append(row_for(cfg, impl, note=failures.get(key, "not timed"), pass_=p))
            else:
                per_round = sorted(timings[key])
                ms, done = per_round[(len(per_round) - 1) // 2]  # the median round (lower middle)
                notes = [] if done >= iters else [f"median of {done} calls (one call is slow)"]
                if p == "fwd":
                    err = errors[impl]
                    if math.isnan(err):
                        notes.append("output has non-finite values")
                else:
                    per_grad = grad_errors[impl]
                    err = (float("nan") if any(math.isnan(e) for e in per_grad.values())
                           else max(per_grad.values()))
                    if math.isnan(err):
                        notes.append("gradients have non-finite values")
                also = getattr(runners.get(impl), "also_time", None)
                if also is not None:  # a second way to call it (varlen: the default per-call check), in the note
                    what, run_also = also
                    also_ms, _ = time_pass(run_also, p, sets, douts, iters, warmup, warmup_s)
                    trusted = "cu_seqlens trusted (flashcore.set_check_device_metadata(False), as flash-attn)"
                    notes.append(f"{trusted}; {what}: {also_ms:.3f} ms "
                                 f"({cfg.pass_flops(p) / also_ms / 1e9:.1f} TFLOPS)")
                results.append(row_for(cfg, impl, ms, err, "; ".join(notes), pass_=p))
                results[-1]["rounds_ms"] = [t for t, _ in timings[key]]  # every round's median, in order
                if p != "fwd":
                    results[-1]["grad_max_err"] = {name: None if math.isnan(e) else e for name, e in per_grad.items()}
            row = results[-1]
            shown = f"{row['tflops']:8.1f} TFLOPS  err {row['max_err']:.2e}" if row["tflops"] is not None and row["max_err"] is not None \
                else (f"{row['tflops']:8.1f} TFLOPS" if row["tflops"] is not None else f"n/a: {row['note']}")
            what = f"{impl:16s}" if list(passes) == ["fwd"] else f"{impl:16s} {p:7s}"
            print(f"  {what} {shown}", flush=True)
    del sets, douts, runners
    torch.cuda.empty_cache()
    return results


def merge_reports(reports: List[dict]) -> dict:
    """One report from several (same device and commit, disjoint configurations): rows concatenated
    in order; the commands joined with " ; "; the date of the last."""
    merged = dict(reports[0])
    for key in ("device", "commit"):
        values = {r.get(key) for r in reports}
        if len(values) > 1:
            raise ValueError(f"merge: reports differ in {key}: {sorted(map(str, values))}")
    merged["date"] = reports[-1].get("date")
    merged["command"] = " ; ".join(r.get("command", "") for r in reports)
    merged["rows"] = [row for r in reports for row in r["rows"]]
    return merged


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset instead of the standard suite")
    parser.add_argument("--impls", default=",".join(i for i in ALL_IMPLS if i not in FLASHCORE_DETERMINISTIC),
                        help=f"comma separated, from {','.join(ALL_IMPLS)} (default: all but "
                             f"{','.join(sorted(FLASHCORE_DETERMINISTIC))})")
    parser.add_argument("--pass", dest="passes", default="fwd",
                        help=f"comma separated, from {','.join(PASSES)}: one row per implementation and pass; "
                             "bwd times torch.autograd.grad through one untimed forward's graph, fwd+bwd a fresh "
                             "forward and its backward (FLOPs 2.5x and 3.5x the forward's)")
    parser.add_argument("--out", default="compare-out", help="output directory")
    parser.add_argument("--iters", type=int, default=30, help="timed calls per measurement (>= 30)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--family", action="append", help="only configurations of these families")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every implementation this many times per row, in rotating order; "
                             "the row keeps the median round")
    parser.add_argument("--warmup-seconds", type=float, default=0.0,
                        help="steady state: before each measurement, run the call for this many seconds "
                             "(the H200 reaches its power cap's clock after about one second of load; the "
                             "default, a few calls, measures the clock left by whatever ran before)")
    parser.add_argument("--backward-suite", action="store_true",
                        help="the backward report's configurations (backward_suite) instead of the standard suite")
    parser.add_argument("--headdim-suite", action="store_true",
                        help="the head-dim report's configurations (headdim_suite) instead of the standard suite")
    parser.add_argument("--wide-suite", action="store_true",
                        help="the large-head-dim forward's configurations (wide_suite) instead of the standard suite")
    parser.add_argument("--backward-headdim-suite", action="store_true",
                        help="the d192 / d256 backward's configurations (backward_headdim_suite)")
    parser.add_argument("--merge", nargs="+", metavar="REPORT_JSON",
                        help="no measuring: combine these report.json files (e.g. one per device call, each "
                             "a subset of families) into one report in --out")
    args = parser.parse_args(argv)
    if args.merge:
        report = merge_reports([json.load(open(path)) for path in args.merge])
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
        impls = [i for i in ALL_IMPLS if any(r["impl"] == i for r in report["rows"])]
        write_markdown(report, os.path.join(args.out, "report.md"), impls)
        plots = write_plots(report, args.out, impls)
        print(f"compare: merged {len(args.merge)} reports ({len(report['rows'])} rows) into {args.out}"
              + (", " + ", ".join(map(os.path.basename, plots)) if plots else ""))
        return 0
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    unknown = [i for i in impls if i not in ALL_IMPLS]
    if unknown:
        parser.error(f"--impls: unknown {unknown}; choose from {list(ALL_IMPLS)}")
    passes = list(dict.fromkeys(p.strip() for p in args.passes.split(",") if p.strip()))
    unknown = [p for p in passes if p not in PASSES]
    if unknown or not passes:
        parser.error(f"--pass: unknown {unknown}; choose from {list(PASSES)}")
    if torch is None or not torch.cuda.is_available():
        print("compare: needs torch and a CUDA device; nothing to measure", file=sys.stderr)
        return 2
    if args.iters < 30:
        print(f"compare: --iters {args.iters} is below the protocol's 30", file=sys.stderr)
    configs = (backward_suite() if args.backward_suite else headdim_suite() if args.headdim_suite
               else wide_suite() if args.wide_suite else backward_headdim_suite() if args.backward_headdim_suite
               else quick_suite() if args.quick else standard_suite())
    if args.family:
        configs = [c for c in configs if c.family in args.family]
    os.makedirs(args.out, exist_ok=True)
    import flashcore
    report = dict(device=torch.cuda.get_device_name(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                  timespec="seconds"), commit=git_commit(), command=" ".join([os.path.basename(sys.argv[0])] +
                  (sys.argv[1:] if argv is None else list(argv))), torch=torch.__version__,
                  flashcore=flashcore.build_info(), rows=[])
    if args.warmup_seconds > 0:
        report["warmup_seconds"] = args.warmup_seconds
    report["flashcore_call_overhead_us"] = call_overhead_us()
    overhead = ", ".join(f"{k} {v:.1f}" for k, v in report["flashcore_call_overhead_us"].items())
    print(f"compare on {report['device']} (torch {report['torch']}; {report['flashcore']})\n"
          f"flashcore host time per call, us: {overhead}", flush=True)
    for n, cfg in enumerate(configs):
        print(f"[{n + 1}/{len(configs)}] {cfg.label()}  {cfg.flops() / 1e9:.1f} GFLOP", flush=True)
        report["rows"] += run_config(cfg, impls, args.iters, args.warmup, args.seed + n, args.rounds,
                                     args.warmup_seconds, passes)
        with open(os.path.join(args.out, "report.json"), "w") as f:  # partial results survive a timeout
            json.dump(report, f, indent=1)
    write_markdown(report, os.path.join(args.out, "report.md"), impls)
    plots = write_plots(report, args.out, impls)
    print(f"compare: wrote {args.out}/report.json, report.md" + (", " + ", ".join(map(os.path.basename, plots)) if plots else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
