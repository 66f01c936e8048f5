"""Patching and logit attribution on a model whose heads' roles are known (``induction_model``:
a tiny Llama trained to copy a repeated segment, whose atlas finds previous-token heads in layer 0
and induction heads in layer 1): on the induction task the heads that restore the answer are the
atlas's induction heads, patched together they restore more than any random set of heads of the
same size, attribution patching follows activation patching, and the induction heads write the
answer directly."""

from __future__ import annotations

import random

import numpy as np
import pytest

import attnkit
import induction_model
from attnkit import circuits
from attnkit.heads.atlas import head_atlas


@pytest.fixture(scope="module")
def copier(copier_path):
    model = attnkit.load(str(copier_path))
    rng = random.Random(7)
    records = model.attention([" ".join(induction_model.repeated(rng)) for _ in range(8)], max_new_tokens=0)
    flagged = head_atlas(records, "decoder").flagged()
    induction = {(li, h) for name, li, h, _ in flagged if name == "induction"}
    pairs = circuits.repeated_pairs(model, induction_model.words(), n=8, length=induction_model.SEGMENT)
    return model, induction, pairs


def test_the_heads_that_restore_the_answer_are_the_induction_heads(copier):
    model, induction, pairs = copier
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
    model, induction, pairs = copier
    found = circuits.direct_logit_attribution(model, pairs[0].clean, pairs[0].answer, pairs[0].foil)
    assert found.values.sum() + found.constant == pytest.approx(found.logit, abs=1e-4)
    grid = found.grid()  # (layers, heads)
    top = np.dstack(np.unravel_index(np.argsort(-grid, axis=None), grid.shape))[0][:2]
    assert {(int(li), int(h)) for li, h in top} <= induction
