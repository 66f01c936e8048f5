"""Search invariants on trained toy models: beam 1 == greedy, cached == uncached,
batched == one by one, input order kept, n-best ranked by the length penalty (fairseq's or GNMT's),
early stopping of settled sentences exact."""

import pytest
import torch

from attnkit.data import collate
from attnkit.inference.translate import translate
from attnkit.loading.model_dir import load_model
from attnkit.search import (
    PENALTIES,
    SearchOptions,
    beam_search,
    greedy_search,
    length_penalty,
)

ARCHS = ["transformer", "rnn"]


@pytest.fixture(scope="module")
def models(trained_toys):
    return {arch: load_model(path)[:2] for arch, path in trained_toys.items()}


@pytest.fixture(scope="module")
def sources(reversal):
    return (reversal / "dev.src").read_text().splitlines()[:24]


def encode(tok, sentences):
    ids = tok.encode_src(sentences)
    return collate(ids, None, list(range(len(ids))))


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_one_equals_greedy(models, sources, arch):
    model, tok = models[arch]
    b = encode(tok, sources)
    greedy = greedy_search(model, b.src, b.src_mask)
    beam = beam_search(model, b.src, b.src_mask, SearchOptions(beam=1))
    assert beam.best == greedy.best
    for g, h in zip(greedy.nbest, beam.nbest):
        assert h[0].log_prob == pytest.approx(g[0].log_prob, abs=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_cached_equals_recomputed_prefix(models, sources, arch):
    model, tok = models[arch]
    b = encode(tok, sources[:8])
    cached = beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, n_best=4))
    uncached = beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, n_best=4), use_cache=False)
    for c, u in zip(cached.nbest, uncached.nbest):
        assert [h.tokens for h in c] == [h.tokens for h in u]
        assert [h.score for h in c] == pytest.approx([h.score for h in u], abs=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_equals_one_by_one_and_order_is_kept(models, sources, arch):
    model, tok = models[arch]
    together = translate(model, tok, sources, SearchOptions(beam=5), batch_tokens=120)  # several length-sorted batches
    for s, t in zip(sources, together):
        alone = translate(model, tok, [s], SearchOptions(beam=5))[0]
        assert t.source == s and t.output == alone.output
        assert t.score == pytest.approx(alone.score, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("arch", ARCHS)
def test_worker_threads_give_the_same_translations_in_order(models, sources, arch, beam):
    """Decoding threads (each on a share of the sentences, single-threaded operations)
    change nothing in the output, keep empty lines and input order, and restore the
    intra-op thread count."""
    model, tok = models[arch]
    lines = sources[:10] + [""] + sources[10:]
    threads = torch.get_num_threads()
    one = translate(model, tok, lines, SearchOptions(beam=beam), workers=1, batch_tokens=120)
    three = translate(model, tok, lines, SearchOptions(beam=beam), workers=3, batch_tokens=120)
    assert torch.get_num_threads() == threads
    assert [t.source for t in three] == lines and three[10].output == ""
    assert [t.output for t in three] == [t.output for t in one]
    assert [t.score for t in three] == pytest.approx([t.score for t in one], abs=1e-4)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        translate(model, tok, lines, workers=0)


PUBLISHED_PENALTIES = {  # lp(|Y|) as the sources write it, |Y| counting EOS
    "fairseq": lambda y, alpha: y**alpha,  # fairseq SequenceGenerator: score / (step + 1) ** lenpen
    "gnmt": lambda y, alpha: ((5 + y) / 6) ** alpha,  # Wu et al. 2016, eq. 14
}


@pytest.mark.parametrize("penalty", sorted(PUBLISHED_PENALTIES))
def test_nbest_ranked_with_the_length_penalty(models, sources, penalty):
    model, tok = models["transformer"]
    b = encode(tok, sources[:6])
    for alpha in (0.0, 1.0, 1.7):
        result = beam_search(model, b.src, b.src_mask, SearchOptions(beam=5, n_best=5, alpha=alpha, penalty=penalty))
        for hyps in result.nbest:
            assert len(hyps) == 5
            scores = [h.score for h in hyps]
            assert scores == sorted(scores, reverse=True)
            assert len({tuple(h.tokens) for h in hyps}) == 5
            for h in hyps:  # score = log P / lp(|Y|)
                lp = PUBLISHED_PENALTIES[penalty](len(h.tokens) + h.finished, alpha)
                assert h.score == pytest.approx(h.log_prob / lp, abs=1e-5)


def test_length_penalty_defaults_and_bad_values(models, sources):
    """alpha None = the style's customary value (PENALTIES); unknown styles and negative alphas are refused."""
    model, tok = models["transformer"]
    b = encode(tok, sources[:6])
    assert PENALTIES == {"fairseq": 1.0, "gnmt": 0.6}
    for penalty, alpha in PENALTIES.items():
        default = beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, n_best=2, penalty=penalty))
        explicit = beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, n_best=2, penalty=penalty, alpha=alpha))
        assert [[(h.tokens, h.score) for h in hyps] for hyps in default.nbest] == [
            [(h.tokens, h.score) for h in hyps] for hyps in explicit.nbest
        ]
    assert (
        beam_search(model, b.src, b.src_mask, SearchOptions(beam=4)).nbest[0][0].score
        == beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, penalty="fairseq", alpha=1.0)).nbest[0][0].score
    )
    with pytest.raises(ValueError, match="unknown length penalty 'wu'; choose from fairseq, gnmt"):
        beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, penalty="wu"))
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        beam_search(model, b.src, b.src_mask, SearchOptions(beam=4, alpha=-0.5))
    assert length_penalty(torch.tensor([3, 7]), 1.0).tolist() == [3.0, 7.0]
    assert length_penalty(7, 1.0, "gnmt") == pytest.approx(2.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_settled_sentences_stop_early_with_the_same_nbest(models, sources, arch, monkeypatch):
    """Stopping a sentence once no live hypothesis can reach its n-best list is exact:
    the same hypotheses and scores as running until beam-many have finished."""
    import attnkit.search.beam as beam_module

    model, tok = models[arch]
    b = encode(tok, sources[:12])
    settle = beam_module._settled
    fired = []

    def counting(*args):
        fired.append(settle(*args))
        return fired[-1]

    for n_best, alpha, penalty in ((1, 0.6, "gnmt"), (3, 0.0, "gnmt"), (2, 1.0, "fairseq"), (1, 1.5, "fairseq")):
        monkeypatch.setattr(beam_module, "_settled", counting)
        early = beam_search(
            model, b.src, b.src_mask, SearchOptions(beam=5, n_best=n_best, alpha=alpha, penalty=penalty)
        )
        monkeypatch.setattr(beam_module, "_settled", lambda *args: False)
        full = beam_search(model, b.src, b.src_mask, SearchOptions(beam=5, n_best=n_best, alpha=alpha, penalty=penalty))
        for e, f in zip(early.nbest, full.nbest):
            assert [h.tokens for h in e] == [h.tokens for h in f]
            assert [h.score for h in e] == pytest.approx([h.score for h in f], abs=1e-5)
    assert any(fired)  # the rule did stop sentences early


@pytest.mark.parametrize("arch", ARCHS)
def test_attention_per_output_token(models, sources, arch):
    model, tok = models[arch]
    for beam in (1, 3):
        t = translate(model, tok, sources[:3], SearchOptions(beam=beam), need_weights=True)
        for tr in t:
            layers, heads, rows, cols = tr.alignment.shape
            assert (rows, cols) == (len(tr.out_pieces), len(tr.src_pieces))
            assert torch.allclose(torch.from_numpy(tr.alignment).sum(-1), torch.ones(layers, heads, rows), atol=1e-4)


def test_length_limit_and_bad_arguments(models, sources):
    model, tok = models["transformer"]
    b = encode(tok, sources[:4])
    short = beam_search(model, b.src, b.src_mask, SearchOptions(beam=3, max_len_ratio=0.0, max_len_extra=2))
    assert all(len(h[0].tokens) <= 2 for h in short.nbest)
    assert (
        greedy_search(model, b.src, b.src_mask, SearchOptions(max_len_ratio=0.0, max_len_extra=2)).nbest[0][0].finished
        is False
    )
    with pytest.raises(ValueError, match="n_best must be between 1 and the beam size 2, got 3"):
        beam_search(model, b.src, b.src_mask, SearchOptions(beam=2, n_best=3))
    with pytest.raises(ValueError, match="beam size must be an integer >= 1, got 0"):
        beam_search(model, b.src, b.src_mask, SearchOptions(beam=0))
