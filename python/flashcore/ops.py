"""The torch custom ops: flashcore::fwd and its backward flashcore::bwd (wired with register_autograd).

Registered with torch.library.custom_op so that
  * torch.compile(fullgraph=True) traces them without a graph break (register_fake gives shapes),
  * CUDA graphs capture them (the kernel runs on the current stream; the C++ validate() reads no
    device memory while the stream is capturing),
  * autograd differentiates every entry point (flashcore::bwd: the C++ attention_backward, which
    runs the first backward path that takes the call: sm90, sm80, the naive GPU backward, the fp64
    CPU reference on CPU tensors; the forward's `deterministic` and `path` inputs reach it, see
    _setup_context).
Plain eager calls skip the dispatcher: forward_impl directly when no graph is recorded
(can_call_impl_directly), EagerAttention (the same functions under a torch.autograd.Function) when
one is (can_run_eager_autograd).
Outputs come from PyTorch's allocator (torch.empty); kernels run on torch's current stream.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake

from . import _C
from ._params import KERNEL_DTYPES, ArrayDesc, backward_path_code, build_params, check_inputs, output_shapes
from ._softmax_args import KERNEL_DTYPE_CODES, rows_and_cols

_TORCH_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.int32: "int32"}

def _dtype_name(t: Tensor) -> str:
    name = _TORCH_DTYPES.get(t.dtype)  # (not .get(dtype, str(...)): that formats the fallback every call)
    return name if name is not None else str(t.dtype).replace("torch.", "")


# The current stream's handle of a device index, without building a torch.cuda.Stream object (what
# Triton and Inductor call); the public torch.cuda.current_stream where a build lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream_handle(device: torch.device) -> int:
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def describe(name: str, t: Optional[Tensor]) -> Optional[ArrayDesc]:
    """ArrayDesc of a tensor. Fake/meta tensors (tracing) get address 0: they are only shape-checked."""
    if t is None:
        return None
    address = 0 if t.device.type == "meta" or is_fake(t) else t.data_ptr()
    return ArrayDesc(name, address, tuple(t.shape), tuple(t.stride()), _dtype_name(t))


def describe_real(name: str, t: Optional[Tensor]) -> Optional[ArrayDesc]:
    """describe() for forward_impl, which only ever sees real tensors (fake and meta ones go to the
    op's fake kernel): no fakeness test, which was the largest host cost of a call."""
    if t is None:
        return None
    return ArrayDesc(name, t.data_ptr(), tuple(t.shape), tuple(t.stride()), _dtype_name(t))


def _check_devices(q: Tensor, others) -> None:
    for name, t in others:
        if t is not None and t.device != q.device:
            raise _C.InvalidArgumentError(f"{name}: must be on q's device ({q.device}), got {t.device}")


# Kernel dtype codes (flashcore::DType) of the torch dtypes the kernels take, as plain ints.
_KERNEL_DTYPE_CODES = {t: int(KERNEL_DTYPES[name]) for t, name in _TORCH_DTYPES.items() if name in KERNEL_DTYPES}


def _call_on_device(device: torch.device, fn, *args) -> None:
    """fn(*args) with `device` current: the C++ API runs on the current device (cudaGetDevice)."""
    if device.index == torch.cuda.current_device():
        fn(*args)
    else:
        with torch.cuda.device(device):
            fn(*args)


def _dense_call_args(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, softcap: float, causal: bool,
                     mask_align: int, window_left: int, window_right: int, path: int) -> Optional[list]:
    """The leading arguments of _C.forward_dense / _C.backward_dense but the o and lse addresses (the
    list's slots 3 and 4, left 0): dense 4-D tensors on one device whose head dims are contiguous, in a
    kernel dtype. None when the call is anything else, or breaks a rule that check_inputs words (wrong
    ranks, dtypes, layouts): the general path then runs and raises its error. The C++ validate() checks
    the rest, with the same messages either way. Filling AttentionParams in C++ instead of describing
    every tensor and setting ~40 attributes from Python is most of a call's host time."""
    code = _KERNEL_DTYPE_CODES.get(q.dtype)
    if (code is None or q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.dtype != q.dtype or v.dtype != q.dtype
            or k.device != q.device or v.device != q.device):
        return None
    B, Sq, Hq, Dqk = q.shape
    _, Sk, Hkv, Dv = v.shape
    qs, ks, vs = q.stride(), k.stride(), v.stride()
    if ((Dqk > 1 and (qs[3] != 1 or ks[3] != 1)) or (Dv > 1 and vs[3] != 1) or k.shape[0] != B
            or v.shape[0] != B or k.shape[3] != Dqk or k.shape[1] != Sk or k.shape[2] != Hkv):
        return None
    return [q.data_ptr(), k.data_ptr(), v.data_ptr(), 0, 0, B, Sq, Hq, Dqk, Sk, Hkv, Dv,
            qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], float(softmax_scale), float(softcap), code,
            int(causal), mask_align, window_left, window_right, path]


