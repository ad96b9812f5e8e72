"""From array descriptions to a flashcore AttentionParams. Free of torch and numpy.

The torch layer (`ops.py`) and the numpy layer (`host.py`) both describe their arrays as `ArrayDesc`
(address, shape, strides in elements, dtype name) and call `build_params`. Rules that need the
shapes of several arrays (which AttentionParams cannot express: k and v agree on heads, the last
dimension is contiguous, alibi has [Hq] or [B, Hq] entries) are checked here, with messages in the C++
API's style ("<argument>: <rule>, got <value>"); every other rule is checked by the C++ validate(),
whose message reaches Python verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from . import _C

KERNEL_DTYPES = {"fp16": _C.DType.FLOAT16, "bf16": _C.DType.BFLOAT16, "fp32": _C.DType.FLOAT32}

# Names accepted by the private `_path=` keyword (and compare.py's --impls), as plain ints: code that
# torch.compile traces handles Python ints, not the extension's enum objects.
PATHS = {
    "auto": int(_C.KernelPath.AUTO),
    "sm90": int(_C.KernelPath.SM90),
    "sm80": int(_C.KernelPath.SM80),
    "naive": int(_C.KernelPath.NAIVE_GPU),
    "cpu": int(_C.KernelPath.CPU_REFERENCE),
    "decode": int(_C.KernelPath.DECODE),
}
PATH_NAMES = {value: name for name, value in PATHS.items()}

# The paths whose backward `_path=` pins: sm80, naive GPU, CPU reference. An sm90 forward's backward
# is chosen automatically (the sm90 backward where it takes the call, else sm80), as for "auto".
_BACKWARD_PATHS = frozenset(PATHS[name] for name in ("sm80", "naive", "cpu"))


def backward_path_code(forward_path: int) -> int:
    """The backward's path code for a forward that ran with `forward_path` (a PATHS value): the same
    path for sm80, naive and cpu, so `_path=` pins both passes; automatic selection (sm90 -> sm80 ->
    naive GPU -> CPU reference, the first that runs the call) for "auto" and for "sm90", whose
    backward does not take every call the sm90 forward does (varlen, softcap, ALiBi, deterministic)."""
    return forward_path if forward_path in _BACKWARD_PATHS else PATHS["auto"]

MASK_ALIGNS = {"bottom_right": int(_C.MaskAlign.BOTTOM_RIGHT), "top_left": int(_C.MaskAlign.TOP_LEFT)}


@dataclass(frozen=True)
class ArrayDesc:
    """One array as the extension sees it: where it lives and how it is laid out."""

    name: str                  # the argument's name, used in error messages
    address: int               # 0 while tracing (fake tensors), else the first element's address
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]   # in elements
    dtype: str                 # "fp16", "bf16", "fp32", "int32", or the framework's name for others


def path_code(path: str) -> int:
    try:
        return PATHS[path]
    except KeyError:
        raise _C.InvalidArgumentError(f"path: must be one of {sorted(PATHS)}, got {path!r}") from None


def mask_align_code(mask_align: str) -> int:
    try:
        return MASK_ALIGNS[mask_align]
    except KeyError:
        raise _C.InvalidArgumentError(f"mask_align: must be one of {sorted(MASK_ALIGNS)}, got {mask_align!r}") from None


def window_bounds(window_size: Sequence[int]) -> Tuple[int, int]:
    """flash-attn's window_size=(left, right), -1 meaning unbounded."""
    try:
        left, right = window_size
        left, right = int(left), int(right)
    except (TypeError, ValueError):
        raise _C.InvalidArgumentError(f"window_size: must be a pair (left, right) of ints, -1 = unbounded; got {window_size!r}") from None
    return left, right


def reject_unsupported(dropout_p: float = 0.0) -> None:
    """flash-attn arguments that flashcore does not implement: refused, never ignored."""
    if dropout_p != 0.0:
        raise _C.UnsupportedError(
            f"dropout_p: flashcore has no attention dropout (forward and backward compute exact attention); "
            f"got {dropout_p}, pass dropout_p=0.0")


def _expect_ndim(desc: ArrayDesc, ndim: int, layout: str) -> None:
    if len(desc.shape) != ndim:
        raise _C.InvalidArgumentError(f"{desc.name}: expected {ndim} dimensions {layout}, got shape {list(desc.shape)}")


def _expect_last_dim_contiguous(desc: ArrayDesc) -> None:
    if desc.shape[-1] > 1 and desc.strides[-1] != 1:
        raise _C.InvalidArgumentError(f"{desc.name}: the last dimension (head dim) must be contiguous (stride 1), "
                         f"got stride {desc.strides[-1]}")


