"""Score functions: each formula against a direct evaluation, gradcheck, bad arguments."""

import math

import pytest
import torch

from attnkit.attention import SCORES, build_score

NAMES = sorted(SCORES)


def direct(name, fn, q, k):
    """Score of every (query, key) pair computed one pair at a time from the paper's formula."""
    t, s = q.shape[-2], k.shape[-2]
    out = torch.empty(*q.shape[:-2], t, s, dtype=q.dtype)
    for i in range(t):
        for j in range(s):
            qi, kj = q[..., i, :], k[..., j, :]
            if name == "dot":
                v = (qi * kj).sum(-1)
            elif name == "scaled_dot":
                v = (qi * kj).sum(-1) / math.sqrt(k.shape[-1])
            elif name in ("general", "bilinear"):
                v = ((qi @ fn.W_a) * kj).sum(-1)  # q^T W_a k
            elif name == "concat":
                v = torch.tanh(torch.cat([qi, kj], -1) @ fn.W_a.T) @ fn.v_a  # v^T tanh(W_a [q; k])
            elif name == "additive":
                v = torch.tanh(fn.W_a(qi) + fn.U_a(kj)) @ fn.v_a  # v^T tanh(W q + U k)
            out[..., i, j] = v
    return out


@pytest.mark.parametrize("name", NAMES)
def test_matches_formula(name):
    d = 6
    fn = build_score(name, query_dim=d, key_dim=d, hidden_dim=5).double()
    q, k = torch.randn(2, 3, d, dtype=torch.float64), torch.randn(2, 4, d, dtype=torch.float64)
    got = fn(q, k)
    assert got.shape == (2, 3, 4)
    torch.testing.assert_close(got, direct(name, fn, q, k), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_prepare_then_score_equals_forward(name):
    fn = build_score(name, query_dim=8, key_dim=8)
    q, k = torch.randn(3, 2, 8), torch.randn(3, 5, 8)
    torch.testing.assert_close(fn.score(q, fn.prepare_keys(k)), fn(q, k))


@pytest.mark.parametrize("name", ["general", "concat", "additive"])
def test_different_query_and_key_sizes(name):
    fn = build_score(name, query_dim=6, key_dim=10, hidden_dim=4)
    assert fn(torch.randn(2, 3, 6), torch.randn(2, 7, 10)).shape == (2, 3, 7)


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck(name):
    fn = build_score(name, query_dim=4, key_dim=4, hidden_dim=3).double()
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: fn(q, k), (q, k))
    names = [n for n, _ in fn.named_parameters()]
    if names:  # gradients w.r.t. the score's own parameters too

        def by_params(*params):
            return torch.func.functional_call(fn, dict(zip(names, params)), (q.detach(), k.detach()))

        params = tuple(p.detach().clone().requires_grad_(True) for p in fn.parameters())
        assert torch.autograd.gradcheck(by_params, params)


def test_unknown_name_suggests():
    with pytest.raises(ValueError, match=r"unknown score function 'generl'; did you mean 'general'\?.*valid: additive"):
        build_score("generl", query_dim=4)


def test_dot_needs_equal_sizes():
    with pytest.raises(ValueError, match="query_dim == key_dim, got 4 and 5"):
        build_score("dot", query_dim=4, key_dim=5)


def test_mismatched_query_size():
    fn = build_score("general", query_dim=4, key_dim=4)
    with pytest.raises(ValueError, match="query last dimension is 3, expected 4"):
        fn(torch.randn(1, 2, 3), torch.randn(1, 2, 4))


@pytest.mark.parametrize("name", NAMES)
def test_a_query_factor_times_each_key_is_the_terms(name):
    """Where the score is a product with each key (dot, scaled dot, general), its query factor times
    the key, dimension by dimension, is that key's terms, and sums to the paper's score (1e-12);
    a tanh score has terms of another form and no factor."""
    fn = build_score(name, query_dim=6, key_dim=6, hidden_dim=5).double()
    q, k = torch.randn(6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    factor = fn.query_factor(q)
    if name in ("concat", "additive"):
        assert factor is None and fn.factor_formula == ""
        return
    assert factor is not None and fn.factor_formula
    torch.testing.assert_close(factor * k, fn.terms(q, k), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close((factor * k).sum(-1), direct(name, fn, q[None], k)[0], rtol=1e-12, atol=1e-12)
