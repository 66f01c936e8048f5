"""Minimum Bayes risk: the pairwise BLEU equals sacreBLEU's own sentence BLEU, the consensus
output wins, and translate's MBR picks from the beam's own outputs."""

import itertools
import random

import pytest
from sacrebleu.metrics import BLEU

from attnkit.inference.translate import translate
from attnkit.loading.model_dir import load_model
from attnkit.search import SearchOptions, mbr_order
from attnkit.search.mbr import pairwise_bleu

SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "Ein Mann fährt ein Fahrrad auf der Straße.",
    "Zwei Hunde spielen im Schnee.",
    "Ein Hund spielt im Schnee, während ein anderer zuschaut.",
    "",
    "Frauen, Männer und Kinder: alle tanzen!",
    "Ein Mann fährt Fahrrad",
    "a",
]


def test_pairwise_bleu_equals_sacrebleu_sentence_bleu():
    """Every ordered pair, including empty and one-word texts, against sacreBLEU (the reference)."""
    rng = random.Random(0)
    words = ["ein", "mann", "eine", "frau", "fährt", "spielt", "im", "schnee", "auf", "der", "straße", ",", ".", "!"]
    texts = SENTENCES + [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(12)]
    reference = BLEU(effective_order=True)
    scores = pairwise_bleu(texts)
    for i, j in itertools.permutations(range(len(texts)), 2):
        assert scores[i][j] == pytest.approx(reference.sentence_score(texts[i], [texts[j]]).score, abs=1e-9), (i, j)
    assert all(scores[i][i] == 0.0 for i in range(len(texts)))


def test_the_consensus_wins_and_ties_keep_the_given_order():
    texts = ["Ein Hund rennt.", "Ein Hund rennt im Park.", "Ein Hund rennt im Park.", "Zwei Katzen schlafen."]
    order = mbr_order(texts)
    assert order[0][0] == 1  # the first of two identical outputs, which agree most with the rest
    assert [i for i, _ in order][-1] == 3  # shares nothing with the others
    utilities = [u for _, u in order]
    assert utilities == sorted(utilities, reverse=True)
    assert mbr_order(["Nur eins."]) == [(0, 0.0)]
    assert mbr_order(["gleich", "gleich", "gleich"])[0][0] == 0
    assert mbr_order([]) == []


@pytest.fixture(scope="module")
def model(trained_toys):
    return load_model(trained_toys["transformer"])[:2]


def test_translate_with_mbr_picks_from_the_beam(model, reversal):
    net, tok = model
    sources = (reversal / "dev.src").read_text().splitlines()[:16]
    beam = translate(net, tok, sources, SearchOptions(beam=6, n_best=6))
    chosen = translate(net, tok, sources, SearchOptions(beam=6, mbr=True))
    listed = translate(net, tok, sources, SearchOptions(beam=6, n_best=6, mbr=True))
    for b, c, n in zip(beam, chosen, listed):
        texts = [text for text, _ in b.nbest]
        best = mbr_order(texts)[0][0]
        assert c.output == texts[best]
        assert c.score == pytest.approx(b.nbest[best][1])  # the chosen output keeps its model score
        assert sorted(n.nbest) == sorted(b.nbest)  # the same outputs, in MBR's order
        assert [text for text, _ in n.nbest] == [texts[i] for i, _ in mbr_order(texts)]
    alignments = translate(net, tok, sources[:4], SearchOptions(beam=6, mbr=True), need_weights=True)
    for c, a in zip(chosen, alignments):
        assert a.output == c.output and a.alignment is not None
        assert a.alignment.shape[-2] == len(a.out_pieces)  # the chosen output's own attention


def test_mbr_needs_a_beam():
    with pytest.raises(ValueError, match="needs a beam of 2 or more"):
        SearchOptions(beam=1, mbr=True)
