"""The attention record: a fused kernel's output and log-sum-exp against PyTorch's own
``scaled_dot_product_attention`` and ``torch.logsumexp`` of eager scores; every view of a
recorded call (blocks, the whole map, head means, pooled overviews, top keys, streamed
statistics) against the same map formed densely and reduced by NumPy, SciPy or PyTorch.
Exact means float32 rounding: 1e-6 absolute unless a test says otherwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import entropy

from attnkit.attention import record
from attnkit.attention.record import (
    AttentionCall,
    MapView,
    Recorder,
    explicit,
    fused,
    fused_with_lse,
    groups,
    head_stats,
    layer_overviews,
)

ATOL = 1e-6


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """A few rows at a time, so that every view runs its blockwise path across many blocks."""
    monkeypatch.setattr(record, "BLOCK", 96)


def _qkv(h=4, h_kv=2, t=23, s=23, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, h, t, d, generator=g)
    k = torch.randn(1, h_kv, s, d, generator=g)
    v = torch.randn(1, h_kv, s, d, generator=g)
    return q, k, v


def _eager(q, k, scale, causal=False, additive=None):
    """The textbook scores and weights, formed: (scores, softmax)."""
    scores = q @ k.transpose(-1, -2) * scale
    if additive is not None:
        scores = scores + additive
    if causal:
        t, s = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(t, s, dtype=torch.bool).tril(s - t).logical_not(), float("-inf"))
    return scores, torch.softmax(scores, -1).nan_to_num(0.0)


CASES = {
    "causal": {"causal": True},
    "causal, fewer queries than keys": {"causal": True, "t": 7},
    "bidirectional": {},
    "a mask and a bias": {"mask": True, "bias": True},
    "cross (t != s)": {"t": 9, "s": 31},
    "causal with a bias": {"causal": True, "bias": True},
}


def _call(case: dict, seed=0) -> tuple[AttentionCall, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A recorded call of ``case`` and, formed by hand, its scores, weights and output (h, t, s)."""
    t, s = case.get("t", 23), case.get("s", 23 if "t" not in case or case.get("causal") else 31)
    if case.get("causal"):
        s = 23
    q, k, v = _qkv(t=t, s=s, seed=seed)
    scale = 8**-0.5
    g = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(1, 1, t, s, generator=g) > 0.3 if case.get("mask") else None
    if mask is not None:
        mask[..., 0, :] = False  # a query that sees no key: all-zero weights, never NaN
    bias = torch.randn(1, 4, t, s, generator=g) if case.get("bias") else None
    additive = None
    if mask is not None or bias is not None:
        floor = torch.zeros(1, 1, t, s).masked_fill(~mask, float("-inf")) if mask is not None else 0
        additive = (bias if bias is not None else 0) + floor
    kk, vv = groups(k, 4), groups(v, 4)
    out, lse = fused_with_lse(q, kk, vv, scale=scale, causal=bool(case.get("causal")), additive=additive)
    scores, weights = _eager(q, kk, scale, bool(case.get("causal")), additive)
    rec = Recorder()
    call = rec.add(
        "decoder",
        q=q[0],
        k=k[0],
        scale=scale,
        lse=lse[0],
        causal=bool(case.get("causal")),
        mask=None if mask is None else mask[0],
        bias=None if bias is None else bias[0],
    )
    return call, scores[0], weights[0], out


@pytest.mark.parametrize("case", list(CASES))
def test_the_fused_kernel_gives_sdpas_output_and_the_eager_log_sum_exp(case):
    call, scores, weights, out = _call(CASES[case])
    q, k = call.q[None], groups(call.k[None], 4)
    v = _qkv(t=q.shape[2], s=k.shape[2])[2]
    expected = weights @ groups(v, 4)[0]
    np.testing.assert_allclose(out[0].numpy(), expected.numpy(), atol=1e-5)
    lse = torch.logsumexp(scores, -1)
    finite = torch.isfinite(lse)
    np.testing.assert_allclose(call.lse[finite].numpy(), lse[finite].numpy(), atol=ATOL)
    assert torch.isneginf(call.lse[~finite]).all() or not (~finite).any()


