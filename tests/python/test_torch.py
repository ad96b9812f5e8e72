"""flashcore's torch API: flash-attn compatible functions, SDPA-layout attention, custom ops,
torch.compile, CUDA graphs. Skips without torch; the GPU tests skip without a CUDA device.

Tolerance (design.md): against an fp64 oracle on the same (rounded) inputs, flashcore's error
(max-abs and relative Frobenius) must be <= 2x the error of PyTorch SDPA's MATH backend computing
in the same dtype (softcap, which SDPA cannot express, uses the same naive computation by hand).
Every GPU kernel path that supports a case is run (sm90, sm80, naive).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashcore  # noqa: E402
from flashcore import ops  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from attention_reference import alibi_slopes, attention, varlen_attention, visible_mask  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class RecordOps(TorchDispatchMode):
    """A dispatch mode that records the names of the ops it sees (and so routes calls through the op)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
GPU_PATHS = ("sm90", "sm80", "naive")


# ------------------------------------------------------------------------------------------------
# Oracle, baseline, comparison
# ------------------------------------------------------------------------------------------------

def to_np64(t):
    return t.detach().to("cpu", torch.float64).numpy()


def sdpa_math_in_dtype(q, k, v, *, scale=None, causal=False, mask_align="bottom_right", window=(-1, -1),
                       softcap=0.0, alibi=None):
    """The naive computation in q's dtype: SDPA's MATH backend with reductions kept in the dtype, a
    float bias carrying the mask and ALiBi. Layout (B, S, H, D) in and out; rows with no visible key
    give 0 (SDPA would give NaN)."""
    batch, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kt = kt.repeat_interleave(hq // hkv, dim=1)
    vt = vt.repeat_interleave(hq // hkv, dim=1)
    visible = torch.from_numpy(visible_mask(sq, sk, causal=causal, mask_align=mask_align, window=window))
    bias = torch.zeros(sq, sk, dtype=torch.float64).masked_fill(~visible, float("-inf"))
    bias = bias.to(q.device)[None, None]
    if alibi is not None:
        dist = (torch.arange(sq)[:, None] + sk - sq - torch.arange(sk)[None, :]).abs().to(q.device, torch.float64)
        bias = bias - alibi.to(torch.float64).reshape(-1, hq, 1, 1) * dist
    bias = bias.to(q.dtype)
    scale = 1.0 / d ** 0.5 if scale is None else scale
    if softcap > 0:  # by hand, the same steps in the dtype
        s = (qt @ kt.transpose(-1, -2)) * scale
        s = softcap * torch.tanh(s / softcap) + bias
        out = torch.softmax(s, dim=-1) @ vt
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        allow = getattr(torch.backends.cuda, "allow_fp16_bf16_reduction_math_sdp", None)
        if allow is not None:
            allow(True)
        try:
            with sdpa_kernel(SDPBackend.MATH):
                out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias, scale=scale)
        finally:
            if allow is not None:
                allow(False)
    return torch.nan_to_num(out.transpose(1, 2), nan=0.0)


def errors(x, ref):
    x = to_np64(x) if isinstance(x, torch.Tensor) else x
    diff = x - ref
    return float(np.abs(diff).max()), float(np.linalg.norm(diff) / max(np.linalg.norm(ref), 1e-300))


def assert_within_2x_baseline(out, baseline, ref, what=""):
    assert torch.isfinite(out).all(), f"{what}: every output element is written and finite"
    ours, base = errors(out, ref), errors(baseline, ref)
    floor = 1e-6 * max(1.0, float(np.abs(ref).max()))  # baseline can be exactly 0 (e.g. one key per row)
    assert ours[0] <= 2 * base[0] + floor, f"{what}: max-abs error {ours[0]:.3g} > 2x SDPA math's {base[0]:.3g}"
    assert ours[1] <= 2 * base[1] + floor, f"{what}: relative error {ours[1]:.3g} > 2x SDPA math's {base[1]:.3g}"


def gpu_paths_for(q, k, v, **kwargs):
    support = flashcore.path_support(q, k, v, **kwargs)
    paths = [p for p in GPU_PATHS if support[p] == ""]
    assert paths, f"no GPU path supports this case: {support}"
    return paths


def make_inputs(batch, sq, sk, hq, hkv, d, dv, dtype, scale=1.0, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, sq, hq, d, device="cuda", generator=gen).mul_(scale).to(dtype)
    k = torch.randn(batch, sk, hkv, d, device="cuda", generator=gen).mul_(scale).to(dtype)
    v = torch.randn(batch, sk, hkv, dv, device="cuda", generator=gen).to(dtype)
    return q, k, v


# (B, Sq, Sk, Hq, Hkv, Dqk, Dv, input scale, kwargs of flash_attn_func)
CASES = {
    "plain": (2, 128, 128, 4, 4, 64, 64, 1.0, {}),
    "causal-sq<sk-odd": (2, 65, 129, 4, 4, 128, 128, 1.0, dict(causal=True)),
    "causal-sq>sk-empty-rows": (1, 129, 63, 4, 2, 128, 128, 1.0, dict(causal=True)),
    "window-gqa4": (2, 100, 100, 8, 2, 128, 128, 1.0, dict(window_size=(32, 8))),
    "softcap-x10": (2, 77, 77, 4, 4, 64, 64, 10.0, dict(softcap=20.0)),
    "alibi-causal": (2, 90, 130, 4, 4, 128, 128, 1.0, dict(causal=True, alibi=True)),
    "decode-mqa": (1, 1, 257, 8, 1, 128, 128, 1.0, {}),
    "long-causal-tails": (1, 1023, 1023, 2, 2, 128, 128, 1.0, dict(causal=True)),
    "dqk192-dv128": (2, 64, 64, 4, 4, 192, 128, 1.0, dict(causal=True, softmax_scale=0.1)),
}


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_flash_attn_func_within_2x_sdpa_math_error(case, dtype):
    batch, sq, sk, hq, hkv, d, dv, scale, kwargs = CASES[case]
    q, k, v = make_inputs(batch, sq, sk, hq, hkv, d, dv, DTYPES[dtype], scale)
    kwargs = dict(kwargs)
    slopes = torch.from_numpy(alibi_slopes(hq)).cuda() if kwargs.pop("alibi", False) else None
    ref_o, ref_lse = attention(to_np64(q), to_np64(k), to_np64(v), scale=kwargs.get("softmax_scale"),
                               causal=kwargs.get("causal", False), window=kwargs.get("window_size", (-1, -1)),
                               softcap=kwargs.get("softcap", 0.0),
                               alibi_slopes=None if slopes is None else slopes.cpu().numpy())
    baseline = sdpa_math_in_dtype(q, k, v, scale=kwargs.get("softmax_scale"), causal=kwargs.get("causal", False),
                                  window=kwargs.get("window_size", (-1, -1)), softcap=kwargs.get("softcap", 0.0),
                                  alibi=slopes)
    support_kwargs = {n: kwargs[n] for n in ("causal", "window_size", "softcap") if n in kwargs}
    for path in gpu_paths_for(q, k, v, alibi_slopes=slopes, **support_kwargs):
        out, lse, probs = flashcore.flash_attn_func(q, k, v, alibi_slopes=slopes, return_attn_probs=True,
                                                    _path=path, **kwargs)
        assert probs is None
        assert out.shape == (batch, sq, hq, dv) and out.dtype == q.dtype
        assert lse.shape == (batch, hq, sq) and lse.dtype == torch.float32
        assert_within_2x_baseline(out, baseline, ref_o, f"{case} {dtype} {path}")
        lse_np = lse.cpu().numpy()
        # Rows that see no key: flash-attn's +inf (the reference and the C++ API: -inf).
        np.testing.assert_array_equal(np.isposinf(lse_np), np.isneginf(ref_lse))
        finite = np.isfinite(ref_lse)
        np.testing.assert_allclose(lse_np[finite], ref_lse[finite], atol=2e-3, rtol=1e-3)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_sdpa_layout_is_top_left_and_copies_nothing(dtype):
    q, k, v = make_inputs(2, 70, 150, 4, 4, 128, 128, DTYPES[dtype], seed=1)
    q_bhsd, k_bhsd, v_bhsd = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    out = flashcore.attention(q_bhsd, k_bhsd, v_bhsd, is_causal=True)
    assert out.shape == (2, 4, 70, 128)
    ref_o, _ = attention(to_np64(q), to_np64(k), to_np64(v), causal=True, mask_align="top_left")
    baseline = sdpa_math_in_dtype(q, k, v, causal=True, mask_align="top_left")
    assert_within_2x_baseline(out.transpose(1, 2), baseline, ref_o, f"attention {dtype}")
    # SDPA itself (its is_causal is top-left) agrees within the same bound.
    sdpa = torch.nn.functional.scaled_dot_product_attention(q_bhsd, k_bhsd, v_bhsd, is_causal=True)
    assert_within_2x_baseline(sdpa.transpose(1, 2), baseline, ref_o, "torch sdpa (sanity)")


@requires_cuda
def test_attention_gqa_needs_enable_gqa_like_sdpa():
    q, k, v = make_inputs(1, 16, 16, 8, 2, 64, 64, torch.float16)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    with pytest.raises(ValueError, match="enable_gqa"):
        flashcore.attention(q, k, v)
    out, lse = flashcore.attention(q, k, v, enable_gqa=True, return_lse=True)
    assert out.shape == (1, 8, 16, 64) and lse.shape == (1, 8, 16)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_varlen_with_seqused_k_gqa_and_empty_sequence(dtype):
    lens_q, lens_k = [5, 0, 130, 64], [9, 3, 200, 64]
    used_k = [9, 3, 150, 1]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device="cuda")
    seqused = torch.tensor(used_k, dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", generator=gen).to(DTYPES[dtype])
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", generator=gen).to(DTYPES[dtype])
    v = torch.randn(sum(lens_k), 2, 128, device="cuda", generator=gen).to(DTYPES[dtype])
    ref_o, ref_lse = varlen_attention(to_np64(q), to_np64(k), to_np64(v), cu_q.cpu().numpy(), cu_k.cpu().numpy(),
                                      seqused_k=np.array(used_k), causal=True)
    baseline = torch.zeros_like(q)
    for b in range(len(lens_q)):
        q0, q1, k0 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b])
        if q1 > q0:
            k1 = k0 + used_k[b]
            baseline[q0:q1] = sdpa_math_in_dtype(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal=True)[0]
    for path in gpu_paths_for(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                              max_seqlen_k=max(lens_k)):
        out, lse, _ = flashcore.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                                       seqused_k=seqused, return_attn_probs=True, _path=path)
        assert out.shape == q.shape and lse.shape == (8, sum(lens_q))
        assert_within_2x_baseline(out, baseline, ref_o, f"varlen {dtype} {path}")
        # Rows that see no key: flash-attn's +inf (the reference and the C++ API: -inf).
        np.testing.assert_array_equal(np.isposinf(lse.cpu().numpy()), np.isneginf(ref_lse))


