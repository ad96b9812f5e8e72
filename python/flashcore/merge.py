"""flashcore.merge_attention_states: two attentions of the same queries over disjoint key sets,
combined into the attention over their union (split-KV, cascade inference, ring attention):

    lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b

computed in fp32 (docs/semantics.md, "Merging attention states"). A side whose lse is -inf or +inf
(flash-attn's value for a row that saw no key) contributes nothing; both empty give o = 0,
lse = -inf. NaN in any input gives NaN.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C
from ._softmax_args import KERNEL_DTYPE_CODES
from .ops import _call_on_device, _current_stream_handle, _dtype_name


def _o_strides(name: str, t: Tensor, varlen: bool):
    """(address, batch, seq, head strides) of an o tensor (varlen [T, H, D]: no batch axis)."""
    st = t.stride()
    if t.shape[-1] > 1 and st[-1] != 1:
        raise _C.InvalidArgumentError(f"{name}: the last dimension (head_dim) must be contiguous, got strides {list(st)}")
    return [t.data_ptr(), 0, st[0], st[1]] if varlen else [t.data_ptr(), st[0], st[1], st[2]]


def _lse_strides(name: str, t: Tensor, varlen: bool):
    """(address, batch, head strides) of an lse tensor ([B, H, S], varlen [H, T]); seq stride 1."""
    st = t.stride()
    if t.shape[-1] > 1 and st[-1] != 1:
        raise _C.InvalidArgumentError(f"{name}: the last dimension (seqlen) must be contiguous, got strides {list(st)}")
    return [t.data_ptr(), 0, st[0]] if varlen else [t.data_ptr(), st[0], st[1]]


def merge_attention_states(o_a: Tensor, lse_a: Tensor, o_b: Tensor, lse_b: Tensor, out: Optional[Tensor] = None,
                           lse_out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Merges (o_a, lse_a) and (o_b, lse_b); returns (o, lse).

    o_a, o_b: [B, S, H, D] (or varlen-packed [T, H, D]), float16, bfloat16 or float32, same shape and
    dtype; lse_a, lse_b: float32 [B, H, S] (varlen: [H, T]), natural log. `out` / `lse_out` receive the
    result when given (out may be o_a and lse_out may be lse_a: in place), else new tensors are made.
    CUDA tensors run on the current stream; CPU tensors on the host, synchronously. Not differentiable.
    """
    if o_a.dim() not in (3, 4):
        raise _C.InvalidArgumentError(f"o_a: must be [B, S, H, D] or varlen [T, H, D], got shape {list(o_a.shape)}")
    varlen = o_a.dim() == 3
    if varlen:
        batch, (seqlen, heads, head_dim) = 1, o_a.shape
        lse_shape = (heads, seqlen)
    else:
        batch, seqlen, heads, head_dim = o_a.shape
        lse_shape = (batch, heads, seqlen)
    if out is None:
        out = torch.empty(o_a.shape, dtype=o_a.dtype, device=o_a.device)
    if lse_out is None:
        lse_out = torch.empty(lse_shape, dtype=torch.float32, device=o_a.device)
    for name, t in (("o_b", o_b), ("out", out)):
        if tuple(t.shape) != tuple(o_a.shape) or t.dtype != o_a.dtype:
            raise _C.InvalidArgumentError(f"{name}: must have o_a's shape {list(o_a.shape)} and dtype {o_a.dtype}, "
                                          f"got {list(t.shape)} {t.dtype}")
    for name, t in (("lse_a", lse_a), ("lse_b", lse_b), ("lse_out", lse_out)):
        if tuple(t.shape) != lse_shape or t.dtype != torch.float32:
            raise _C.InvalidArgumentError(f"{name}: must be float32 of shape {list(lse_shape)}, got "
                                          f"{list(t.shape)} {t.dtype}")
    for name, t in (("lse_a", lse_a), ("o_b", o_b), ("lse_b", lse_b), ("out", out), ("lse_out", lse_out)):
        if t.device != o_a.device:
            raise _C.InvalidArgumentError(f"{name}: must be on o_a's device ({o_a.device}), got {t.device}")
    code = KERNEL_DTYPE_CODES.get(_dtype_name(o_a))
    if code is None:
        raise _C.InvalidArgumentError(f"o_a: dtype must be float16, bfloat16 or float32, got {o_a.dtype}")
    args = (_o_strides("o_a", o_a, varlen), _lse_strides("lse_a", lse_a, varlen), _o_strides("o_b", o_b, varlen),
            _lse_strides("lse_b", lse_b, varlen), _o_strides("out", out, varlen),
            _lse_strides("lse_out", lse_out, varlen), batch, seqlen, heads, head_dim, code)
    if o_a.device.type == "cuda":
        _call_on_device(o_a.device, _C.merge_states, *args, _current_stream_handle(o_a.device))
    else:
        _C.merge_states(*args, 0)  # host memory: the CPU implementation, synchronous
    return out, lse_out
