"""flashcore._C and flashcore.host on numpy arrays: runs in CI (no GPU, no torch).

Host arrays run the C++ library's fp64 CPU reference path, so these tests check the binding end to
end (pointers, strides, flags, varlen, errors) against an independent numpy oracle.
"""

import math

import numpy as np
import pytest

import flashcore
from flashcore import _C, host
from flashcore._params import build_params, window_bounds

from attention_reference import alibi_slopes, attention, random_qkv, relative_error, varlen_attention

# The CPU reference computes in fp64; fp32 output adds one rounding.
FP32_TOLERANCE = 1e-6
# fp16/bf16 outputs: the fp64 result rounded once to the dtype (half an ulp, relative to the row scale).
HALF_TOLERANCE = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def run_and_compare(q, k, v, tolerance=FP32_TOLERANCE, **kwargs):
    out, lse = host.attention_forward(q, k, v, **kwargs)
    ref_kwargs = {name: kwargs[name] for name in ("causal", "mask_align", "softcap", "alibi_slopes") if name in kwargs}
    if "window_size" in kwargs:
        ref_kwargs["window"] = kwargs["window_size"]
    if "softmax_scale" in kwargs:
        ref_kwargs["scale"] = kwargs["softmax_scale"]
    ref_o, ref_lse = attention(q, k, v, **ref_kwargs)
    assert np.isfinite(out).all(), "every output element is written and finite"
    np.testing.assert_allclose(out, ref_o, rtol=0, atol=tolerance * max(1.0, np.abs(ref_o).max()))
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    finite = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=1e-6, atol=1e-6)
    return out, lse


def test_build_info_names_the_paths():
    info = flashcore.build_info()
    assert info.startswith("flashcore ")
    assert "cpu-reference" in info


def test_params_round_trip_pointer_fields():
    p = _C.AttentionParams()
    p.q = 0x1234560
    p.cu_seqlens_q = 0
    assert p.q == 0x1234560 and not p.is_varlen()
    p.cu_seqlens_q = 64
    assert p.is_varlen()
    p.head_dim_qk = 64
    assert math.isclose(p.effective_scale(), 1 / 8)


def test_check_device_metadata_setting_reaches_varlen_params():
    from flashcore import _params

    q = np.zeros((5, 2, 16), dtype=np.float32)
    kv = np.zeros((6, 2, 16), dtype=np.float32)
    out = np.zeros((5, 2, 16), dtype=np.float32)
    cu_q = np.array([0, 2, 5], dtype=np.int32)
    cu_k = np.array([0, 3, 6], dtype=np.int32)
    d = host.describe
    args = (d("q", q), d("k", kv), d("v", kv), d("out", out), None)
    kwargs = dict(cu_seqlens_q=d("cu_seqlens_q", cu_q), cu_seqlens_k=d("cu_seqlens_k", cu_k),
                  max_seqlen_q=3, max_seqlen_k=3)
    assert _params.build_params(*args, **kwargs).check_device_metadata is False  # default: no sync
    try:
        flashcore.set_check_device_metadata(True)
        assert _params.build_params(*args, **kwargs).check_device_metadata is True
    finally:
        flashcore.set_check_device_metadata(False)
    assert _params.build_params(*args, **kwargs).check_device_metadata is False


@pytest.mark.parametrize("sq,sk", [(1, 1), (7, 7), (65, 33), (33, 65), (1, 63)])
def test_fp32_matches_fp64_oracle_for_odd_lengths(sq, sk):
    rng = np.random.default_rng(sq * 100 + sk)
    q, k, v = random_qkv(rng, 2, sq, sk, 4, 4, 16)
    run_and_compare(q, k, v)


@pytest.mark.parametrize("mask_align", ["bottom_right", "top_left"])
@pytest.mark.parametrize("sq,sk", [(20, 20), (12, 30), (30, 12)])
def test_causal_follows_the_requested_alignment(mask_align, sq, sk):
    rng = np.random.default_rng(7)
    q, k, v = random_qkv(rng, 2, sq, sk, 2, 2, 8)
    out, lse = run_and_compare(q, k, v, causal=True, mask_align=mask_align)
    if mask_align == "bottom_right" and sq > sk:  # first Sq - Sk rows see no key: o = 0, lse = -inf
        assert (out[:, : sq - sk] == 0).all() and np.isneginf(lse[:, :, : sq - sk]).all()


