"""Inference entry points: flash-attn's flash_attn_with_kvcache, and paged K/V for the varlen forward.

flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                        cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                        softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                        rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                        return_softmax_lse=False)
has flash-attn's signature and semantics (docs/semantics.md, "KV cache"): k/v (when given) are
appended to the caches in place at cache_seqlens (rotated first with rotary_cos/sin), then q attends
over each entry's keys [cache_leftpad, cache_seqlens + seqlen_new). Caches are dense
[batch_cache, seqlen_cache, nheads_k, headdim] or paged [num_blocks, page_block_size, nheads_k,
headdim] with block_table int32 [batch, max_blocks_per_seq]. num_splits: 0 lets the decode path's
plan choose the split-KV count from the SM count, 1 disables it. softmax_lse is returned as flash-attn
returns it (+inf for a row with no key).

Both calls are torch custom ops (flashcore::fwd_kvcache mutates k_cache and v_cache) with fake
kernels, so torch.compile traces them; nothing synchronizes the host (cache_seqlens and the block
table are trusted, as flash-attn trusts them; the kernels clamp out-of-range entries so nothing is
read or written outside the caches), so a decode step can be captured in a CUDA graph. Inference
only: no autograd.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C, _params, ops
from ._params import KERNEL_DTYPES, path_code, window_bounds

_NO_TENSOR = (0, 0, 0, 0)


def _int32_1d(name: str, t: Tensor, count: int, device) -> None:
    if t.dtype != torch.int32 or t.dim() != 1 or t.shape[0] != count:
        raise _C.InvalidArgumentError(f"{name}: must be an int32 tensor of shape [{count}], got {t.dtype} "
                                      f"{list(t.shape)}")
    if t.device != device:
        raise _C.InvalidArgumentError(f"{name}: must be on q's device ({device}), got {t.device}")


def _cache_params(q: Tensor, k_cache: Tensor, v_cache: Tensor, out: Tensor, lse: Tensor, *,
                  block_table: Optional[Tensor], cache_batch_idx: Optional[Tensor], cache_leftpad: Optional[Tensor],
                  alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor] = None,
                  cu_seqlens_k: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None, max_seqlen_q: int = 0,
                  max_seqlen_k: int = 0, softmax_scale: float, softcap: float, causal: bool, window_left: int,
                  window_right: int, num_splits: int, path: int, check_metadata: bool = False) -> "_C.AttentionParams":
    """AttentionParams of an attention over a cache (dense, batch-indexed or paged). Shapes that
    AttentionParams cannot express are checked here; validate() checks the rest."""
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise _C.InvalidArgumentError(f"q: dtype {q.dtype} is not supported (fp16, bf16, fp32)")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise _C.InvalidArgumentError(f"{name}: expected 4 dimensions (batch_cache or num_blocks, seqlen or "
                                          f"page_block_size, nheads_k, headdim), got shape {list(t.shape)}")
        if t.dtype != q.dtype or t.device != q.device:
            raise _C.InvalidArgumentError(f"{name}: must have q's dtype and device ({q.dtype}, {q.device}), got "
                                          f"{t.dtype}, {t.device}")
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise _C.InvalidArgumentError(f"{name}: the last dimension (head dim) must be contiguous")
    if tuple(k_cache.shape[:3]) != tuple(v_cache.shape[:3]):
        raise _C.InvalidArgumentError(f"v_cache: all dimensions but the last must match k_cache's "
                                      f"{list(k_cache.shape[:3])}, got {list(v_cache.shape[:3])}")
    varlen = cu_seqlens_q is not None
    p = _C.AttentionParams()
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out.data_ptr(), lse.data_ptr()
    p.dtype = KERNEL_DTYPES[ops._dtype_name(q)]
    p.heads_q, p.heads_kv = q.shape[-2], k_cache.shape[2]
    p.head_dim_qk, p.head_dim_v = q.shape[-1], v_cache.shape[-1]
    if q.shape[-1] > 1 and q.stride(-1) != 1:
        raise _C.InvalidArgumentError("q: the last dimension (head dim) must be contiguous")
    if varlen:
        p.batch = cu_seqlens_q.shape[0] - 1
        p.seqlen_q, p.seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        p.total_q = q.shape[0]
        p.cu_seqlens_q, p.cu_seqlens_k = cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr()
        p.q_seq_stride, p.q_head_stride = q.stride(0), q.stride(1)
        p.o_seq_stride, p.o_head_stride = out.stride(0), out.stride(1)
        p.lse_head_stride = lse.stride(0)
    else:
        p.batch, p.seqlen_q = q.shape[0], q.shape[1]
        p.seqlen_k = k_cache.shape[1]
        p.q_batch_stride, p.q_seq_stride, p.q_head_stride = q.stride()[:3]
        p.o_batch_stride, p.o_seq_stride, p.o_head_stride = out.stride()[:3]
        p.lse_batch_stride, p.lse_head_stride = lse.stride(0), lse.stride(1)
    p.k_batch_stride, p.k_seq_stride, p.k_head_stride = k_cache.stride()[:3]
    p.v_batch_stride, p.v_seq_stride, p.v_head_stride = v_cache.stride()[:3]
    if seqused_k is not None:
        p.seqused_k = seqused_k.data_ptr()
    if block_table is not None:
        if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != p.batch:
            raise _C.InvalidArgumentError(f"block_table: must be an int32 tensor [batch, max_blocks_per_seq] with "
                                          f"batch = {p.batch}, got {block_table.dtype} {list(block_table.shape)}")
        if block_table.device != q.device or block_table.stride(1) != 1:
            raise _C.InvalidArgumentError("block_table: must be on q's device with contiguous rows")
        p.block_table = block_table.data_ptr()
        p.block_table_batch_stride = block_table.stride(0)
        p.pages_per_seq = block_table.shape[1]
        p.page_size = k_cache.shape[1]
        p.num_pages = k_cache.shape[0]
        if not varlen:
            p.seqlen_k = p.pages_per_seq * p.page_size
    if cache_batch_idx is not None:
        _int32_1d("cache_batch_idx", cache_batch_idx, p.batch, q.device)
        p.kv_batch_idx = cache_batch_idx.data_ptr()
        p.kv_batch = k_cache.shape[0]
    elif block_table is None and not varlen and k_cache.shape[0] != p.batch:
        raise _C.InvalidArgumentError(f"k_cache: batch size must match q ({p.batch}) without cache_batch_idx or "
                                      f"block_table, got {k_cache.shape[0]}")
    if cache_leftpad is not None:
        _int32_1d("cache_leftpad", cache_leftpad, p.batch, q.device)
        p.leftpad_k = cache_leftpad.data_ptr()
    if alibi_slopes is not None:
        if alibi_slopes.dtype != torch.float32 or tuple(alibi_slopes.shape) not in ((p.heads_q,), (p.batch, p.heads_q)):
            raise _C.InvalidArgumentError(f"alibi_slopes: must be float32 [nheads] or [batch, nheads], got "
                                          f"{alibi_slopes.dtype} {list(alibi_slopes.shape)}")
        p.alibi_slopes = alibi_slopes.data_ptr()
        p.alibi_batch_stride = alibi_slopes.stride(0) if alibi_slopes.dim() == 2 else 0
    p.softmax_scale = float(softmax_scale)
    p.softcap = float(softcap)
    p.causal = bool(causal)
    p.window_left, p.window_right = int(window_left), int(window_right)
    p.num_splits = int(num_splits)
    p.path = _C.KernelPath(path)
    # False: the small arrays are trusted, as flash-attn trusts them (no host sync; graph capture).
    p.check_device_metadata = bool(check_metadata)
    return p


def _new_kv(name: str, t: Optional[Tensor], batch: int, heads_k: int, q: Tensor) -> Tuple[int, int, int, int]:
    if t is None:
        return _NO_TENSOR
    if t.dim() != 4 or t.shape[0] != batch or t.shape[2] != heads_k or t.dtype != q.dtype or t.device != q.device:
        raise _C.InvalidArgumentError(f"{name}: must be {q.dtype} on {q.device} of shape [batch={batch}, seqlen_new, "
                                      f"nheads_k={heads_k}, headdim], got {t.dtype} {list(t.shape)} on {t.device}")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise _C.InvalidArgumentError(f"{name}: the last dimension (head dim) must be contiguous")
    return (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))


def _fwd_kvcache_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor], v: Optional[Tensor],
                rotary_cos: Optional[Tensor], rotary_sin: Optional[Tensor], cache_seqlens: Optional[Tensor],
                cache_batch_idx: Optional[Tensor], cache_leftpad: Optional[Tensor], block_table: Optional[Tensor],
                alibi_slopes: Optional[Tensor], softmax_scale: float, causal: bool, window_left: int,
                window_right: int, softcap: float, rotary_interleaved: bool, num_splits: int,
                path: int) -> Tuple[Tensor, Tensor]:
    if q.dim() != 4:
        raise _C.InvalidArgumentError(f"q: expected 4 dimensions (batch, seqlen_q, nheads, headdim), got shape "
                                      f"{list(q.shape)}")
    if (k is None) != (v is None):
        raise _C.InvalidArgumentError("k, v: pass both (appended to the cache) or neither")
    B, Sq, Hq, _ = q.shape
    out = torch.empty((B, Sq, Hq, v_cache.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    params = _cache_params(q, k_cache, v_cache, out, lse, block_table=block_table, cache_batch_idx=cache_batch_idx,
                           cache_leftpad=cache_leftpad, alibi_slopes=alibi_slopes, softmax_scale=softmax_scale,
                           softcap=softcap, causal=causal, window_left=window_left, window_right=window_right,
                           num_splits=num_splits, path=path)
    if cache_seqlens is not None:
        _int32_1d("cache_seqlens", cache_seqlens, B, q.device)
    k_new = _new_kv("k", k, B, k_cache.shape[2], q)
    v_new = _new_kv("v", v, B, k_cache.shape[2], q)
    seqlen_new = k.shape[1] if k is not None else 0
    rotary_dim = rotary_len = 0
    if rotary_cos is not None or rotary_sin is not None:
        if rotary_cos is None or rotary_sin is None:
            raise _C.InvalidArgumentError("rotary_cos, rotary_sin: pass both or neither")
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            if t.dim() != 2 or t.dtype != q.dtype or t.device != q.device or not t.is_contiguous():
                raise _C.InvalidArgumentError(f"{name}: must be a contiguous {q.dtype} tensor [seqlen_ro, "
                                              f"rotary_dim / 2] on {q.device}, got {t.dtype} {list(t.shape)}")
        if rotary_sin.shape != rotary_cos.shape:
            raise _C.InvalidArgumentError(f"rotary_sin: must have rotary_cos's shape {list(rotary_cos.shape)}")
        rotary_len, rotary_dim = rotary_cos.shape[0], 2 * rotary_cos.shape[1]
    cos_ptr = rotary_cos.data_ptr() if rotary_cos is not None else 0
    sin_ptr = rotary_sin.data_ptr() if rotary_sin is not None else 0
    seqlens_ptr = cache_seqlens.data_ptr() if cache_seqlens is not None else 0
    if q.device.type == "cuda":
        ops._call_on_device(q.device, _C.forward_kvcache, params, seqlens_ptr, list(k_new), list(v_new), seqlen_new,
                            cos_ptr, sin_ptr, rotary_dim, rotary_len, bool(rotary_interleaved),
                            ops._current_stream_handle(q.device))
    else:
        _C.forward_kvcache(params, seqlens_ptr, list(k_new), list(v_new), seqlen_new, cos_ptr, sin_ptr, rotary_dim,
                           rotary_len, bool(rotary_interleaved), 0)
    return out, lse


fwd_kvcache = torch.library.custom_op("flashcore::fwd_kvcache", mutates_args=("k_cache", "v_cache"))(
    _fwd_kvcache_impl)


@fwd_kvcache.register_fake
def _fwd_kvcache_fake(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                      cache_leftpad, block_table, alibi_slopes, softmax_scale, causal, window_left, window_right,
                      softcap, rotary_interleaved, num_splits, path):
    B, Sq, Hq, _ = q.shape
    return (q.new_empty((B, Sq, Hq, v_cache.shape[-1])), q.new_empty((B, Hq, Sq), dtype=torch.float32))


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                            *, _path: str = "auto"):
    """flash-attn's flash_attn_with_kvcache (module docstring). Returns out, or (out, softmax_lse)."""
    window_left, window_right = window_bounds(window_size)
    if causal:
        window_right = 0  # flash-attn: causal=True means window_size[1] = 0
    # flash-attn's maybe_contiguous for the inputs (the caches are written in place: they must be
    # contiguous in the head dim already, which _cache_params checks).
    q, k, v, rotary_cos, rotary_sin = (t.contiguous() if t is not None and t.dim() > 0 and t.shape[-1] > 1
                                       and t.stride(-1) != 1 else t for t in (q, k, v, rotary_cos, rotary_sin))
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    # Plain eager tensors skip the dispatcher (its Python round trips cost more than a decode step).
    direct = ops.can_call_impl_directly(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                                        cache_batch_idx, cache_leftpad, block_table, alibi_slopes)
    op = _fwd_kvcache_impl if direct else fwd_kvcache
    out, lse = op(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                           cache_leftpad, block_table, alibi_slopes,
                           0.0 if softmax_scale is None else float(softmax_scale), bool(causal), window_left,
                           window_right, float(softcap), bool(rotary_interleaved), int(num_splits), path_code(_path))
    if not return_softmax_lse:
        return out
    return out, lse.masked_fill(lse == float("-inf"), float("inf"))


