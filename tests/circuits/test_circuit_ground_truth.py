"""Patching and logit attribution on a model whose heads' roles are known (``induction_model``:
a tiny Llama trained to copy a repeated segment, whose atlas finds previous-token heads in layer 0
and induction heads in layer 1): on the induction task the heads that restore the answer are the
atlas's induction heads, patched together they restore more than any random set of heads of the
same size, attribution patching follows activation patching, and the induction heads write the
answer directly, and their OV circuits copy (Elhage et al.'s score near 1). Path patching finds the previous-token head feeding the induction heads through
their keys (K-composition), not their queries, and the weights' K-composition says the same; the
score of an induction head's bright cell is made by the previous-token head's write at the key's
position meeting the query's own token. On an indirect-object task the heads that restore the
answer are heads that read the subject from the end, above every random set of as many heads."""

from __future__ import annotations

import random

import numpy as np
import pytest

import attnkit
import induction_model
import ioi_model
from attnkit import circuits
from attnkit.heads.atlas import head_atlas


@pytest.fixture(scope="module")
def copier(copier_path):
    model = attnkit.load(str(copier_path))
    rng = random.Random(7)
    records = model.attention([" ".join(induction_model.repeated(rng)) for _ in range(8)], max_new_tokens=0)
    flagged = head_atlas(records, "decoder").flagged()
    roles = {role: {(li, h) for name, li, h, _ in flagged if name == role} for role in ("induction", "previous_token")}
    pairs = circuits.repeated_pairs(model, induction_model.words(), n=8, length=induction_model.SEGMENT)
    return model, roles, pairs


def test_the_heads_that_restore_the_answer_are_the_induction_heads(copier):
    model, roles, pairs = copier
    induction = roles["induction"]
    exact = circuits.activation_patching(model, pairs)
    carriers = {(u.layer, u.head) for u, e in zip(exact.units, exact.effect) if e > 0.1}
    assert carriers and carriers <= induction  # every head that restores a tenth of the answer copies
    low = exact.interval()[:, 0]
    assert all(low[i] > 0 for i, u in enumerate(exact.units) if (u.layer, u.head) in carriers)
    approximate = circuits.attribution_patching(model, pairs)
    assert circuits.agreement(approximate, exact) > 0.95
    # the induction heads together, against every random set of as many other heads
    heads = [u for u in exact.units if (u.layer, u.head) in induction]
    together = circuits.patched_together(model, pairs, heads)
    rng = random.Random(0)
    others = [u for u in exact.units if (u.layer, u.head) not in induction]
    random_sets = [circuits.patched_together(model, pairs, rng.sample(others, len(heads))) for _ in range(10)]
    assert together > 0.5 and together > max(random_sets)


def test_the_induction_heads_write_the_answer(copier):
    model, roles, pairs = copier
    induction = roles["induction"]
    found = circuits.direct_logit_attribution(model, pairs[0].clean, pairs[0].answer, pairs[0].foil)
    assert found.values.sum() + found.constant == pytest.approx(found.logit, abs=1e-4)
    grid = found.grid()  # (layers, heads)
    top = np.dstack(np.unravel_index(np.argsort(-grid, axis=None), grid.shape))[0][:2]
    assert {(int(li), int(h)) for li, h in top} <= induction


def test_the_induction_heads_ov_circuits_copy(copier):
    model, roles, _ = copier
    found = circuits.ov_circuits(model, " ".join(induction_model.repeated(random.Random(3))))
    induction = [i for i, (li, h) in enumerate(zip(found.layers, found.heads)) if (li, h) in roles["induction"]]
    others = [i for i in range(len(found.names)) if i not in induction]
    assert induction and (found.copying[induction] > 0.9).all()  # they raise the token they read
    assert found.copying[induction].mean() > found.copying[others].mean() + 0.3


def test_the_previous_token_head_feeds_the_induction_heads_through_their_keys(copier):
    model, roles, pairs = copier
    found = circuits.path_patching(model, pairs[:4])
    effect = np.abs(found.effect)  # (senders, receivers, q k v)
    q, k = found.via.index("q"), found.via.index("k")
    into = [j for j, b in enumerate(found.receivers) if (b.layer, b.head) in roles["induction"]]
    prev = [i for i, a in enumerate(found.senders) if (a.layer, a.head) in roles["previous_token"]]
    assert prev and into
    top = found.table()[:3]
    assert all(r["via"] == "k" for r in top)  # the strongest paths are into keys
    assert {r["sender"] for r in top} <= {f"blocks.{li}.attn.h{h}" for li, h in roles["previous_token"]}
    assert {r["receiver"] for r in top} <= {f"blocks.{li}.attn.h{h}" for li, h in roles["induction"]}
    through_keys = effect[np.ix_(prev, into)][..., k].sum()
    assert through_keys > 5 * effect[np.ix_(prev, into)][..., q].sum()
    composition = found.composition[np.ix_(prev, into)]
    assert (composition[..., k] > composition[..., q]).all()  # the weights say so too


def test_an_induction_heads_bright_cell_is_the_previous_token_head_at_the_key(copier):
    model, roles, _ = copier
    words = induction_model.repeated(random.Random(3))
    text = " ".join(words)
    tokens = model.run(text).tokens
    query = len(tokens) - 3  # in the second copy
    key = next(j for j in range(1, query) if tokens[j - 1] == tokens[query])  # after the first copy's same word
    for li, h in sorted(roles["induction"]):
        found = circuits.qk_attribution(model, text, f"blocks.{li}.attn", h, query, key)
        assert found.terms.sum() == pytest.approx(found.score, abs=1e-4)
        if found.weight < 0.3:
            continue  # a head that does not look there
        best = found.table(1)[0]
        assert best["query_writer"] == "embed"  # the query's own token
        assert best["key_writer"] in {f"blocks.{a}.attn.h{b}" for a, b in roles["previous_token"]}
        return
    pytest.fail("no induction head attends to the word after the previous copy")


@pytest.fixture(scope="module")
def ioi(ioi_path):
    model = attnkit.load(str(ioi_path))
    return model, [circuits.Pair(*p) for p in ioi_model.pairs(16)]


def test_patching_finds_the_heads_that_read_the_subject(ioi):
    """On the indirect-object task the answer turns on one fact, which name came twice, and the
    heads that carry the answer are heads at the end that read it: each attends to the subject
    more than to everything else together. Together they restore more than any random set of
    as many other heads."""
    model, pairs = ioi
    exact = circuits.activation_patching(model, pairs)
    assert exact.clean.mean() > 2  # the model answers: the indirect object over the subject
    carriers = [exact.units[i] for i in np.argsort(-exact.effect) if exact.effect[i] > 0.1]
    assert carriers
    records = model.attention([p.clean for p in pairs], max_new_tokens=0)
    for unit in carriers:
        on_subject = []
        for pair, record in zip(pairs, records):
            words = pair.clean.split()
            w = record.maps["decoder"][unit.layer, unit.head, -1]  # from the end, over <s> + the words
            on_subject.append(w[[i + 1 for i, x in enumerate(words) if x == pair.foil.strip()]].sum())
        assert np.mean(on_subject) > 0.5, unit.label  # it reads the subject
    together = circuits.patched_together(model, pairs, carriers)
    rng = random.Random(0)
    others = [u for u in exact.units if u not in carriers]
    random_sets = [circuits.patched_together(model, pairs, rng.sample(others, len(carriers))) for _ in range(20)]
    assert together > 0.5 and together > max(random_sets)
