"""A right-to-left model (tokenizer.right_to_left): trained on target pieces last to first, it
writes its output from the end, yet text in and text out read as usual; its scores are the
probabilities of the pieces in its own order, so teacher forcing and beam search agree. As a
reranker it adds its weighted score to the beam's, alone or beside a reverse model's."""

import io
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.config import config_from_dict
from attnkit.data import collate
from attnkit.data.tokenizer import EOS_LABEL
from attnkit.inference.score import score_pairs
from attnkit.inference.translate import Rerankers, Reverse, RightToLeft, translate
from attnkit.loading.model_dir import load_model, load_translators
from attnkit.search import SearchOptions
from attnkit.training.trainer import train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def right_to_left(reversal, toy_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("toy_r2l")
    cfg = toy_config(reversal, out, "transformer")
    cfg["tokenizer"]["right_to_left"] = True
    train(config_from_dict(cfg), quiet=True)
    return out


@pytest.fixture(scope="module")
def sources(reversal):
    return (reversal / "dev.src").read_text().splitlines()[:40]


def test_it_translates_and_its_output_reads_left_to_right(right_to_left, sources):
    net, tok, cfg = load_model(right_to_left)
    assert cfg.tokenizer.right_to_left and tok.right_to_left
    found = translate(net, tok, sources, SearchOptions(beam=4), need_weights=True)
    references = [" ".join(reversed(s.split())) for s in sources]  # the task: reverse the letters
    right = sum(t.output == ref for t, ref in zip(found, references))
    assert right >= 0.75 * len(sources), [(t.output, ref) for t, ref in zip(found, references)]
    t = next(t for t, ref in zip(found, references) if t.output == ref and ref != ref[::-1])
    # the pieces (and the attention's rows) in the order the model wrote them: the last letter first
    words = [p.removeprefix("\u2581") for p in t.out_pieces if p != EOS_LABEL]
    assert "".join(words) == "".join(t.output.split())[::-1]
    assert t.out_pieces[-1] == EOS_LABEL and t.alignment is not None and t.alignment.shape[2] == len(t.out_pieces)


def test_teacher_forcing_reads_the_target_last_piece_first(right_to_left, sources):
    net, tok, _ = load_model(right_to_left)
    targets = [" ".join(reversed(s.split())) for s in sources[:8]]
    scores = score_pairs(net, tok, sources[:8], targets)
    forward_ids = [tok.tgt.encode(t) for t in targets]
    for i, (s, ids) in enumerate(zip(sources[:8], forward_ids)):
        batch = collate(tok.encode_src([s]), [ids[::-1]], np.array([0]))  # sentencepiece's ids, reversed by hand
        with torch.no_grad():
            logits = net(batch.src, batch.src_mask, batch.tgt_in).logits
        reference = -F.cross_entropy(logits[0].double(), batch.tgt_out[0], reduction="sum").item()
        assert scores.log_prob[i] == pytest.approx(reference, rel=1e-5, abs=1e-5)
    found = translate(net, tok, sources[:8], SearchOptions(beam=4, n_best=4, alpha=0))
    outputs = [text for t in found for text, _ in t.nbest]
    repeated = [t.source for t in found for _ in t.nbest]
    beam = [score for t in found for _, score in t.nbest]
    assert score_pairs(net, tok, repeated, outputs).log_prob == pytest.approx(beam, rel=1e-4, abs=1e-4)


def test_it_is_not_ensembled_with_a_left_to_right_model(right_to_left, trained_toys):
    with pytest.raises(ValueError, match="opposite directions"):
        load_translators([trained_toys["transformer"], right_to_left])


def test_reranking_adds_the_right_to_left_models_weighted_score(right_to_left, trained_toys, sources):
    net, tok = load_model(trained_toys["transformer"])[:2]
    r2l = RightToLeft.load(right_to_left)
    reverse = Reverse(*load_model(trained_toys["rnn"])[:2])  # reversing letters is its own reverse
    beam = translate(net, tok, sources, SearchOptions(beam=5, n_best=5))
    texts = [[text for text, _ in b.nbest] for b in beam]
    other_way = [score_pairs(r2l.model, r2l.tok, [b.source] * 5, t).per_token for b, t in zip(beam, texts)]
    backward = [score_pairs(reverse.model, reverse.tok, t, [b.source] * 5).per_token for b, t in zip(beam, texts)]
    for w_rev, w_r2l in ((0.0, 1.5), (0.7, 1.5)):
        options = SearchOptions(beam=5, n_best=5, rerank=w_rev, rerank_r2l=w_r2l)
        listed = translate(net, tok, sources, options, rerankers=Rerankers(reverse if w_rev else None, r2l))
        changed = 0
        for b, t, o, back, n in zip(beam, texts, other_way, backward, listed):
            combined = [score + w_r2l * r + w_rev * k for (_, score), r, k in zip(b.nbest, o, back)]
            order = sorted(range(5), key=lambda j: -combined[j])
            assert [text for text, _ in n.nbest] == [t[j] for j in order]
            assert [s for _, s in n.nbest] == pytest.approx([combined[j] for j in order], rel=1e-5)
            changed += n.output != b.output
        assert changed > 0  # the rerankers changed some choices: the test sees them at work


def test_right_to_left_reranking_needs_its_model(trained_toys):
    net, tok = load_model(trained_toys["transformer"])[:2]
    with pytest.raises(ValueError, match="needs a right-to-left model"):
        translate(net, tok, ["a b c"], SearchOptions(beam=3, rerank_r2l=1.0))
    with pytest.raises(ValueError, match="writes left to right"):
        RightToLeft.load(trained_toys["transformer"])
    with pytest.raises(ValueError, match="right-to-left model's weight must be a number >= 0"):
        SearchOptions(beam=3, rerank_r2l=-1.0)
    with pytest.raises(ValueError, match="minimum Bayes risk or reranking"):
        SearchOptions(beam=3, rerank_r2l=1.0, mbr=True)


def test_the_flags_reach_translate_and_evaluate(capsys, monkeypatch, right_to_left, trained_toys, sources, tmp_path):
    """--rerank-r2l R2L [--r2l-weight W], alone and with --rerank: translate()'s outputs and scores."""
    from attnkit.cli import main
    from attnkit.cli.flags import DEFAULT_R2L_WEIGHT, DEFAULT_RERANK_WEIGHT

    forward, backward = str(trained_toys["transformer"]), str(trained_toys["rnn"])
    net, tok = load_model(forward)[:2]
    r2l, reverse = RightToLeft.load(right_to_left), Reverse(*load_model(backward)[:2])
    cases = [
        ([], SearchOptions(beam=4, n_best=2, rerank_r2l=DEFAULT_R2L_WEIGHT)),
        (["--r2l-weight", "3"], SearchOptions(beam=4, n_best=2, rerank_r2l=3.0)),
        (
            ["--rerank", backward, "--r2l-weight", "0.5"],
            SearchOptions(beam=4, n_best=2, rerank=DEFAULT_RERANK_WEIGHT, rerank_r2l=0.5),
        ),
    ]
    for flags, options in cases:
        expected = translate(net, tok, sources, options, rerankers=Rerankers(reverse if options.rerank else None, r2l))
        argv = ["translate", forward, "--beam", "4", "--n-best", "2", "--rerank-r2l", str(right_to_left), *flags]
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(sources) + "\n").encode())))
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out.splitlines() == [
            f"{i} ||| {text} ||| {score:.4f}" for i, t in enumerate(expected) for text, score in t.nbest
        ]
    srcs, refs, hyps = tmp_path / "srcs.txt", tmp_path / "refs.txt", tmp_path / "hyps.txt"
    srcs.write_text("\n".join(sources) + "\n")
    refs.write_text("\n".join(" ".join(reversed(s.split())) for s in sources) + "\n")
    argv = ["evaluate", forward, "--src", str(srcs), "--ref", str(refs), "--beam", "4"]
    code = main([*argv, "--rerank-r2l", str(right_to_left), "-o", str(hyps)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "BLEU" in out
    expected = translate(
        net, tok, sources, SearchOptions(beam=4, rerank_r2l=DEFAULT_R2L_WEIGHT), rerankers=Rerankers(r2l=r2l)
    )
    assert hyps.read_text().splitlines() == [t.output for t in expected]
