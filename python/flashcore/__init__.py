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
"""

from . import _C
from ._C import InvalidArgumentError, UnsupportedError, build_info
from ._params import set_check_device_metadata

__version__ = "0.1.0"

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

__all__ = ["InvalidArgumentError", "UnsupportedError", "build_info", "set_check_device_metadata", *_TORCH_API]
