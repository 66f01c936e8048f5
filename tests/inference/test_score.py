"""Scoring given outputs (teacher forcing) and reranking a beam with a reverse model.

score_pairs is checked against PyTorch's own cross-entropy on each pair alone (no padding, no
batching) and against the log-probabilities beam search accumulated step by step for the outputs
it found; translate's reranking against the recombination written out here."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.data import collate
from attnkit.inference.score import score_pairs
from attnkit.inference.translate import Rerankers, Reverse, translate
from attnkit.loading.model_dir import load_model
from attnkit.search import SearchOptions


@pytest.fixture(scope="module", params=["transformer", "rnn"])
def model(request, trained_toys):
    return load_model(trained_toys[request.param])[:2]


@pytest.fixture(scope="module")
def sources(reversal):
    return (reversal / "dev.src").read_text().splitlines()[:24]


def test_score_pairs_equals_pytorch_cross_entropy_on_each_pair_alone(model, sources):
    net, tok = model
    sources = list(sources)
    targets = [" ".join(reversed(s.split())) for s in sources]  # the references
    targets[3] = "a a a a a a a a a a a"  # unlike anything it learnt
    targets[5] = ""  # only </s>
    sources[7] = ""  # only </s> on the source side
    scores = score_pairs(net, tok, sources, targets, batch_tokens=40)  # many batches, with padding
    for i, (s, t) in enumerate(zip(sources, targets)):
        batch = collate(tok.encode_src([s]), tok.encode_tgt([t]), np.array([0]))
        with torch.no_grad():
            logits = net(batch.src, batch.src_mask, batch.tgt_in).logits
        reference = -F.cross_entropy(logits[0].double(), batch.tgt_out[0], reduction="sum").item()
        assert scores.log_prob[i] == pytest.approx(reference, rel=1e-5, abs=1e-5), i
        assert scores.tokens[i] == len(tok.encode_tgt([t])[0]) + 1
    assert scores.per_token == pytest.approx(scores.log_prob / scores.tokens)
    assert scores.log_prob[3] < scores.log_prob[:3].min()  # nonsense is less probable than references
    again = score_pairs(net, tok, sources[::-1], targets[::-1], batch_tokens=100_000)  # one batch, other order
    assert again.log_prob[::-1] == pytest.approx(scores.log_prob, rel=1e-5, abs=1e-5)


def test_score_pairs_equals_the_log_probability_beam_search_found(model, sources):
    net, tok = model
    found = translate(net, tok, sources, SearchOptions(beam=4, n_best=4, alpha=0))  # score = log P
    outputs = [text for t in found for text, _ in t.nbest]
    repeated = [t.source for t in found for _ in t.nbest]
    scores = score_pairs(net, tok, repeated, outputs)
    beam = [score for t in found for _, score in t.nbest]
    assert scores.log_prob == pytest.approx(beam, rel=1e-4, abs=1e-4)


def test_an_ensemble_scores_by_its_mean_probability_as_it_decodes(trained_toys, sources):
    from attnkit.loading.model_dir import load_translators

    models, tok, _ = load_translators([trained_toys["transformer"], trained_toys["rnn"]])
    found = translate(models, tok, sources, SearchOptions(beam=3, n_best=3, alpha=0))  # score = log P
    outputs = [text for t in found for text, _ in t.nbest]
    repeated = [t.source for t in found for _ in t.nbest]
    scores = score_pairs(models, tok, repeated, outputs, batch_tokens=50)
    assert scores.log_prob == pytest.approx([score for t in found for _, score in t.nbest], rel=1e-4, abs=1e-4)
    for i in (0, 5, 11):  # the definition: each model's full forward pass, probabilities averaged
        batch = collate(tok.encode_src([repeated[i]]), tok.encode_tgt([outputs[i]]), np.array([0]))
        with torch.no_grad():
            mean = sum(F.softmax(m(batch.src, batch.src_mask, batch.tgt_in).logits[0].double(), -1) for m in models) / 2
        reference = mean.log().gather(-1, batch.tgt_out[0, :, None]).sum().item()
        assert scores.log_prob[i] == pytest.approx(reference, rel=1e-5, abs=1e-5)
    alone = score_pairs([models[0]], tok, repeated, outputs)  # a one-model list is that model
    assert alone.log_prob == pytest.approx(score_pairs(models[0], tok, repeated, outputs).log_prob)


def test_score_pairs_rejects_mismatched_lists(model):
    net, tok = model
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        score_pairs(net, tok, ["a b", "c d"], ["b a"])
    empty = score_pairs(net, tok, [], [])
    assert empty.log_prob.shape == empty.tokens.shape == (0,)


def test_reranking_picks_by_the_beam_score_plus_the_reverse_models(trained_toys, sources):
    """A Transformer reverses letters; the reverse of reversing is reversing, so the toy RNN
    is its reverse model."""
    net, tok = load_model(trained_toys["transformer"])[:2]
    reverse = Reverse(*load_model(trained_toys["rnn"])[:2])
    beam = translate(net, tok, sources, SearchOptions(beam=5, n_best=5))
    weight = 2.0
    reranked = translate(net, tok, sources, SearchOptions(beam=5, rerank=weight), rerankers=Rerankers(reverse))
    listed = translate(net, tok, sources, SearchOptions(beam=5, n_best=5, rerank=weight), rerankers=Rerankers(reverse))
    changed = 0
    for b, r, n in zip(beam, reranked, listed):
        texts = [text for text, _ in b.nbest]
        backward = score_pairs(reverse.model, reverse.tok, texts, [b.source] * len(texts)).per_token
        combined = [score + weight * back for (_, score), back in zip(b.nbest, backward)]
        best = int(np.argmax(combined))
        assert r.output == texts[best]
        assert r.score == pytest.approx(combined[best], rel=1e-5)
        assert [text for text, _ in n.nbest] == [texts[j] for j in sorted(range(5), key=lambda j: -combined[j])]
        assert [s for _, s in n.nbest] == sorted((s for _, s in n.nbest), reverse=True)
        changed += r.output != b.output
    assert changed > 0  # the reverse model changed some choices: the test sees reranking at work
    aligned = translate(
        net, tok, sources[:6], SearchOptions(beam=5, rerank=weight), rerankers=Rerankers(reverse), need_weights=True
    )
    for r, a in zip(reranked, aligned):
        assert a.output == r.output and a.alignment is not None
        assert a.alignment.shape[-2] == len(a.out_pieces)  # the chosen output's own attention


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(beam=1, rerank=0.5), "needs a beam of 2 or more"),
        (dict(beam=5, rerank=0.5, mbr=True), "minimum Bayes risk or reranking"),
        (dict(beam=5, rerank=-1.0), "must be a number >= 0"),
        (dict(beam=5, rerank=math.nan), "must be a number >= 0"),
        (dict(beam=5, rerank=math.inf), "must be a number >= 0"),
    ],
)
def test_rerank_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        SearchOptions(**options)


def test_reranking_without_a_reverse_model_is_refused(trained_toys):
    net, tok = load_model(trained_toys["transformer"])[:2]
    with pytest.raises(ValueError, match="reranking needs a reverse model"):
        translate(net, tok, ["a b c"], SearchOptions(beam=3, rerank=1.0))