@pytest.mark.parametrize("case", list(CASES))
def test_the_fused_kernel_without_a_record_gives_the_eager_output_and_gradients(case):
    """What a model runs when nothing records (ablation, importance): the same output as the
    textbook path, and the same gradients through q, k and v (float64, 1e-10)."""
    call, *_ = _call(CASES[case])
    t, s = call.q.shape[1], call.k.shape[1]
    q, k, v = (x.double().requires_grad_() for x in _qkv(t=t, s=s))
    additive = None if call.bias is None and call.mask is None else record.additive_term(call.mask, call.bias)
    additive = None if additive is None else additive[None].double()
    causal = bool(CASES[case].get("causal"))
    kw = {"scale": 8**-0.5, "causal": causal, "additive": additive}
    out = fused(q, groups(k, 4), groups(v, 4), **kw)
    expected, _ = explicit(q, groups(k, 4), groups(v, 4), **kw)
    rows = torch.isfinite(out).all(-1)  # a query that sees no key: the kernels may give NaN there
    np.testing.assert_allclose(out[rows].detach().numpy(), expected[rows].detach().numpy(), atol=1e-10)
    grads = torch.autograd.grad(out[rows].sum(), (q, k, v))
    expected_grads = torch.autograd.grad(expected[rows].sum(), (q, k, v))
    for got, want in zip(grads, expected_grads):  # the textbook's gradient is NaN at a query that sees no key
        finite = torch.isfinite(want)
        np.testing.assert_allclose(got[finite].numpy(), want[finite].numpy(), atol=1e-10)


