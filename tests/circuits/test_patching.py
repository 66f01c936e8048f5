"""Activation and attribution patching against independent references: the same patch written
by hand as a forward pre-hook on GPT-2's output projection (no attnkit site involved), and
autograd's directional derivative of the metric along the clean-minus-corrupted direction."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import attnkit
from attnkit import circuits
from attnkit.circuits.patching import agreement
from tiny_hf import build


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return attnkit.load(build("gpt2", tmp_path_factory.mktemp("hf") / "gpt2"), device="cpu")


@pytest.fixture(scope="module")
def pairs(gpt2):
    return circuits.repeated_pairs(gpt2, n=3, length=6)


def _logits_patched_by_hand(model, pair, layer, head):
    """The corrupted run with one head's input to c_proj taken from the clean run: GPT-2's own
    modules and a torch hook, no attnkit site."""
    net = model.hf.model
    proj = net.transformer.h[layer].attn.c_proj
    d = net.config.n_embd // net.config.n_head
    ids = {t: torch.tensor([model.hf.encode_text(t)]) for t in (pair.clean, pair.corrupt)}
    kept = {}
    handle = proj.register_forward_pre_hook(lambda m, args: kept.update(x=args[0].detach()))
    with torch.no_grad():
        net(input_ids=ids[pair.clean])
    handle.remove()

    def patch(m, args):
        x = args[0].clone()
        x[..., head * d : (head + 1) * d] = kept["x"][..., head * d : (head + 1) * d]
        return (x,)

    handle = proj.register_forward_pre_hook(patch)
    with torch.no_grad():
        logits = net(input_ids=ids[pair.corrupt]).logits[0, -1]
    handle.remove()
    return logits


def test_activation_patching_is_the_same_patch_written_by_hand(gpt2, pairs):
    found = circuits.activation_patching(gpt2, pairs)
    heads = gpt2.hf.model.config.n_head
    assert [u.label for u in found.units] == [f"blocks.{li}.attn.h{h}" for li in range(2) for h in range(heads)]
    for i, pair in enumerate(pairs):
        a, f = gpt2.answer_token(pair.answer), gpt2.answer_token(pair.foil)
        for j, unit in enumerate(found.units):
            logits = _logits_patched_by_hand(gpt2, pair, unit.layer, unit.head)
            assert found.values[i, j] == pytest.approx(float(logits[a] - logits[f]), abs=1e-6)
    # the effect is normalised: 0 the corrupted run, 1 the clean one, over the pairs' means
    span = found.clean.mean() - found.corrupt.mean()
    np.testing.assert_allclose(found.effect, (found.values.mean(0) - found.corrupt.mean()) / span)
    low, high = found.interval().T
    assert np.all(low <= found.effect + 1e-9) and np.all(found.effect <= high + 1e-9)


def test_patching_every_stream_at_its_last_layer_restores_the_clean_run(gpt2, pairs):
    """The last layer's stream at every position patched in from the clean run is the clean run."""
    found = circuits.activation_patching(gpt2, pairs[:1], of="resid")
    assert found.grid().shape == (2, len(found.tokens["blocks"]))
    t = len(found.tokens["blocks"])
    # the repeat is the same words in both texts: patching a stream after the first copy changes nothing
    np.testing.assert_allclose(found.grid()[0, 6:], 0, atol=1e-6)
    assert found.grid()[:, :t].shape[1] == t


def _directional_derivative(model, pair, unit, clean_z):
    """d metric / d alpha at 0 of the corrupted run with z_h + alpha (clean_h - corrupted_h):
    autograd through a scalar, no gradient at the activation itself."""
    alpha = torch.zeros((), requires_grad=True)
    a, f = model.answer_token(pair.answer), model.answer_token(pair.foil)

    def hook(z, site):
        z = z.clone()
        z[:, unit.head] = z[:, unit.head] + alpha * (clean_z[:, unit.head] - z[:, unit.head].detach())
        return z

    run = model.run(pair.corrupt, hooks={unit.site: hook}, grad=True)
    metric = run.logits[0, -1, a] - run.logits[0, -1, f]
    (grad,) = torch.autograd.grad(metric, alpha)
    return float(grad), float(metric.detach())


