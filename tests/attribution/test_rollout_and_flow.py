"""Attention rollout against the matrix product written out, attention flow against networkx's
max-flow on the same layered graph (the reference implementation's construction), and the
invariants both keep."""

import numpy as np
import pytest

from attnkit.attribution import attention_flow, raw_attention, residual_attention, rollout


def random_maps(layers=3, heads=2, tokens=5, seed=0, sharp=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(layers, heads, tokens, tokens)) * sharp
    w = np.exp(logits)
    return w / w.sum(-1, keepdims=True)


def test_rollout_is_the_product_of_the_residual_mixed_layers():
    maps = random_maps(layers=4, tokens=6)
    a = [(0.5 * maps[layer].mean(0) + 0.5 * np.eye(6)) for layer in range(4)]
    a = [x / x.sum(1, keepdims=True) for x in a]
    np.testing.assert_allclose(rollout(maps), a[3] @ a[2] @ a[1] @ a[0], atol=1e-12)
    np.testing.assert_allclose(rollout(maps).sum(1), 1.0, atol=1e-12)


def test_rollout_of_identity_attention_is_the_identity_and_of_one_layer_its_mix():
    eye = np.broadcast_to(np.eye(4), (3, 2, 4, 4))
    np.testing.assert_allclose(rollout(eye), np.eye(4), atol=1e-12)
    one = random_maps(layers=1, tokens=4)
    np.testing.assert_allclose(rollout(one), residual_attention(one)[0])


def networkx_flow(maps):
    """Abnar & Zuidema's construction with networkx: edges from (l, i) down to (l - 1, j)."""
    import networkx as nx

    res = residual_attention(maps)
    layers, s, _ = res.shape
    g = nx.DiGraph()
    for layer in range(1, layers + 1):
        for i in range(s):
            for j in range(s):
                g.add_edge((layer, i), (layer - 1, j), capacity=float(res[layer - 1, i, j]))
    out = np.array([[nx.maximum_flow_value(g, (layers, i), (0, j)) for j in range(s)] for i in range(s)])
    return out / out.sum(1, keepdims=True)


@pytest.mark.parametrize("seed, layers, tokens", [(0, 2, 4), (1, 3, 6), (2, 4, 5)])
def test_flow_equals_networkx_max_flow(seed, layers, tokens):
    pytest.importorskip("networkx")
    maps = random_maps(layers=layers, tokens=tokens, seed=seed)
    np.testing.assert_allclose(attention_flow(maps), networkx_flow(maps), atol=1e-7)


def test_flow_with_one_layer_is_that_layers_mix_and_rows_sum_to_one():
    one = random_maps(layers=1, tokens=5, seed=3)
    # one layer: the only path from (1, i) to (0, j) is the edge itself
    np.testing.assert_allclose(attention_flow(one), residual_attention(one)[0], atol=1e-7)
    many = random_maps(layers=4, tokens=7, seed=4)
    np.testing.assert_allclose(attention_flow(many).sum(1), 1.0, atol=1e-12)


def test_raw_attention_and_bad_maps():
    maps = random_maps(layers=2, heads=3, tokens=4)
    np.testing.assert_allclose(raw_attention(maps), maps[-1].mean(0))
    np.testing.assert_allclose(raw_attention(maps, 0, 2), maps[0, 2])
    with pytest.raises(ValueError, match="layer 5 out of range"):
        raw_attention(maps, 5)
    with pytest.raises(ValueError, match="head 3 out of range"):
        raw_attention(maps, 0, 3)
    with pytest.raises(ValueError, match=r"\(layers, heads, tokens, tokens\)"):
        rollout(maps[0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        attention_flow(-maps)