@requires_cuda
def test_packed_variants_equal_the_unpacked_call_on_views():
    qkv = torch.randn(2, 50, 3, 4, 64, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.unbind(2)
    expect = flashcore.flash_attn_func(q, k, v, causal=True)
    torch.testing.assert_close(flashcore.flash_attn_qkvpacked_func(qkv, causal=True), expect, rtol=0, atol=0)
    kv = qkv[:, :, 1:]
    torch.testing.assert_close(flashcore.flash_attn_kvpacked_func(q, kv, causal=True), expect, rtol=0, atol=0)
    cu = torch.tensor([0, 50, 100], dtype=torch.int32, device="cuda")
    flat = qkv.reshape(100, 3, 4, 64)
    expect_varlen = flashcore.flash_attn_varlen_func(flat[:, 0], flat[:, 1], flat[:, 2], cu, cu, 50, 50, causal=True)
    out = flashcore.flash_attn_varlen_qkvpacked_func(flat, cu, 50, causal=True)
    torch.testing.assert_close(out, expect_varlen, rtol=0, atol=0)
    out = flashcore.flash_attn_varlen_kvpacked_func(flat[:, 0], flat[:, 1:], cu, cu, 50, 50, causal=True)
    torch.testing.assert_close(out, expect_varlen, rtol=0, atol=0)
    # Same sequences, dense or packed: the same function (kernel paths may differ, so to rounding).
    torch.testing.assert_close(expect_varlen.reshape(2, 50, 4, 64), expect)


@requires_cuda
def test_runs_on_the_current_stream():
    q, k, v = make_inputs(2, 256, 256, 4, 4, 128, 128, torch.float16)
    expect = flashcore.flash_attn_func(q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = flashcore.flash_attn_func(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out, expect, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------
# torch.compile, CUDA graphs, autograd
# ------------------------------------------------------------------------------------------------

@requires_cuda
def test_torch_compile_fullgraph_has_no_graph_break():
    torch._dynamo.reset()
    q, k, v = make_inputs(2, 96, 96, 8, 2, 128, 128, torch.bfloat16)
    cu = torch.tensor([0, 40, 96], dtype=torch.int32, device="cuda")

    def model(q, k, v):
        a = flashcore.flash_attn_func(q * 0.5, k, v, causal=True, window_size=(16, -1))
        b = flashcore.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                enable_gqa=True).transpose(1, 2)
        c = flashcore.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 56, 56)
        return a + b, c

    compiled = torch.compile(model, fullgraph=True)
    got = compiled(q, k, v)
    expect = model(q, k, v)
    for g, e in zip(got, expect):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.fixture
def forward_overrides():
    """Sets flashcore's sm90 plan overrides (flashcore._C.ForwardOverrides fields) for one test."""
    from flashcore import _C

    def set_overrides(**fields):
        o = _C.ForwardOverrides()
        for name, value in fields.items():
            setattr(o, name, value)
        _C.set_forward_overrides(o)

    yield set_overrides
    _C.set_forward_overrides(None)


def capture_and_replay(step, inputs, scale=1.0, seed=7):
    """Captures step() in a CUDA graph (after a warm-up outside the capture), refills `inputs` with
    new random values, replays, and returns (the graph's outputs, an eager step() on the new inputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for x in inputs:
        x.copy_(torch.randn(x.shape, device="cuda", generator=gen).mul_(scale))
    graph.replay()
    torch.cuda.synchronize()
    return captured, step()


@requires_cuda
def test_cuda_graph_capture_and_replay_dense_and_varlen():
    q, k, v = make_inputs(2, 128, 128, 4, 4, 128, 128, torch.float16)
    cu = torch.tensor([0, 100, 256], dtype=torch.int32, device="cuda")
    qf, kf, vf = (x.reshape(256, 4, 128) for x in (q, k, v))

    def step():
        return flashcore.flash_attn_func(q, k, v, causal=True), flashcore.flash_attn_varlen_func(
            qf, kf, vf, cu, cu, 156, 156, causal=True)

    captured, expect = capture_and_replay(step, (q, k, v))
    for got, want in zip(captured, expect):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@requires_cuda
def test_cuda_graph_capture_and_replay_stream_k_tail(forward_overrides):
    # sm90: the persistent grid capped to 5 CTAs and the stream-K tail forced on, so this dense call
    # (3 query blocks x 4 heads = 12 tiles) splits tiles between CTAs; the launch workspace (flags,
    # fp32 partials) is then allocated inside the capture. Other paths ignore both overrides.
    forward_overrides(max_grid_units=5, stream_k=1)
    q, k, v = make_inputs(1, 300, 700, 4, 4, 128, 128, torch.float16, scale=3.0, seed=5)

    def step():
        return flashcore.flash_attn_func(q, k, v, return_attn_probs=True)[:2]

    (out, lse), expect = capture_and_replay(step, (q, k, v), scale=3.0, seed=11)
    torch.testing.assert_close(out, expect[0], rtol=0, atol=0)
    torch.testing.assert_close(lse, expect[1], rtol=0, atol=0)
    ref_o, ref_lse = attention(to_np64(q), to_np64(k), to_np64(v))
    assert_within_2x_baseline(out, sdpa_math_in_dtype(q, k, v), ref_o, "stream-K tail in a CUDA graph")
    np.testing.assert_allclose(lse.cpu().numpy(), ref_lse, atol=2e-3, rtol=1e-3)


def _sdpa_grads(q, k, v, dout, causal, dtype, math_only):
    """dq, dk, dv of SDPA (flash-attn layout in and out) with inputs cast to dtype; math backend if asked."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    ctx = sdpa_kernel(SDPBackend.MATH) if math_only else torch.enable_grad()
    with ctx:
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
            enable_gqa=q.shape[2] != k.shape[2]).transpose(1, 2)
    out.backward(dout.to(dtype))
    return q.grad, k.grad, v.grad