def test_the_kernel_without_its_log_sum_exp_takes_one_blockwise_pass(monkeypatch):
    """Where no kernel returns the log-sum-exp, one pass over the scores gives the same."""
    q, k, v = _qkv(h=2, h_kv=2, t=40, s=40)
    expected_out, expected_lse = fused_with_lse(q, k, v, scale=0.3, causal=True)
    lse = record._lse_blockwise(q, k, 0.3, True, None)
    np.testing.assert_allclose(lse.numpy(), expected_lse.numpy(), atol=ATOL)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    np.testing.assert_allclose(out.numpy(), expected_out.numpy(), atol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_blocks_and_whole_maps_equal_the_formed_weights(case):
    call, _, weights, _ = _call(CASES[case])
    h, t, s = weights.shape
    for head in range(h):
        view = MapView(call, head)
        np.testing.assert_allclose(view.dense(), weights[head].numpy(), atol=ATOL)
        np.testing.assert_allclose(
            view.block((t // 3, t - 1), (1, s // 2)), weights[head, t // 3 : t - 1, 1 : s // 2].numpy(), atol=ATOL
        )
        np.testing.assert_allclose(view.block(t - 1)[0], weights[head, t - 1].numpy(), atol=ATOL)
    np.testing.assert_allclose(MapView(call, "mean").dense(), weights.mean(0).numpy(), atol=ATOL)
    visible = weights.sum(-1) > 0
    np.testing.assert_allclose(weights.sum(-1)[visible].numpy(), 1.0, atol=1e-5)  # rows sum to 1


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("size", [(5, 7), (23, 40), 4, (2, 3)])  # (2, 3): a pixel row taller than a block
def test_an_overview_is_the_max_or_mean_of_the_cells_each_pixel_covers(case, size):
    call, _, weights, _ = _call(CASES[case])
    dense = weights[1].numpy()
    t, s = dense.shape
    ph, pw = (size, size) if isinstance(size, int) else size
    ph, pw = min(ph, t), min(pw, s)
    rows, cols = (np.arange(ph + 1) * t) // ph, (np.arange(pw + 1) * s) // pw
    view = MapView(call, 1)
    for reduce, fn in (("max", np.max), ("mean", np.mean)):
        expected = np.array(
            [[fn(dense[rows[i] : rows[i + 1], cols[j] : cols[j + 1]]) for j in range(pw)] for i in range(ph)]
        )
        np.testing.assert_allclose(view.overview(size, reduce), expected, atol=ATOL)


@pytest.mark.parametrize("case", list(CASES))
def test_top_keys_are_torchs_topk_of_the_formed_rows(case):
    call, _, weights, _ = _call(CASES[case])
    idx, val = MapView(call, 2).top_keys(5)
    top = torch.topk(weights[2], 5, dim=-1)
    np.testing.assert_allclose(val, top.values.numpy(), atol=ATOL)
    # the same keys, where weights are not tied
    picked = np.take_along_axis(weights[2].numpy(), idx, axis=1)
    np.testing.assert_allclose(picked, top.values.numpy(), atol=ATOL)


@pytest.mark.parametrize("case", list(CASES))
def test_streamed_statistics_equal_those_of_the_formed_map(case):
    call, _, weights, _ = _call(CASES[case])
    w = weights[3].double().numpy()
    t, s = w.shape
    stats = MapView(call, 3).row_stats(sink=2, band=3)
    seen = w.sum(-1) > 0
    np.testing.assert_allclose(stats["entropy"][seen], entropy(w[seen], axis=1), atol=1e-5)
    np.testing.assert_allclose(stats["sink"], w[:, :2].sum(-1), atol=ATOL)
    dist = np.abs(np.arange(t)[:, None] + (s - t) - np.arange(s)[None, :])
    np.testing.assert_allclose(stats["local"], (w * (dist <= 3)).sum(-1), atol=ATOL)
    np.testing.assert_allclose(stats["distance"], (w * dist).sum(-1), atol=1e-5)


def test_a_float16_record_stays_within_its_stated_error():
    """q and k kept in float16 (a long input's record): every weight within 2e-3 of float32's."""
    call, _, weights, _ = _call(CASES["causal"])
    half = AttentionCall("decoder", 0, q=call.q.half(), k=call.k.half(), scale=call.scale, lse=call.lse, causal=True)
    for head in range(4):
        np.testing.assert_allclose(MapView(half, head).dense(), weights[head].numpy(), atol=2e-3)


LSE_RULES = {
    "causal": {"causal": True},
    "a key mask": {"key_mask": True},
    "cross (t != s)": {"t": 9},
    "causal, fewer queries than keys": {"causal": True, "t": 7},
    "a mask and a bias": {"mask": True, "bias": True},
}


@pytest.mark.parametrize("rules", list(LSE_RULES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_log_sum_exp_of_a_calls_own_q_and_k_is_torchs(rules, dtype):
    """``lse_of`` (a fused kernel where the only rule is causal over a square map or a key mask,
    else rows of scores) against ``torch.logsumexp`` of the eager scores of the very q and k the
    call keeps (float16 ones rounded): 4e-6 absolute, for scores of magnitude up to ~60."""
    case = LSE_RULES[rules]
    t, s = case.get("t", 31), 31
    q, k, _ = _qkv(t=t, s=s, seed=3)
    q, k = (q * 4).to(dtype), (k * 4).to(dtype)
    g = torch.Generator().manual_seed(4)
    key_mask = torch.rand(s, generator=g) > 0.4 if case.get("key_mask") else None
    mask = torch.rand(1, t, s, generator=g) > 0.3 if case.get("mask") else None
    bias = torch.randn(4, t, s, generator=g) if case.get("bias") else None
    call = AttentionCall(
        "decoder",
        0,
        q=q[0],
        k=k[0],
        scale=8**-0.5,
        causal=bool(case.get("causal")),
        key_mask=key_mask,
        mask=mask,
        bias=bias,
    )
    additive = record.additive_term(None if key_mask is None else key_mask.expand(t, s), None)
    if mask is not None:
        additive = record.additive_term(mask, bias)
    scores, _ = _eager(q.float(), groups(k.float(), 4), 8**-0.5, call.causal, additive)
    np.testing.assert_allclose(record.lse_of(call).numpy(), torch.logsumexp(scores[0], -1).numpy(), atol=4e-6)


def test_a_float16_recording_keeps_the_log_sum_exp_of_its_rounded_q_and_k():
    """Large scores (q and k of norm ~50): rounding q and k to float16 moves each score by far more
    than 1e-6, so the log-sum-exp is of the rounded ones and every row still sums to 1."""
    q, k, _ = _qkv(t=30, s=30)
    q, k = q * 6, k * 6
    kk = groups(k, 4)
    scores = q @ kk.transpose(-1, -2) * 8**-0.5
    causal = torch.ones(30, 30, dtype=torch.bool).tril()
    lse = torch.logsumexp(scores.masked_fill(~causal, float("-inf")), -1)
    with record.recording(dtype=torch.float16) as rec:
        call = rec.add("decoder", q=q[0], k=k[0], scale=8**-0.5, lse=lse[0], causal=True)
    assert call.q.dtype == torch.float16
    for head in range(4):
        np.testing.assert_allclose(MapView(call, head).dense().sum(-1), 1.0, atol=1e-5)  # float32 sums
    with (
        pytest.raises(ValueError, match="float16 or float32, not torch.bfloat16"),
        record.recording(dtype=torch.bfloat16),
    ):
        pass


def test_dense_weights_are_a_view_too():
    """A score that does not factor through q . k keeps its weights: the same views answer."""
    call, _, weights, _ = _call(CASES["cross (t != s)"])
    dense = AttentionCall("cross", 0, weights=weights)
    for head in (0, "mean"):
        np.testing.assert_allclose(
            MapView(dense, head).overview((3, 4)), MapView(call, head).overview((3, 4)), atol=ATOL
        )
        np.testing.assert_allclose(MapView(dense, head).top_keys(3)[1], MapView(call, head).top_keys(3)[1], atol=ATOL)


def test_the_explicit_path_keeps_the_weights_in_the_graph():
    q, k, v = _qkv(h=2, h_kv=2)
    q.requires_grad_(True)
    out, weights = explicit(q, k, v, scale=0.5, causal=True)
    assert weights.requires_grad
    np.testing.assert_allclose(weights.detach().numpy(), _eager(q.detach(), k, 0.5, True)[1].numpy(), atol=ATOL)
    expected = F.scaled_dot_product_attention(q.detach(), k, v, is_causal=True, scale=0.5)
    np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "ask, message",
    [
        (lambda v: v.block((0, 99)), "rows 0..98 out of range: the map has 23 rows"),
        (lambda v: v.block(None, (5, 5)), "columns 5..4 out of range"),
        (lambda v: v.block(-1), "rows -1..-1 out of range"),
        (lambda v: v.overview(0), "at least one pixel"),
        (lambda v: v.overview(8, "median"), "reduce is 'max' or 'mean'"),
        (lambda v: v.top_keys(0), "k must be at least 1"),
    ],
)
def test_a_block_out_of_range_is_one_line(ask, message):
    call, *_ = _call(CASES["causal"])
    with pytest.raises(ValueError, match=message):
        ask(MapView(call, 0))


@pytest.mark.parametrize("head", [4, -5, "all", True, 1.5])
def test_a_head_that_does_not_exist_is_one_line(head):
    call, *_ = _call(CASES["causal"])
    with pytest.raises(ValueError, match=r"out of range: 4 head\(s\) \(0..3\) or 'mean'"):
        MapView(call, head)


def test_each_kind_counts_its_own_layers():
    with record.recording() as rec:
        assert record.active() is rec
        for kind in ("encoder", "decoder", "cross", "decoder", "encoder", "cross"):
            rec.add(kind, weights=torch.ones(1, 1, 1))
    assert record.active() is None
    assert [(c.kind, c.layer) for c in rec.calls] == [
        ("encoder", 0),
        ("decoder", 0),
        ("cross", 0),
        ("decoder", 1),
        ("encoder", 1),
        ("cross", 1),
    ]
    assert {k: len(v) for k, v in rec.by_kind().items()} == {"encoder": 2, "decoder": 2, "cross": 2}


@pytest.mark.parametrize("case", list(CASES))
def test_one_pass_over_a_calls_own_q_and_k_gives_its_log_sum_exp(case):
    call, scores, _, _ = _call(CASES[case])
    expected = torch.logsumexp(scores, -1)
    found = record.lse_of(call)
    finite = torch.isfinite(expected)
    np.testing.assert_allclose(found[finite].numpy(), expected[finite].numpy(), atol=ATOL)
    assert torch.isneginf(found[~finite]).all()


def _dense_head_stats(weights: np.ndarray, offset: int, sink: int, band: int) -> dict[str, np.ndarray]:
    """The summaries from formed maps (h, t, s), in float64: the definitions, written out."""
    _, t, s = weights.shape
    i = np.arange(t)[:, None] + offset
    dist = np.abs(i - np.arange(s)[None, :]).astype(np.float64)
    w = weights.astype(np.float64)
    valid = w.sum(-1) > 0
    entropy = -np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0).sum(-1)
    keys = (w > 0).sum(-1)  # random q and k: every allowed key has a weight above 0
    parts = {
        "entropy": entropy,
        "normalised": np.where(keys > 1, entropy / np.log(np.maximum(keys, 2)), 0),
        "max_weight": w.max(-1),
        "sink": w[..., :sink].sum(-1),
        "local": (w * (dist <= band)).sum(-1),
        "distance": (w * dist).sum(-1),
    }
    return {name: np.where(valid, x, 0).sum(-1) / valid.sum(-1) for name, x in parts.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_head_stats_stream_the_dense_definitions_for_every_head_at_once(case):
    call, _, weights, _ = _call(CASES[case])
    _, t, s = call.shape
    found = head_stats(call, sink=2, band=3)
    expected = _dense_head_stats(weights.numpy(), s - t, 2, 3)
    for name, value in expected.items():
        np.testing.assert_allclose(found[name], value, atol=1e-5, err_msg=name)
    # a formed map (an RNN's) under the same rules: the same summaries
    dense = AttentionCall("cross", 0, weights=weights, causal=call.causal, key_mask=call.key_mask, mask=call.mask)
    for name, value in head_stats(dense, sink=2, band=3).items():
        np.testing.assert_allclose(value, expected[name], atol=1e-5, err_msg=name)
    # the per-query statistics of one head, averaged, agree
    rows = MapView(call, 1).row_stats(sink=2, band=3)
    seen = weights[1].sum(-1).numpy() > 0
    np.testing.assert_allclose(found["entropy"][1], rows["entropy"][seen].mean(), atol=1e-5)
    np.testing.assert_allclose(found["distance"][1], rows["distance"][seen].mean(), atol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_an_overview_of_a_region_pools_only_its_cells(case):
    call, _, weights, _ = _call(CASES[case])
    dense = weights.mean(0).numpy()
    t, s = dense.shape
    r0, r1, c0, c1 = 1, t - 2, 3, s - 1
    region = dense[r0:r1, c0:c1]
    rows, cols = (np.arange(4) * (r1 - r0)) // 3, (np.arange(6) * (c1 - c0)) // 5
    for reduce, fn in (("max", np.max), ("mean", np.mean)):
        expected = [[fn(region[rows[i] : rows[i + 1], cols[j] : cols[j + 1]]) for j in range(5)] for i in range(3)]
        found = MapView(call, "mean").overview((3, 5), reduce, rows=(r0, r1), cols=(c0, c1))
        np.testing.assert_allclose(found, expected, atol=ATOL)
    corner = MapView(call, 0).overview(50, rows=(0, 2), cols=(s - 3, s))  # one pixel per cell
    np.testing.assert_allclose(corner, weights[0, :2, s - 3 :].numpy(), atol=ATOL)


@pytest.mark.parametrize("case", list(CASES))
def test_layer_overviews_are_each_heads_overview_and_the_means(case):
    call, _, weights, _ = _call(CASES[case])
    found = layer_overviews(call, (5, 7))
    assert found.shape == (call.heads + 1, 5, 7)
    for head in range(call.heads):
        np.testing.assert_allclose(found[head], MapView(call, head).overview((5, 7)), atol=ATOL)
    np.testing.assert_allclose(found[-1], MapView(call, "mean").overview((5, 7)), atol=ATOL)
    dense = AttentionCall("cross", 0, weights=weights, causal=call.causal, mask=call.mask, key_mask=call.key_mask)
    np.testing.assert_allclose(layer_overviews(dense, (5, 7)), found, atol=ATOL)
    from attnkit.attention.record import head_stats, overviews_and_stats

    pooled, stats = overviews_and_stats(call, (5, 7))  # one pass: the same pixels and summaries
    np.testing.assert_array_equal(pooled, found)
    for name, values in head_stats(call).items():
        np.testing.assert_allclose(stats[name], values, rtol=1e-12)


@pytest.mark.parametrize("shape", [(3, 17, 23), (2, 40, 7), (1, 5, 5)])
def test_pooling_by_runs_is_the_max_of_each_pixel_s_cells(shape):
    """The sliding-max pooling of the overviews against numpy's max over each pixel's cells, with
    pixels of unequal runs (23 columns into 6 pixels: runs of 3 and 4) and runs of one cell."""
    from attnkit.attention.record.views import _max_pool

    rng = np.random.default_rng(sum(shape))
    h, r, c = shape
    w = rng.random(shape).astype(np.float32)
    for m, n in ((min(r, 4), min(c, 6)), (r, c), (1, 1)):
        row_edges, col_edges = (np.arange(m + 1) * r) // m, (np.arange(n + 1) * c) // n
        row_of, col_of = np.repeat(np.arange(m), np.diff(row_edges)), np.repeat(np.arange(n), np.diff(col_edges))
        found = _max_pool(torch.from_numpy(w), torch.from_numpy(col_of), n, torch.from_numpy(row_of), m).numpy()
        want = np.array([[[w[k, row_of == i][:, col_of == j].max() for j in range(n)] for i in range(m)]
                         for k in range(h)])  # fmt: skip
        np.testing.assert_array_equal(found, want)


@pytest.mark.parametrize("case", ["causal", "causal, fewer queries than keys", "bidirectional", "causal with a bias"])
def test_the_summaries_and_overviews_hold_across_small_blocks_and_a_cache(case, monkeypatch):
    """Blocks of two query rows (so a band, a cache's window and a pixel's run cross blocks) and a
    StreamingLLM cache of 2 sinks and 5 recent keys: the streamed summaries (the mass outside the
    cache included) equal the dense definitions, and every pixel is the max of its cells."""
    from attnkit.attention import kernels
    from attnkit.attention.kernels import sink_window_kept
    from attnkit.attention.record import overviews_and_stats

    call, _, weights, _ = _call(CASES[case])
    h, t, s = call.shape
    monkeypatch.setattr(kernels, "BLOCK", 2 * s * h)
    pooled, found = overviews_and_stats(call, (6, 5), sink=2, band=3, cache=(2, 5))
    expected = _dense_head_stats(weights.numpy(), s - t, 2, 3)
    for name, value in expected.items():
        np.testing.assert_allclose(found[name], value, atol=1e-5, err_msg=name)
    if call.causal:
        i = torch.arange(t)[:, None] + s - t
        kept = sink_window_kept(i, torch.arange(s)[None, :], 2, 5)
        over = (i[:, 0] >= 7).numpy()
        outside = (weights * ~kept).sum(-1).numpy()[:, over].mean(-1)
        np.testing.assert_allclose(found["outside"], outside, atol=1e-5)
    w = torch.cat([weights, weights.mean(0, keepdim=True)]).numpy()
    rows, cols = (np.arange(7) * t) // 6, (np.arange(6) * s) // 5
    want = [[[w[k, rows[a] : rows[a + 1], cols[b] : cols[b + 1]].max() for b in range(5)] for a in range(6)]
            for k in range(h + 1)]  # fmt: skip
    np.testing.assert_allclose(pooled, want, atol=ATOL)