def test_attribution_patching_is_autograds_directional_derivative(gpt2, pairs):
    found = circuits.attribution_patching(gpt2, pairs)
    exact = circuits.activation_patching(gpt2, pairs)
    for i, pair in enumerate(pairs):
        clean = gpt2.cache(pair.clean, sites=[u.site for u in found.units])
        for j, unit in enumerate(found.units):
            slope, base = _directional_derivative(gpt2, pair, unit, clean[unit.site])
            assert base == pytest.approx(found.corrupt[i], abs=1e-6)
            assert found.values[i, j] - found.corrupt[i] == pytest.approx(slope, rel=1e-4, abs=1e-6)
    assert agreement(found, exact) > 0.9  # on a random model the first order is close
    by_position = circuits.attribution_patching(gpt2, pairs[:1], of="heads_by_position")
    t = len(by_position.tokens["blocks"])
    # a head's estimate over every position is the sum of its estimates position by position
    per_position = by_position.values.reshape(1, -1, t) - by_position.corrupt[:, None, None]
    np.testing.assert_allclose(per_position.sum(-1), found.values[:1] - found.corrupt[:1, None], rtol=1e-4, atol=1e-6)


def test_a_translator_patches_its_cross_attention(tmp_path):
    m = attnkit.load("multi30k-en-de")
    pair = circuits.Pair("A dog runs in the park.", "A cat runs in the park.", "Hund", "Katze", target="Ein")
    exact = circuits.activation_patching(m, [pair])
    kinds = {u.site.split(".")[0] + "." + u.site.split(".")[2] for u in exact.units}
    assert kinds == {"encoder.attn", "decoder.attn", "decoder.cross"}
    assert exact.clean[0] > exact.corrupt[0]  # the clean source says Hund
    assert agreement(circuits.attribution_patching(m, [pair]), exact) > 0.9
    assert exact.grid("decoder.*.cross").shape == (4, 4)
    with pytest.raises(ValueError, match="covers two sites a layer: name one kind"):
        exact.grid("decoder")