def assert_grads_within_2x_sdpa_math(grads, q, k, v, dout, causal, what=""):
    """flash-attn's rule: the relative (Frobenius) error of each of dq, dk, dv against fp64 no worse
    than 2x that of PyTorch's math backend in q's dtype. Layout (B, S, H, D), Sq == Sk (so the causal
    alignments agree)."""
    ref = _sdpa_grads(q, k, v, dout, causal, torch.float64, math_only=False)
    base = _sdpa_grads(q, k, v, dout, causal, q.dtype, math_only=True)
    for name, got, want, baseline in zip("qkv", grads, ref, base):
        assert got.dtype == q.dtype and got.shape == want.shape, f"{what} d{name}"
        assert torch.isfinite(got).all(), f"{what} d{name}"
        err = (got.double() - want).norm() / want.norm()
        base_err = (baseline.double() - want).norm() / want.norm()
        assert err <= 2 * base_err + 1e-4, f"{what} d{name}: {err:.3e} vs math {q.dtype} {base_err:.3e}"


def attention_grads(q, k, v, dout, **kwargs):
    """dq, dk, dv of flashcore.flash_attn_func(q, k, v, **kwargs) for dout."""
    qg, kg, vg = (x.detach().clone().requires_grad_() for x in (q, k, v))
    flashcore.flash_attn_func(qg, kg, vg, **kwargs).backward(dout)
    return qg.grad, kg.grad, vg.grad