@pytest.mark.parametrize("window, causal", [((3, 2), False), ((0, 0), False), ((5, -1), False), ((-1, 4), False),
                                            ((5, -1), True), ((3, 0), True)])
@pytest.mark.parametrize("mask_align", ["bottom_right", "top_left"])
def test_sliding_window(window, causal, mask_align):
    rng = np.random.default_rng(11)
    q, k, v = random_qkv(rng, 1, 24, 31, 2, 2, 8)
    run_and_compare(q, k, v, window_size=window, causal=causal, mask_align=mask_align)


def test_causal_with_a_right_window_is_refused_by_the_cpp_api():
    q, k, v = random_qkv(np.random.default_rng(0), 1, 8, 8, 2, 2, 8)
    with pytest.raises(ValueError, match="^causal:"):
        host.attention_forward(q, k, v, causal=True, window_size=(2, 2))


def test_softcap_and_scale_with_large_scores():
    rng = np.random.default_rng(3)
    q, k, v = random_qkv(rng, 2, 17, 23, 2, 2, 16, scale=10.0)  # x10 inputs stress the softmax
    run_and_compare(q, k, v, softcap=30.0, softmax_scale=0.3)


@pytest.mark.parametrize("per_batch", [False, True])
def test_alibi_slopes_per_head_or_per_batch(per_batch):
    rng = np.random.default_rng(5)
    q, k, v = random_qkv(rng, 2, 13, 29, 4, 4, 8)
    slopes = alibi_slopes(4)
    if per_batch:
        slopes = np.stack([slopes, slopes[::-1]]).copy()
    run_and_compare(q, k, v, alibi_slopes=slopes, causal=True)


@pytest.mark.parametrize("hq,hkv", [(4, 1), (8, 2), (8, 8)])
def test_gqa_query_head_reads_kv_head_h_over_group(hq, hkv):
    rng = np.random.default_rng(hq * 10 + hkv)
    q, k, v = random_qkv(rng, 2, 9, 14, hq, hkv, 16, dv=8)  # Dqk != Dv too
    run_and_compare(q, k, v)


def test_strided_views_sdpa_layout_without_copies():
    """[B, H, S, D] arrays passed as [B, S, H, D] views; out and lse given with their own strides."""
    rng = np.random.default_rng(9)
    q_bhsd = rng.standard_normal((2, 3, 10, 16)).astype(np.float32)
    k_bhsd = rng.standard_normal((2, 3, 12, 16)).astype(np.float32)
    v_bhsd = rng.standard_normal((2, 3, 12, 16)).astype(np.float32)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q_bhsd, k_bhsd, v_bhsd))
    assert not q.flags.c_contiguous
    out_bhsd = np.full((2, 3, 10, 16), np.nan, dtype=np.float32)
    lse_padded = np.full((2, 3, 16), np.nan, dtype=np.float32)  # row stride 16 > Sq
    out, lse = host.attention_forward(q, k, v, causal=True, mask_align="top_left",
                                      out=out_bhsd.transpose(0, 2, 1, 3), lse=lse_padded[:, :, :10])
    ref_o, ref_lse = attention(q, k, v, causal=True, mask_align="top_left")
    np.testing.assert_allclose(out_bhsd.transpose(0, 2, 1, 3), ref_o, atol=FP32_TOLERANCE * 10)
    np.testing.assert_allclose(lse_padded[:, :, :10], ref_lse, atol=1e-6)
    assert np.isnan(lse_padded[:, :, 10:]).all(), "nothing written outside lse's view"


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_half_precision_output_is_the_rounded_fp64_result(dtype):
    rng = np.random.default_rng(21)
    q, k, v = random_qkv(rng, 2, 19, 19, 4, 2, 32)
    if dtype == "fp16":
        q16, k16, v16 = (x.astype(np.float16) for x in (q, k, v))
        out, lse = host.attention_forward(q16, k16, v16, causal=True)
        out32, exact = out.astype(np.float32), (q16, k16, v16)
    else:
        q16, k16, v16 = (host.to_bf16_bits(x) for x in (q, k, v))
        out, lse = host.attention_forward(q16, k16, v16, causal=True, dtype="bf16")
        assert out.dtype == np.uint16
        out32, exact = host.from_bf16_bits(out), tuple(host.from_bf16_bits(x) for x in (q16, k16, v16))
    ref_o, ref_lse = attention(*exact, causal=True)
    np.testing.assert_allclose(out32, ref_o, rtol=0, atol=HALF_TOLERANCE[dtype] * np.abs(ref_o).max() * 1.01)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-5)


