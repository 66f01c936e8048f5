"""`attnkit train` on bad input: one line on stderr, exit status 1, nothing lost."""

import re

import pytest
import yaml

from attnkit.cli import main


def corpus(tmp_path, src: bytes, tgt: bytes):
    (tmp_path / "a.src").write_bytes(src)
    (tmp_path / "a.tgt").write_bytes(tgt)
    cfg = {
        "out_dir": str(tmp_path / "model"),
        "data": {
            "train_src": str(tmp_path / "a.src"),
            "train_tgt": str(tmp_path / "a.tgt"),
            "dev_src": str(tmp_path / "a.src"),
            "dev_tgt": str(tmp_path / "a.tgt"),
        },
        "tokenizer": {"vocab_size": 20},
        "model": {"arch": "transformer", "d_model": 16, "layers": 1, "transformer": {"ffn": 16, "heads": 2}},
        "train": {"max_steps": 2, "eval_every": 2, "batch_tokens": 200, "warmup": 1},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def one_line_error(capsys, argv, pattern):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("attnkit train: error: ")
    assert re.search(pattern, err), err


GOOD = b"a b c\nd e f\ng h i\n"


@pytest.mark.parametrize(
    "src,tgt,pattern",
    [
        (GOOD, b"a b\nc d\n", r"a.src has 3 lines, .*a.tgt has 2 \(line 3 has no partner\)"),
        (GOOD, b"x\n\xff\xfe\ny\n", r"a.tgt: line 2 is not valid UTF-8"),
        (b"\n\n", b"\n\n", r"no sentence pairs"),
    ],
)
def test_bad_corpora(tmp_path, capsys, src, tgt, pattern):
    one_line_error(capsys, ["train", str(corpus(tmp_path, src, tgt))], pattern)
    assert not (tmp_path / "model").exists()  # nothing half-made


def test_missing_file_and_config_errors(tmp_path, capsys):
    cfg = corpus(tmp_path, GOOD, GOOD)
    (tmp_path / "a.tgt").unlink()
    one_line_error(capsys, ["train", str(cfg)], r"file not found: .*a.tgt")
    one_line_error(capsys, ["train", str(tmp_path / "none.yaml")], r"config file not found")
    one_line_error(
        capsys, ["train", str(cfg), "model.layrs=2"], r"unknown config key 'model.layrs'; did you mean 'model.layers'"
    )
    one_line_error(capsys, ["train", str(cfg), "model.arch=lstm"], r"unknown model.arch 'lstm'")
    one_line_error(
        capsys, ["train", str(cfg), "model.rnn.score=dott"], r"unknown model.rnn.score 'dott'; did you mean 'dot'"
    )
    one_line_error(
        capsys, ["train", str(cfg), "train.keep_last=0"], r"train.keep_last=0 is out of range: it must be >= 1"
    )
    one_line_error(
        capsys,
        ["train", str(cfg), "model.transformer.heads=0"],
        r"model.transformer.heads=0 is out of range: it must be >= 1",
    )
    one_line_error(capsys, ["train", str(cfg), "model.arch=encoder"], r"model.arch=encoder has no decoder")
    (tmp_path / "a_file").write_text("x")
    one_line_error(
        capsys, ["train", str(cfg), f"out_dir={tmp_path / 'a_file'}"], r"is a file; a training run writes a directory"
    )
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    one_line_error(capsys, ["train", str(listed)], r"must hold a mapping of sections")


def test_existing_run_is_not_overwritten_and_resume_needs_a_run(tmp_path, capsys):
    cfg = corpus(tmp_path, GOOD * 5, GOOD * 5)
    one_line_error(capsys, ["train", str(cfg), "--resume"], r"nothing to resume in .*model")
    assert main(["train", str(cfg)]) == 0
    capsys.readouterr()
    one_line_error(capsys, ["train", str(cfg)], r"already holds a training run; continue it with --resume")
    assert main(["train", str(cfg), "--resume", "train.max_steps=4"]) == 0


def test_resume_applies_safe_changes_and_refuses_the_rest(tmp_path, capsys):
    """A changed learning rate reaches the restored optimizer, with one line saying so; a change
    that does not fit the checkpoint (model shape, tokenizer, data, batches) is refused by name."""
    import torch

    from attnkit.loading.model_dir import load_checkpoint

    cfg = corpus(tmp_path, GOOD * 5, GOOD * 5)
    assert main(["train", str(cfg)]) == 0
    capsys.readouterr()
    for override, key in (
        ("model.d_model=32", "model.d_model"),
        ("tokenizer.vocab_size=30", "tokenizer.vocab_size"),
        ("train.batch_tokens=100", "train.batch_tokens"),
        ("train.seed=7", "train.seed"),
        (f"data.train_src={tmp_path / 'a.tgt'}", "data.train_src"),
    ):
        one_line_error(
            capsys,
            ["train", str(cfg), "--resume", "train.max_steps=4", override],
            rf"cannot change {re.escape(key)} when resuming \(.* in the checkpoint, .* now\)",
        )
    before = load_checkpoint(tmp_path / "model" / "checkpoints" / "last.pt")
    assert main(["train", str(cfg), "--resume", "train.max_steps=4", "train.lr=0.001", "train.schedule=constant"]) == 0
    err = capsys.readouterr().err
    assert "resume: train.lr 0.005 -> 0.001" in err and "resume: train.schedule inverse_sqrt -> constant" in err
    after = load_checkpoint(tmp_path / "model" / "checkpoints" / "last.pt")
    assert after["progress"]["step"] == 4 and before["progress"]["step"] == 2
    assert [g["lr"] for g in after["optimizer"]["param_groups"]] == [0.001]  # constant schedule at the new lr
    assert after["config"]["train"]["lr"] == 0.001
    assert not torch.equal(after["model"]["output.weight"], before["model"]["output.weight"])