@requires_cuda
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_gradients_within_2x_sdpa_math_error(compiled, causal):
    # flash-attn's rule: flashcore's gradient error (fp16) no worse than 2x that of PyTorch's math
    # backend in fp16, both against fp64. Sq == Sk, so causal alignment is the same for both; GQA 4/2.
    torch._dynamo.reset()
    q, k, v = make_inputs(2, 96, 96, 4, 2, 64, 64, torch.float16, seed=3)
    dout = torch.randn(2, 96, 4, 64, device="cuda", dtype=torch.float16)
    fn = torch.compile(flashcore.flash_attn_func, fullgraph=True) if compiled else flashcore.flash_attn_func
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    fn(qg, kg, vg, causal=causal).backward(dout)
    assert_grads_within_2x_sdpa_math((qg.grad, kg.grad, vg.grad), q, k, v, dout, causal)


@requires_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
def test_deterministic_backward_is_bitwise_repeatable(dtype, d, causal):
    # S = 1000: 8 KV blocks of the sm80 backward (128 keys) add into each dQ row. Without
    # deterministic=True those fp32 atomic adds land in any order; with it, in KV-block order, so two
    # backward passes through the same graph give the same bits. (The default path: on sm80+ devices
    # the sm80 backward; elsewhere the naive backward, deterministic anyway.)
    q, k, v = (x.requires_grad_() for x in make_inputs(2, 1000, 1000, 4, 4, d, d, DTYPES[dtype], seed=4))
    dout = torch.randn(2, 1000, 4, d, device="cuda", dtype=DTYPES[dtype])
    out = flashcore.flash_attn_func(q, k, v, causal=causal, deterministic=True)
    first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    second = torch.autograd.grad(out, (q, k, v), dout)
    for name, a, b in zip("qkv", first, second):
        assert torch.isfinite(a).all(), f"d{name}"
        assert torch.equal(a, b), f"d{name}: two deterministic backward passes differ"


