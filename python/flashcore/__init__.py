"""flashcore: fused multi-head attention (FlashAttention forward) for NVIDIA GPUs.

Drop-in for flash-attn 2.x's functional API (forward and backward):

    from flashcore import flash_attn_func, flash_attn_varlen_func   # instead of: from flash_attn import ...

and an SDPA-layout entry point, `flashcore.attention(q, k, v, is_causal=...)`. Both are
torch.library custom ops (torch.compile and CUDA graphs work). Without torch, `flashcore.host`
runs the same C++ library on numpy arrays (the fp64 CPU reference path) and `flashcore._C` is the raw
binding. Errors: flashcore.InvalidArgumentError for a call that breaks a rule (the message names the
argument; a ValueError and also a RuntimeError, which is what flash-attn users catch),
flashcore.UnsupportedError (a NotImplementedError, hence RuntimeError) for a valid call no kernel path
of this build/device runs, RuntimeError for CUDA failures.

No silent slow path: a call on a GPU that no fused kernel takes runs on the naive reference kernel
(tens to hundreds of times slower) with a flashcore.SlowPathWarning, once per distinct reason, naming
the reason and the fix; flashcore.set_strict(True), or FLASHCORE_STRICT=1 in the environment (read
once), makes such calls raise flashcore.UnsupportedError instead. Tensors whose only problem is their
alignment (a base or stride that is not a multiple of 16 bytes, a head dim that is not a multiple of
8) are copied to aligned buffers and run on the fused kernels, silently.
"""

from . import _C
from ._C import InvalidArgumentError, SlowPathWarning, UnsupportedError, build_info
from ._params import set_check_device_metadata

__version__ = "0.1.0"


def set_strict(enabled: bool = True) -> None:
    """Strict mode on (True) or off (False): a call that only the naive reference kernel can run
    raises UnsupportedError, naming why, instead of running with a SlowPathWarning. Process-wide;
    FLASHCORE_STRICT=1 in the environment starts a process in strict mode."""
    _C.set_slow_path_policy(1 if enabled else 0)


def check_errors() -> None:
    """Waits for the current CUDA stream, then raises InvalidArgumentError for a problem the device
    check found in an earlier varlen call's cu_seqlens / seqused_k (set_check_device_metadata(False),
    the default, or a captured graph); the next flashcore call would raise it otherwise."""
    stream = 0
    if _torch is not None and _torch.cuda.is_available():
        stream = _torch.cuda.current_stream().cuda_stream
    _C.check_errors(stream)


def is_strict() -> bool:
    """Whether strict mode is on (set_strict, or FLASHCORE_STRICT=1 at the first call)."""
    return _C.slow_path_policy() == 1

_TORCH_API = (
    "flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func", "attention", "path_support",
    "softmax", "merge_attention_states", "flash_attn_with_kvcache",
)

try:
    import torch as _torch  # noqa: F401
except ImportError:  # numpy-only installs: the torch API explains itself when asked for
    _torch = None

if _torch is not None:
    from .interface import (attention, flash_attn_func, flash_attn_kvpacked_func,  # noqa: F401
                            flash_attn_qkvpacked_func, flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                            flash_attn_varlen_qkvpacked_func, path_support, softmax)
    from .kvcache import flash_attn_with_kvcache  # noqa: F401
    from .merge import merge_attention_states  # noqa: F401
else:
    def __getattr__(name):
        if name in _TORCH_API:
            raise ImportError(f"flashcore.{name} needs PyTorch, which is not installed; "
                              "flashcore.host runs on numpy arrays")
        raise AttributeError(f"module 'flashcore' has no attribute {name!r}")

__all__ = ["InvalidArgumentError", "SlowPathWarning", "UnsupportedError", "build_info", "check_errors", "is_strict",
           "set_check_device_metadata", "set_strict", *_TORCH_API]
