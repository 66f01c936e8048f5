"""Head detectors: each score streamed from a recorded call against its definition written out
here over the dense map (formed by softmax of the same q and k) in NumPy, float64; exact means
1e-5 absolute (float32 weights summed over rows)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnkit.attention import record
from attnkit.attention.record import AttentionCall, Recorder, groups
from attnkit.heads.detectors import (
    DELIMITERS,
    DETECTORS,
    NEEDLE,
    OFFSETS,
    PATTERNS,
    SINK_KEYS,
    applicable,
    copied_span,
    counted_cells,
    detect,
)

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
    """A sequence with repeats (a random segment, then the segment again), delimiters, and at the
    end a copy of an earlier span (a needle)."""
    rng = np.random.default_rng(seed)
    half = [str(x) for x in rng.integers(0, 9, n // 2)]
    out = (half + half + ["."] * n)[:n]
    out[3] = "[SEP]"
    out[n - 6 :] = out[4:10]
    return out


def _needle(keys):
    """The longest suffix of ``keys`` (NEEDLE or more tokens) found earlier, by brute force: (the
    nearest earlier copy's start, its length) or None."""
    n = len(keys)
    for length in range(n // 2, NEEDLE - 1, -1):
        starts = [p for p in range(n - 2 * length + 1) if keys[p : p + length] == keys[n - length :]]
        if starts:
            return starts[-1], length
    return None


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
    causal = bool(np.all(np.triu(w, s - t + 1) == 0)) and t > 1
    out["sink"] = mean(w[..., 0], ip + 1 >= SINK_KEYS if causal else np.ones(t, bool))
    top = w.argmax(-1)  # (h, t)
    needle = _needle(keys)
    if needle is not None:
        first, length = needle
        answer = np.array([s - length <= ip[i] + 1 < s for i in range(t)])
        copies = np.array(
            [
                [
                    first <= top[x, i] < first + length and ip[i] + 1 < s and keys[top[x, i]] == keys[ip[i] + 1]
                    for i in range(t)
                ]
                for x in range(h)
            ]
        )
        out["retrieval"] = mean(copies.astype(float), answer)
    count = {k: keys.count(k) for k in keys}
    seen = [range(ip[i] + 1) if causal else range(s) for i in range(t)]
    rarest = np.array([min(count[keys[j]] for j in seen[i]) for i in range(t)])
    hits = np.array([[count[keys[top[x, i]]] == rarest[i] for i in range(t)] for x in range(h)])
    out["rare_word"] = mean(hits.astype(float), np.array([len(r) >= 2 for r in seen]))
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
    assert ("induction" in names) == ("retrieval" in names) == case["causal"]
    assert copied_span(keys)[::2] == _needle(keys)
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


def test_an_even_causal_head_on_a_short_input_is_no_sink():
    """Eight tokens, weights spread evenly: the first queries see the first token among few keys
    (query 0 among one), so over every query the first token gets 0.34, past the threshold. Over
    the queries that see SINK_KEYS keys or more it gets their mean 1 / (i + 1): 0.18."""
    t = 8
    w = torch.ones(1, t, t).tril()
    w = w / w.sum(-1, keepdim=True)
    tokens = [f"w{x}" for x in range(t)]
    got = detect(AttentionCall("decoder", 0, weights=w, causal=True), tokens, tokens, ["sink"])
    every_query = float(w[0, :, 0].mean())
    assert every_query > DETECTORS["sink"].threshold
    assert got["sink"][0] == pytest.approx(np.mean([1 / (i + 1) for i in range(SINK_KEYS - 1, t)]))
    assert got["sink"][0] < DETECTORS["sink"].threshold


def test_a_detector_the_attention_cannot_take_is_one_line():
    call, _ = _recorded(t=9, s=17, causal=False)  # cross-attention: other tokens
    keys, queries = [f"k{x}" for x in range(17)], [f"q{x}" for x in range(9)]
    assert set(detect(call, queries, keys)) == {"sink", "delimiter", "broad"}
    with pytest.raises(ValueError, match="induction detector needs causal self-attention"):
        detect(call, queries, keys, ["induction"])
    with pytest.raises(ValueError, match="unknown detector 'copying'"):
        detect(call, queries, keys, ["copying"])
    with pytest.raises(ValueError, match="the call has 9 queries and 17 keys"):
        detect(call, queries[:3], keys)


def _planted(targets, t, s, causal):
    """Formed weights (h, t, s) whose head x puts 0.9 of each query's weight on ``targets[x][i]``
    (None: uniform over the keys it sees)."""
    w = torch.zeros(len(targets), t, s)
    for x, where in enumerate(targets):
        for i in range(t):
            seen = i + s - t + 1 if causal else s
            w[x, i, :seen] = 1.0 / seen
            if where is not None and where[i] is not None:
                w[x, i, :seen] *= 0.1
                w[x, i, where[i]] += 0.9
    return AttentionCall("decoder", 0, weights=w, causal=causal)


def test_a_planted_retrieval_head_copies_from_the_needle_and_a_rare_word_head_finds_the_rare():
    tokens = [f"w{x}" for x in range(30)] + [f"w{x}" for x in range(10, 20)]  # the needle w10..w19, then again
    assert copied_span(tokens) == (10, 30, 10)
    copy = [p - 19 if 29 <= p < 39 else p for p in range(40)]  # to the needle's copy of the next token
    call = _planted([copy, None, list(range(40))], 40, 40, causal=True)
    got = detect(call, tokens, tokens, ["retrieval", "induction"])
    assert got["retrieval"].tolist() == [1.0, 0.0, 0.0]  # uniform: the first key; itself: not the next token
    assert got["induction"][0] > 0.5  # in the repeat, the token after the earlier copy is the induction target
    fresh = tokens[:30] + [f"y{x}" for x in range(10)]  # no needle: no query it scores
    assert copied_span(fresh) is None and detect(call, fresh, fresh, ["retrieval"])["retrieval"].tolist() == [0.0] * 3
    words = ["a", "b"] * 4 + ["zebra"] + ["a", "b"] * 4
    call = _planted([[8] * 17, [0] * 17], 17, 17, causal=False)
    got = detect(call, words, words, ["rare_word"])
    assert got["rare_word"].tolist() == [1.0, 0.0]
    common = detect(call, words, words, ["rare_word"], frequency={"a": 1, "b": 50, "zebra": 50})
    assert common["rare_word"].tolist() == [0.0, 1.0]  # rarity from a larger count: "a" is the rare one


def test_streamed_scores_equal_the_dense_ones_at_4096_tokens(monkeypatch):
    """At 4,096 tokens the record's blocks against the whole formed map, each definition written
    over it here in torch (float64): 1e-5, relative for the distance (about 1,000 tokens)."""
    monkeypatch.setattr(record, "BLOCK", 4 * 2**20)  # the library's own block size
    t = 4096
    call, _ = _recorded(t=t, s=t, causal=True, h=2, h_kv=1, seed=3)
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 2, t, 8, generator=g), torch.randn(1, 1, t, 8, generator=g)
    scores = (q @ k.transpose(-1, -2))[0].double() * 8**-0.5
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    w = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)  # (2, t, t)
    tokens = _tokens(t, seed=3)
    ids = torch.tensor([int(x) if x.isdigit() else -1 for x in tokens])
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    found = detect(call, tokens, tokens, ["previous_token", "duplicate_token", "induction", "sink", "distance"])
    expected = {
        "previous_token": w[:, torch.arange(1, t), torch.arange(t - 1)].mean(-1),
        "sink": w[:, SINK_KEYS - 1 :, 0].mean(-1),
        "distance": (w * (i - j).abs()).sum(-1).mean(-1),
    }
    same = (ids[None, :] == ids[:, None]) & (j < i) & (ids[:, None] >= 0)
    after = torch.zeros(t, t, dtype=torch.bool)
    after[:, 1:] = (ids[None, :-1] == ids[:, None]) & (ids[:, None] >= 0)
    after &= (j >= 1) & (j < i)
    for name, m in (("duplicate_token", same), ("induction", after)):
        rows = m.any(-1)
        expected[name] = (w * m).sum(-1)[:, rows].mean(-1)
    for name, value in expected.items():  # distance, in tokens (about 1,000): float32 relative error
        tol = {"rtol": 1e-5} if name == "distance" else {"atol": ATOL}
        np.testing.assert_allclose(found[name], value.numpy(), **tol, err_msg=name)