@requires_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sm80_backward_within_2x_sdpa_math_error_like_the_naive_backward(dtype, d, causal):
    # _path pins the backward too where the path has one: "sm80" runs the sm80 backward (or raises),
    # "naive" the naive GPU backward. Both meet the gradient rule, so they agree to within it.
    # S = 300: three KV blocks of 128 keys, the last one partial; GQA 4/2.
    q, k, v = make_inputs(2, 300, 300, 4, 2, d, d, DTYPES[dtype], seed=6)
    if flashcore.path_support(q, k, v, causal=causal).get("sm80", "not built"):
        pytest.skip("the sm80 path does not run on this device/build")
    dout = torch.randn(2, 300, 4, d, device="cuda", dtype=DTYPES[dtype])
    for path in ("sm80", "naive"):
        for deterministic in (False, True):
            grads = attention_grads(q, k, v, dout, causal=causal, deterministic=deterministic, _path=path)
            assert_grads_within_2x_sdpa_math(grads, q, k, v, dout, causal,
                                             f"{dtype} d{d} causal={causal} {path} deterministic={deterministic}")


@requires_cuda
def test_deterministic_backward_under_torch_compile_equals_eager_bitwise():
    # flashcore::fwd's deterministic input and flashcore::bwd's path input through AOTAutograd
    # (fullgraph): the compiled step runs the same kernels in the same order as eager.
    torch._dynamo.reset()
    q, k, v = make_inputs(1, 300, 300, 4, 4, 64, 64, torch.bfloat16, seed=8)
    dout = torch.randn(1, 300, 4, 64, device="cuda", dtype=torch.bfloat16)

    def step(q, k, v):
        return flashcore.flash_attn_func(q, k, v, causal=True, deterministic=True, _path="sm80")

    if flashcore.path_support(q, k, v, causal=True).get("sm80", "not built"):
        pytest.skip("the sm80 path does not run on this device/build")
    compiled = torch.compile(step, fullgraph=True)
    grads = []
    for fn in (compiled, step):
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        fn(qg, kg, vg).backward(dout)
        grads.append((qg.grad, kg.grad, vg.grad))
    for name, got, want in zip("qkv", *grads):
        assert torch.equal(got, want), f"d{name}: compiled and eager deterministic backward differ"


