import numpy as np
import pytest
import torch

from attnkit.config import config_from_dict
from attnkit.data import Tokenizer
from attnkit.data.tokenizer import PAD
from attnkit.inspection import explain, prepare
from attnkit.inspection.explain import entropy
from attnkit.loading.model_dir import load_model
from attnkit.models import build_model


def _fresh(toy_dir, **model):
    """A fresh pre-norm Transformer shaped like the toy model (``model``: keys of the model section)."""
    tok = Tokenizer.load(toy_dir)
    cfg = config_from_dict(
        {
            "model": {
                "arch": "transformer",
                "d_model": 32,
                "layers": 2,
                **model,
                "transformer": {"heads": 4, "ffn": 32, "norm_first": True},
            }
        }
    )
    net = build_model(cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint)
    return net.eval(), tok


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_walkthrough_reproduces_the_trained_model(trained_toys, kind):
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b c d e"])
    for head in range(2):
        for query in range(len(p.src_tokens) if kind == "encoder" else len(p.tgt_in_tokens)):
            w = explain(model, p, kind=kind, layer=0, head=head, query=query)
            assert w.max_error < 1e-5
            np.testing.assert_allclose(w.weights.sum(), 1.0, atol=1e-6)
            np.testing.assert_allclose(w.context, w.weights @ w.v, atol=1e-5)
            np.testing.assert_allclose(w.raw, w.k @ w.q, rtol=1e-5, atol=1e-5)
            assert w.scale == pytest.approx(1 / np.sqrt(w.q.shape[0]))
    if kind == "decoder":  # causal: the last key is masked for the first query
        w = explain(model, p, kind=kind, layer=0, head=0, query=0)
        assert w.weights[0] == pytest.approx(1.0) and np.all(w.weights[1:] == 0)


@pytest.mark.parametrize("positions", ["rope", "alibi", "t5", "relative", "learned", "fourier", "none"])
def test_walkthrough_with_every_positional_scheme(trained_toys, positions):
    model, tok = _fresh(trained_toys["transformer"], positions=positions)
    [p] = prepare(model, tok, ["a b c d e f"], targets=["f e d c"])
    for kind in ("encoder", "decoder", "cross"):
        w = explain(model, p, kind=kind, layer=-1, head=3, query=2)
        assert w.max_error < 1e-5, (positions, kind)
        assert (w.bias is not None) == (positions in ("alibi", "t5", "relative") and kind != "cross")


def test_without_scaling_the_softmax_is_sharper(trained_toys):
    """softmax(e) vs softmax(e / sqrt(d_k)): dividing by a temperature > 1 can only spread the weights."""
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b c d e f g"])
    for query in range(len(p.src_tokens)):
        w = explain(model, p, kind="encoder", layer=0, head=1, query=query)
        assert entropy(w.unscaled_weights) <= entropy(w.weights) + 1e-6
        assert w.unscaled_weights.max() >= w.weights.max() - 1e-6
    assert "saturates" in w.report() and "match the model's forward pass" in w.report()


def test_errors(trained_toys):
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b"])
    with pytest.raises(ValueError, match="layer 3 out of range"):
        explain(model, p, layer=3)
    with pytest.raises(ValueError, match="head 9 out of range"):
        explain(model, p, head=9)
    with pytest.raises(ValueError, match="query 10 out of range"):
        explain(model, p, query=10)
    rnn, rtok, _ = load_model(trained_toys["rnn"])
    [rp] = prepare(rnn, rtok, ["a b"])
    with pytest.raises(ValueError, match="head 1 out of range: the RNN's attention has one head"):
        explain(rnn, rp, kind="cross", head=1)
    with pytest.raises(ValueError, match=r"has no encoder self-attention \(it has: cross\)"):
        explain(rnn, rp, kind="encoder")


@pytest.mark.parametrize("attention", ["global", "local-m", "local-p"])
@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "concat", "additive"])
@pytest.mark.parametrize("feeding", [True, False])
def test_recurrent_walkthrough_reproduces_luong_attention(trained_toys, attention, score, feeding):
    """Every score, window and decoder wiring: the recomputed weights are the model's, the
    per-dimension terms sum to the scores (and are the query factor times each key, where the score
    is such a product), and local attention puts no weight outside its window."""
    tok = Tokenizer.load(trained_toys["rnn"])
    cfg = config_from_dict(
        {
            "model": {
                "arch": "rnn",
                "d_model": 32,
                "layers": 1,
                "rnn": {"hidden": 32, "attention": attention, "score": score, "window": 2, "input_feeding": feeding},
            }
        }
    )
    net = build_model(
        cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint
    ).eval()
    [p] = prepare(net, tok, ["a b c d e f g h"], targets=["h g f e d"])
    for query in range(len(p.tgt_in_tokens)):
        w = explain(net, p, kind="cross", query=query)
        assert w.recurrent and w.max_error < 1e-5
        np.testing.assert_allclose(w.terms.sum(-1), w.raw, atol=1e-5)
        if w.factor is not None:  # the figure's strip times each encoder state: the terms
            np.testing.assert_allclose(w.factor[None] * w.k, w.terms, atol=1e-5)
        assert (w.factor is None) == (score in ("concat", "additive"))
        np.testing.assert_allclose(w.context, w.weights @ w.v, atol=1e-5)
        assert np.all(w.weights[~w.allowed] == 0)
        if attention == "global":
            assert w.allowed.all() and w.weights.sum() == pytest.approx(1.0, abs=1e-5)
        else:
            assert w.allowed.sum() <= 2 * w.window + 1 and abs(np.flatnonzero(w.allowed) - w.p_t).max() <= w.window
        if attention == "local-p":  # the Gaussian is not renormalised: the weights sum to at most 1
            assert w.gauss is not None and w.weights.sum() <= 1.0 + 1e-6
            # the softmax before the Gaussian, over the window alone, against PyTorch's masked softmax
            masked = torch.from_numpy(np.where(w.allowed, w.raw, -np.inf))
            np.testing.assert_allclose(w.in_window, torch.softmax(masked, -1).numpy(), atol=1e-6)
            np.testing.assert_allclose(w.in_window * w.gauss, w.weights, atol=1e-6)
    assert "match the model's forward pass" in w.report() and w.score in w.report()
