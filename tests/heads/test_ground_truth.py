"""The atlas and ablation on a model whose heads' roles are known (``induction_model``: a tiny
Llama trained on random words with a segment repeated, as Olsson et al. 2022 train theirs): the
atlas finds its previous-token heads in layer 0 and its induction heads in layer 1, and
removing either destroys the in-context copying (K-composition: an induction head reads what a
previous-token head wrote), while removing as many heads drawn at random does not. The atlas
finds the same heads on TransformerLens' probe (a random sequence repeated) drawn for the
model's tokenizer, and its retrieval detector finds them too: on a repeat they copy."""

from __future__ import annotations

import random

import pytest
import torch

import attnkit
import induction_model
from attnkit.attention.intervene import gating
from attnkit.heads.ablation import attention_modules, removing
from attnkit.heads.atlas import head_atlas
from attnkit.heads.detectors import DETECTORS
from attnkit.heads.probes import probe_inputs

CHANCE = 3.47  # ln 32 words


@pytest.fixture(scope="module")
def copier(copier_path):
    model = attnkit.load(str(copier_path))
    rng = random.Random(7)
    records = model.attention([" ".join(induction_model.repeated(rng)) for _ in range(8)], max_new_tokens=0)
    return model, head_atlas(records, "decoder")


def _losses_without(model, heads):
    """(first half, second half) loss with ``heads`` ((layer, head) of the decoder) zeroed."""
    prepared = model.prepare(["a b"], max_new_tokens=0)[0]
    modules = attention_modules(model, prepared)
    with gating(removing(modules, [("decoder", layer, head) for layer, head in heads])):
        return induction_model.half_losses(model.hf.model, model.hf.tokenizer)


@pytest.mark.slow
def test_the_atlas_finds_the_heads_that_copy_and_removing_them_stops_the_copying(copier):
    model, atlas = copier
    first, second = _losses_without(model, [])
    assert first > 3.0 and second < 0.5  # chance on the first half; copied on the second
    flagged = atlas.flagged()
    induction = {(li, h) for name, li, h, _ in flagged if name == "induction"}
    previous = {(li, h) for name, li, h, _ in flagged if name == "previous_token"}
    assert induction and all(li == 1 for li, _ in induction)  # reads a previous-token head below it
    assert previous and all(li == 0 for li, _ in previous)
    assert all(atlas.scores["induction"][li, h] >= DETECTORS["induction"].threshold for li, h in induction)
    assert atlas.offsets is not None and all(atlas.offsets[li, h] == -1 for li, h in previous)
    # the induction heads removed: the second half is back at chance or worse; the first half,
    # which no copying helps, loses far less (zero ablation moves every prediction a little)
    first_i, second_i = _losses_without(model, sorted(induction))
    assert second_i > 0.6 * CHANCE and second_i - second > 3 * (first_i - first)
    # the previous-token heads removed: the induction heads have nothing to read
    assert _losses_without(model, sorted(previous))[1] > 0.5 * CHANCE
    # as many heads drawn at random from the rest, 20 times: every draw hurts the copying less
    rest = [(li, h) for li in range(2) for h in range(8) if (li, h) not in induction]
    draws = random.Random(0)
    worst = max(_losses_without(model, draws.sample(rest, len(induction)))[1] for _ in range(20))
    assert worst < second_i - 1.0
    # of those the atlas flags for neither role: the copying survives
    others = [(li, h) for li, h in rest if (li, h) not in previous]
    assert _losses_without(model, others[: len(induction)])[1] < 0.5 * CHANCE


@pytest.mark.slow
def test_the_repeated_probe_for_the_models_tokenizer_finds_the_same_heads(copier):
    model, atlas = copier
    prepared = probe_inputs(model, "repeated", tokens=2 * induction_model.SEGMENT + 1, inputs=8)
    probed = head_atlas(model.attention(prepared, max_new_tokens=0), "decoder")
    found = {name: {(li, h) for n, li, h, _ in probed.flagged() if n == name} for name in ("induction", "retrieval")}
    expected = {(li, h) for n, li, h, _ in atlas.flagged() if n == "induction"}
    assert found["induction"] == expected and expected <= found["retrieval"]


@pytest.mark.slow
def test_a_model_that_reads_a_fixed_offset_grows_positional_heads(tmp_path):
    """Trained on words each a fixed function of the word PERIOD back (about 9 s): the atlas flags
    positional heads at offset -(PERIOD - 1) from the query (the word PERIOD back from the one it
    predicts) and no induction head; removing them sends the loss past chance, removing as many
    other heads does far less."""
    path = induction_model.train(tmp_path / "offset", sequence=induction_model.offset_sequence, steps=300)
    model = attnkit.load(str(path))
    rng = random.Random(7)
    texts = [" ".join(induction_model.offset_sequence(rng)) for _ in range(8)]
    atlas = head_atlas(model.attention(texts, max_new_tokens=0), "decoder", ["positional", "induction"])
    positional = sorted((li, h) for name, li, h, _ in atlas.flagged() if name == "positional")
    assert positional and not any(name == "induction" for name, *_ in atlas.flagged())
    assert atlas.offsets is not None and all(atlas.offsets[li, h] == 1 - induction_model.PERIOD for li, h in positional)
    modules = attention_modules(model, model.prepare(["a b"], max_new_tokens=0)[0])
    tok, lm = model.hf.tokenizer, model.hf.model

    def loss(heads):  # on the words that follow from the one PERIOD back
        draws = random.Random(1)
        ids = torch.tensor([tok(" ".join(induction_model.offset_sequence(draws)))["input_ids"] for _ in range(32)])
        with torch.no_grad(), gating(removing(modules, [("decoder", li, h) for li, h in heads])):
            logits = lm(ids).logits[:, :-1]
        each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        return float(each[:, induction_model.PERIOD + 1 :].mean())

    assert loss([]) < 0.2 and loss(positional) > CHANCE
    rest = [(li, h) for li in range(2) for h in range(8) if (li, h) not in positional]
    draws = random.Random(0)
    assert max(loss(draws.sample(rest, min(len(rest), len(positional)))) for _ in range(5)) < loss(positional) - 1.0
