"""Multi-head attention: parity with torch.nn.MultiheadAttention, cached decoding, invariants."""

import pytest
import torch
from torch import nn

from attnkit import MultiHeadAttention, SinusoidalPositionalEncoding
from attnkit.attention import KVCache, causal_mask, padding_mask
from attnkit.positions import build_positions

D, H = 16, 4


def pair(dropout=0.0, bias=True):
    ours = MultiHeadAttention(D, H, dropout, bias=bias)
    ref = nn.MultiheadAttention(D, H, dropout=dropout, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj_weight)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if bias:
            ours.in_proj_bias.normal_()
            ours.out_proj.bias.normal_()
            ref.in_proj_bias.copy_(ours.in_proj_bias)
            ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ours.eval(), ref.eval()


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_parity_with_padding(need_weights, bias):
    ours, ref = pair(bias=bias)
    x = torch.randn(3, 6, D)
    keep = padding_mask(torch.tensor([6, 4, 2]), 6)
    out = ours(x, x, x, keep[:, None, :], need_weights=need_weights)
    ctx, w = ref(x, x, x, key_padding_mask=~keep, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out.context, ctx, rtol=0, atol=1e-6)
    if need_weights:
        assert out.weights.shape == (3, H, 6, 6)
        torch.testing.assert_close(out.weights, w, rtol=0, atol=1e-6)
    else:
        assert out.weights is None