@requires_cuda
def test_backward_varlen_equals_per_sequence_dense_backward():
    lens = [37, 64, 5]
    cu = torch.tensor([0, 37, 101, 106], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(106, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    dout = torch.randn(106, 2, 64, device="cuda", dtype=torch.bfloat16)
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    # deterministic=True: the sm80 backward's dQ adds come in KV-block order (the naive backward has
    # no atomics), so varlen and per-sequence dense calls give the same bits.
    flashcore.flash_attn_varlen_func(qg, kg, vg, cu, cu, 64, 64, causal=True, deterministic=True).backward(dout)
    start = 0
    for n in lens:
        sl = slice(start, start + n)
        qs, ks, vs = (x[sl].unsqueeze(0).clone().requires_grad_() for x in (q, k, v))
        flashcore.flash_attn_func(qs, ks, vs, causal=True, deterministic=True).backward(dout[sl].unsqueeze(0))
        for got, want in ((qg.grad[sl], qs.grad[0]), (kg.grad[sl], ks.grad[0]), (vg.grad[sl], vs.grad[0])):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        start += n


@requires_cuda
def test_backward_varlen_tokens_past_the_last_sequence_get_zero_gradients():
    """The packed tensors may hold tokens no sequence owns (rows past cu_seqlens[-1]); they do not
    reach the output, so their gradients are 0, written by the backward (dq, dk, dv come unzeroed
    from the allocator: NaN-filled blocks are freed first so the allocator hands them back)."""
    cu_q = torch.tensor([0, 37, 101], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 50, 130], dtype=torch.int32, device="cuda")
    q = torch.randn(110, 4, 64, device="cuda", dtype=torch.float16)  # 9 tail rows
    k, v = (torch.randn(140, 2, 64, device="cuda", dtype=torch.float16) for _ in range(2))  # 10 tail rows
    dout = torch.randn(110, 4, 64, device="cuda", dtype=torch.float16)
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    poison = [torch.full(shape, float("nan"), device="cuda", dtype=torch.float16)
              for shape in (q.shape,) * 3 + (k.shape,) * 4]
    del poison  # NaN-filled blocks back in the cache, for out and the gradients to take
    flashcore.flash_attn_varlen_func(qg, kg, vg, cu_q, cu_k, 64, 80, causal=True).backward(dout)
    for name, grad, first in (("dq", qg.grad, 101), ("dk", kg.grad, 130), ("dv", vg.grad, 130)):
        assert torch.isfinite(grad).all(), name
        assert torch.count_nonzero(grad[first:]) == 0, name
        assert torch.count_nonzero(grad[:first]) > 0, name


@requires_cuda
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_graph_capture_of_a_training_step(deterministic):
    # Forward and backward captured in one CUDA graph (the backward's workspace, and in deterministic
    # mode its zeroed turn counters, come from the stream-ordered pool inside the capture); a replay on
    # new inputs equals an eager step on them. (80 keys: one KV block, so one dQ add per row either way.)
    q, k, v = (x.requires_grad_() for x in make_inputs(1, 80, 80, 4, 2, 64, 64, torch.bfloat16, seed=9))
    dout = torch.randn(1, 80, 4, 64, device="cuda", dtype=torch.bfloat16)

    def step():
        for t in (q, k, v):
            t.grad = None
        flashcore.flash_attn_func(q, k, v, causal=True, deterministic=deterministic).backward(dout)
        return q.grad, k.grad, v.grad

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    for t in (q, k, v):
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    with torch.no_grad():
        for t in (q, k, v, dout):
            t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    captured = [g.clone() for g in captured]
    eager = step()
    for got, want in zip(captured, eager):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_backward_path_follows_the_forward_path_where_it_has_one():
    from flashcore._params import PATHS, backward_path_code
    got = {name: backward_path_code(code) for name, code in PATHS.items()}
    assert got == {"auto": PATHS["auto"], "sm90": PATHS["auto"], "sm80": PATHS["sm80"], "naive": PATHS["naive"],
                   "cpu": PATHS["cpu"], "decode": PATHS["auto"]}


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("path", ["auto", "cpu"])
def test_deterministic_and_the_backward_path_reach_flashcore_bwd(path, deterministic):
    """flashcore::fwd takes `deterministic` after `path`; its autograd passes both (the path through
    backward_path_code) as flashcore::bwd's last two arguments."""
    from flashcore._params import PATHS

    calls = {}

    class RecordCalls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.setdefault(str(func), []).append(args)
            return func(*args, **(kwargs or {}))

    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 12, 2, 16, generator=gen).requires_grad_() for _ in range(3))
    dout = torch.randn(1, 12, 2, 16, generator=gen)
    with RecordCalls():
        flashcore.flash_attn_func(q, k, v, causal=True, deterministic=deterministic, _path=path).backward(dout)
    (fwd_args,) = calls["flashcore.fwd.default"]
    (bwd_args,) = calls["flashcore.bwd.default"]
    assert tuple(fwd_args[-2:]) == (PATHS[path], deterministic)
    assert tuple(bwd_args[-2:]) == (PATHS[path], deterministic)


