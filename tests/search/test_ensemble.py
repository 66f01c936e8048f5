"""Ensemble decoding: several models' next-word distributions averaged at every step.

Checked against a reference written from the definition (full teacher-forced forward
passes of every model, probabilities averaged with torch.softmax, the argmax taken),
and by invariants: a model ensembled with itself decodes as the model alone; cached
equals recomputed prefixes; translate and evaluate take an ensemble end to end."""

import math

import pytest
import torch

from attnkit.data import collate
from attnkit.data.tokenizer import BOS, EOS
from attnkit.evaluation import evaluate_files
from attnkit.inference.translate import translate
from attnkit.loading.model_dir import load_model, load_translators
from attnkit.search import SearchOptions, beam_search
from attnkit.search.hypotheses import max_lengths
from attnkit.search.scoring import ensemble_best_tokens


@pytest.fixture(scope="module")
def pair(trained_toys):
    """The toy Transformer and RNN: trained on the same data with the same tokenizer settings."""
    models, tok, _ = load_translators([trained_toys["transformer"], trained_toys["rnn"]])
    return models, tok


@pytest.fixture(scope="module")
def sources(reversal):
    return (reversal / "dev.src").read_text().splitlines()[:16]


def encode(tok, sentences):
    ids = tok.encode_src(sentences)
    return collate(ids, None, list(range(len(ids))))


def test_the_toys_share_one_tokenizer(trained_toys):
    (_, a, _), (_, b, _) = load_model(trained_toys["transformer"]), load_model(trained_toys["rnn"])
    assert a.same_as(b)


def test_scores_are_the_log_of_the_mean_probability():
    torch.manual_seed(0)
    outputs = [torch.nn.Linear(6, 11), torch.nn.Linear(4, 11)]
    hidden = [torch.randn(5, 6), torch.randn(5, 4)]
    mean = (torch.softmax(outputs[0](hidden[0]), -1) + torch.softmax(outputs[1](hidden[1]), -1)) / 2
    ref_best, ref_words = mean.log().topk(3, dim=-1)
    with torch.inference_mode():  # as search runs: with buffers, the logits are computed in them
        for buffers in (None, (torch.empty(8, 11), torch.empty(8, 11))):
            best, words, lse = ensemble_best_tokens(outputs, [h for h in hidden], 3, buffers)
            assert torch.equal(words, ref_words)
            torch.testing.assert_close(best, ref_best)
            assert torch.equal(lse, torch.zeros(5, 1))


def reference_greedy(models, src, mask, limit):
    """One sentence, from the definition: at each step run every model over the whole prefix,
    average the probabilities of the next word, take the most probable."""
    prefix, log_prob = [BOS], 0.0
    while len(prefix) <= limit:
        tgt = torch.tensor([prefix])
        probs = torch.stack([torch.softmax(m(src, mask, tgt).logits[0, -1].float(), -1) for m in models]).mean(0)
        word = int(probs.argmax())
        log_prob += math.log(float(probs[word]))
        if word == EOS:
            return prefix[1:], log_prob
        prefix.append(word)
    return prefix[1:], log_prob


@torch.inference_mode()
def test_beam_one_equals_the_definition(pair, sources):
    models, tok = pair
    for sentence in sources[:6]:
        b = encode(tok, [sentence])
        limit = int(max_lengths(b.src_mask, SearchOptions().max_len_ratio, SearchOptions().max_len_extra)[0])
        want, want_lp = reference_greedy(models, b.src, b.src_mask, limit)
        hyp = beam_search(models, b.src, b.src_mask, SearchOptions(beam=1)).nbest[0][0]
        assert hyp.tokens == want
        assert hyp.log_prob == pytest.approx(want_lp, abs=1e-4)


def test_a_model_with_itself_decodes_as_the_model(pair, sources):
    (model, _), tok = pair
    b = encode(tok, sources)
    alone = beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, n_best=2))
    twice = beam_search([model, model], b.src, b.src_mask, SearchOptions(beam=4, n_best=2))
    for a, t in zip(alone.nbest, twice.nbest):
        assert [h.tokens for h in a] == [h.tokens for h in t]
        assert [h.score for h in a] == pytest.approx([h.score for h in t], abs=1e-4)


def test_cached_equals_recomputed_prefix(pair, sources):
    models, tok = pair
    b = encode(tok, sources[:8])
    cached = beam_search(models, b.src, b.src_mask, SearchOptions(beam=3, n_best=3))
    uncached = beam_search(models, b.src, b.src_mask, SearchOptions(beam=3, n_best=3), use_cache=False)
    for c, u in zip(cached.nbest, uncached.nbest):
        assert [h.tokens for h in c] == [h.tokens for h in u]
        assert [h.score for h in c] == pytest.approx([h.score for h in u], abs=1e-4)


def test_translate_takes_an_ensemble_in_batches_and_threads(pair, sources):
    models, tok = pair
    many = sources * 5  # enough sentences for two decoding threads
    together = translate(models, tok, many, SearchOptions(beam=3), batch_tokens=60, workers=2)
    for s, t in zip(many[:8], together):
        alone = translate(models, tok, [s], SearchOptions(beam=3), workers=1)[0]
        assert t.source == s and t.output == alone.output
        assert t.score == pytest.approx(alone.score, abs=1e-4)


def test_evaluate_files_scores_an_ensemble(trained_toys, reversal, tmp_path):
    report = evaluate_files(
        trained_toys["transformer"],
        reversal / "dev.src",
        reversal / "dev.tgt",
        SearchOptions(beam=2),
        ensemble=[trained_toys["rnn"]],
        output=tmp_path / "out.txt",
    )
    assert report.startswith("BLEU = ")
    assert len((tmp_path / "out.txt").read_text().splitlines()) == len((reversal / "dev.src").read_text().splitlines())


def test_an_ensemble_gives_no_attention_maps(pair, sources):
    models, tok = pair
    b = encode(tok, sources[:2])
    with pytest.raises(ValueError, match="no single attention map"):
        beam_search(models, b.src, b.src_mask, need_weights=True)


def test_different_output_vocabularies_are_refused(pair, sources):
    (model, _), tok = pair
    other = torch.nn.Linear(4, 7)

    class Wider:  # an interface-shaped stand-in with a different vocabulary size
        output_projection = other

    b = encode(tok, sources[:1])
    with pytest.raises(ValueError, match="different output vocabularies"):
        beam_search([model, Wider()], b.src, b.src_mask)