def _forward_dense_cuda(q: Tensor, k: Tensor, v: Tensor, softmax_scale: float, softcap: float, causal: bool,
                        mask_align: int, window_left: int, window_right: int, path: int):
    """forward_impl for the common call (_dense_call_args) on CUDA tensors; None for anything else."""
    args = _dense_call_args(q, k, v, softmax_scale, softcap, causal, mask_align, window_left, window_right, path)
    if args is None:
        return None
    B, Sq, Hq, Dv = q.shape[0], q.shape[1], q.shape[2], v.shape[3]
    out = torch.empty((B, Sq, Hq, Dv), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device)
    args[3], args[4] = out.data_ptr(), lse.data_ptr()
    _call_on_device(q.device, _C.forward_dense, *args, _current_stream_handle(q.device))
    return out, lse


def forward_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                 seqused_k: Optional[Tensor], alibi_slopes: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
                 softmax_scale: float, softcap: float, causal: bool, mask_align: int, window_left: int,
                 window_right: int, path: int, deterministic: bool) -> Tuple[Tensor, Tensor]:
    """Attention forward in flash-attn layout; returns (out, lse). softmax_scale 0 means 1/sqrt(D).
    `deterministic` is for the backward (saved by _setup_context); the forward is deterministic and
    ignores it."""
    if (cu_seqlens_q is None and cu_seqlens_k is None and seqused_k is None and alibi_slopes is None
            and q.device.type == "cuda"):
        result = _forward_dense_cuda(q, k, v, softmax_scale, softcap, causal, mask_align, window_left, window_right,
                                     path)
        if result is not None:
            return result
    _check_devices(q, (("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                       ("seqused_k", seqused_k), ("alibi_slopes", alibi_slopes)))
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    descs = dict(cu_seqlens_q=describe_real("cu_seqlens_q", cu_seqlens_q),
                 cu_seqlens_k=describe_real("cu_seqlens_k", cu_seqlens_k),
                 seqused_k=describe_real("seqused_k", seqused_k),
                 alibi_slopes=describe_real("alibi_slopes", alibi_slopes))
    qd, kd, vd = describe_real("q", q), describe_real("k", k), describe_real("v", v)
    check_inputs(qd, kd, vd, **descs)  # shapes first, so the outputs below have meaningful shapes
    o_shape, lse_shape = output_shapes(q.shape, v.shape, varlen)
    out = torch.empty(o_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
    params = build_params(qd, kd, vd, describe_real("out", out), describe_real("lse", lse), **descs,
                          inputs_checked=True, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                          softmax_scale=softmax_scale, softcap=softcap,
                          causal=causal, mask_align=mask_align, window_left=window_left,
                          window_right=window_right, path=path)
    if q.device.type == "cuda":
        _call_on_device(q.device, _C.forward, params, _current_stream_handle(q.device))
    else:
        _C.forward(params, 0)  # host memory: the fp64 CPU reference, synchronous
    return out, lse


fwd = torch.library.custom_op("flashcore::fwd", mutates_args=())(forward_impl)


def can_call_impl_directly(*tensors: Optional[Tensor]) -> bool:
    """True when calling forward_impl directly is exactly what the op would do: plain eager tensors
    (no subclass such as FakeTensor or DTensor), no torch.compile tracing, no dispatch mode
    (FlopCounterMode, ...) to observe the op, and no autograd graph to record. It skips the
    dispatcher's Python round trips (tens of microseconds per call); anything else uses the op. Under
    torch.profiler the op is used too, so the call shows up under its name (flashcore::fwd, ...)."""
    if torch.compiler.is_compiling() or _dispatch_modes_active() or _profiler_active():
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) is not Tensor or (grad and t.requires_grad)):
            return False
    return True


def can_run_eager_autograd(*tensors: Optional[Tensor]) -> bool:
    """True when EagerAttention.apply does exactly what the op would: can_call_impl_directly's
    conditions but the autograd one (plain tensors, no tracing, dispatch mode or profiler)."""
    if torch.compiler.is_compiling() or _dispatch_modes_active() or _profiler_active():
        return False
    return all(t is None or type(t) is Tensor for t in tensors)


_profiler_enabled = getattr(torch._C._autograd, "_profiler_enabled", None)


def _profiler_active() -> bool:
    return _profiler_enabled is not None and _profiler_enabled()


def _dispatch_modes_active() -> bool:
    stack_length = getattr(torch._C, "_len_torch_dispatch_stack", None)
    return stack_length is None or stack_length() > 0


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q, max_seqlen_k,
              softmax_scale, softcap, causal, mask_align, window_left, window_right, path, deterministic):
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    check_inputs(describe("q", q), describe("k", k), describe("v", v),
                 cu_seqlens_q=describe("cu_seqlens_q", cu_seqlens_q),
                 cu_seqlens_k=describe("cu_seqlens_k", cu_seqlens_k),
                 seqused_k=describe("seqused_k", seqused_k), alibi_slopes=describe("alibi_slopes", alibi_slopes))
    o_shape, lse_shape = output_shapes(q.shape, v.shape, varlen)
    return (q.new_empty(o_shape, dtype=q.dtype), q.new_empty(lse_shape, dtype=torch.float32))


def _grad_strides(t: Tensor, varlen: bool):
    """(address, batch, seq, head strides) of a gradient tensor for _C.backward (varlen: no batch axis)."""
    st = t.stride()
    return [t.data_ptr(), 0, st[0], st[1]] if varlen else [t.data_ptr(), st[0], st[1], st[2]]


def backward_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                  cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], seqused_k: Optional[Tensor],
                  alibi_slopes: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
                  softcap: float, causal: bool, mask_align: int, window_left: int, window_right: int, path: int,
                  deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv of flashcore::fwd for dout (docs/semantics.md, "Backward"); out and lse as the forward
    returned them. `path`: a KernelPath code (_params.PATHS) the C++ backward is pinned to, 0 = automatic
    selection (_setup_context passes _params.backward_path_code of the forward's path). `deterministic`:
    the fused backwards add dQ with fp32 atomics in any order unless True, which fixes the order
    (bitwise-repeatable gradients); the naive GPU and CPU backward are deterministic either way."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    # Every backward writes every element of dq, dk, dv (zeros where no row or key is visible, and for
    # varlen tokens past the last sequence), so they need no zeroing.
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    args = None
    if not varlen and seqused_k is None and alibi_slopes is None and q.device.type == "cuda":
        args = _dense_call_args(q, k, v, softmax_scale, softcap, causal, mask_align, window_left, window_right, path)
    # _C.backward_dense takes o and lse as the forward wrote them (contiguous [B, Sq, Hq, Dv], [B, Hq, Sq]).
    if (args is not None and out.is_contiguous() and lse.is_contiguous()
            and dout.shape == out.shape == (*q.shape[:3], v.shape[3])
            and lse.shape == (q.shape[0], q.shape[2], q.shape[1])):
        args[3], args[4] = out.data_ptr(), lse.data_ptr()
        grads = [x for t in (dout, dq, dk, dv) for x in _grad_strides(t, False)]
        _call_on_device(q.device, _C.backward_dense, *args, *grads, bool(deterministic),
                        _current_stream_handle(q.device))
        return dq, dk, dv
    descs = dict(cu_seqlens_q=describe_real("cu_seqlens_q", cu_seqlens_q),
                 cu_seqlens_k=describe_real("cu_seqlens_k", cu_seqlens_k),
                 seqused_k=describe_real("seqused_k", seqused_k),
                 alibi_slopes=describe_real("alibi_slopes", alibi_slopes))
    params = build_params(describe_real("q", q), describe_real("k", k), describe_real("v", v),
                          describe_real("out", out), describe_real("lse", lse), **descs,
                          max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale,
                          softcap=softcap, causal=causal, mask_align=mask_align, window_left=window_left,
                          window_right=window_right, path=path)
    grads = [_grad_strides(t, varlen) for t in (dout, dq, dk, dv)]
    if q.device.type == "cuda":
        _call_on_device(q.device, _C.backward, params, *grads, deterministic, _current_stream_handle(q.device))
    else:
        _C.backward(params, *grads, deterministic, 0)  # host memory: the fp64 CPU reference
    return dq, dk, dv


bwd = torch.library.custom_op("flashcore::bwd", mutates_args=())(backward_impl)


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q,
              max_seqlen_k, softmax_scale, softcap, causal, mask_align, window_left, window_right, path,
              deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q, max_seqlen_k, softmax_scale,
     softcap, causal, mask_align, window_left, window_right, path, deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes)
    # The backward runs on the forward's path for sm80, naive GPU and CPU reference (`_path=` pins both
    # passes, and a pinned backward that cannot run the call raises UnsupportedError rather than
    # falling back), else on automatic selection (auto; sm90, whose backward takes most but not all of
    # the sm90 forward's calls). `deterministic` (ignored by the forward) reaches the backward.
    ctx.scalars = (max_seqlen_q, max_seqlen_k, softmax_scale, softcap, causal, mask_align, window_left, window_right,
                   backward_path_code(path), deterministic)