def test_varlen_with_seqused_k_and_an_empty_sequence():
    rng = np.random.default_rng(13)
    lens_q, lens_k = [5, 0, 17, 1], [9, 4, 17, 30]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    seqused = np.array([9, 2, 11, 30], dtype=np.int32)
    q = rng.standard_normal((cu_q[-1], 4, 16)).astype(np.float32)
    k = rng.standard_normal((cu_k[-1], 2, 16)).astype(np.float32)
    v = rng.standard_normal((cu_k[-1], 2, 16)).astype(np.float32)
    out, lse = host.attention_forward(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                                      max_seqlen_k=max(lens_k), seqused_k=seqused, causal=True)
    ref_o, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, seqused_k=seqused, causal=True)
    assert out.shape == (cu_q[-1], 4, 16) and lse.shape == (4, cu_q[-1])
    np.testing.assert_allclose(out, ref_o, atol=FP32_TOLERANCE * 10)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    np.testing.assert_allclose(lse[np.isfinite(ref_lse)], ref_lse[np.isfinite(ref_lse)], atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Errors: ValueError naming the argument; the C++ message verbatim; nothing written.
# ------------------------------------------------------------------------------------------------

def small_problem(hq=4, hkv=4, d=16, dtype=np.float32):
    rng = np.random.default_rng(0)
    return random_qkv(rng, 1, 8, 8, hq, hkv, d, dtype=dtype)


def dense_params(q, k, v, out, lse):
    """AttentionParams for dense host arrays, filled field by field (the raw _C API)."""
    p = _C.AttentionParams()
    p.q, p.k, p.v, p.o, p.lse = (x.ctypes.data for x in (q, k, v, out, lse))
    p.batch, p.seqlen_q, p.heads_q, p.head_dim_qk = q.shape
    p.seqlen_k, p.heads_kv, p.head_dim_v = k.shape[1], k.shape[2], v.shape[3]
    p.dtype = _C.DType.FLOAT32
    _C.set_dense_strides(p)
    return p


@pytest.mark.parametrize("broken, argument", [
    (dict(hq=6, hkv=4), "heads_q"),
    (dict(hq=4, hkv=4, d=2000), "head_dim_qk"),
])
def test_cpp_rule_violations_raise_value_error_with_the_cpp_message(broken, argument):
    q, k, v = small_problem(**broken)
    out = np.full(q.shape[:3] + (v.shape[3],), np.nan, dtype=np.float32)
    lse = np.full((q.shape[0], q.shape[2], q.shape[1]), np.nan, dtype=np.float32)
    with pytest.raises(ValueError) as from_validate:
        _C.validate(dense_params(q, k, v, out, lse))
    with pytest.raises(ValueError) as from_forward:
        host.attention_forward(q, k, v, out=out, lse=lse)
    assert str(from_validate.value).startswith(argument + ":")
    assert str(from_forward.value) == str(from_validate.value), "Python passes the C++ message verbatim"
    assert np.isnan(out).all() and np.isnan(lse).all(), "nothing written on error"


def test_argument_errors_are_value_and_runtime_errors():
    # flash-attn raises RuntimeError for bad arguments; flashcore's InvalidArgumentError is both, so
    # either `except` clause catches it, from the C++ validation and from the Python-side checks.
    assert issubclass(flashcore.InvalidArgumentError, ValueError)
    assert issubclass(flashcore.InvalidArgumentError, RuntimeError)
    q, k, v = random_qkv(np.random.default_rng(0), 1, 8, 8, 2, 2, 8)
    with pytest.raises(RuntimeError, match="^causal:"):  # a rule of the C++ validate()
        host.attention_forward(q, k, v, causal=True, window_size=(2, 2))
    with pytest.raises(RuntimeError, match="^k:"):  # a shape rule checked in Python
        host.attention_forward(q, k[:, :, :, :4], v)


@pytest.mark.parametrize("kwargs, argument", [
    (dict(window_size=(-2, 0)), "window_left"),
    (dict(softcap=-1.0), "softcap"),
    (dict(softmax_scale=float("nan")), "softmax_scale"),
])
def test_invalid_score_or_window_arguments_name_the_cpp_field(kwargs, argument):
    q, k, v = small_problem()
    with pytest.raises(ValueError, match="^" + argument + ":"):
        host.attention_forward(q, k, v, **kwargs)


def test_invalid_cu_seqlens_contents_are_reported():
    q = np.zeros((10, 2, 8), dtype=np.float32)
    cu_q = np.array([0, 6, 4], dtype=np.int32)  # not monotone
    cu_k = np.array([0, 5, 10], dtype=np.int32)
    with pytest.raises(ValueError, match="^cu_seqlens_q"):
        host.attention_forward(q, q, q, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=6, max_seqlen_k=5)


@pytest.mark.parametrize("mutate, message", [
    (lambda q, k, v: (q[0], k, v), "q: expected 4 dimensions"),
    (lambda q, k, v: (q, k.astype(np.float16), v), "k: dtype must match q"),
    (lambda q, k, v: (q, k, v[:, :5]), "v: all dimensions but the last must match k's"),
    (lambda q, k, v: (q, k[..., :8], v), "k: head dim must match q's"),
    (lambda q, k, v: (q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)),
     "q: dtype float64 is not supported"),
    (lambda q, k, v: (np.repeat(q, 2, axis=3)[..., ::2], k, v), "q: the last dimension (head dim) must be contiguous"),
])
def test_shape_rules_checked_before_the_call_name_the_argument(mutate, message):
    q, k, v = small_problem()
    with pytest.raises(ValueError) as err:
        host.attention_forward(*mutate(q, k, v))
    assert str(err.value).startswith(message)


