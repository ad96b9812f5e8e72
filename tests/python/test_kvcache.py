"""flashcore.flash_attn_with_kvcache and paged flash_attn_varlen_func against a float64 reference:
append then attend, rotary in both layouts, dense / batch-indexed / paged caches (shuffled pages,
block sizes 16, 64, 256), left padding, GQA, split counts forced from 1 to many, CUDA-graph capture
of a decode step, torch.compile. Tolerance: 2x the error of the same attention computed in the dtype
by torch (plus a small floor). Skips without torch or a CUDA device."""

import math

import pytest

torch = pytest.importorskip("torch")

import flashcore  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def rotate(x, cos, sin, positions, interleaved):
    """Rotary embedding of x [B, S, H, D] at positions [B, S] (float64 math)."""
    rd = 2 * cos.shape[1]
    c = cos.double()[positions][:, :, None, :]  # [B, S, 1, rd/2]
    s = sin.double()[positions][:, :, None, :]
    x = x.double()
    if interleaved:
        x0, x1 = x[..., 0:rd:2], x[..., 1:rd:2]
        r0, r1 = x0 * c - x1 * s, x0 * s + x1 * c
        rot = torch.stack((r0, r1), dim=-1).flatten(-2)
    else:
        x0, x1 = x[..., : rd // 2], x[..., rd // 2: rd]
        rot = torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
    return torch.cat((rot, x[..., rd:]), dim=-1)


def attend(q, k, v, valid, causal, dtype=torch.float64):
    """q [B, Sq, Hq, D]; k, v [B, Sk, Hkv, D] in cache coordinates; valid [B, Sk] the key rows each
    entry sees; causal bottom-right over the valid keys. Computed in `dtype`."""
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    qt = q.to(dtype).transpose(1, 2)
    kt = k.to(dtype).transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    vt = v.to(dtype).transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
    s = (qt @ kt.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    mask = valid[:, None, None, :].expand(B, 1, Sq, k.shape[1]).clone()
    if causal:
        # Query i sees the valid keys up to (count of valid keys) - Sq + i, counted from the first valid one.
        rank = valid.cumsum(-1) - 1  # position of each key among the valid ones
        count = valid.sum(-1)
        limit = count[:, None] - Sq + torch.arange(Sq, device=q.device)[None, :]  # [B, Sq]
        mask &= rank[:, None, None, :] <= limit[:, None, :, None]
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s.float() if dtype != torch.float64 else s, dim=-1).to(dtype)
    p = torch.nan_to_num(p, nan=0.0)
    return (p @ vt).transpose(1, 2)


def make_case(B, Sq, Hq, Hkv, D, S_cache, dtype, *, seqlen_new, page_size=None, batch_idx=False, leftpad=False,
              rotary=None, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *shape: torch.randn(*shape, generator=gen, device="cuda").to(dtype)  # noqa: E731
    B_cache = B + 2 if batch_idx else B
    k_cache, v_cache = rnd(B_cache, S_cache, Hkv, D), rnd(B_cache, S_cache, Hkv, D)
    cache_seqlens = torch.randint(0, S_cache - seqlen_new + 1, (B,), generator=gen, device="cuda", dtype=torch.int32)
    cache_seqlens[0] = S_cache - seqlen_new  # one full entry
    q = rnd(B, Sq, Hq, D)
    k_new = rnd(B, seqlen_new, Hkv, D) if seqlen_new else None
    v_new = rnd(B, seqlen_new, Hkv, D) if seqlen_new else None
    idx = torch.randperm(B_cache, generator=gen, device="cuda")[:B].to(torch.int32) if batch_idx else None
    pad = None
    if leftpad:
        pad = (torch.rand(B, generator=gen, device="cuda") * cache_seqlens.float()).to(torch.int32)
    cos = sin = None
    if rotary is not None:
        angle = torch.rand(S_cache, D // 4, generator=gen, device="cuda") * 2 * math.pi  # rotary_dim = D / 2
        cos, sin = torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)
    table = None
    k_pool = v_pool = None
    if page_size is not None:
        pages_per_seq = math.ceil(S_cache / page_size)
        num_pages = B * pages_per_seq + 5
        table = torch.randperm(num_pages, generator=gen, device="cuda")[: B * pages_per_seq].to(torch.int32)
        table = table.reshape(B, pages_per_seq)
        k_pool = rnd(num_pages, page_size, Hkv, D)
        v_pool = rnd(num_pages, page_size, Hkv, D)
        # The dense view of the pool is the logical cache.
        k_cache = k_pool[table.long()].reshape(B, pages_per_seq * page_size, Hkv, D)[:, :S_cache].contiguous()
        v_cache = v_pool[table.long()].reshape(B, pages_per_seq * page_size, Hkv, D)[:, :S_cache].contiguous()
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, k_new=k_new, v_new=v_new, cache_seqlens=cache_seqlens,
                idx=idx, pad=pad, cos=cos, sin=sin, table=table, k_pool=k_pool, v_pool=v_pool)


def expected(c, causal, interleaved, dtype):
    """(reference out fp64, same-dtype baseline out, expected dense caches after the append)."""
    q, k_cache, v_cache = c["q"], c["k_cache"], c["v_cache"]
    if c["idx"] is not None:
        k_cache, v_cache = k_cache[c["idx"].long()], v_cache[c["idx"].long()]
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    B, Sq = q.shape[:2]
    seqlens = c["cache_seqlens"].long()
    new = c["k_new"].shape[1] if c["k_new"] is not None else 0
    if c["cos"] is not None:
        pos_q = seqlens[:, None] + (torch.arange(Sq, device="cuda")[None, :] if causal else 0)
        q = rotate(q, c["cos"], c["sin"], pos_q.expand(B, Sq), interleaved).to(q.dtype)
    if new:
        k_new = c["k_new"]
        if c["cos"] is not None:
            pos_k = seqlens[:, None] + torch.arange(new, device="cuda")[None, :]
            k_new = rotate(k_new, c["cos"], c["sin"], pos_k, interleaved).to(k_new.dtype)
        for b in range(B):
            k_cache[b, seqlens[b]: seqlens[b] + new] = k_new[b]
            v_cache[b, seqlens[b]: seqlens[b] + new] = c["v_new"][b]
    rows = torch.arange(k_cache.shape[1], device="cuda")[None, :]
    valid = rows < (seqlens + new)[:, None]
    if c["pad"] is not None:
        valid &= rows >= c["pad"].long()[:, None]
    ref = attend(q, k_cache, v_cache, valid, causal)
    base = attend(q, k_cache, v_cache, valid, causal, dtype=dtype)
    return ref, base, k_cache, v_cache


def check_close(out, ref, base):
    err = (out.double() - ref).abs().max().item()
    base_err = (base.double() - ref).abs().max().item()
    assert torch.isfinite(out).all()
    assert err <= 2 * base_err + 1e-3, (err, base_err)


@requires_cuda
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("layout", ["dense", "batch_idx", "paged16", "paged64", "paged256"])
@pytest.mark.parametrize("causal", [False, True])
def test_append_then_attend_matches_reference(dtype, layout, causal):
    dt = DTYPES[dtype]
    page = {"paged16": 16, "paged64": 64, "paged256": 256}.get(layout)
    for seed, (sq, new, rotary, interleaved, leftpad, splits) in enumerate([
            (1, 1, None, False, False, 0), (1, 1, True, True, False, 1), (4, 4, True, False, True, 0),
            (1, 0, None, False, True, 7), (4, 4, None, False, False, 64)]):
        c = make_case(3, sq, 16, 2, 128, 1000, dt, seqlen_new=new, page_size=page, batch_idx=layout == "batch_idx",
                      leftpad=leftpad, rotary=rotary, seed=seed)
        ref, base, k_exp, v_exp = expected(c, causal, interleaved, dt)
        kc = c["k_pool"] if page else c["k_cache"]
        vc = c["v_pool"] if page else c["v_cache"]
        out, lse = flashcore.flash_attn_with_kvcache(
            c["q"], kc, vc, c["k_new"], c["v_new"], rotary_cos=c["cos"], rotary_sin=c["sin"],
            cache_seqlens=c["cache_seqlens"], cache_batch_idx=c["idx"], cache_leftpad=c["pad"], block_table=c["table"],
            causal=causal, rotary_interleaved=interleaved, num_splits=splits, return_softmax_lse=True)
        check_close(out, ref, base)
        assert lse.shape == (3, 16, sq) and torch.isfinite(lse).all()
        # The cache now holds the appended rows (rotated), everything else unchanged.
        if page:
            pages = c["table"].long()
            k_now = kc[pages].reshape(3, -1, 2, 128)[:, :1000]
            v_now = vc[pages].reshape(3, -1, 2, 128)[:, :1000]
        else:
            k_now, v_now = (kc, vc) if c["idx"] is None else (kc[c["idx"].long()], vc[c["idx"].long()])
        tol = 1e-2 if dt == torch.bfloat16 else 2e-3  # the rotation rounds once; the reference rounds once too
        assert (k_now.double() - k_exp.double()).abs().max().item() <= tol * max(1.0, k_exp.abs().max().item())
        assert torch.equal(v_now, v_exp)


@requires_cuda
def test_int_cache_seqlens_and_gqa_32_8():
    c = make_case(2, 1, 32, 8, 128, 300, torch.bfloat16, seqlen_new=0)
    c["cache_seqlens"][:] = 300
    ref, base, _, _ = expected(c, False, False, torch.bfloat16)
    out = flashcore.flash_attn_with_kvcache(c["q"], c["k_cache"], c["v_cache"], cache_seqlens=300)
    check_close(out, ref, base)


@requires_cuda
def test_decode_step_is_cuda_graph_capturable():
    c = make_case(2, 1, 16, 2, 128, 512, torch.float16, seqlen_new=1, page_size=16)
    seqlens = c["cache_seqlens"].clone()
    ref, base, _, _ = expected(c, True, False, torch.float16)
    args = (c["q"], c["k_pool"].clone(), c["v_pool"].clone(), c["k_new"], c["v_new"])
    kw = dict(cache_seqlens=seqlens, block_table=c["table"], causal=True)
    flashcore.flash_attn_with_kvcache(*args, **kw)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashcore.flash_attn_with_kvcache(*args, **kw)
    graph.replay()
    torch.cuda.synchronize()
    check_close(out, ref, base)


@requires_cuda
def test_torch_compile_traces_the_kvcache_op():
    c = make_case(2, 1, 16, 2, 64, 200, torch.bfloat16, seqlen_new=1)
    ref, base, _, _ = expected(c, True, False, torch.bfloat16)
    fn = torch.compile(lambda *a, **kw: flashcore.flash_attn_with_kvcache(*a, **kw), fullgraph=True)
    out = fn(c["q"], c["k_cache"].clone(), c["v_cache"].clone(), c["k_new"], c["v_new"],
             cache_seqlens=c["cache_seqlens"], causal=True)
    check_close(out, ref, base)


@requires_cuda
@pytest.mark.parametrize("page_size", [16, 256])
def test_varlen_prefill_over_a_paged_cache_equals_the_dense_call(page_size):
    gen = torch.Generator(device="cuda").manual_seed(3)
    lens_q, lens_k = [5, 130, 1], [200, 130, 77]
    H, Hkv, D = 8, 2, 128
    total_q = sum(lens_q)
    q = torch.randn(total_q, H, D, generator=gen, device="cuda").half()
    pages_per_seq = math.ceil(max(lens_k) / page_size)
    num_pages = 3 * pages_per_seq + 2
    k_pool = torch.randn(num_pages, page_size, Hkv, D, generator=gen, device="cuda").half()
    v_pool = torch.randn(num_pages, page_size, Hkv, D, generator=gen, device="cuda").half()
    table = torch.randperm(num_pages, generator=gen, device="cuda")[: 3 * pages_per_seq].to(torch.int32).reshape(3, -1)
    cu_q = torch.tensor([0, 5, 135, 136], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, 200, 330, 407], device="cuda", dtype=torch.int32)
    k_dense = torch.cat([k_pool[table[b].long()].reshape(-1, Hkv, D)[: lens_k[b]] for b in range(3)])
    v_dense = torch.cat([v_pool[table[b].long()].reshape(-1, Hkv, D)[: lens_k[b]] for b in range(3)])
    out_paged = flashcore.flash_attn_varlen_func(q, k_pool, v_pool, cu_q, cu_k, 130, 200, causal=True,
                                                 block_table=table)
    # The dense call runs a prefill path (sm90 / sm80): equal up to the rounding of two kernels.
    out_dense = flashcore.flash_attn_varlen_func(q, k_dense, v_dense, cu_q, cu_k, 130, 200, causal=True)
    assert torch.isfinite(out_paged).all()
    assert (out_paged.float() - out_dense.float()).abs().max().item() < 4e-3


@requires_cuda
def test_bad_kvcache_inputs_raise_clear_errors():
    c = make_case(2, 1, 16, 2, 64, 100, torch.float16, seqlen_new=1, page_size=16)
    with pytest.raises(ValueError, match="block_table"):
        flashcore.flash_attn_with_kvcache(c["q"], c["k_pool"], c["v_pool"], block_table=c["table"][:1],
                                          cache_seqlens=c["cache_seqlens"])
    with pytest.raises(ValueError, match="k, v"):
        flashcore.flash_attn_with_kvcache(c["q"], c["k_cache"], c["v_cache"], c["k_new"], None,
                                          cache_seqlens=c["cache_seqlens"])
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashcore.flash_attn_with_kvcache(c["q"], c["k_cache"], c["v_cache"],
                                          cache_seqlens=c["cache_seqlens"].long())