def _gradients(ctx, grad_out, backward):
    # grad_lse is not propagated (as in flash-attn): the LSE output is a statistic, not a differentiable result.
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes = ctx.saved_tensors
    dq, dk, dv = backward(grad_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes,
                          *ctx.scalars)
    return (dq, dk, dv) + (None,) * 14  # one per flashcore::fwd input


def _backward(ctx, grad_out, grad_lse):
    return _gradients(ctx, grad_out, bwd)


fwd.register_autograd(_backward, setup_context=_setup_context)


class EagerAttention(torch.autograd.Function):
    """flashcore::fwd and its autograd for plain eager calls that record a graph (can_run_eager_autograd):
    the same forward_impl, _setup_context and backward_impl as the op, without the dispatcher's and the
    op autograd wrapper's Python round trips on either pass (a few hundred microseconds of host time
    per training step's call, which short sequences do not hide behind the GPU's work). Anything the
    op serves specially (torch.compile, dispatch modes, subclasses, the profiler) uses the op."""

    @staticmethod
    def forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q, max_seqlen_k,
                softmax_scale, softcap, causal, mask_align, window_left, window_right, path, deterministic):
        return forward_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q, max_seqlen_k,
                            softmax_scale, softcap, causal, mask_align, window_left, window_right, path, deterministic)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _setup_context(ctx, inputs, output)
        ctx.set_materialize_grads(False)  # grad_lse is ignored: no zero tensor made for it

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        if grad_out is None:  # only lse reached the loss
            grad_out = torch.zeros_like(ctx.saved_tensors[3])
        return _gradients(ctx, grad_out, backward_impl)