def test_pairs_read_from_a_file(tmp_path, gpt2):
    path = tmp_path / "pairs.jsonl"
    rows = [{"clean": "the dog runs", "corrupt": "the cat runs", "answer": " in", "foil": " on"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert circuits.read_pairs(path) == [circuits.Pair("the dog runs", "the cat runs", " in", " on")]
    path.write_text('{"clean": "a", "corrupt": "b", "answer": "c"}\n')
    with pytest.raises(ValueError, match=r"pairs.jsonl:1: no foil"):
        circuits.read_pairs(path)
    path.write_text("{nope\n")
    with pytest.raises(ValueError, match=r"pairs.jsonl:1: not JSON"):
        circuits.read_pairs(path)


class _Words:
    """A tokenizer stand-in for which every word with its leading space is one token except ``Tom``."""

    name = "words"

    def answer_token(self, text):
        if text.count(" ") != 1 or text == " Tom":
            raise ValueError(f"{text!r} is 2 tokens")
        return hash(text)


def test_name_swapped_pairs_swap_the_answer_and_the_foil(gpt2):
    made = circuits.name_swap_pairs(_Words(), n=6)
    for p in made:
        io, s = p.answer.strip(), p.foil.strip()
        assert p.clean.count(s) == 2 and p.clean.count(io) == 1  # the giver named twice, the receiver once
        assert p.corrupt.count(io) == 2 and p.corrupt.count(s) == 1 and "Tom" not in p.clean
    with pytest.raises(ValueError, match="need two names of one token each; gpt2 has 0"):
        circuits.name_swap_pairs(gpt2)


@pytest.mark.parametrize(
    "ask, message",
    [
        (lambda m, b: circuits.activation_patching(b, []), "no pairs to patch"),
        (
            lambda m, b: circuits.activation_patching(b, [circuits.Pair("the dog", "the cat", " in", " on")]),
            "it writes no tokens, so it has no logits to patch",
        ),
        (
            lambda m, b: circuits.activation_patching(m, [circuits.Pair("the dog runs", "a dog", " in", " on")]),
            r"pair 1: the clean text is 3 tokens and the corrupted one 2 .*: patching needs them equal",
        ),
        (
            lambda m, b: circuits.activation_patching(m, [circuits.Pair("the dog", "the cat", " in the", " on")]),
            r"' in the' is 2 tokens for .*: an answer must be one token",
        ),
        (
            lambda m, b: circuits.activation_patching(
                m, [circuits.Pair("the dog", "the cat", " in", " on")], metric="kl"
            ),
            "unknown metric 'kl'; choose from logit_diff, prob, loss",
        ),
        (
            lambda m, b: circuits.activation_patching(m, [circuits.Pair("the dog", "the cat", " in", " on")], of="x"),
            "unknown patching of 'x'",
        ),
        (
            lambda m, b: circuits.activation_patching(m, [circuits.Pair("the dog", "the dog", " in", " on")]),
            "the corruption does not change the metric",
        ),
        (
            lambda m, b: circuits.patched_together(
                m, [circuits.Pair("the dog", "the man", " in", " on")], [circuits.Unit("blocks.1.attn.z", 1, 4)]
            ),
            "blocks.1.attn.z has heads 0 to 3, not 4",
        ),
        (
            lambda m, b: circuits.patched_together(
                m, [circuits.Pair("the dog", "the man", " in", " on")], [circuits.Unit("blocks.9.attn.z", 9, 0)]
            ),
            "no site 'blocks.9.attn.z' to patch",
        ),
        (
            lambda m, b: circuits.activation_patching(m, [circuits.Pair("the dog", "the cat", " in", " on", "x")]),
            "continues its text: put the whole text in clean, not in target",
        ),
    ],
)
def test_bad_input_is_one_line(gpt2, tmp_path_factory, ask, message):
    bert = attnkit.load(build("bert", tmp_path_factory.mktemp("hf") / "bert"), device="cpu")
    with pytest.raises(ValueError, match=message):
        ask(gpt2, bert)


def test_attribution_patching_stops_in_one_line_before_memory_runs_out(gpt2, pairs, monkeypatch):
    from attnkit import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 10_000)  # 8 kB for the backward pass
    with pytest.raises(ValueError, match=r"attribution patching of pair 1 keeps more than 0\.0 GB") as err:
        circuits.attribution_patching(gpt2, pairs)
    assert "\n" not in str(err.value)
    monkeypatch.undo()
    assert circuits.attribution_patching(gpt2, pairs).values.shape[1] == 8  # the graph it left is gone


@pytest.mark.parametrize("engine", ["gpt2", "translator"])
def test_layers_recomputed_change_the_memory_not_the_estimates(engine, gpt2, pairs, monkeypatch):
    """Each layer is recomputed in the backward pass rather than kept (its hooks replayed, keeping
    nothing twice): the estimates equal those of the whole graph kept, to float rounding, and what
    the graph holds is a fraction of it."""
    from attnkit.loaded import recompute

    model, asked = gpt2, pairs[:2]
    if engine == "translator":  # attnkit's own layers read their streams inside their forward
        model = attnkit.load("multi30k-en-de")
        asked = [circuits.Pair("A dog runs in the park.", "A cat runs in the park.", "Hund", "Katze", target="Ein")]
    counted: list[int] = []
    real = torch.autograd.graph.saved_tensors_hooks

    def counting(pack, unpack):
        def tally(t):
            counted[-1] += t.numel() * t.element_size()
            return pack(t)

        counted.append(0)
        return real(tally, unpack)

    monkeypatch.setattr(recompute.torch.autograd.graph, "saved_tensors_hooks", counting)
    recomputed = circuits.attribution_patching(model, asked)
    monkeypatch.setattr(recompute, "checkpoint", lambda f, *a, use_reentrant, **k: f(*a, **k))
    kept = circuits.attribution_patching(model, asked)
    np.testing.assert_allclose(recomputed.values, kept.values, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(recomputed.corrupt, kept.corrupt)
    assert counted[0] < 0.8 * counted[-1], counted


def test_a_forward_set_on_a_layer_is_put_back(gpt2, pairs):
    """A layer whose instance carries its own forward (accelerate's hooks do so) gets it back."""
    layer = gpt2.hf.model.transformer.h[1]
    mine = layer.forward  # the class's, bound: now the instance's own
    layer.forward = mine
    try:
        circuits.attribution_patching(gpt2, pairs[:1])
        assert vars(layer)["forward"] is mine
    finally:
        del layer.forward
    circuits.attribution_patching(gpt2, pairs[:1])
    assert "forward" not in vars(layer)