def test_the_report_says_why_a_detector_is_silent_or_cannot_rank():
    """One short input: the detectors that need a repeat say what they need, not that they score
    any input; a ranking detector every head ties on says so instead of naming three of them."""
    from attnkit.heads.atlas import _ranked

    tied = np.ones((2, 4))
    assert _ranked(tied, 4) == ": 8 of 8 heads tie at 1.00 on these inputs: too little input to rank them"
    spread = np.arange(8, dtype=float).reshape(2, 4) / 8
    assert _ranked(spread, 4) == ", highest: layer 1 head 3 0.88, layer 1 head 2 0.75, layer 1 head 1 0.62"
    assert "--probe repeated" in DETECTORS["induction"].needs and "--probe needle" in DETECTORS["retrieval"].needs
    from attnkit.cli.main import build_parser

    named = {m for d in DETECTORS.values() for m in re.findall(r"--probe (\w+)", d.needs)}
    assert named == {"repeated", "needle"}
    for probe in named:  # each names a probe the command takes
        assert build_parser().parse_args(["heads", "some-model", "--probe", probe]).probe == probe
    assert all(d.needs == "" or d.needs.startswith(("a ", "an ")) for d in DETECTORS.values())


def test_a_vocabulary_of_no_words_still_gives_a_probe():
    """t0 .. t255 and symbols: no alphabetic word, but every token reads back alone, so the
    repeated probe draws them; a special token never is."""
    from attnkit.heads.probes import single_tokens, vocabulary_words

    pieces = [f"t{i}" for i in range(256)] + ["<pad>", "[CLS]", "+", "##x"]

    def count(text: str) -> int:
        return len(text.split()) + 2  # one token a piece, and two specials

    assert vocabulary_words(pieces) == []
    found = single_tokens(pieces, count, __import__("random").Random(0))
    assert len(found) == 257 and "+" in found and not {"<pad>", "[CLS]", "##x", "x"} & set(found)


