"""Cache policies against plain references: each policy's kept keys built by hand, step by step as
its paper describes, then softmax attention under that mask; and a policy applied in a real
forward against transformers' eager attention with those masks."""

from __future__ import annotations

import copy

import pytest
import torch

import attnkit
import tiny_hf
from attnkit.attention import caches, kernels
from attnkit.attention.intervene import caching


def h2o_kept(q: torch.Tensor, k: torch.Tensor, scale: float, heavy: int, recent: int) -> torch.Tensor:
    """(h, t, t): H2O's cache at each query (``h2o_from_scores``) of each head's scale q k^T."""
    return torch.stack([h2o_from_scores(q[i] @ k[i].T * scale, None, heavy, recent) for i in range(q.shape[0])])


def snapkv_kept(q, k, scale: float, prompt: int, keep: int, observe: int, pool: int) -> torch.Tensor:
    """(h, t, t): SnapKV's cache: the prompt's queries see every earlier key; after it, the last
    ``observe`` prompt keys, the ``keep - observe`` earlier ones with the most votes (the window's
    weights summed, averaged over ``pool`` neighbours), and every key since."""
    h, t, _ = q.shape
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    out = causal.expand(h, t, t).clone()
    for head in range(h):
        scores = (q[head, :prompt] @ k[head, :prompt].T * scale).masked_fill(~causal[:prompt, :prompt], -torch.inf)
        votes = torch.softmax(scores, -1)[prompt - observe :, : prompt - observe].sum(0)
        n, half = len(votes), pool // 2
        pooled = torch.stack([votes[max(0, j - half) : j + half + 1].mean() for j in range(n)])
        chosen = set(pooled.topk(keep - observe).indices.tolist()) | set(range(prompt - observe, t))
        for i in range(prompt, t):
            out[head, i] = torch.tensor([j in chosen and j <= i for j in range(t)])
    return out


POLICIES = [
    (caches.HeavyHitters(heavy=5, recent=4), lambda q, k, s: h2o_kept(q, k, s, 5, 4)),
    (caches.HeavyHitters(heavy=0, recent=6), lambda q, k, s: h2o_kept(q, k, s, 0, 6)),
    (caches.SnapKV(prompt=24, keep=10, observe=4, pool=3), lambda q, k, s: snapkv_kept(q, k, s, 24, 10, 4, 3)),
    (caches.SinkWindow(sinks=2, window=5), None),
]


@pytest.mark.parametrize("policy, reference", POLICIES)
def test_a_policy_is_attention_over_the_keys_its_paper_keeps(policy, reference):
    h, t, d = 3, 36, 8
    q, k, v = torch.randn(1, h, t, d), torch.randn(1, h, t, d), torch.randn(1, h, t, d)
    if reference is None:
        i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
        kept = ((j <= i) & ((j < 2) | (j > i - 5))).expand(h, t, t)
    else:
        kept = reference(q[0], k[0], 0.35)
    want, _ = kernels.explicit(q, k, v, scale=0.35, additive=kernels.additive_term(kept[None], None))
    got, lse = policy.attend(q, k, v, caches.Rules(0.35))
    assert torch.allclose(got, want, atol=1e-6)
    scores = (q @ k.transpose(-1, -2) * 0.35).masked_fill(~kept[None], -torch.inf)
    assert torch.allclose(lse, scores.logsumexp(-1), atol=1e-5)
    assert (kept.sum(-1) <= policy.budget).all() or isinstance(policy, caches.SnapKV)


def test_a_learned_sink_and_a_soft_cap_stay():
    h, t, d = 2, 30, 8
    q, k, v = torch.randn(1, h, t, d), torch.randn(1, h, t, d), torch.randn(1, h, t, d)
    sink = torch.randn(1, h, 1)
    policy = caches.HeavyHitters(heavy=4, recent=4)
    got, _ = policy.attend(q, k, v, caches.Rules(0.5, cap=0.8, sink=sink))
    capped = torch.tanh(q @ k.transpose(-1, -2) * 0.5 / 0.8) * 0.8  # the scores H2O accumulates on
    kept = torch.zeros(h, t, t, dtype=torch.bool)
    for head in range(h):  # the reference's sets, from the capped scores and the sink
        kept[head] = h2o_from_scores(capped[0, head], sink[0, head, 0], 4, 4)
    want, _ = kernels.explicit(q, k, v, scale=0.5, cap=0.8, sink=sink, additive=kernels.additive_term(kept[None], None))
    assert torch.allclose(got, want, atol=1e-6)