def output_shapes(q_shape: Sequence[int], v_shape: Sequence[int], varlen: bool):
    """Shapes of o and lse for q [.., Sq, Hq, Dqk] and v [.., Sk, Hkv, Dv]."""
    if varlen:  # q [total_q, Hq, D]: o [total_q, Hq, Dv], lse [Hq, total_q]
        return (q_shape[0], q_shape[1], v_shape[-1]), (q_shape[1], q_shape[0])
    return (q_shape[0], q_shape[1], q_shape[2], v_shape[-1]), (q_shape[0], q_shape[2], q_shape[1])


def check_inputs(q: ArrayDesc, k: ArrayDesc, v: ArrayDesc, *, cu_seqlens_q: Optional[ArrayDesc] = None,
                 cu_seqlens_k: Optional[ArrayDesc] = None, seqused_k: Optional[ArrayDesc] = None,
                 alibi_slopes: Optional[ArrayDesc] = None) -> None:
    """The rules between arrays that AttentionParams cannot express. Raises ValueError."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        layouts = {"q": "(total_q, nheads, headdim)", "k": "(total_k, nheads_k, headdim)",
                   "v": "(total_k, nheads_k, headdim_v)"}
    else:
        layouts = {"q": "(batch, seqlen_q, nheads, headdim)", "k": "(batch, seqlen_k, nheads_k, headdim)",
                   "v": "(batch, seqlen_k, nheads_k, headdim_v)"}
    for desc in (q, k, v):
        _expect_ndim(desc, 3 if varlen else 4, layouts[desc.name])
    if q.dtype not in KERNEL_DTYPES:
        raise _C.InvalidArgumentError(f"q: dtype {q.dtype} is not supported (fp16, bf16, fp32)")
    for desc in (k, v):
        if desc.dtype != q.dtype:
            raise _C.InvalidArgumentError(f"{desc.name}: dtype must match q ({q.dtype}), got {desc.dtype}")
    for desc in (q, k, v):
        _expect_last_dim_contiguous(desc)
    if not varlen and k.shape[0] != q.shape[0]:
        raise _C.InvalidArgumentError(f"k: batch size must match q ({q.shape[0]}), got {k.shape[0]}")
    if k.shape[-1] != q.shape[-1]:
        raise _C.InvalidArgumentError(f"k: head dim must match q's ({q.shape[-1]}), got {k.shape[-1]}")
    if tuple(v.shape[:-1]) != tuple(k.shape[:-1]):
        raise _C.InvalidArgumentError(f"v: all dimensions but the last must match k's {list(k.shape[:-1])}, got {list(v.shape[:-1])}")

    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise _C.InvalidArgumentError("cu_seqlens_q, cu_seqlens_k: varlen needs both (int32 [batch + 1])")
        for desc in (cu_seqlens_q, cu_seqlens_k):
            if desc.dtype != "int32" or len(desc.shape) != 1 or desc.shape[0] < 1:
                raise _C.InvalidArgumentError(f"{desc.name}: must be a 1-D int32 array of batch + 1 offsets, "
                                 f"got dtype {desc.dtype} shape {list(desc.shape)}")
            if desc.shape[0] > 1 and desc.strides[0] != 1:
                raise _C.InvalidArgumentError(f"{desc.name}: must be contiguous, got stride {desc.strides[0]}")
        if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
            raise _C.InvalidArgumentError(f"cu_seqlens_k: must have as many entries as cu_seqlens_q ({cu_seqlens_q.shape[0]}), "
                             f"got {cu_seqlens_k.shape[0]}")
    if seqused_k is not None:
        if not varlen:
            raise _C.InvalidArgumentError("seqused_k: only applies to varlen calls (with cu_seqlens_q/k)")
        batch = cu_seqlens_q.shape[0] - 1
        if seqused_k.dtype != "int32" or tuple(seqused_k.shape) != (batch,):
            raise _C.InvalidArgumentError(f"seqused_k: must be int32 [batch] = [{batch}], got dtype {seqused_k.dtype} "
                             f"shape {list(seqused_k.shape)}")
        if batch > 1 and seqused_k.strides[0] != 1:
            raise _C.InvalidArgumentError(f"seqused_k: must be contiguous, got stride {seqused_k.strides[0]}")

    if alibi_slopes is not None:
        heads_q = q.shape[-2]
        batch = (cu_seqlens_q.shape[0] - 1) if varlen else q.shape[0]
        if alibi_slopes.dtype != "fp32":
            raise _C.InvalidArgumentError(f"alibi_slopes: must be float32, got {alibi_slopes.dtype}")
        if tuple(alibi_slopes.shape) not in ((heads_q,), (batch, heads_q)):
            raise _C.InvalidArgumentError(f"alibi_slopes: shape must be [nheads] = [{heads_q}] or [batch, nheads] = "
                             f"[{batch}, {heads_q}], got {list(alibi_slopes.shape)}")
        _expect_last_dim_contiguous(alibi_slopes)


# Whether a call with device-resident cu_seqlens / seqused_k copies them to the host to check them
# before it runs (True: one stream synchronization per call, and a bad array fails that call). False,
# the default (as flash-attn: no sync): a one-block kernel checks them on the device, in stream order,
# and the next flashcore call or flashcore.check_errors() raises for a problem it found; the kernels
# clamp every length into the tensors meanwhile (wrong results, no access outside them). Graph capture
# never reads them on the host either way.
check_device_metadata = False


def set_check_device_metadata(enabled: bool) -> None:
    """Check device-resident cu_seqlens/seqused_k on the host before each varlen call runs (True: one
    stream sync per call, the bad call itself raises), or on the device without a sync (False, the
    default: the next call or flashcore.check_errors() raises)."""
    global check_device_metadata
    check_device_metadata = bool(enabled)


def build_params(q: ArrayDesc, k: ArrayDesc, v: ArrayDesc, o: ArrayDesc, lse: Optional[ArrayDesc], *,
                 cu_seqlens_q: Optional[ArrayDesc] = None, cu_seqlens_k: Optional[ArrayDesc] = None,
                 seqused_k: Optional[ArrayDesc] = None, alibi_slopes: Optional[ArrayDesc] = None,
                 max_seqlen_q: int = 0, max_seqlen_k: int = 0, softmax_scale: Optional[float] = None,
                 softcap: float = 0.0, causal: bool = False, mask_align: int = 0,
                 window_left: int = -1, window_right: int = -1, path: int = 0,
                 inputs_checked: bool = False) -> "_C.AttentionParams":
    """Checks the arrays (check_inputs, unless the caller just did: inputs_checked) and fills
    AttentionParams; the C++ API validates the rest."""
    if not inputs_checked:
        check_inputs(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k,
                     alibi_slopes=alibi_slopes)
    varlen = cu_seqlens_q is not None
    o_shape, lse_shape = output_shapes(q.shape, v.shape, varlen)
    if tuple(o.shape) != tuple(o_shape) or o.dtype != q.dtype:
        raise _C.InvalidArgumentError(f"out: must be {q.dtype} of shape {list(o_shape)}, got {o.dtype} {list(o.shape)}")
    _expect_last_dim_contiguous(o)
    if lse is not None:
        if tuple(lse.shape) != tuple(lse_shape) or lse.dtype != "fp32":
            raise _C.InvalidArgumentError(f"lse: must be fp32 of shape {list(lse_shape)}, got {lse.dtype} {list(lse.shape)}")
        _expect_last_dim_contiguous(lse)

    p = _C.AttentionParams()
    p.q, p.k, p.v, p.o = q.address, k.address, v.address, o.address
    p.lse = lse.address if lse is not None else 0
    p.dtype = KERNEL_DTYPES[q.dtype]
    if varlen:
        p.batch = cu_seqlens_q.shape[0] - 1
        p.seqlen_q, p.seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        p.total_q, p.total_k = q.shape[0], k.shape[0]
        p.cu_seqlens_q, p.cu_seqlens_k = cu_seqlens_q.address, cu_seqlens_k.address
        p.seqused_k = seqused_k.address if seqused_k is not None else 0
        p.check_device_metadata = check_device_metadata
        # [tokens, heads, dim]: no batch stride.
        p.q_seq_stride, p.q_head_stride = q.strides[0], q.strides[1]
        p.k_seq_stride, p.k_head_stride = k.strides[0], k.strides[1]
        p.v_seq_stride, p.v_head_stride = v.strides[0], v.strides[1]
        p.o_seq_stride, p.o_head_stride = o.strides[0], o.strides[1]
        if lse is not None:
            p.lse_head_stride = lse.strides[0]
    else:
        p.batch, p.seqlen_q, p.seqlen_k = q.shape[0], q.shape[1], k.shape[1]
        p.q_batch_stride, p.q_seq_stride, p.q_head_stride = q.strides[:3]
        p.k_batch_stride, p.k_seq_stride, p.k_head_stride = k.strides[:3]
        p.v_batch_stride, p.v_seq_stride, p.v_head_stride = v.strides[:3]
        p.o_batch_stride, p.o_seq_stride, p.o_head_stride = o.strides[:3]
        if lse is not None:
            p.lse_batch_stride, p.lse_head_stride = lse.strides[0], lse.strides[1]
    p.heads_q, p.heads_kv = q.shape[-2], k.shape[-2]
    p.head_dim_qk, p.head_dim_v = q.shape[-1], v.shape[-1]

    p.softmax_scale = 0.0 if softmax_scale is None else float(softmax_scale)
    p.softcap = float(softcap)
    if alibi_slopes is not None:
        p.alibi_slopes = alibi_slopes.address
        p.alibi_batch_stride = alibi_slopes.strides[0] if len(alibi_slopes.shape) == 2 else 0
    p.causal = bool(causal)
    p.mask_align = _C.MaskAlign(mask_align)
    p.window_left, p.window_right = int(window_left), int(window_right)
    p.path = _C.KernelPath(path)
    return p
