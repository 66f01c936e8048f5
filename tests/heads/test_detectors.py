"""Head detectors: each score streamed from a recorded call against its definition written out
here over the dense map (formed by softmax of the same q and k) in NumPy, float64; exact means
1e-5 absolute (float32 weights summed over rows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.attention import record
from attnkit.attention.record import AttentionCall, Recorder, groups
from attnkit.heads.detectors import DELIMITERS, DETECTORS, OFFSETS, applicable, detect

ATOL = 1e-5


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(record, "BLOCK", 96)  # many blocks of rows: the streamed path across block edges


def _recorded(t=29, s=29, causal=True, h=4, h_kv=2, seed=0, plant=True):
    """A recorded call with random q and k (heads planted to attend to known places) and its
    dense weights (h, t, s), formed here."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, h, t, 8, generator=g)
    k = torch.randn(1, h_kv, s, 8, generator=g)
    rec = Recorder()
    call = rec.add_scores(None, q, k, scale=8**-0.5, causal=causal)
    scores = (q @ groups(k, h).transpose(-1, -2))[0] * 8**-0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(t, s, dtype=torch.bool).tril(s - t), float("-inf"))
    return call, torch.softmax(scores, -1).double().numpy()


def _tokens(n, seed=0):
    """A sequence with repeats (a random segment, then the segment again) and delimiters."""
    rng = np.random.default_rng(seed)
    half = [str(x) for x in rng.integers(0, 9, n // 2)]
    out = (half + half + ["."] * n)[:n]
    out[3] = "[SEP]"
    return out


def _dense(w, queries, keys):
    """Every detector's definition over formed maps (h, t, s)."""
    h, t, s = w.shape
    ip = np.arange(t) + s - t  # each query's position among the keys
    valid = w.sum(-1) > 0
    out = {}

    def mean(score, applies):
        use = valid & applies[None, :]
        return np.where(use, score, 0).sum(-1) / np.maximum(use.sum(-1), 1)

    out["previous_token"] = mean(
        np.stack([[w[x, i, ip[i] - 1] if ip[i] >= 1 else 0 for i in range(t)] for x in range(h)]), ip >= 1
    )
    same = np.array([[keys[j] == queries[i] and j < ip[i] for j in range(s)] for i in range(t)])
    out["duplicate_token"] = mean((w * same).sum(-1), same.any(-1))
    after = np.array([[1 <= j < ip[i] and keys[j - 1] == queries[i] for j in range(s)] for i in range(t)])
    out["induction"] = mean((w * after).sum(-1), after.any(-1))
    out["sink"] = mean(w[..., 0], np.ones(t, bool))
    out["delimiter"] = mean(
        (w * np.array([j > 0 and k in DELIMITERS for j, k in enumerate(keys)])).sum(-1), np.ones(t, bool)
    )
    ent = -np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0).sum(-1)
    n_keys = (w > 0).sum(-1)
    out["broad"] = mean(np.where(n_keys > 1, ent / np.log(np.maximum(n_keys, 2)), 0), np.ones(t, bool))
    out["distance"] = mean((w * np.abs(ip[:, None] - np.arange(s)[None, :])).sum(-1), np.ones(t, bool))
    off = w.argmax(-1) - ip[None, :]
    shares = np.stack([((off == o) & valid).sum(-1) / valid.sum(-1) for o in range(-OFFSETS, OFFSETS + 1)], -1)
    out["positional"] = shares.max(-1)
    out["positional_offset"] = shares.argmax(-1) - OFFSETS
    out["positional_shares"] = shares
    return out


@pytest.mark.parametrize("case", [{"causal": True}, {"causal": False}, {"causal": True, "t": 11}])
def test_every_detector_streams_its_dense_definition(case):
    t, s = case.get("t", 29), 29
    call, w = _recorded(t=t, s=s, causal=case["causal"])
    keys = _tokens(s)
    queries = keys[s - t :]
    found = detect(call, queries, keys)
    expected = _dense(w, queries, keys)
    names = applicable(self_attention=True, causal=case["causal"])
    assert ("induction" in names) == case["causal"]
    for name in [*names, "positional_offset", "positional_shares"]:
        np.testing.assert_allclose(found[name], expected[name], atol=ATOL, err_msg=name)
    # a formed map (an RNN's, or local attention's window) gives the same scores
    formed = AttentionCall("decoder", 0, weights=torch.from_numpy(w).float(), causal=call.causal)
    for name, value in detect(formed, queries, keys).items():
        np.testing.assert_allclose(value, expected[name], atol=ATOL, err_msg=f"formed {name}")


def test_a_planted_previous_token_head_and_sink_head_are_flagged():
    t = 40
    scores = torch.full((3, t, t), -30.0)
    i = torch.arange(t)
    scores[0, i[1:], i[1:] - 1] = 10.0  # head 0: the previous token
    scores[1, :, 0] = 10.0  # head 1: the first token
    scores[2] = 0.0  # head 2: uniform
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    call = AttentionCall("decoder", 0, weights=w, causal=True)
    tokens = [f"w{x}" for x in range(t)]
    got = detect(call, tokens, tokens)
    assert got["previous_token"][0] > DETECTORS["previous_token"].threshold > got["previous_token"][2]
    assert got["sink"][1] > DETECTORS["sink"].threshold > got["sink"][0]
    assert got["positional"][0] > 0.9 and got["positional_offset"][0] == -1
    assert got["broad"][2] == pytest.approx(39 / 40) and got["broad"][0] < 0.1  # query 0 sees one key: 0


def test_a_detector_the_attention_cannot_take_is_one_line():
    call, _ = _recorded(t=9, s=17, causal=False)  # cross-attention: other tokens
    keys, queries = [f"k{x}" for x in range(17)], [f"q{x}" for x in range(9)]
    assert set(detect(call, queries, keys)) == {"sink", "delimiter", "broad", "distance"}
    with pytest.raises(ValueError, match="induction detector needs causal self-attention"):
        detect(call, queries, keys, ["induction"])
    with pytest.raises(ValueError, match="unknown detector 'copying'"):
        detect(call, queries, keys, ["copying"])
    with pytest.raises(ValueError, match="the call has 9 queries and 17 keys"):
        detect(call, queries[:3], keys)