def h2o_from_scores(scores: torch.Tensor, sink: torch.Tensor | None, heavy: int, recent: int) -> torch.Tensor:
    """(t, t): H2O's cache at each query, simulated with Python sets from the scores (t, t) and a
    sink logit in each softmax: every key until the cache is full; then the recent window and the
    heavy set, a key leaving the window competing with the heavy keys on the attention it has
    accumulated (each query's weights over its own cache)."""
    t = scores.shape[0]
    out = torch.zeros(t, t, dtype=torch.bool)
    acc = [0.0] * t
    held: set[int] = set()
    for i in range(t):
        held.add(i)
        if len(held) > heavy + recent:
            old = [j for j in held if j <= i - recent]
            held.remove(min(old, key=lambda j: (acc[j], -j)))
        keys = sorted(held)
        row = scores[i, keys] if sink is None else torch.cat([scores[i, keys], sink[None]])
        w = torch.softmax(row, 0)[: len(keys)]
        for j, x in zip(keys, w.tolist()):
            acc[j] += x
        out[i, keys] = True
    return out


def test_a_policy_in_the_forward_is_eager_attention_with_its_masks(tmp_path):
    import transformers
    from transformers import AttentionInterface
    from transformers.models.llama.modeling_llama import eager_attention_forward

    model = attnkit.load(str(tiny_hf.build("llama", tmp_path / "llama", positions=64)))
    hf = model.hf.model
    layer, policy = 1, caches.HeavyHitters(heavy=6, recent=5)

    def by_hand(module, q, k, v, mask, **kwargs):
        t = q.shape[2]
        kept = torch.ones(t, t, dtype=torch.bool).tril().expand(q.shape[0], q.shape[1], t, t).clone()
        if module.layer_idx == layer:
            keys = kernels.groups(k, q.shape[1])
            kept[0] = h2o_kept(q[0], keys[0], kwargs["scaling"], 6, 5)
        return eager_attention_forward(module, q, k, v, kernels.additive_term(kept, None), **kwargs)

    AttentionInterface.register("attnkit_test_h2o", by_hand)
    config = copy.deepcopy(hf.config)
    eager = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="attnkit_test_h2o")
    eager.load_state_dict(hf.state_dict())
    eager.eval()
    ids = torch.randint(5, 30, (1, 32))
    with torch.no_grad():
        plain = hf(ids).logits
        with caching({f"blocks.{layer}.attn": torch.zeros(hf.config.num_attention_heads)}, policy):
            got = hf(ids).logits
        want = eager(ids).logits
    assert (got - want).abs().max() < 1e-5
    assert (got - plain).abs().max() > 1e-3


def test_bad_policies_are_one_line():
    with pytest.raises(ValueError, match="recent"):
        caches.HeavyHitters(heavy=2, recent=0)
    with pytest.raises(ValueError, match="keep"):
        caches.SnapKV(prompt=10, keep=4, observe=4)
    with pytest.raises(ValueError, match="holds every key"):
        caches.HeavyHitters(heavy=8, recent=8).check(12)
    with pytest.raises(ValueError, match="leaves no token"):
        caches.SnapKV(prompt=20, keep=8, observe=2).check(20)
    q = torch.randn(1, 2, 1, 4)
    with pytest.raises(ValueError, match="whole sequence"):
        caches.HeavyHitters(heavy=1, recent=1).attend(q, torch.randn(1, 2, 9, 4), torch.randn(1, 2, 9, 4),
                                                      caches.Rules(1.0))  # fmt: skip