# ------------------------------------------------------------------------------------------------
# flashcore::softmax — the standalone row-softmax ladder (docs/softmax.md)
# ------------------------------------------------------------------------------------------------

def _softmax_check(x: Tensor) -> Tuple[int, int]:
    dtype = _dtype_name(x)
    if dtype not in KERNEL_DTYPE_CODES:
        raise _C.InvalidArgumentError(f"x: dtype must be float32, float16 or bfloat16, got {x.dtype}")
    return rows_and_cols("x", tuple(x.shape), tuple(x.stride()))


@torch.library.custom_op("flashcore::softmax", mutates_args=())
def softmax_op(x: Tensor, variant: int) -> Tuple[Tensor, Tensor]:
    """Softmax over the last dimension of a contiguous tensor; returns (y, lse) with lse fp32 of
    shape x.shape[:-1] (natural log)."""
    rows, cols = _softmax_check(x)
    y = torch.empty_like(x)
    lse = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x.device.type == "cuda":
        stream = _current_stream_handle(x.device)
        with torch.cuda.device(x.device):
            _C.softmax_forward(x.data_ptr(), y.data_ptr(), lse.data_ptr(), rows, cols,
                               KERNEL_DTYPE_CODES[_dtype_name(x)], variant, stream)
    else:
        _C.softmax_forward(x.data_ptr(), y.data_ptr(), lse.data_ptr(), rows, cols,
                           KERNEL_DTYPE_CODES[_dtype_name(x)], variant, 0)
    return y, lse


@softmax_op.register_fake
def _softmax_fake(x, variant):
    _softmax_check(x)
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.float32)

