"""flashcore.integrations.transformers on small random-weight Llama-, Qwen2- and Gemma2-style models
(GQA; Qwen2 with a sliding window on every layer; Gemma2 with alternating sliding-window layers,
attention softcap and its own query scale). Skips without transformers or a CUDA device.

Logits: the oracle is the same model in fp32 with transformers' eager attention; in bf16, flashcore's
largest logit error (non-padded positions) must be no worse than 2x that of transformers' eager
attention in bf16 (sdpa cannot express Gemma2's softcap, eager can). Generation: greedy decoding in
fp32 (prompt, then one token per step over the KV cache) gives the same tokens as sdpa's (eager's for
Gemma2), for one prompt and for a left-padded batch of two."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import flashcore.integrations.transformers as fc_hf  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
NAME = fc_hf.register()

SMALL = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)


def config(arch):
    if arch == "llama":
        return transformers.LlamaConfig(**SMALL)
    if arch == "qwen2":
        return transformers.Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=16, max_window_layers=0)
    return transformers.Gemma2Config(**SMALL, head_dim=64, sliding_window=16, attn_logit_softcapping=50.0,
                                     final_logit_softcapping=30.0, query_pre_attn_scalar=64)


def build(arch, impl, dtype, state=None):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config(arch), attn_implementation=impl)
    if state is not None:
        model.load_state_dict(state)
    return model.to("cuda", dtype).eval()


def batch(padded):
    torch.manual_seed(1)
    ids = torch.randint(0, SMALL["vocab_size"], (2, 40), device="cuda")
    mask = torch.ones_like(ids)
    if padded:
        mask[1, :9] = 0  # left padding, as generate() batches prompts
        mask[0, 35:] = 0  # and right padding
    return ids, mask


@requires_cuda
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "padding"])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma2"])
def test_logits_within_2x_eager_error(arch, padded, monkeypatch):
    calls = {"flash_attn_func": 0, "flash_attn_varlen_func": 0}
    for fn in calls:  # count what the registered function runs (a silent sdpa fallback would run neither)
        original = getattr(fc_hf.interface, fn)

        def counted(*args, _fn=fn, _original=original, **kwargs):
            calls[_fn] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(fc_hf.interface, fn, counted)
    oracle = build(arch, "eager", torch.float32)
    state = oracle.state_dict()
    ids, mask = batch(padded)
    keep = mask.bool()
    with torch.no_grad():
        ref = oracle(input_ids=ids, attention_mask=mask).logits.float()
        err = {}
        for impl in ("eager", NAME):
            logits = build(arch, impl, torch.bfloat16, state)(input_ids=ids, attention_mask=mask).logits.float()
            assert torch.isfinite(logits[keep]).all(), impl
            err[impl] = (logits - ref)[keep].abs().max().item()
    print(f"{arch} {'padded' if padded else 'dense'}: max logit error vs fp32 eager: {err}")
    assert err[NAME] <= 2 * err["eager"] + 1e-3, err
    layers = SMALL["num_hidden_layers"]
    assert calls["flash_attn_varlen_func" if padded else "flash_attn_func"] == layers, calls


@requires_cuda
@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma2"])
def test_greedy_generate_matches_sdpa(arch):
    # (sdpa cannot express Gemma2's attention softcap: eager is its reference.)
    reference = build(arch, "eager" if arch == "gemma2" else "sdpa", torch.float32)
    ours = build(arch, NAME, torch.float32, reference.state_dict())
    torch.manual_seed(2)
    prompt = torch.randint(0, SMALL["vocab_size"], (1, 12), device="cuda")
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = reference.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
        got = ours.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
        ids, mask = batch(True)
        expected_batch = reference.generate(ids[:, :20], attention_mask=mask[:, :20], **kwargs)
        got_batch = ours.generate(ids[:, :20], attention_mask=mask[:, :20], **kwargs)
    assert torch.equal(got, expected), (got, expected)
    assert torch.equal(got_batch, expected_batch), (got_batch, expected_batch)