def test_alibi_slopes_shape_is_checked():
    q, k, v = small_problem()
    with pytest.raises(ValueError, match="^alibi_slopes: shape must be"):
        host.attention_forward(q, k, v, alibi_slopes=np.ones(3, dtype=np.float32))


def test_a_pinned_path_that_cannot_run_raises_unsupported_error():
    q, k, v = small_problem()
    with pytest.raises(flashcore.UnsupportedError) as err:
        host.attention_forward(q, k, v, path="naive")
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, NotImplementedError)
    assert "naive-gpu" in str(err.value)


def test_supports_lists_every_concrete_path_in_dispatch_order():
    q, k, v = small_problem()
    out = np.empty_like(q)
    lse = np.empty((1, 4, 8), dtype=np.float32)
    rows = _C.supports(dense_params(q, k, v, out, lse))
    assert [path for path, _, _ in rows] == [_C.KernelPath.DECODE, _C.KernelPath.SM90, _C.KernelPath.SM80,
                                             _C.KernelPath.NAIVE_GPU, _C.KernelPath.CPU_REFERENCE]
    cpu = rows[-1]
    assert cpu[1] and cpu[2] == "", "host arrays run on the CPU reference"
    assert all(not supported and reason for _, supported, reason in rows[:-1])
    assert _C.select_path(dense_params(q, k, v, out, lse)) == _C.KernelPath.CPU_REFERENCE


def test_torch_api_without_torch_explains_itself():
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed: the torch API is available")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="needs PyTorch"):
        flashcore.flash_attn_func  # noqa: B018