@pytest.mark.parametrize("case", [{"causal": True}, {"causal": False}, {"causal": True, "t": 11}])
def test_the_outlined_cells_sum_to_each_pattern_detectors_score(case):
    """What the patterns figure outlines is what the detector counts: the mean over the scored
    queries of the weight in their cells is the detector's score, head by head."""
    t, s = case.get("t", 29), 29
    call, w = _recorded(t=t, s=s, causal=case["causal"])
    keys = _tokens(s)
    queries = keys[s - t :]
    names = [n for n in PATTERNS if n in applicable(self_attention=True, causal=case["causal"])]
    found = detect(call, queries, keys, names=names)
    for name in names:
        cells, rows = counted_cells(name, queries, keys, case["causal"])
        assert cells.shape == (t, s) and rows.shape == (t,) and rows.any() and not cells[~rows].any(), name
        mine = (w * cells).sum(-1)[:, rows].mean(-1)
        np.testing.assert_allclose(found[name], mine, atol=ATOL, err_msg=name)
    with pytest.raises(ValueError, match="sums no cells"):
        counted_cells("broad", queries, keys, True)


def test_the_report_ranks_heads_within_each_role():
    """Where a role flags most heads (a sink on short inputs), the report orders them by score so the
    list still says which heads it is strongest in."""
    from attnkit.heads.atlas import Atlas

    sink = np.array([[0.9, 0.4], [0.95, 0.35]])
    prev = np.array([[0.1, 0.6], [0.2, 0.1]])
    report = Atlas("decoder", {"sink": sink, "previous_token": prev}, None, inputs=2).report()
    lines = report.splitlines()
    at = lines.index("  by role, strongest first:")
    assert lines[at + 1].startswith("    sink: 4 of 4 heads (most heads pass its threshold here")
    assert (
        "1. layer 1 head 0 0.95, 2. layer 0 head 0 0.90, 3. layer 0 head 1 0.40, 4. layer 1 head 1 0.35"
        in lines[at + 1]
    )
    assert lines[at + 2] == "    previous-token: 1 of 4 heads: 1. layer 0 head 1 0.60"
