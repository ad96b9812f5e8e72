"""flashcore on host arrays (numpy): runs the C++ library's fp64 CPU reference path.

Needs numpy, not torch. It is how the extension is tested without a GPU (CI), and a convenient
reference: the same validation and the same semantics as the GPU paths.

    out, lse = flashcore.host.attention_forward(q, k, v, causal=True)

Layout is flash-attn's: q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] (varlen: [total, H, D] with
cu_seqlens_q/k). Arrays may have any strides whose last dimension is contiguous. numpy has no
bfloat16: pass uint16 arrays holding bf16 bit patterns with dtype="bf16".
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from . import _C
from ._params import ArrayDesc, build_params, mask_align_code, output_shapes, path_code, window_bounds
from ._softmax_args import KERNEL_DTYPE_CODES, rows_and_cols, variant_code

_NUMPY_DTYPES = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32", np.dtype(np.int32): "int32"}


def describe(name: str, array, dtype: Optional[str] = None) -> ArrayDesc:
    """ArrayDesc of a numpy array (strides converted from bytes to elements)."""
    if not isinstance(array, np.ndarray):
        raise _C.InvalidArgumentError(f"{name}: expected a numpy array, got {type(array).__name__}")
    if dtype == "bf16":
        if array.dtype != np.uint16:
            raise _C.InvalidArgumentError(f"{name}: dtype='bf16' needs uint16 arrays of bf16 bit patterns, got {array.dtype}")
        name_of_dtype = "bf16"
    else:
        name_of_dtype = _NUMPY_DTYPES.get(array.dtype, str(array.dtype))
    itemsize = array.itemsize
    strides = []
    for stride in array.strides:
        if stride % itemsize != 0:
            raise _C.InvalidArgumentError(f"{name}: strides must be whole elements, got {array.strides} bytes for itemsize {itemsize}")
        strides.append(stride // itemsize)
    return ArrayDesc(name, int(array.ctypes.data), tuple(array.shape), tuple(strides), name_of_dtype)


def _optional(name: str, array, dtype: Optional[str] = None) -> Optional[ArrayDesc]:
    return None if array is None else describe(name, array, dtype)


def attention_forward(q, k, v, *, softmax_scale: Optional[float] = None, causal: bool = False,
                      mask_align: str = "bottom_right", window_size: Sequence[int] = (-1, -1),
                      softcap: float = 0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
                      max_seqlen_q: Optional[int] = None, max_seqlen_k: Optional[int] = None,
                      seqused_k=None, out=None, lse=None, dtype: Optional[str] = None,
                      path: str = "auto") -> Tuple[np.ndarray, np.ndarray]:
    """Attention on host arrays; returns (out, lse). `out`/`lse` may be given (any strides)."""
    qd, kd, vd = describe("q", q, dtype), describe("k", k, dtype), describe("v", v, dtype)
    cu_q, cu_k = _optional("cu_seqlens_q", cu_seqlens_q), _optional("cu_seqlens_k", cu_seqlens_k)
    varlen = cu_q is not None or cu_k is not None
    o_shape, lse_shape = output_shapes(qd.shape, vd.shape, varlen) if len(qd.shape) == (3 if varlen else 4) \
        else (None, None)
    if out is None and o_shape is not None:
        out = np.empty(o_shape, dtype=q.dtype)
    if lse is None and lse_shape is not None:
        lse = np.empty(lse_shape, dtype=np.float32)
    if varlen:
        if max_seqlen_q is None or max_seqlen_k is None:
            raise _C.InvalidArgumentError("max_seqlen_q, max_seqlen_k: varlen calls must give both")
    window_left, window_right = window_bounds(window_size)
    params = build_params(
        qd, kd, vd, describe("out", out, dtype) if out is not None else qd,
        describe("lse", lse) if lse is not None else None,
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqused_k=_optional("seqused_k", seqused_k),
        alibi_slopes=_optional("alibi_slopes", alibi_slopes),
        max_seqlen_q=max_seqlen_q or 0, max_seqlen_k=max_seqlen_k or 0, softmax_scale=softmax_scale,
        softcap=softcap, causal=causal, mask_align=mask_align_code(mask_align),
        window_left=window_left, window_right=window_right, path=path_code(path))
    if out is not None and not out.flags.writeable:
        raise _C.InvalidArgumentError("out: must be writeable")
    _C.forward(params)
    return out, lse


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even (NaN stays NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def softmax(x, *, dtype: Optional[str] = None, return_lse: bool = False, variant: str = "auto"):
    """Row softmax over the last dimension of a contiguous numpy array through the C++ library (host
    memory runs its fp64 CPU path). fp32/fp16 arrays, or uint16 bf16 bit patterns with dtype='bf16'.
    Returns y (same dtype and shape), and with return_lse the natural-log LSE per row (fp32,
    shape x.shape[:-1])."""
    xd = describe("x", x, dtype)
    if xd.dtype not in KERNEL_DTYPE_CODES:
        raise _C.InvalidArgumentError(f"x: dtype must be fp32, fp16 or bf16 (uint16 bits with dtype='bf16'), got {xd.dtype}")
    rows, cols = rows_and_cols("x", xd.shape, xd.strides)
    y = np.empty_like(x)
    lse = np.empty(x.shape[:-1], dtype=np.float32)
    _C.softmax_forward(xd.address, int(y.ctypes.data), int(lse.ctypes.data), rows, cols,
                       KERNEL_DTYPE_CODES[xd.dtype], variant_code(variant), 0)
    return (y, lse) if return_lse else y