@torch.library.custom_op("flashcore::fwd_paged", mutates_args=())
def fwd_paged(q: Tensor, k_cache: Tensor, v_cache: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
              seqused_k: Optional[Tensor], block_table: Tensor, alibi_slopes: Optional[Tensor], max_seqlen_q: int,
              max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int, window_right: int,
              softcap: float, path: int) -> Tuple[Tensor, Tensor]:
    """The varlen forward over a paged cache (flash_attn_varlen_func with block_table): q [total_q,
    nheads, headdim], k_cache/v_cache [num_blocks, page_block_size, nheads_k, headdim]; cu_seqlens_k
    give each sequence's key count (its keys are rows 0.. of its block-table row)."""
    if q.dim() != 3:
        raise _C.InvalidArgumentError(f"q: expected 3 dimensions (total_q, nheads, headdim), got shape {list(q.shape)}")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _int32_1d(name, t, block_table.shape[0] + 1, q.device)
    out = torch.empty((q.shape[0], q.shape[1], v_cache.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    params = _cache_params(q, k_cache, v_cache, out, lse, block_table=block_table, cache_batch_idx=None,
                           cache_leftpad=None, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
                           cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k, max_seqlen_q=max_seqlen_q,
                           max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
                           window_left=window_left, window_right=window_right, num_splits=0, path=path,
                           check_metadata=_params.check_device_metadata)
    if q.device.type == "cuda":
        ops._call_on_device(q.device, _C.forward, params, ops._current_stream_handle(q.device))
    else:
        _C.forward(params, 0)
    return out, lse


@fwd_paged.register_fake
def _fwd_paged_fake(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, alibi_slopes,
                    max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, path):
    return (q.new_empty((q.shape[0], q.shape[1], v_cache.shape[-1])),
            q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))
