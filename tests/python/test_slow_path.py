"""No silent slow path: a CUDA call that no fused kernel takes warns (flashcore.SlowPathWarning, once
per distinct reason) or, in strict mode, raises UnsupportedError; tensors whose only problem is their
alignment run on the fused kernels over aligned copies, strict mode or not."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashcore  # noqa: E402

from attention_reference import attention  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _strict_mode(enabled):
    """A fixture that sets strict mode for one test and restores it after."""
    @pytest.fixture
    def fixture():
        was = flashcore.is_strict()
        flashcore.set_strict(enabled)
        yield
        flashcore.set_strict(was)
    return fixture


strict = _strict_mode(True)
not_strict = _strict_mode(False)


def inputs(d, dv=None, sq=40, sk=70, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(1, sq, 2, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(1, sk, 2, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(1, sk, 2, dv or d, device="cuda", generator=g).to(dtype)
    return q, k, v


def assert_close_to_reference(out, q, k, v, causal=False):
    ref, _ = attention(*(t.detach().cpu().double().numpy() for t in (q, k, v)), causal=causal)
    np.testing.assert_allclose(out.float().cpu().numpy(), ref, atol=2e-2, rtol=0)


@requires_cuda
def test_strict_mode_raises_where_only_the_naive_kernel_runs(strict):
    q, k, v = inputs(264, dtype=torch.float32)  # fp32 above d256: no fused kernel takes it
    with pytest.raises(flashcore.UnsupportedError, match="strict mode"):
        flashcore.flash_attn_func(q, k, v)
    # Asked for by name, the naive kernel runs in strict mode too.
    out = flashcore.flash_attn_func(q, k, v, _path="naive")
    assert_close_to_reference(out, q, k, v)


@requires_cuda
def test_the_naive_fallback_warns_once_per_reason_naming_it(not_strict):
    q, k, v = inputs(280, dtype=torch.float32)
    with pytest.warns(flashcore.SlowPathWarning, match="naive reference kernel") as record:
        out = flashcore.flash_attn_func(q, k, v, causal=True)
    assert any("280" in str(w.message) and "set_strict" in str(w.message) for w in record)
    assert_close_to_reference(out, q, k, v, causal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same reasons again: no second warning
        flashcore.flash_attn_func(q, k, v, causal=True)


@requires_cuda
def test_a_warnings_filter_turns_the_warning_into_an_exception(not_strict):
    q, k, v = inputs(296, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", flashcore.SlowPathWarning)
        with pytest.raises(flashcore.SlowPathWarning):
            flashcore.flash_attn_func(q, k, v)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_misaligned_tensors_run_fused_on_aligned_copies_in_strict_mode(strict, dtype):
    # q, k, v one element past a 16-byte boundary (a view of a larger buffer), and head dim 36 (rows
    # of 72 bytes): neither is a layout the fused kernels load directly.
    # Large enough for the copies to pay (smaller calls run on the naive kernel, their fastest way).
    n = 1024 * 2 * 64
    base = torch.randn(1 + 3 * n, device="cuda").to(dtype)
    q, k, v = (base[1 + i * n: 1 + (i + 1) * n].view(1, 1024, 2, 64) for i in range(3))
    assert q.data_ptr() % 16 != 0
    out = flashcore.flash_attn_func(q, k, v, causal=True)
    assert_close_to_reference(out, q, k, v, causal=True)
    q, k, v = inputs(36, sq=1024, sk=1024, dtype=dtype)
    out = flashcore.flash_attn_func(q, k, v)
    assert_close_to_reference(out, q, k, v)


def test_flashcore_strict_in_the_environment_starts_in_strict_mode():
    env = dict(os.environ, FLASHCORE_STRICT="1")
    code = "import flashcore; print(flashcore.is_strict())"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "True", result.stderr
    env["FLASHCORE_STRICT"] = "0"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


@requires_cuda
def test_malformed_cu_seqlens_without_sync_raise_at_check_errors_or_in_the_checked_mode():
    q, k, v = (t[0] for t in inputs(64, sq=40, sk=70))
    cu_q = torch.tensor([0, 10, 40], dtype=torch.int32, device="cuda")
    bad_cu_k = torch.tensor([0, 50, 20], dtype=torch.int32, device="cuda")  # decreasing
    flashcore.check_errors()  # nothing pending
    flashcore.flash_attn_varlen_func(q, k, v, cu_q, bad_cu_k, 30, 50)  # default: no sync, no raise here
    with pytest.raises(flashcore.InvalidArgumentError, match=r"cu_seqlens_k\[2\]: must be >= cu_seqlens_k\[1\]"):
        flashcore.check_errors()
    flashcore.check_errors()  # reported once
    flashcore.set_check_device_metadata(True)
    try:
        with pytest.raises(flashcore.InvalidArgumentError, match=r"cu_seqlens_k\[2\]"):
            flashcore.flash_attn_varlen_func(q, k, v, cu_q, bad_cu_k, 30, 50)
    finally:
        flashcore.set_check_device_metadata(False)
    good_cu_k = torch.tensor([0, 20, 70], dtype=torch.int32, device="cuda")
    out = flashcore.flash_attn_varlen_func(q, k, v, cu_q, good_cu_k, 30, 50)
    flashcore.check_errors()
    assert torch.isfinite(out).all()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_another_gpu_run_there_and_mixed_devices_are_refused():
    # The call follows its tensors' device (cuda:1 while cuda:0 is current); mixing devices is an error
    # naming the argument.
    torch.cuda.set_device(0)
    g = torch.Generator(device="cuda:1").manual_seed(3)
    q, k, v = (torch.randn(1, 256, 2, 64, device="cuda:1", generator=g).to(torch.bfloat16) for _ in range(3))
    out = flashcore.flash_attn_func(q, k, v, causal=True)
    assert out.device == q.device
    assert_close_to_reference(out, q, k, v, causal=True)
    with pytest.raises(flashcore.InvalidArgumentError, match="k: must be on q's device"):
        flashcore.flash_attn_func(q, k.to("cuda:0"), v)