# ---- flashcore.host.softmax: the softmax ladder's binding (host memory runs its fp64 CPU path) ----

def _softmax_reference(x: np.ndarray):
    x64 = x.astype(np.float64)
    m = x64.max(axis=-1, keepdims=True)
    e = np.exp(x64 - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / s, (m + np.log(s))[..., 0]


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (4, 1000), (2, 3, 65)])
def test_softmax_matches_fp64_reference_fp32(shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32) * 5
    y, lse = host.softmax(x, return_lse=True)
    ref_y, ref_lse = _softmax_reference(x)
    assert y.shape == x.shape and y.dtype == np.float32 and lse.shape == x.shape[:-1]
    np.testing.assert_allclose(y, ref_y, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-6, atol=1e-6)


def test_softmax_fp16_and_bf16_round_the_fp64_result_once():
    x = np.random.default_rng(7).standard_normal((5, 300)).astype(np.float32)
    ref_y, _ = _softmax_reference(x.astype(np.float16).astype(np.float32))
    y16 = host.softmax(x.astype(np.float16))
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16.astype(np.float64), ref_y, rtol=2.0 ** -10, atol=1e-7)
    bits = host.to_bf16_bits(x)
    ref_b, _ = _softmax_reference(host.from_bf16_bits(bits))
    yb = host.softmax(bits, dtype="bf16")
    np.testing.assert_allclose(host.from_bf16_bits(yb).astype(np.float64), ref_b, rtol=2.0 ** -7, atol=1e-7)


def test_softmax_propagates_nan_and_handles_all_minus_inf_rows_like_torch():
    x = np.zeros((3, 4), dtype=np.float32)
    x[0, 2] = np.nan
    x[1, :] = -np.inf
    y, lse = host.softmax(x, return_lse=True)
    assert np.isnan(y[0]).all() and np.isnan(lse[0])
    assert np.isnan(y[1]).all() and np.isneginf(lse[1])
    np.testing.assert_allclose(y[2], 0.25)


