"""An fp64 numpy oracle of flashcore's attention function (docs/semantics.md), written from the
specification and independent of the C++ code, plus the test data helpers both suites share.

Layout as flash-attn's: q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv].
"""

from __future__ import annotations

import numpy as np


def visible_mask(sq: int, sk: int, *, causal: bool = False, mask_align: str = "bottom_right",
                 window=(-1, -1)) -> np.ndarray:
    """[Sq, Sk] bool: i + off - left <= j <= i + off + right; causal sets right = 0."""
    left, right = window
    if causal:
        right = 0
    off = sk - sq if mask_align == "bottom_right" else 0
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    visible = np.ones((sq, sk), dtype=bool)
    if left >= 0:
        visible &= j >= i + off - left
    if right >= 0:
        visible &= j <= i + off + right
    return visible


def attention(q, k, v, *, scale=None, causal=False, mask_align="bottom_right", window=(-1, -1), softcap=0.0,
              alibi_slopes=None):
    """Returns (o [B, Sq, Hq, Dv] float64, lse [B, Hq, Sq] float64). Empty rows: o = 0, lse = -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    batch, sq, hq, dqk = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    k = np.repeat(k, group, axis=2)  # query head h reads kv head h // group
    v = np.repeat(v, group, axis=2)
    scale = 1.0 / np.sqrt(dqk) if scale is None else scale
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    if alibi_slopes is not None:
        slopes = np.broadcast_to(np.asarray(alibi_slopes, dtype=np.float64), (batch, hq))
        dist = np.abs(np.arange(sq)[:, None] + sk - sq - np.arange(sk)[None, :])
        s = s - slopes[:, :, None, None] * dist[None, None]
    visible = visible_mask(sq, sk, causal=causal, mask_align=mask_align, window=window)
    s = np.where(visible[None, None], s, -np.inf)
    row_has_key = visible.any(axis=1)[None, None, :]
    row_max = np.where(row_has_key, s.max(axis=-1, initial=-np.inf), 0.0)
    p = np.exp(s - row_max[..., None])
    row_sum = p.sum(axis=-1)
    with np.errstate(divide="ignore"):
        lse = np.where(row_has_key, np.log(np.where(row_has_key, row_sum, 1.0)) + row_max, -np.inf)
    p = np.where(row_has_key[..., None], p / np.where(row_has_key, row_sum, 1.0)[..., None], 0.0)
    o = np.einsum("bhij,bjhd->bihd", p, v)
    return o, lse


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, *, seqused_k=None, **kwargs):
    """Packed sequences: q [total_q, Hq, D] etc. Returns (o [total_q, Hq, Dv], lse [Hq, total_q])."""
    o = np.zeros(q.shape[:2] + (v.shape[-1],))
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = cu_seqlens_q[b], cu_seqlens_q[b + 1]
        k0, k1 = cu_seqlens_k[b], cu_seqlens_k[b + 1]
        if seqused_k is not None:
            k1 = k0 + seqused_k[b]
        if q1 == q0:
            continue
        ob, lb = attention(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], **kwargs)
        o[q0:q1] = ob[0]
        lse[:, q0:q1] = lb[0]
    return o, lse


def random_qkv(rng, batch, sq, sk, hq, hkv, dqk, dv=None, scale=1.0, dtype=np.float32):
    dv = dqk if dv is None else dv
    q = (rng.standard_normal((batch, sq, hq, dqk)) * scale).astype(dtype)
    k = (rng.standard_normal((batch, sk, hkv, dqk)) * scale).astype(dtype)
    v = rng.standard_normal((batch, sk, hkv, dv)).astype(dtype)
    return q, k, v


def alibi_slopes(heads: int) -> np.ndarray:
    """The ALiBi paper's geometric slopes 2^(-8 h / H)."""
    return np.array([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], dtype=np.float32)


def relative_error(x, ref) -> float:
    """||x - ref|| / ||ref|| over finite reference entries (Frobenius)."""
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / denom) if denom > 0 else float(np.linalg.norm(x - ref))
