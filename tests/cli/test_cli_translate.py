"""`attnkit translate` and `attnkit evaluate` on a trained toy model."""

import io
import re
import shutil
import sys

import pytest
import yaml

from attnkit.cli import main


@pytest.fixture
def model_dir(trained_toys):
    return str(trained_toys["transformer"])


def run(capsys, monkeypatch, argv, stdin: bytes = b""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_translate_stdin_keeps_empty_lines_and_order(capsys, monkeypatch, model_dir):
    code, out, err = run(capsys, monkeypatch, ["translate", model_dir], b"a b c\n\nd e f g\n")
    assert code == 0, err
    assert out.splitlines() == ["c b a", "", "g f e d"]


def test_translate_files_nbest_and_checkpoints(capsys, monkeypatch, model_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\nh g\n")
    dst = tmp_path / "out.txt"
    assert main(["translate", model_dir, "-i", str(src), "-o", str(dst), "--beam", "1"]) == 0
    assert dst.read_text().splitlines() == ["c b a", "g h"]
    assert main(["translate", model_dir, "-i", str(src), "-o", str(dst), "--workers", "2"]) == 0
    assert dst.read_text().splitlines() == ["c b a", "g h"]
    code, out, _ = run(capsys, monkeypatch, ["translate", model_dir, "-i", str(src), "--n-best", "3"])
    lines = out.splitlines()
    assert len(lines) == 6 and lines[0].startswith("0 ||| c b a ||| -")
    scores = [float(line.split(" ||| ")[2]) for line in lines[:3]]
    assert scores == sorted(scores, reverse=True)
    for ckpt in (["--checkpoint", "last"], ["--checkpoint", "average", "--average-last", "2"]):
        code, out, err = run(capsys, monkeypatch, ["translate", model_dir, "-i", str(src), *ckpt])
        assert code == 0 and out.splitlines() == ["c b a", "g h"], err


def test_overlong_input_is_truncated_with_a_warning(capsys, monkeypatch, model_dir):
    code, out, err = run(capsys, monkeypatch, ["translate", model_dir, "--max-src-len", "3"], b"a b\na b c d e f g h\n")
    assert code == 0 and len(out.splitlines()) == 2
    assert re.search(r"warning: line 2 is longer than 3 subwords", err) and "line 1" not in err


def one_line_error(capsys, monkeypatch, argv, pattern, stdin=b"a b\n", code=1):
    got, _out, err = run(capsys, monkeypatch, argv, stdin)
    assert got == code and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err), err


def test_length_penalty_options_reach_beam_search(capsys, monkeypatch, model_dir):
    """--length-penalty / --alpha: the n-best scores translate() gives with the same settings
    (fairseq |Y|^1 by default); a negative alpha is refused by the parser."""
    from attnkit.inference.translate import translate
    from attnkit.loading.model_dir import load_model
    from attnkit.search import SearchOptions

    model, tok, _ = load_model(model_dir)
    cases = (
        ([], dict(penalty="fairseq", alpha=1.0)),
        (["--length-penalty", "gnmt"], dict(penalty="gnmt", alpha=0.6)),
        (["--length-penalty", "gnmt", "--alpha", "0"], dict(penalty="gnmt", alpha=0.0)),
    )
    outputs = []
    for argv, settings in cases:
        code, out, err = run(capsys, monkeypatch, ["translate", model_dir, "--n-best", "3", *argv], b"a b c\nh g\n")
        assert code == 0, err
        expected = translate(model, tok, ["a b c", "h g"], SearchOptions(beam=5, n_best=3, **settings))
        lines = [f"{i} ||| {text} ||| {score:.4f}" for i, t in enumerate(expected) for text, score in t.nbest]
        assert out.splitlines() == lines
        outputs.append(out)
    assert len(set(outputs)) == 3  # the settings change the scores
    assert main(["translate", model_dir, "--alpha", "-1"]) == 2
    assert "--alpha: expected a number >= 0, got '-1'" in capsys.readouterr().err


def test_bad_input_and_bad_model_dirs(capsys, monkeypatch, model_dir, tmp_path):
    one_line_error(
        capsys, monkeypatch, ["translate", model_dir], r"<stdin>: line 2 is not valid UTF-8", b"a b\nc\xe9\n"
    )
    one_line_error(capsys, monkeypatch, ["translate", str(tmp_path / "none")], r"model directory not found")
    one_line_error(capsys, monkeypatch, ["translate", str(tmp_path)], r"is not a model directory \(no config.yaml\)")
    one_line_error(
        capsys,
        monkeypatch,
        ["translate", model_dir, "--workers", "0"],
        r"--workers: expected an integer >= 1, got '0'",
        code=2,
    )

    corrupt = tmp_path / "corrupt"
    shutil.copytree(model_dir, corrupt)
    (corrupt / "checkpoints" / "best.pt").write_bytes(b"\x00" * 100)
    one_line_error(capsys, monkeypatch, ["translate", str(corrupt)], r"best.pt is not a readable checkpoint")

    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    cfg = yaml.safe_load((other / "config.yaml").read_text())
    cfg["model"]["d_model"] = 48
    (other / "config.yaml").write_text(yaml.safe_dump(cfg))
    one_line_error(
        capsys, monkeypatch, ["translate", str(other)], r"checkpoint does not fit the model in .*config.yaml"
    )


def test_evaluate_prints_scores_signatures_and_speed(capsys, monkeypatch, model_dir, reversal, tmp_path):
    code, out, err = run(
        capsys,
        monkeypatch,
        [
            "evaluate",
            model_dir,
            "--src",
            str(reversal / "dev.src"),
            "--ref",
            str(reversal / "dev.tgt"),
            "--beam",
            "3",
            "-o",
            str(tmp_path / "hyp"),
        ],
    )
    assert code == 0, err
    # the scores are sacreBLEU's on the written output, called directly
    import sacrebleu

    hyps = (tmp_path / "hyp").read_text().splitlines()
    refs = (reversal / "dev.tgt").read_text().splitlines()
    bleu, chrf = sacrebleu.corpus_bleu(hyps, [refs]), sacrebleu.corpus_chrf(hyps, [refs])
    assert re.search(rf"^BLEU = {bleu.score:.2f}  \(nrefs:1\|case:mixed\|eff:no\|tok:13a\|", out, re.M), out
    assert re.search(rf"^chrF2 = {chrf.score:.2f}  \(nrefs:1\|", out, re.M), out
    assert re.search(r"^200 sentences in [\d.]+ s = [\d.]+ sentences/s$", out, re.M)
    assert len((tmp_path / "hyp").read_text().splitlines()) == 200
    short = tmp_path / "short"
    short.write_text("a b\n")
    one_line_error(
        capsys,
        monkeypatch,
        ["evaluate", model_dir, "--src", str(reversal / "dev.src"), "--ref", str(short)],
        r"200 source lines but 1 reference lines",
    )


def test_mbr_flag_reaches_translate(capsys, monkeypatch, model_dir):
    """--mbr: the beam's consensus output, as translate() gives it; --n-best lists the beam in MBR's order."""
    from attnkit.inference.translate import translate
    from attnkit.loading.model_dir import load_model
    from attnkit.search import SearchOptions

    model, tok, _ = load_model(model_dir)
    expected = translate(model, tok, ["a b c", "h g"], SearchOptions(beam=6, n_best=3, mbr=True))
    code, out, err = run(capsys, monkeypatch, ["translate", model_dir, "--beam", "6", "--mbr"], b"a b c\nh g\n")
    assert code == 0, err
    assert out.splitlines() == [t.output for t in expected]
    code, out, err = run(
        capsys, monkeypatch, ["translate", model_dir, "--beam", "6", "--mbr", "--n-best", "3"], b"a b c\nh g\n"
    )
    assert code == 0, err
    assert out.splitlines() == [
        f"{i} ||| {text} ||| {score:.4f}" for i, t in enumerate(expected) for text, score in t.nbest
    ]


def test_rerank_flags_reach_translate_and_evaluate(capsys, monkeypatch, model_dir, reversal, tmp_path):
    """--rerank REVERSE [--rerank-weight W]: the outputs translate() gives with that reverse model and
    weight (the toy model reverses letters, so it is its own reverse model); evaluate scores them.
    Two reverse models score as an ensemble."""
    from attnkit.cli.flags import DEFAULT_RERANK_WEIGHT
    from attnkit.inference.translate import Rerankers, Reverse, translate
    from attnkit.loading.model_dir import load_model
    from attnkit.search import SearchOptions

    model, tok, _ = load_model(model_dir)
    sources = (reversal / "dev.src").read_text().splitlines()[:20]
    stdin = ("\n".join(sources) + "\n").encode()
    cases = [([], DEFAULT_RERANK_WEIGHT), (["--rerank-weight", "3"], 3.0)]
    cases.append(([model_dir, "--rerank-weight", "3"], 3.0))  # a model ensembled with itself scores as it alone
    for flags, weight in cases:
        options = SearchOptions(beam=4, n_best=2, rerank=weight)
        expected = translate(model, tok, sources, options, rerankers=Rerankers(Reverse(model, tok)))
        command = ["translate", model_dir, "--beam", "4", "--n-best", "2", "--rerank", model_dir, *flags]
        code, out, err = run(capsys, monkeypatch, command, stdin)
        assert code == 0, err
        assert out.splitlines() == [
            f"{i} ||| {text} ||| {score:.4f}" for i, t in enumerate(expected) for text, score in t.nbest
        ]
    refs = tmp_path / "refs.txt"
    refs.write_text("\n".join(" ".join(reversed(s.split())) for s in sources) + "\n")
    srcs = tmp_path / "srcs.txt"
    srcs.write_text("\n".join(sources) + "\n")
    out_file = tmp_path / "out.txt"
    command = ["evaluate", model_dir, "--src", str(srcs), "--ref", str(refs), "--beam", "4", "--rerank", model_dir]
    code, out, err = run(capsys, monkeypatch, [*command, "-o", str(out_file)], b"")
    assert code == 0, err
    options = SearchOptions(beam=4, rerank=DEFAULT_RERANK_WEIGHT)
    expected = translate(model, tok, sources, options, rerankers=Rerankers(Reverse(model, tok)))
    assert out_file.read_text().splitlines() == [t.output for t in expected]
    assert "BLEU" in out