def test_backward_on_cpu_tensors_matches_float64_autograd():
    q, k, v = (torch.randn(1, 20, 2, 16, dtype=torch.float32, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, 20, 2, 16, dtype=torch.float32)
    flashcore.flash_attn_func(q, k, v, causal=True, softcap=3.0).backward(dout)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = torch.einsum("bihd,bjhd->bhij", q64, k64) / 4.0
    s = 3.0 * torch.tanh(s / 3.0)
    s = s.masked_fill(torch.ones(20, 20, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.einsum("bhij,bjhd->bihd", s.softmax(-1), v64)
    out.backward(dout.double())
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------

@requires_cuda
def test_cpp_rule_violation_gives_the_same_message_as_the_cpp_api_on_host():
    from flashcore import host
    q, k, v = make_inputs(1, 8, 8, 6, 4, 64, 64, torch.float16)
    with pytest.raises(ValueError) as gpu_err:
        flashcore.flash_attn_func(q, k, v)
    with pytest.raises(ValueError) as host_err:
        host.attention_forward(*(x.cpu().numpy() for x in (q, k, v)))
    assert str(gpu_err.value).startswith("heads_q:")
    assert str(gpu_err.value) == str(host_err.value)


@requires_cuda
@pytest.mark.parametrize("call, error, message", [
    (lambda q, k, v: flashcore.flash_attn_func(q, k, v, dropout_p=0.1), flashcore.UnsupportedError, "dropout_p:"),
    (lambda q, k, v: flashcore.attention(q, k, v, attn_mask=torch.ones(8, 8, dtype=torch.bool, device="cuda")),
     flashcore.UnsupportedError, "attn_mask:"),
    (lambda q, k, v: flashcore.flash_attn_func(q.double(), k.double(), v.double()), ValueError,
     "q: dtype float64 is not supported"),
    (lambda q, k, v: flashcore.attention(*(x.transpose(1, 3).contiguous().transpose(1, 3).transpose(1, 2)
                                           for x in (q, k, v))), ValueError,
     "q: the last dimension (head dim) must be contiguous"),
    (lambda q, k, v: flashcore.flash_attn_func(q, k.cpu(), v), ValueError, "k: must be on q's device"),
    (lambda q, k, v: flashcore.flash_attn_func(q, k, v, window_size=(1, 2, 3)), ValueError, "window_size:"),
    (lambda q, k, v: flashcore.flash_attn_func(q, k, v, _path="sm75"), ValueError, "path:"),
])
def test_bad_inputs_raise_clear_errors(call, error, message):
    q, k, v = make_inputs(1, 8, 8, 4, 4, 64, 64, torch.float16)
    with pytest.raises(error) as err:
        call(q, k, v)
    assert str(err.value).startswith(message), str(err.value)


@requires_cuda
def test_flash_attn_func_copies_a_strided_head_dim_like_flash_attn():
    q, k, v = make_inputs(2, 16, 16, 4, 4, 64, 64, torch.float16)
    strided = [x.transpose(1, 3).contiguous().transpose(1, 3) for x in (q, k, v)]  # head dim stride != 1
    assert all(x.stride(-1) != 1 for x in strided)
    assert torch.equal(flashcore.flash_attn_func(*strided, causal=True), flashcore.flash_attn_func(q, k, v, causal=True))
    cu = torch.tensor([0, 16, 32], device="cuda", dtype=torch.int32)
    packed = [x.reshape(32, 4, 64) for x in (q, k, v)]
    flat = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in packed]  # [32, 4, 64], head dim stride 4
    assert all(x.stride(-1) != 1 for x in flat)
    assert torch.equal(flashcore.flash_attn_varlen_func(*flat, cu, cu, 16, 16),
                       flashcore.flash_attn_varlen_func(*packed, cu, cu, 16, 16))


def test_rows_without_keys_return_lse_plus_inf_like_flash_attn():
    # Causal bottom-right with Sq = 8 > Sk = 4: query rows 0..3 see no key. flash-attn returns +inf
    # there; the output rows are 0 and the rows that see keys keep their finite LSE.
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, n, 2, 16, generator=gen) for n in (8, 4, 4))
    out, lse, _ = flashcore.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert torch.isposinf(lse[..., :4]).all() and torch.isfinite(lse[..., 4:]).all()
    assert (out[:, :4] == 0).all()


def test_cpu_tensors_run_the_fp64_cpu_reference():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 9, 4, 16, generator=gen)
    k = torch.randn(2, 13, 2, 16, generator=gen)
    v = torch.randn(2, 13, 2, 16, generator=gen)
    out, lse, _ = flashcore.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    ref_o, ref_lse = attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), causal=True)
    np.testing.assert_allclose(out.numpy(), ref_o, atol=1e-5)
    np.testing.assert_allclose(lse.numpy(), ref_lse, atol=1e-5)


