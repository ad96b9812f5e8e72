"""flashcore as an attention implementation of Hugging Face transformers (v5's AttentionInterface).

    import flashcore.integrations.transformers as fc_hf
    fc_hf.register()                                   # once; returns the name, "fc_attention"
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fc_attention")

(The name must not contain "flash": transformers treats such implementations as flash-attn kernels
to load from its hub.)

What the attention function does with what a model passes it:
  * query [B, Hq, Sq, D], key / value [B, Hkv, Sk, D] (GQA / MQA as they are; the KV cache's keys
    included during generate()); returns ([B, Sq, Hq, Dv], None) like transformers' flash and sdpa
    functions;
  * no padding: flash_attn_func, causal as the module says (module.is_causal, or an is_causal
    keyword), aligned bottom-right (the last query row sees the last key: prefill and decode alike);
  * a 2-D padding mask [B, Sk] (1 = token; registered with the mask interface under the same name,
    so models build this form for us): the tokens are gathered (unpad), run with
    flash_attn_varlen_func, and scattered back (pad; padded query rows get zeros). Left and right
    padding both work; the query rows are the mask's last Sq columns;
  * packed sequences without a mask (cu_seq_lens_q / cu_seq_lens_k / max_length_q / max_length_k
    keywords, transformers' packed-training convention): flash_attn_varlen_func on them directly;
  * scaling (the module's softmax scale), sliding_window (keys within the last `sliding_window`
    positions: window_size = (sliding_window - 1, 0)), softcap (Gemma-2's attn_logit_softcapping).
dropout > 0 is refused (flashcore has no attention dropout). The backward is flashcore's.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import interface

DEFAULT_NAME = "fc_attention"


def _window(sliding_window) -> tuple:
    if sliding_window is None or sliding_window <= 0:
        return (-1, -1)
    return (int(sliding_window) - 1, 0)


def _unpad(x: torch.Tensor, keep: torch.Tensor):
    """x [B, S, H, D], keep [B, S] bool -> (tokens [T, H, D], flat indices, cu_seqlens int32, max length)."""
    lengths = keep.sum(dim=1, dtype=torch.int32)
    indices = torch.nonzero(keep.flatten(), as_tuple=False).flatten()
    cu = torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
    return x.flatten(0, 1).index_select(0, indices), indices, cu, int(lengths.max().item()) if lengths.numel() else 0


def flashcore_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                value: torch.Tensor, attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                                scaling: Optional[float] = None, sliding_window: Optional[int] = None,
                                softcap: Optional[float] = None, **kwargs):
    """transformers' attention-function signature (see the module docstring)."""
    if dropout and dropout > 0.0:
        raise NotImplementedError("flashcore: attention dropout is not supported (dropout must be 0)")
    causal = bool(kwargs.get("is_causal", getattr(module, "is_causal", True)))
    window = _window(sliding_window)
    cap = float(softcap) if softcap else 0.0
    batch, _, sq, _ = query.shape
    sk = key.shape[2]
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [B, S, H, D] views
    common = dict(softmax_scale=scaling, causal=causal, window_size=window, softcap=cap)

    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if attention_mask is None and cu_q is not None and cu_k is not None and batch == 1:
        out = interface.flash_attn_varlen_func(q[0], k[0], v[0], cu_q.to(torch.int32), cu_k.to(torch.int32),
                                               int(kwargs.get("max_length_q")), int(kwargs.get("max_length_k")),
                                               **common)
        return out.unsqueeze(0), None

    if attention_mask is None or bool(attention_mask.all()):
        return interface.flash_attn_func(q, k, v, **common), None

    if attention_mask.dim() != 2:
        raise ValueError("flashcore: expected a 2-D padding mask [batch, kv_length] (register() installs the mask "
                         f"function that builds it); got shape {tuple(attention_mask.shape)}")
    keep_k = attention_mask[:, -sk:].to(torch.bool)
    keep_q = attention_mask[:, -sq:].to(torch.bool)
    q_tok, q_idx, cu_q, max_q = _unpad(q, keep_q)
    k_tok, _, cu_k, max_k = _unpad(k, keep_k)
    v_tok, _, _, _ = _unpad(v, keep_k)
    out_tok = interface.flash_attn_varlen_func(q_tok, k_tok, v_tok, cu_q, cu_k, max_q, max_k, **common)
    out = out_tok.new_zeros((batch * sq,) + tuple(out_tok.shape[1:]))
    out.index_copy_(0, q_idx, out_tok)
    return out.view(batch, sq, *out_tok.shape[1:]), None


def register(name: str = DEFAULT_NAME) -> str:
    """Registers flashcore's attention function, and the 2-D padding-mask builder of transformers'
    flash implementations, under `name` (pass it as attn_implementation). Returns the name."""
    if "flash" in name:
        raise ValueError(f"name: must not contain 'flash' (transformers would look for a flash-attn kernel "
                         f"named {name!r} on its hub); got {name!r}")
    from transformers import AttentionInterface
    AttentionInterface.register(name, flashcore_attention_forward)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask
    except ImportError:  # older transformers: models pass 2-D masks to custom functions already
        return name
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, flash_attention_mask)
    return name
