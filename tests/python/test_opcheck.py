"""torch.library.opcheck over every flashcore custom op (schema, fake kernel, autograd registration,
dispatcher round trips: the checks torch.compile and AOT autograd rely on), and torch.compile with
dynamic shapes (one graph serves several sequence lengths, results equal the eager ones). Skips
without torch or a CUDA device."""

import pytest

torch = pytest.importorskip("torch")

import flashcore  # noqa: E402
from flashcore import kvcache, ops  # noqa: E402
from flashcore._params import PATHS  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def rnd(*shape, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=gen).to(dtype)


@requires_cuda
@pytest.mark.parametrize("causal", [False, True])
def test_opcheck_fwd_and_its_autograd(causal):
    q, k, v = rnd(2, 64, 8, 64, seed=1), rnd(2, 80, 2, 64, seed=2), rnd(2, 80, 2, 64, seed=3)
    for t in (q, k, v):
        t.requires_grad_(True)
    args = (q, k, v, None, None, None, None, 0, 0, 0.0, 0.0, causal, 0, -1, 0 if causal else -1, PATHS["auto"], False)
    torch.library.opcheck(ops.fwd, args)


@requires_cuda
def test_opcheck_fwd_varlen():
    q, k, v = rnd(96, 4, 64), rnd(96, 4, 64, seed=1), rnd(96, 4, 64, seed=2)
    cu = torch.tensor([0, 40, 96], dtype=torch.int32, device="cuda")
    args = (q, k, v, cu, cu, None, None, 56, 56, 0.0, 0.0, True, 0, -1, 0, PATHS["auto"], False)
    torch.library.opcheck(ops.fwd, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


@requires_cuda
def test_opcheck_bwd():
    q, k, v = rnd(1, 32, 4, 64), rnd(1, 32, 4, 64, seed=1), rnd(1, 32, 4, 64, seed=2)
    out, lse = ops.fwd(q, k, v, None, None, None, None, 0, 0, 0.0, 0.0, True, 0, -1, 0, PATHS["auto"], False)
    dout = rnd(1, 32, 4, 64, seed=3)
    args = (dout, q, k, v, out, lse, None, None, None, None, 0, 0, 0.0, 0.0, True, 0, -1, 0, PATHS["auto"], False)
    torch.library.opcheck(ops.bwd, args)


@requires_cuda
def test_opcheck_softmax():
    torch.library.opcheck(ops.softmax_op, (rnd(8, 300, dtype=torch.float32), 0))


@requires_cuda
def test_opcheck_fwd_kvcache_with_append_rotary_and_pages():
    B, Hkv, D, page = 2, 2, 64, 16
    pages_per_seq = 8
    k_pool, v_pool = rnd(B * pages_per_seq + 2, page, Hkv, D, seed=4), rnd(B * pages_per_seq + 2, page, Hkv, D, seed=5)
    table = torch.randperm(B * pages_per_seq + 2, device="cuda")[: B * pages_per_seq].to(torch.int32).view(B, -1)
    q, k, v = rnd(B, 1, 8, D, seed=6), rnd(B, 1, Hkv, D, seed=7), rnd(B, 1, Hkv, D, seed=8)
    cos, sin = rnd(page * pages_per_seq, D // 4, seed=9), rnd(page * pages_per_seq, D // 4, seed=10)
    seqlens = torch.tensor([5, 100], dtype=torch.int32, device="cuda")
    args = (q, k_pool, v_pool, k, v, cos, sin, seqlens, None, None, table, None, 0.0, True, -1, 0, 0.0, False, 0,
            PATHS["auto"])
    torch.library.opcheck(kvcache.fwd_kvcache, args,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


@requires_cuda
def test_opcheck_fwd_paged():
    Hkv, D, page = 2, 64, 16
    k_pool, v_pool = rnd(12, page, Hkv, D, seed=1), rnd(12, page, Hkv, D, seed=2)
    table = torch.randperm(12, device="cuda")[:10].to(torch.int32).view(2, 5)
    q = rnd(70, 4, D, seed=3)
    cu_q = torch.tensor([0, 30, 70], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 50, 130], dtype=torch.int32, device="cuda")
    args = (q, k_pool, v_pool, cu_q, cu_k, None, table, None, 40, 80, 0.0, True, -1, 0, 0.0, PATHS["auto"])
    torch.library.opcheck(kvcache.fwd_paged, args,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


@requires_cuda
def test_torch_compile_dynamic_shapes_serve_several_lengths():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()

    def model(q, k, v):
        return flashcore.flash_attn_func(q, k, v, causal=True)

    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for s in (48, 96, 130):
        q, k, v = rnd(2, s, 8, 64, seed=s), rnd(2, s, 2, 64, seed=s + 1), rnd(2, s, 2, 64, seed=s + 2)
        torch.testing.assert_close(compiled(q, k, v), model(q, k, v), rtol=0, atol=0)
    # One graph with a symbolic length serves all three (a recompilation per length would be 3 frames).
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert frames <= 1, f"{frames} graphs compiled for three lengths"


@requires_cuda
def test_eager_calls_show_up_in_the_profiler_under_the_op_name():
    q, k, v = rnd(1, 64, 4, 64), rnd(1, 64, 4, 64, seed=1), rnd(1, 64, 4, 64, seed=2)
    cache_k, cache_v = rnd(1, 128, 4, 64, seed=3), rnd(1, 128, 4, 64, seed=4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        flashcore.flash_attn_func(q, k, v, causal=True)
        flashcore.flash_attn_with_kvcache(q[:, :1], cache_k, cache_v, cache_seqlens=100)
    names = {e.key for e in prof.key_averages()}
    assert "flashcore::fwd" in names, sorted(names)[:20]
    assert "flashcore::fwd_kvcache" in names, sorted(names)[:20]
