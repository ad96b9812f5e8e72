"""flashcore.merge_attention_states against a float64 torch evaluation of

    lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b

with the empty-side rules (lse -inf or +inf: that side contributes nothing; both empty: o = 0,
lse = -inf). Skips without torch; the CUDA cases skip without a CUDA device (CPU tensors run the
C++ CPU implementation and need neither).
"""

import pytest

torch = pytest.importorskip("torch")

import flashcore  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# One rounding of the fp32 result to the dtype, plus the fp32 blend's few ulps.
TOLERANCE = {"fp32": 2.0 ** -21, "fp16": 2.0 ** -10, "bf16": 2.0 ** -7}
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


def reference(o_a, lse_a, o_b, lse_b, varlen):
    """float64 merge; lse [B, H, S] (varlen [H, T]) is moved to o's [B, S, H] ([T, H]) order."""
    la, lb = lse_a.double(), lse_b.double()
    la, lb = (la.transpose(0, 1), lb.transpose(0, 1)) if varlen else (la.transpose(1, 2), lb.transpose(1, 2))
    a_empty, b_empty = torch.isinf(la), torch.isinf(lb)
    la0 = la.masked_fill(a_empty, float("-inf"))
    lb0 = lb.masked_fill(b_empty, float("-inf"))
    m = torch.maximum(la0, lb0)
    m_safe = m.masked_fill(torch.isinf(m), 0.0)
    lse = m_safe + torch.log(torch.exp(la0 - m_safe) + torch.exp(lb0 - m_safe))  # -inf where both empty
    both = a_empty & b_empty
    lse_safe = lse.masked_fill(both, 0.0)
    w_a = torch.exp(la0 - lse_safe).masked_fill(a_empty, 0.0)
    w_b = torch.exp(lb0 - lse_safe).masked_fill(b_empty, 0.0)
    o = w_a[..., None] * o_a.double() + w_b[..., None] * o_b.double()
    lse = lse.transpose(0, 1) if varlen else lse.transpose(1, 2)
    return o, lse


def make_inputs(shape, dtype, device, varlen, seed=0):
    gen = torch.Generator().manual_seed(seed)
    o_a = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    o_b = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    lse_shape = (shape[1], shape[0]) if varlen else (shape[0], shape[2], shape[1])
    lse_a = (torch.rand(lse_shape, generator=gen) * 16 - 8)
    lse_b = (torch.rand(lse_shape, generator=gen) * 16 - 8)
    flat_a, flat_b = lse_a.view(-1), lse_b.view(-1)
    flat_a[0::7] = float("-inf")   # a empty
    flat_b[1::7] = float("inf")    # b empty (flash-attn's value)
    flat_a[2::7] = float("inf")    # both empty
    flat_b[2::7] = float("-inf")
    flat_b[3::7] = flat_a[3::7] - 60.0  # far apart
    return o_a, lse_a.to(device), o_b, lse_b.to(device)


def check(o, lse, ref_o, ref_lse, name, o_a, o_b):
    assert torch.equal(torch.isneginf(lse.cpu()), torch.isneginf(ref_lse.cpu()))
    finite = torch.isfinite(ref_lse)
    torch.testing.assert_close(lse[finite].double(), ref_lse[finite], rtol=2.0 ** -22, atol=0.0)
    err = (o.double() - ref_o).abs()
    # The fp32 blend is within a few ulps of |o_a| + |o_b| (weights <= 1), then one rounding to the dtype.
    bound = TOLERANCE[name] * ref_o.abs() + 2.0 ** -21 * (o_a.double().abs() + o_b.double().abs()) + 1e-30
    assert bool((err <= bound).all()), f"max error {err.max().item()}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("varlen", [False, True])
def test_merge_matches_float64(device, name, varlen):
    shape = (37, 3, 64) if varlen else (2, 9, 3, 64)
    o_a, lse_a, o_b, lse_b = make_inputs(shape, DTYPES[name], device, varlen)
    o, lse = flashcore.merge_attention_states(o_a, lse_a, o_b, lse_b)
    ref_o, ref_lse = reference(o_a, lse_a, o_b, lse_b, varlen)
    check(o, lse, ref_o, ref_lse, name, o_a, o_b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(DTYPES))
def test_merge_in_place_and_odd_head_dim(device, name):
    o_a, lse_a, o_b, lse_b = make_inputs((2, 5, 4, 33), DTYPES[name], device, False, seed=3)
    ref_o, ref_lse = reference(o_a, lse_a, o_b, lse_b, False)
    o_a_before = o_a.clone()
    o, lse = flashcore.merge_attention_states(o_a, lse_a, o_b, lse_b, out=o_a, lse_out=lse_a)
    assert o.data_ptr() == o_a.data_ptr() and lse.data_ptr() == lse_a.data_ptr()
    check(o, lse, ref_o, ref_lse, name, o_a_before, o_b)


@pytest.mark.parametrize("device", DEVICES)
def test_merge_strided_inputs(device):
    # o_b as a [B, H, S, D] tensor transposed to [B, S, H, D]: non-contiguous, last dim contiguous.
    o_a, lse_a, o_b, lse_b = make_inputs((2, 6, 3, 16), torch.float16, device, False, seed=5)
    o_b_strided = o_b.transpose(1, 2).contiguous().transpose(1, 2)
    o, lse = flashcore.merge_attention_states(o_a, lse_a, o_b_strided, lse_b)
    ref_o, ref_lse = reference(o_a, lse_a, o_b, lse_b, False)
    check(o, lse, ref_o, ref_lse, "fp16", o_a, o_b)


@pytest.mark.parametrize("device", DEVICES)
def test_merge_nan_propagates(device):
    o_a, lse_a, o_b, lse_b = make_inputs((1, 4, 2, 8), torch.float32, device, False, seed=7)
    lse_a[0, 1, 2] = float("nan")
    o, lse = flashcore.merge_attention_states(o_a, lse_a, o_b, lse_b)
    assert torch.isnan(lse[0, 1, 2])
    assert torch.isnan(o[0, 2, 1]).all()


@pytest.mark.parametrize("device", DEVICES)
def test_merge_rejects_bad_arguments(device):
    o_a, lse_a, o_b, lse_b = make_inputs((1, 4, 2, 8), torch.float16, device, False)
    with pytest.raises(flashcore.InvalidArgumentError, match="lse_b"):
        flashcore.merge_attention_states(o_a, lse_a, o_b, lse_b[:, :1])
    with pytest.raises(flashcore.InvalidArgumentError, match="o_b"):
        flashcore.merge_attention_states(o_a, lse_a, o_b.float(), lse_b)
    with pytest.raises(flashcore.InvalidArgumentError, match="o_b"):  # the C++ overlap rule: only o_a may be o
        flashcore.merge_attention_states(o_a, lse_a, o_b, lse_b, out=o_b)