def test_softmax_rejects_bad_arguments_with_the_argument_named():
    x = np.zeros((4, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="x: must be contiguous"):
        host.softmax(x[:, ::2])
    with pytest.raises(ValueError, match="variant: must be one of"):
        host.softmax(x, variant="fastest")
    with pytest.raises(ValueError, match="x: dtype must be"):
        host.softmax(np.zeros((2, 2), dtype=np.float64))
    with pytest.raises(ValueError, match="cols"):
        host.softmax(np.zeros((2, 0), dtype=np.float32))


# _C.forward_dense: the torch op's eager path for dense calls (python/flashcore/ops.py) fills
# AttentionParams in C++. On host arrays it reaches the same fp64 CPU path, so it must give what the
# general path gives, bit for bit, with strided inputs, GQA, every mask flag, and the same errors.
def _forward_dense_host(q, k, v, *, dtype_code=int(_C.DType.FLOAT32), softmax_scale=0.0, softcap=0.0, causal=False,
                        mask_align=int(_C.MaskAlign.BOTTOM_RIGHT), window=(-1, -1), with_lse=True, sizes=None):
    B, Sq, Hq, Dqk = q.shape
    _, Sk, Hkv, Dv = v.shape
    out = np.full((B, Sq, Hq, Dv), np.nan, dtype=q.dtype)
    lse = np.full((B, Hq, Sq), np.nan, dtype=np.float32)
    strides = [s // q.itemsize for x in (q, k, v) for s in x.strides[:3]]
    args = [q.ctypes.data, k.ctypes.data, v.ctypes.data, out.ctypes.data, lse.ctypes.data if with_lse else 0,
            *(sizes or (B, Sq, Hq, Dqk, Sk, Hkv, Dv)), *strides, float(softmax_scale), float(softcap), dtype_code,
            int(causal), mask_align, window[0], window[1], int(_C.KernelPath.AUTO), 0]
    _C.forward_dense(*args)
    return out, lse


@pytest.mark.parametrize("case", [
    dict(causal=True),
    dict(causal=True, mask_align="top_left", softmax_scale=0.3),
    dict(window_size=(5, 2), softcap=20.0),
    dict(),
])
def test_forward_dense_matches_the_general_path(case):
    rng = np.random.default_rng(7)
    base_q, base_k, base_v = random_qkv(rng, 2, 37, 45, 8, 8, 32, dv=16, scale=2.0)
    # Strided views: q [B, H, S, D] memory read as [B, S, H, D]; k/v keep every other head (GQA 4).
    q = np.ascontiguousarray(base_q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    k, v = base_k[:, :, ::4], base_v[:, :, ::4]
    assert not q.flags.c_contiguous and k.shape[2] == 2
    want_o, want_lse = host.attention_forward(q, k, v, **case)
    align = int(_C.MaskAlign.TOP_LEFT if case.get("mask_align") == "top_left" else _C.MaskAlign.BOTTOM_RIGHT)
    got_o, got_lse = _forward_dense_host(q, k, v, softmax_scale=case.get("softmax_scale", 0.0),
                                         softcap=case.get("softcap", 0.0), causal=case.get("causal", False),
                                         mask_align=align, window=case.get("window_size", (-1, -1)))
    np.testing.assert_array_equal(got_o, want_o)
    np.testing.assert_array_equal(got_lse, want_lse)


def test_forward_dense_without_lse_and_its_errors():
    rng = np.random.default_rng(8)
    q, k, v = random_qkv(rng, 1, 9, 9, 2, 2, 16)
    got_o, got_lse = _forward_dense_host(q, k, v, with_lse=False)
    want_o, _ = host.attention_forward(q, k, v)
    np.testing.assert_array_equal(got_o, want_o)
    assert np.isnan(got_lse).all(), "lse = 0 (null): nothing written there"
    # The C++ validate() names the argument and the rule, and writes nothing.
    with pytest.raises(ValueError, match="heads"):
        _forward_dense_host(q, k, v, sizes=(1, 9, 3, 16, 9, 2, 16))  # Hq 3 is not a multiple of Hkv 2
    with pytest.raises(ValueError, match="out of range"):
        _forward_dense_host(q, k, v, sizes=(1, 9, 2, 16, 9, 2, 1 << 40))
    with pytest.raises(ValueError, match="window_size"):
        _forward_dense_host(q, k, v, window=(1 << 40, 0))
    with pytest.raises(TypeError, match="30 arguments"):
        _C.forward_dense(0, 0, 0)


# _C.backward_dense: the torch op's eager backward for dense calls fills BackwardParams in C++. On
# host arrays both it and _C.backward (params built from Python) run the fp64 CPU backward: the same
# gradients bit for bit, with strided inputs and gradients, GQA and the mask flags; errors from the
# same validation, and nothing written then.
def _backward_general_host(q, k, v, out, lse, dout, grads, **case):
    qd, kd, vd = host.describe("q", q), host.describe("k", k), host.describe("v", v)
    window_left, window_right = window_bounds(case.get("window_size", (-1, -1)))
    params = build_params(qd, kd, vd, host.describe("out", out), host.describe("lse", lse),
                          softmax_scale=case.get("softmax_scale", 0.0), softcap=case.get("softcap", 0.0),
                          causal=case.get("causal", False), mask_align=case.get("align", 0),
                          window_left=window_left, window_right=window_right)
    as_grad = [[t.ctypes.data, *(s // t.itemsize for s in t.strides[:3])] for t in (dout, *grads)]
    _C.backward(params, *as_grad, False, 0)


def _backward_dense_host(q, k, v, out, lse, dout, grads, *, sizes=None, **case):
    B, Sq, Hq, Dqk = q.shape
    _, Sk, Hkv, Dv = v.shape
    window_left, window_right = window_bounds(case.get("window_size", (-1, -1)))
    strides = [s // q.itemsize for x in (q, k, v) for s in x.strides[:3]]
    args = [q.ctypes.data, k.ctypes.data, v.ctypes.data, out.ctypes.data, lse.ctypes.data,
            *(sizes or (B, Sq, Hq, Dqk, Sk, Hkv, Dv)), *strides, float(case.get("softmax_scale", 0.0)),
            float(case.get("softcap", 0.0)), int(_C.DType.FLOAT32), int(case.get("causal", False)),
            case.get("align", 0), window_left, window_right, int(_C.KernelPath.AUTO)]
    for t in (dout, *grads):
        args += [t.ctypes.data, *(s // t.itemsize for s in t.strides[:3])]
    _C.backward_dense(*args, False, 0)


@pytest.mark.parametrize("case", [
    dict(causal=True),
    dict(causal=True, align=int(_C.MaskAlign.TOP_LEFT), softmax_scale=0.3),
    dict(window_size=(5, 2), softcap=20.0),
    dict(),
])
def test_backward_dense_matches_the_general_path(case):
    rng = np.random.default_rng(11)
    base_q, base_k, base_v = random_qkv(rng, 2, 29, 33, 8, 8, 16, dv=8, scale=2.0)
    q = np.ascontiguousarray(base_q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # strided, as in the forward test
    k, v = base_k[:, :, ::4], base_v[:, :, ::4]  # GQA 4
    mask_align = "top_left" if case.get("align") else "bottom_right"
    out, lse = host.attention_forward(q, k, v, causal=case.get("causal", False), mask_align=mask_align,
                                      softmax_scale=case.get("softmax_scale"), softcap=case.get("softcap", 0.0),
                                      window_size=case.get("window_size", (-1, -1)))
    dout = rng.standard_normal(out.shape).astype(np.float32)
    # dq with strides of its own ([B, H, S, D] memory); NaN poison shows any element left unwritten.
    want = [np.full(q.shape, np.nan, np.float32), np.full(k.shape, np.nan, np.float32),
            np.full(v.shape, np.nan, np.float32)]
    got = [np.full((q.shape[0], q.shape[2], q.shape[1], q.shape[3]), np.nan, np.float32).transpose(0, 2, 1, 3),
           np.full(k.shape, np.nan, np.float32), np.full(v.shape, np.nan, np.float32)]
    _backward_general_host(q, k, v, out, lse, dout, want, **case)
    _backward_dense_host(q, k, v, out, lse, dout, got, **case)
    for g, w in zip(got, want):
        assert np.isfinite(w).all(), "every gradient element is written"
        np.testing.assert_array_equal(g, w)


def test_backward_dense_errors_name_the_rule_and_write_nothing():
    rng = np.random.default_rng(12)
    q, k, v = random_qkv(rng, 1, 9, 9, 2, 2, 16)
    out, lse = host.attention_forward(q, k, v)
    dout = np.ones_like(out)
    grads = [np.full(t.shape, np.nan, np.float32) for t in (q, k, v)]
    with pytest.raises(ValueError, match="heads"):
        _backward_dense_host(q, k, v, out, lse, dout, grads, sizes=(1, 9, 3, 16, 9, 2, 16))
    with pytest.raises(ValueError, match="out of range"):
        _backward_dense_host(q, k, v, out, lse, dout, grads, sizes=(1, 9, 2, 16, 9, 2, 1 << 40))
    assert all(np.isnan(g).all() for g in grads), "nothing written on error"
    with pytest.raises(TypeError, match="47 arguments"):
        _C.backward_dense(0, 0, 0)


def test_strict_mode_round_trips_and_host_calls_never_warn():
    # Host arrays run the CPU reference, never the naive GPU kernel: strict mode does not touch them.
    was = flashcore.is_strict()
    try:
        flashcore.set_strict(True)
        assert flashcore.is_strict()
        rng = np.random.default_rng(5)
        q, k, v = random_qkv(rng, 1, 5, 7, 2, 2, 300)  # a head dim no fused kernel has
        run_and_compare(q, k, v)
        flashcore.set_strict(False)
        assert not flashcore.is_strict()
    finally:
        flashcore.set_strict(was)
    assert issubclass(flashcore.SlowPathWarning, UserWarning)


def test_check_errors_is_a_no_op_when_no_device_check_ran():
    flashcore.check_errors()  # no GPU, no unsynchronized varlen call: nothing pending, no device needed