def test_causal_parity():
    ours, ref = pair()
    x = torch.randn(2, 5, D)
    ctx, _ = ref(x, x, x, attn_mask=~causal_mask(5), need_weights=False)
    torch.testing.assert_close(ours(x, x, x, causal=True).context, ctx, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours(x, x, x, need_weights=True, causal=True).context, ctx, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shared_kv", [True, False])
def test_cross_attention_parity(shared_kv):
    ours, ref = pair()
    q, mem = torch.randn(2, 3, D), torch.randn(2, 7, D)
    v = mem if shared_kv else torch.randn(2, 7, D)
    keep = padding_mask(torch.tensor([7, 5]), 7)
    ctx, w = ref(q, mem, v, key_padding_mask=~keep, average_attn_weights=False)
    out = ours(q, mem, v, keep[:, None, :], need_weights=True)
    torch.testing.assert_close(out.context, ctx, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.weights, w, rtol=0, atol=1e-6)


def test_dropout_is_on_weights_and_off_in_eval():
    ours = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(2, 5, D)
    ours.train()
    a = ours(x, x, x).context
    assert not torch.allclose(a, ours(x, x, x).context)
    ours.eval()
    torch.testing.assert_close(ours(x, x, x).context, ours(x, x, x).context)


IN_ATTENTION = ["none", "relative", "t5", "rope", "alibi"]


def mha_with(scheme, causal=False):
    return MultiHeadAttention(D, H, positions=build_positions(scheme, d_model=D, num_heads=H, causal=causal)).eval()


@pytest.mark.parametrize("scheme", IN_ATTENTION)
def test_cached_incremental_equals_full_recompute(scheme):
    mha = mha_with(scheme, causal=True)
    x = torch.randn(2, 6, D)
    full = mha(x, x, x, need_weights=True, causal=True)
    cache = KVCache()
    steps = []
    for i in range(6):  # one token at a time
        xi = x[:, i : i + 1]
        steps.append(mha(xi, xi, xi, need_weights=True, causal=True, cache=cache))
    assert len(cache) == 6
    torch.testing.assert_close(torch.cat([s.context for s in steps], 1), full.context, rtol=0, atol=1e-5)
    torch.testing.assert_close(steps[-1].weights[:, :, 0], full.weights[:, :, -1], rtol=0, atol=1e-6)
    # a block of several new tokens after a prefix
    cache = KVCache()
    mha(x[:, :2], x[:, :2], x[:, :2], causal=True, cache=cache)
    rest = mha(x[:, 2:], x[:, 2:], x[:, 2:], causal=True, cache=cache)
    torch.testing.assert_close(rest.context, full.context[:, 2:], rtol=0, atol=1e-5)


def test_static_cross_attention_cache_and_reorder():
    mha = MultiHeadAttention(D, H).eval()
    q, mem = torch.randn(3, 4, D), torch.randn(3, 7, D)
    full = mha(q, mem, mem).context
    cache = KVCache(static=True)
    first = mha(q[:, :1], mem, mem, cache=cache).context
    later = mha(q[:, 1:], mem, mem, cache=cache).context
    torch.testing.assert_close(torch.cat([first, later], 1), full, rtol=0, atol=1e-6)
    cache.reorder(torch.tensor([2, 0]))
    torch.testing.assert_close(mha(q[[2, 0], 1:], None, None, cache=cache).context, full[[2, 0], 1:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_queries_equal_attention_to_repeated_keys(t, need_weights):
    """group=g: each run of g query rows shares one key/value row (a sentence's beam
    hypotheses and its memory); same result as repeating every key/value row g times."""
    mha = MultiHeadAttention(D, H).eval()
    g, n, s = 3, 2, 7
    q, mem = torch.randn(n * g, t, D), torch.randn(n, s, D)
    keep = padding_mask(torch.tensor([7, 4]), s)[:, None, None, :]
    want = mha(q, mem.repeat_interleave(g, 0), mem.repeat_interleave(g, 0), keep.repeat_interleave(g, 0), need_weights)
    got = mha(q, mem, mem, keep, need_weights, group=g)
    torch.testing.assert_close(got.context, want.context, rtol=0, atol=1e-6)
    if need_weights:
        torch.testing.assert_close(got.weights, want.weights, rtol=0, atol=1e-6)
        assert got.weights[g:, ..., 4:].abs().max() == 0  # the second sentence's padding, for all its rows
    cache = KVCache(static=True)
    mha(q, mem, mem, keep, group=g, cache=cache)
    assert cache.k.shape[0] == n  # kept once per sentence
    torch.testing.assert_close(mha(q, None, None, keep, group=g, cache=cache).context, want.context, rtol=0, atol=1e-6)


def test_grouped_queries_reject_what_does_not_fit():
    mha = MultiHeadAttention(D, H).eval()
    q, mem = torch.randn(6, 1, D), torch.randn(4, 5, D)
    with pytest.raises(ValueError, match="group=2 query rows per key row"):
        mha(q, mem, mem, group=2)
    with pytest.raises(ValueError, match="not self-attention"):
        mha(q, q, q, group=2)
    cache = KVCache(static=True)
    mha(q, mem[:3], mem[:3], group=2, cache=cache)
    with pytest.raises(ValueError, match="cache holds 3 key rows"):
        mha(q[:4], None, None, group=2, cache=cache)


@pytest.mark.parametrize("scheme", IN_ATTENTION)
def test_fast_and_explicit_paths_agree(scheme):
    mha = mha_with(scheme)
    x = torch.randn(2, 5, D)
    keep = padding_mask(torch.tensor([5, 3]), 5)[:, None, :]
    torch.testing.assert_close(
        mha(x, x, x, keep).context, mha(x, x, x, keep, need_weights=True).context, rtol=0, atol=1e-6
    )


def test_no_positions_is_permutation_equivariant_absolute_positions_are_not():
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(1, 6, D)
    perm = torch.randperm(6)
    out = mha(x, x, x).context
    torch.testing.assert_close(mha(x[:, perm], x[:, perm], x[:, perm]).context, out[:, perm], rtol=0, atol=1e-6)
    pe = SinusoidalPositionalEncoding(D, 32)
    xp, xperm = x + pe(6), x[:, perm] + pe(6)
    assert not torch.allclose(mha(xperm, xperm, xperm).context, mha(xp, xp, xp).context[:, perm], atol=1e-3)


@pytest.mark.parametrize("scheme", ["relative", "rope", "alibi", "t5"])
def test_in_attention_schemes_break_permutation_equivariance(scheme):
    mha = mha_with(scheme)
    torch.nn.init.normal_(next(mha.positions.parameters(), torch.empty(0)))  # make learned tables non-trivial
    x = torch.randn(1, 6, D)
    perm = torch.tensor([1, 3, 0, 5, 2, 4])  # not a reversal: ALiBi's |i - j| is symmetric under that
    assert not torch.allclose(mha(x[:, perm], x[:, perm], x[:, perm]).context, mha(x, x, x).context[:, perm], atol=1e-4)


def test_bad_arguments():
    with pytest.raises(
        ValueError, match=r"d_model=10 is not divisible by num_heads=4; valid head counts: \[1, 2, 5, 10\]"
    ):
        MultiHeadAttention(10, 4)
    mha = MultiHeadAttention(D, H)
    with pytest.raises(ValueError, match=r"expected last dimension d_model=16; got \[8, 16, 16\]"):
        mha(torch.randn(1, 2, 8), torch.randn(1, 2, D), torch.randn(1, 2, D))
    with pytest.raises(ValueError, match=r"must be \(b, t, d_model\)"):
        mha(torch.randn(2, D), torch.randn(2, D), torch.randn(2, D))
    with pytest.raises(ValueError, match="batch/length mismatch"):
        mha(torch.randn(1, 2, D), torch.randn(1, 3, D), torch.randn(1, 4, D))
    x = torch.randn(1, 3, D)
    with pytest.raises(ValueError, match=r"does not fit 3 queries x 3 keys"):
        mha(x, x, x, torch.ones(1, 3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(D, H, dropout=1.5)
