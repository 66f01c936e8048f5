"""Global and local (Luong 2015) attention: invariants against global attention, gradcheck, O(t*D) memory."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attnkit import GlobalAttention, LocalAttention, build_recurrent_attention
from attnkit.attention import padding_mask

B, T, S, DQ = 2, 5, 9, 6


def inputs(s=S, dtype=torch.float32):
    return torch.randn(B, T, DQ, dtype=dtype), torch.randn(B, s, DQ, dtype=dtype), torch.randn(B, s, 4, dtype=dtype)


def test_global_matches_softmax_formula():
    att = GlobalAttention(query_dim=DQ, key_dim=DQ, score="dot")
    q, k, v = inputs()
    keep = padding_mask(torch.tensor([9, 6]), S)
    out = att(q, k, v, keep, need_weights=True)
    scores = (q @ k.transpose(1, 2)).masked_fill(~keep[:, None], float("-inf"))
    w = scores.softmax(-1)
    torch.testing.assert_close(out.weights, w)
    torch.testing.assert_close(out.context, w @ v)
    assert att(q, k, v, keep).weights is None


@pytest.mark.parametrize("score", ["dot", "general", "concat", "additive"])
def test_local_m_with_wide_window_equals_global(score):
    glob = GlobalAttention(query_dim=DQ, key_dim=DQ, score=score)
    local = LocalAttention(query_dim=DQ, key_dim=DQ, mode="local-m", window=S, score=glob.score)
    q, k, v = inputs()
    keep = padding_mask(torch.tensor([9, 6]), S)
    g, loc = glob(q, k, v, keep, need_weights=True), local(q, k, v, keep, need_weights=True)
    torch.testing.assert_close(loc.weights, g.weights, rtol=0, atol=1e-6)
    torch.testing.assert_close(loc.context, g.context, rtol=0, atol=1e-6)


def test_local_m_window_and_step_decoding():
    D = 1
    local = LocalAttention(query_dim=DQ, key_dim=DQ, mode="local-m", window=D, score="general")
    q, k, v = inputs()
    out = local(q, k, v, need_weights=True)
    torch.testing.assert_close(out.p_t, torch.arange(T).float().expand(B, T))
    for t in range(T):
        outside = [s for s in range(S) if abs(s - t) > D]
        assert (out.weights[:, t, outside] == 0).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(B, T))
    # one decoder step at a time, telling local-m which step it is
    prepared = local.prepare_keys(k)
    for t in range(T):
        step = local(q[:, t : t + 1], k, v, positions=torch.tensor([t]), prepared=prepared)
        torch.testing.assert_close(step.context[:, 0], out.context[:, t])


def test_local_p_is_windowed_renormalised_global_times_gaussian():
    D = 2
    local = LocalAttention(query_dim=DQ, key_dim=DQ, mode="local-p", window=D, score="general")
    glob = GlobalAttention(query_dim=DQ, key_dim=DQ, score=local.score)
    q, k, v = inputs()
    lengths = torch.tensor([9, 6])
    keep = padding_mask(lengths, S)
    out = local(q, k, v, keep, need_weights=True)
    # eq. 9: p_t = S * sigmoid(v_p^T tanh(W_p h_t)) with S the real source length
    p_t = lengths[:, None] * torch.sigmoid(local.v_p(torch.tanh(local.W_p(q)))).squeeze(-1)
    torch.testing.assert_close(out.p_t, p_t)
    g = glob(q, k, v, keep, need_weights=True).weights  # (b, t, s)
    pos = torch.arange(S).float()
    window = ((pos - p_t[..., None]).abs() <= D) & keep[:, None]
    restricted = g * window
    align = restricted / restricted.sum(-1, keepdim=True)  # eq. 7 inside the window
    expected = align * torch.exp(-((pos - p_t[..., None]) ** 2) / (2 * (D / 2) ** 2))  # eq. 10
    torch.testing.assert_close(out.weights, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.context, torch.einsum("bts,bsd->btd", expected, v), rtol=0, atol=1e-6)
    assert (out.weights.sum(-1) <= 1 + 1e-6).all()


def test_gradcheck_local_p():
    local = LocalAttention(query_dim=3, key_dim=3, mode="local-p", window=2, score="concat", hidden_dim=3).double()
    q = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 6, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 6, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: local(q, k, v).context, (q, k, v))
    # p_t itself is learned: gradients reach W_p and v_p through the Gaussian
    local(q, k, v).context.sum().backward()
    assert local.W_p.weight.grad.abs().sum() > 0 and local.v_p.weight.grad.abs().sum() > 0


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor any op produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(x, torch.Tensor):
                self.largest = max(self.largest, x.numel())
        return out


@pytest.mark.parametrize("mode", ["local-m", "local-p"])
def test_local_attention_never_builds_the_full_matrix(mode):
    s, D, hidden = 2000, 3, 8
    local = LocalAttention(query_dim=DQ, key_dim=DQ, mode=mode, window=D, score="additive", hidden_dim=hidden)
    q, k, v = inputs(s)
    prepared = local.prepare_keys(k)  # key-only work, O(s), done once per sentence
    keep = padding_mask(torch.tensor([s, s - 7]), s)
    with LargestTensor() as probe:
        local(q, k, v, keep, prepared=prepared)
    # every intermediate is O(b * t * D * features); the full matrix would be b * t * s
    assert probe.largest <= B * T * (2 * D + 1) * hidden < B * T * s


def test_fully_masked_window_gives_zero_context():
    local = LocalAttention(query_dim=DQ, key_dim=DQ, mode="local-m", window=1)
    q, k, v = inputs()
    out = local(q, k, v, padding_mask(torch.tensor([2, 9]), S), need_weights=True)
    assert torch.equal(out.context[0, 4], torch.zeros(4)) and torch.isfinite(out.weights).all()


def test_factory_and_bad_arguments():
    assert isinstance(build_recurrent_attention("global", query_dim=4, key_dim=4), GlobalAttention)
    assert build_recurrent_attention("local-p", query_dim=4, key_dim=4, window=3).window == 3
    with pytest.raises(ValueError, match="unknown attention type 'locl-p'; did you mean 'local-p'"):
        build_recurrent_attention("locl-p", query_dim=4, key_dim=4)
    with pytest.raises(ValueError, match="window half-width D must be >= 1 for local-p, got 0"):
        LocalAttention(query_dim=4, key_dim=4, mode="local-p", window=0)
    local = LocalAttention(query_dim=4, key_dim=4, mode="local-m")
    with pytest.raises(ValueError, match="shape mismatch"):
        local(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 6, 4))