def test_eager_fast_path_equals_the_op_and_dispatch_modes_still_see_the_op():
    """Plain eager calls skip the dispatcher (ops.can_call_impl_directly); under a dispatch mode the
    call goes through flashcore::fwd, and both give the same result."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 6, 2, 8, generator=gen) for _ in range(3))
    assert ops.can_call_impl_directly(q, k, v)
    direct = flashcore.flash_attn_func(q, k, v, causal=True)
    with RecordOps() as recorder:
        via_op = flashcore.flash_attn_func(q, k, v, causal=True)
    assert "flashcore.fwd.default" in recorder.names
    torch.testing.assert_close(direct, via_op, rtol=0, atol=0)
    assert not ops.can_call_impl_directly(q.requires_grad_(), k, v)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_eager_autograd_equals_the_op_bitwise(dtype, causal):
    """A training call in eager mode runs ops.EagerAttention (no dispatcher, the C++ dense entry points
    on both passes); under a dispatch mode the same call runs flashcore::fwd and flashcore::bwd. With
    deterministic=True the two give the same output and gradients bit for bit, and every gradient
    element is written (the dense backward allocates them unzeroed)."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(2, 200, 8, 128, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(2, 333, 2, 128, device="cuda", dtype=dtype, generator=gen)  # GQA 4, Sq != Sk
    v = torch.randn(2, 333, 2, 128, device="cuda", dtype=dtype, generator=gen)
    dout = torch.randn(2, 200, 8, 128, device="cuda", dtype=dtype, generator=gen)

    def step(record):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        if record:
            with RecordOps() as recorder:
                out = flashcore.flash_attn_func(*leaves, causal=causal, deterministic=True)
                out.backward(dout)
            assert "flashcore.fwd.default" in recorder.names and "flashcore.bwd.default" in recorder.names
        else:
            assert ops.can_run_eager_autograd(*leaves)
            out = flashcore.flash_attn_func(*leaves, causal=causal, deterministic=True)
            assert type(out.grad_fn).__name__ == "EagerAttentionBackward"
            out.backward(dout)
        return [out.detach()] + [t.grad for t in leaves]

    eager, via_op = step(False), step(True)
    for name, a, b in zip(("out", "dq", "dk", "dv"), eager, via_op):
        assert torch.isfinite(a).all(), name
        assert torch.equal(a, b), name


@requires_cuda
def test_eager_autograd_with_only_lse_in_the_loss_gives_zero_gradients():
    """grad_lse is not propagated (flash-attn's rule): a loss of the LSE alone leaves zero gradients,
    on the eager autograd path as on the op's."""
    q, k, v = (torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.float16).requires_grad_() for _ in range(3))
    _, lse, _ = flashcore.flash_attn_func(q, k, v, return_attn_probs=True)
    lse.sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and torch.count_nonzero(t.grad) == 0


# ------------------------------------------------------------------------------------------------
# flashcore.softmax (the standalone softmax ladder)
# ------------------------------------------------------------------------------------------------

@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("variant", ["auto", "warp_shuffle", "row_per_block", "multi_block", "row_in_smem"])
def test_softmax_matches_torch_softmax_and_logsumexp(dtype, variant):
    torch.manual_seed(3)
    x = (torch.randn(37, 3000, device="cuda") * 8).to(dtype)
    y, lse = flashcore.softmax(x, return_lse=True, variant=variant)
    x64 = x.double()
    ref = torch.softmax(x64, dim=-1)
    err = (y.double() - ref).abs().max().item()
    torch_err = (torch.softmax(x, dim=-1).double() - ref).abs().max().item()
    assert y.dtype == dtype and y.shape == x.shape and torch.isfinite(y).all()
    assert err <= 2 * torch_err + 1e-7, (err, torch_err)
    torch.testing.assert_close(lse.double(), torch.logsumexp(x64, dim=-1), rtol=1e-5, atol=1e-5)


@requires_cuda
def test_softmax_over_a_middle_dim_and_nan_rows_follow_torch():
    x = torch.randn(4, 50, 6, device="cuda")
    torch.testing.assert_close(flashcore.softmax(x, dim=1), torch.softmax(x, dim=1))
    x = torch.zeros(3, 8, device="cuda")
    x[0, 3] = float("nan")
    x[1] = float("-inf")
    y = flashcore.softmax(x)
    assert torch.isnan(y[0]).all() and torch.isnan(y[1]).all()
    torch.testing.assert_close(y[2], torch.full((8,), 0.125, device="cuda"))


@requires_cuda
def test_softmax_compiles_fullgraph():
    fn = torch.compile(lambda t: flashcore.softmax(t, dim=-1) * 2, fullgraph=True)
    x = torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(fn(x), torch.softmax(x, dim=-1) * 2)


def test_softmax_rejects_unknown_variant():
    with pytest.raises(ValueError, match="variant: must be one of"):
        flashcore.softmax(torch.zeros(2, 2), variant="fastest")
