"""The attend step and scaled dot-product attention: parity with PyTorch's SDPA and invariants."""

import importlib

import pytest
import torch
import torch.nn.functional as F

from attnkit.attention import (
    attend,
    causal_mask,
    dot_product_attention,
    key_mask,
    masked_softmax,
    padding_mask,
)


def qkv(b=3, h=2, t=5, s=7, d=8, dtype=torch.float32):
    return (
        torch.randn(b, h, t, d, dtype=dtype),
        torch.randn(b, h, s, d, dtype=dtype),
        torch.randn(b, h, s, d, dtype=dtype),
    )


def reference(q, k, v, mask=None, causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


@pytest.mark.parametrize("need_weights", [False, True])
def test_parity_unmasked(need_weights):
    q, k, v = qkv()
    out = dot_product_attention(q, k, v, need_weights=need_weights)
    torch.testing.assert_close(out.context, reference(q, k, v), rtol=0, atol=1e-6)


@pytest.mark.parametrize("need_weights", [False, True])
def test_parity_padding(need_weights):
    q, k, v = qkv()
    mask = key_mask(padding_mask(torch.tensor([7, 3, 1]), 7))
    out = dot_product_attention(q, k, v, mask, need_weights=need_weights)
    torch.testing.assert_close(out.context, reference(q, k, v, mask), rtol=0, atol=1e-6)


@pytest.mark.parametrize("need_weights", [False, True])
def test_parity_causal(need_weights):
    q, k, v = qkv(t=6, s=6)
    out = dot_product_attention(q, k, v, causal=True, need_weights=need_weights)
    torch.testing.assert_close(out.context, reference(q, k, v, causal=True), rtol=0, atol=1e-6)
    # causal with padding as well
    pad = key_mask(padding_mask(torch.tensor([6, 4, 2]), 6))
    out = dot_product_attention(q, k, v, pad, causal=True, need_weights=need_weights)
    torch.testing.assert_close(out.context, reference(q, k, v, pad & causal_mask(6)), rtol=0, atol=1e-6)


def test_fast_and_explicit_paths_agree_with_bias():
    q, k, v = qkv()
    bias = torch.randn(1, 2, 5, 7)
    mask = key_mask(padding_mask(torch.tensor([7, 3, 2]), 7))
    fast = dot_product_attention(q, k, v, mask, bias=bias)
    slow = dot_product_attention(q, k, v, mask, bias=bias, need_weights=True)
    torch.testing.assert_close(fast.context, slow.context, rtol=0, atol=1e-6)


def test_weights_rows_sum_to_one_and_masked_are_exactly_zero():
    q, k, v = qkv()
    mask = key_mask(padding_mask(torch.tensor([7, 3, 1]), 7))
    w = dot_product_attention(q, k, v, mask, need_weights=True).weights
    assert w.shape == (3, 2, 5, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 5))
    assert (w[1, ..., 3:] == 0).all() and (w[2, ..., 1:] == 0).all()


@pytest.mark.parametrize("causal", [False, True])
def test_small_cpu_path_equals_flash_kernel_with_gradients(monkeypatch, causal):
    """Short inputs on CPU take two matmuls and a softmax; longer ones the flash kernel.
    Both give the same context and the same gradients (mask, bias, causal)."""
    kernels_module = importlib.import_module("attnkit.attention.kernels")

    q, k, v = qkv(t=6, s=6)
    bias = torch.randn(1, 2, 6, 6, requires_grad=True)
    mask = key_mask(padding_mask(torch.tensor([6, 3, 1]), 6))
    results = []
    for limit in (kernels_module.SMALL_CPU_SCORES, 0):  # the small path, then forced onto the kernel
        monkeypatch.setattr(kernels_module, "SMALL_CPU_SCORES", limit)
        leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
        bias.grad = None
        out = dot_product_attention(*leaves, mask, bias=bias, causal=causal).context
        out.backward(torch.ones_like(out))
        results.append((out, *(x.grad for x in leaves), bias.grad.clone()))
    for small, kernel in zip(*results):
        torch.testing.assert_close(small, kernel, rtol=0, atol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_query_gives_zero_not_nan(need_weights):
    q, k, v = qkv(b=1, h=1, t=2, s=3)
    q.requires_grad_(True)
    mask = torch.tensor([[True, False, True], [False, False, False]])[None, None]
    out = dot_product_attention(q, k, v, mask, need_weights=need_weights)
    assert torch.equal(out.context[0, 0, 1], torch.zeros(8))
    if need_weights:
        assert torch.equal(out.weights[0, 0, 1], torch.zeros(3))
    out.context.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_attend_dropout_only_in_training():
    scores, values = torch.randn(2, 4, 6), torch.randn(2, 6, 3)
    a = attend(scores, values, dropout=0.5, training=False)
    b = attend(scores, values)
    torch.testing.assert_close(a.context, b.context)
    c = attend(scores, values, dropout=0.5, training=True)
    torch.testing.assert_close(c.weights, b.weights)  # returned weights are pre-dropout
    assert not torch.allclose(c.context, b.context)


def test_masked_softmax_bfloat16():
    scores = torch.randn(3, 5).bfloat16()
    w = masked_softmax(scores, torch.tensor([True, True, False, True, False]))
    assert w.dtype == torch.bfloat16 and (w[:, [2, 4]] == 0).all()
    torch.testing.assert_close(w.float().sum(-1), torch.ones(3), atol=1e-2, rtol=0)


def test_gradcheck_explicit_path():
    q, k, v = (x.double().requires_grad_(True) for x in qkv(b=1, h=2, t=3, s=4, d=3))
    mask = torch.tensor([True, True, False, True])
    assert torch.autograd.gradcheck(
        lambda q, k, v: dot_product_attention(q, k, v, mask, need_weights=True).context, (q, k, v)
    )


def test_mismatched_values():
    with pytest.raises(ValueError, match="scores have 4 keys but values have 5"):
        attend(torch.randn(2, 3, 4), torch.randn(2, 5, 6))
