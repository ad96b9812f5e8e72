"""flash-attn 2.x compatible functions and an SDPA-layout `attention`, on the flashcore::fwd op.

Same signatures, defaults and return conventions as flash_attn.flash_attn_interface:
  * out, or (out, softmax_lse, None) with return_attn_probs=True. flash-attn returns attention
    probabilities (S_dmask) only when dropout_p > 0, which flashcore refuses, so the third item is
    None exactly as flash-attn's would be.
  * causal=True is aligned to the bottom-right corner of the score matrix (flash-attn's convention)
    and, as in flash-attn, sets window_size[1] to 0; window_size=(left, right), -1 = unbounded; softcap > 0 caps scores; alibi_slopes [H] or [B, H] fp32.
  * softmax_lse is [B, H, Sq] (varlen: [H, total_q]), float32, natural log; +inf for a row that sees
    no key, as flash-attn returns it (flashcore's native API and the C++ API use -inf there).
  * q, k, v whose head dimension is strided are copied to contiguous tensors first (flash-attn's
    maybe_contiguous); `flashcore.attention` keeps the native rule and raises instead.
Refused with a clear error, never ignored: dropout_p > 0. block_table (paged K/V, k/v then
[num_blocks, page_block_size, nheads_k, headdim]) runs the varlen forward over a paged cache
(flashcore.kvcache; inference only, no autograd).
`deterministic` reaches the backward: the sm80 backward kernel adds dQ with fp32 atomics in any order
unless deterministic=True, which fixes that order (bitwise-repeatable gradients); the naive GPU and
CPU backward are always deterministic, and so is the forward. `attention` takes it as a keyword-only
extra.

Every function also takes the private keyword `_path` ("auto", "sm90", "sm80", "naive", "cpu") to
pin a kernel path (tools/bench/compare.py runs each path this way). The backward follows the forward's
path where that path has a backward (sm80, naive, cpu; a pinned backward that cannot run the call
raises UnsupportedError) and selects automatically for "auto" and "sm90" (no sm90 backward yet).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from . import _C, kvcache, ops
from ._params import (PATH_NAMES, ArrayDesc, build_params, mask_align_code, output_shapes, path_code,
                      reject_unsupported, window_bounds)


def _run(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, max_seqlen_q=0, max_seqlen_k=0,
         softmax_scale=None, causal=False, mask_align="bottom_right", window_size=(-1, -1), softcap=0.0,
         alibi_slopes=None, path="auto", deterministic=False, causal_overrides_window=False):
    window_left, window_right = window_bounds(window_size)
    if causal and causal_overrides_window:
        window_right = 0  # flash-attn: causal=True means window_size[1] = 0, whatever was passed
    tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes)
    if ops.can_call_impl_directly(*tensors):
        op = ops.forward_impl
    elif ops.can_run_eager_autograd(*tensors):
        op = ops.EagerAttention.apply
    else:
        op = ops.fwd
    return op(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, int(max_seqlen_q), int(max_seqlen_k),
              0.0 if softmax_scale is None else float(softmax_scale), float(softcap), bool(causal),
              mask_align_code(mask_align), window_left, window_right, path_code(path), bool(deterministic))


def _head_dim_contiguous(*tensors):
    """flash-attn's maybe_contiguous: a tensor whose last (head) dimension is strided is copied to a
    contiguous one (the kernels read rows of the head dim); anything else is passed as it is."""
    return tuple(t.contiguous() if t is not None and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1 else t
                 for t in tensors)


def _result(out: Tensor, lse: Tensor, return_attn_probs: bool):
    if not return_attn_probs:
        return out
    # flash-attn's convention for rows that see no key (the C++ API's lse, kept for the backward, is -inf).
    return out, lse.masked_fill(lse == float("-inf"), float("inf")), None


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False, *,
                    _path: str = "auto"):
    """q (batch, seqlen_q, nheads, headdim), k/v (batch, seqlen_k, nheads_k, headdim[_v])."""
    reject_unsupported(dropout_p)
    q, k, v = _head_dim_contiguous(q, k, v)
    out, lse = _run(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                    softcap=softcap, alibi_slopes=alibi_slopes, path=_path, deterministic=deterministic,
                    causal_overrides_window=True)
    return _result(out, lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                              *, _path: str = "auto"):
    """qkv (batch, seqlen, 3, nheads, headdim): q, k, v are strided views of it, no copy."""
    if qkv.dim() != 5 or qkv.shape[2] != 3:
        raise _C.InvalidArgumentError(f"qkv: expected shape (batch, seqlen, 3, nheads, headdim), got {list(qkv.shape)}")
    return flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale, causal,
                           window_size, softcap, alibi_slopes, deterministic, return_attn_probs, _path=_path)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                             *, _path: str = "auto"):
    """q (batch, seqlen_q, nheads, headdim), kv (batch, seqlen_k, 2, nheads_k, headdim)."""
    if kv.dim() != 5 or kv.shape[2] != 2:
        raise _C.InvalidArgumentError(f"kv: expected shape (batch, seqlen_k, 2, nheads_k, headdim), got {list(kv.shape)}")
    return flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal, window_size,
                           softcap, alibi_slopes, deterministic, return_attn_probs, _path=_path)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
                           *, seqused_k: Optional[Tensor] = None, _path: str = "auto"):
    """q (total_q, nheads, headdim), k/v (total_k, nheads_k, headdim[_v]), cu_seqlens int32 [batch + 1].
    seqused_k (int32 [batch], optional): only the first seqused_k[b] keys of sequence b are used."""
    reject_unsupported(dropout_p)
    q, k, v = _head_dim_contiguous(q, k, v)
    if block_table is not None:  # prefill over a paged cache (inference: no autograd)
        window_left, window_right = window_bounds(window_size)
        out, lse = kvcache.fwd_paged(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, alibi_slopes,
                                     int(max_seqlen_q), int(max_seqlen_k),
                                     0.0 if softmax_scale is None else float(softmax_scale), bool(causal),
                                     window_left, 0 if causal else window_right, float(softcap), path_code(_path))
        return _result(out, lse, return_attn_probs)
    out, lse = _run(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k,
                    max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale,
                    causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
                    path=_path, deterministic=deterministic, causal_overrides_window=True)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None,
                                     causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                     deterministic=False, return_attn_probs=False, *, _path: str = "auto"):
    """qkv (total, 3, nheads, headdim)."""
    if qkv.dim() != 4 or qkv.shape[1] != 3:
        raise _C.InvalidArgumentError(f"qkv: expected shape (total, 3, nheads, headdim), got {list(qkv.shape)}")
    return flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens, max_seqlen,
                                  max_seqlen, dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs, _path=_path)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                    softcap=0.0, alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False, *, _path: str = "auto"):
    """q (total_q, nheads, headdim), kv (total_k, 2, nheads_k, headdim)."""
    if kv.dim() != 4 or kv.shape[1] != 2:
        raise _C.InvalidArgumentError(f"kv: expected shape (total_k, 2, nheads_k, headdim), got {list(kv.shape)}")
    return flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs, _path=_path)


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False, *,
              window_size: Sequence[int] = (-1, -1), softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
              return_lse: bool = False, deterministic: bool = False, _path: str = "auto"):
    """torch.nn.functional.scaled_dot_product_attention's layout and conventions.

    q (batch, nheads, seqlen_q, headdim), k/v (batch, nheads_k, seqlen_k, headdim[_v]); returns out
    (batch, nheads, seqlen_q, headdim_v) [, lse (batch, nheads, seqlen_q)]. is_causal is aligned to
    the top-left corner (query i sees keys j <= i), as in SDPA; so is the sliding window. The tensors
    are passed as strided views (no copy). attn_mask and dropout are refused. deterministic=True makes
    the backward bitwise repeatable (as flash_attn_func's).
    """
    if attn_mask is not None:
        raise ops._C.UnsupportedError("attn_mask: arbitrary masks are not supported; use is_causal, "
                                      "window_size, softcap or alibi_slopes")
    reject_unsupported(dropout_p)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise _C.InvalidArgumentError(f"{name}: expected 4 dimensions (batch, nheads, seqlen, headdim), got shape {list(t.shape)}")
    if k.shape[1] != q.shape[1] and not enable_gqa:
        raise _C.InvalidArgumentError(f"k: number of heads ({k.shape[1]}) differs from q's ({q.shape[1]}); "
                         "pass enable_gqa=True for grouped-query attention")
    out, lse = _run(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale,
                    causal=is_causal, mask_align="top_left", window_size=window_size, softcap=softcap,
                    alibi_slopes=alibi_slopes, path=_path, deterministic=deterministic)
    out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


def path_support(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, window_size=(-1, -1),
                 softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None, cu_seqlens_q=None,
                 cu_seqlens_k=None, max_seqlen_q: int = 0, max_seqlen_k: int = 0,
                 mask_align: str = "bottom_right") -> dict:
    """{path name: "" if that kernel path can run this call, else the reason}, in dispatch order.
    Arguments as flash_attn_func / flash_attn_varlen_func (flash-attn layout). Writes nothing."""
    window_left, window_right = window_bounds(window_size)
    varlen = cu_seqlens_q is not None
    qd = ops.describe("q", q)
    # supports() only asks where memory lives, so q stands in for the outputs: nothing is written.
    o_shape, _ = output_shapes(q.shape, v.shape, varlen)
    o_strides = torch.empty(o_shape, device="meta").stride()
    out_desc = ArrayDesc("out", qd.address, tuple(o_shape), tuple(o_strides), qd.dtype)
    params = build_params(qd, ops.describe("k", k), ops.describe("v", v), out_desc, None,
                          cu_seqlens_q=ops.describe("cu_seqlens_q", cu_seqlens_q),
                          cu_seqlens_k=ops.describe("cu_seqlens_k", cu_seqlens_k),
                          alibi_slopes=ops.describe("alibi_slopes", alibi_slopes), max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, softcap=softcap, causal=causal,
                          mask_align=mask_align_code(mask_align), window_left=window_left,
                          window_right=window_right)
    return {PATH_NAMES[int(path)]: ("" if supported else reason)
            for path, supported, reason in ops._C.supports(params)}


def softmax(x: Tensor, dim: int = -1, *, return_lse: bool = False, variant: str = "auto"):
    """torch.softmax(x, dim) through flashcore's softmax ladder (fp32 math, fp32/fp16/bf16 in and out,
    NaN-propagating like torch). With return_lse also returns the natural-log LSE of each softmaxed
    row (fp32, x's shape without `dim`). `variant` picks a ladder step (see docs/softmax.md).
    A non-last `dim` or a non-contiguous x is made contiguous first (one copy). Forward only."""
    from ._softmax_args import variant_code
    code = variant_code(variant)
    moved = x.movedim(dim, -1)
    y, lse = ops.softmax_op(moved.contiguous(), code)
    y = y.movedim(-1, dim)
    return (y, lse) if return_lse else y

