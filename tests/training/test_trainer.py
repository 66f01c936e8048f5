"""End to end on a toy task: both model families learn it; the model directory is
complete; a run killed mid-way and resumed ends with the same parameters."""

import json
import signal
import subprocess
import sys
import time

import pytest

from attnkit.config import config_from_dict, save_config
from attnkit.evaluation import bleu
from attnkit.inference.translate import translate
from attnkit.loading.model_dir import ModelDir, load_checkpoint, load_model
from attnkit.training.trainer import train
from checkpoints import assert_same_weights

pytestmark = pytest.mark.slow  # trains models, kills and resumes runs


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_both_models_learn_the_toy_task(reversal, toy_config, tmp_path, arch):
    out = tmp_path / arch
    summary = train(config_from_dict(toy_config(reversal, out, arch)), quiet=True)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert losses[-1] < 0.25 * losses[0]  # the loss falls
    model, tok, _ = load_model(out)
    dev_src = (reversal / "dev.src").read_text().splitlines()
    dev_tgt = (reversal / "dev.tgt").read_text().splitlines()
    outputs = [t.output for t in translate(model, tok, dev_src)]
    accuracy = sum(o == r for o, r in zip(outputs, dev_tgt)) / len(dev_tgt)
    assert accuracy >= 0.8, accuracy  # the task is solved
    assert summary["best"] > 80  # dev BLEU

    md = ModelDir(out)
    assert md.config_path.is_file() and (out / "spm.joint.model").is_file()
    assert md.last.is_file() and md.best.is_file() and len(md.step_checkpoints()) == min(10, summary["step"] // 100)
    valid = [r for r in records if r["kind"] == "valid"]
    assert {"dev_loss", "dev_ppl", "dev_bleu", "bleu_signature"} <= valid[-1].keys()
    assert {"loss", "lr", "tgt_tokens_per_s", "ppl"} <= records[0].keys()

    # the averaged checkpoint loads and scores
    averaged, tok, _ = load_model(out, checkpoint_name="average", average_last=3)
    score = bleu([t.output for t in translate(averaged, tok, dev_src)], dev_tgt)
    assert score.score > 50 and "tok:13a" in score.signature


def _run_cli(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "attnkit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def _train_until(cfg_path, checkpoint):
    """`attnkit train cfg_path` in a subprocess, returned once it has written ``checkpoint``."""
    proc = _run_cli("train", str(cfg_path))
    deadline = time.time() + 120
    while not checkpoint.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)
    return proc


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_killed_and_resumed_equals_uninterrupted(reversal, toy_config, tmp_path, how):
    steps = {"max_steps": 120, "eval_every": 20, "log_every": 20}
    reference = tmp_path / "reference"
    train(config_from_dict(toy_config(reversal, reference, "transformer", **steps)), quiet=True)

    out = tmp_path / "interrupted"
    cfg_path = tmp_path / "cfg.yaml"
    save_config(config_from_dict(toy_config(reversal, out, "transformer", **steps)), cfg_path)
    proc = _train_until(cfg_path, out / "checkpoints" / "step_40.pt")
    proc.send_signal(getattr(signal, how))
    _, err = proc.communicate(timeout=120)
    if how == "SIGTERM":  # saved, and says so in its exit status: 128 + 15
        assert proc.returncode == 143 and "continue with --resume" in err
    stopped_at = load_checkpoint(out / "checkpoints" / "last.pt")["progress"]["step"]
    # SIGTERM saves at the current step; SIGKILL may even land between step_40.pt and last.pt
    assert 20 <= stopped_at < 120

    (out / "checkpoints" / ".step_999.k1ll.tmp.pt").write_bytes(b"left by a writer killed mid-write")
    done = _run_cli("train", str(cfg_path), "--resume")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert "resumed from" in err
    assert not list(out.glob(".*.tmp*")) and not list((out / "checkpoints").glob(".*.tmp*"))
    entries = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train_steps = [e["step"] for e in entries if e["kind"] == "train"]
    assert train_steps == sorted(set(train_steps)) == list(range(20, 121, 20))  # one run, no repeats
    assert [e["kind"] for e in entries].count("end") == 1
    assert_same_weights(out, reference)


def test_a_run_with_subword_sampling_resumes_on_the_draw_it_stopped_in(reversal, toy_config, tmp_path):
    """Sampled segmentations cannot be drawn again alike in another process: the run keeps each
    epoch's draw until a checkpoint has passed it, and a resumed run reads it back."""
    out, cfg_path = tmp_path / "sampled", tmp_path / "cfg.yaml"
    steps = {"max_steps": 100, "eval_every": 20, "log_every": 20}
    save_config(
        config_from_dict(toy_config(reversal, out, "transformer", **steps), ["tokenizer.sampling=0.2"]), cfg_path
    )
    proc = _train_until(cfg_path, out / "checkpoints" / "step_40.pt")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    epoch = load_checkpoint(out / "checkpoints" / "last.pt")["progress"]["epoch"]
    kept = sorted(p.name for p in (out / "subwords").iterdir())
    assert kept[0] == f"epoch_{epoch}.npz"  # the draws before the checkpoint's epoch are pruned

    (out / "subwords" / ".epoch_9.k1ll.tmp.npz").write_bytes(b"left by a writer killed mid-write")
    done = _run_cli("train", str(cfg_path), "--resume")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert not list((out / "subwords").glob(".*.tmp*"))
    assert f"its subword draw read back from {out / 'subwords' / kept[0]}" in err
    entries = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train_steps = [e["step"] for e in entries if e["kind"] == "train"]
    assert train_steps == list(range(20, 101, 20))
    last_epoch = load_checkpoint(out / "checkpoints" / "last.pt")["progress"]["epoch"]
    assert last_epoch > epoch and not (out / "subwords" / kept[0]).exists()
    assert all(int(p.stem.split("_")[1]) >= last_epoch for p in (out / "subwords").iterdir())


def test_bf16_autocast_and_accumulation_train(reversal, toy_config, tmp_path):
    out = tmp_path / "bf16"
    cfg = toy_config(reversal, out, "transformer", max_steps=80, eval_every=80, log_every=20, bf16=True, accumulate=2)
    summary = train(config_from_dict(cfg), quiet=True)
    losses = [json.loads(line)["loss"] for line in (out / "log.jsonl").read_text().splitlines() if '"train"' in line]
    assert all(map(lambda x: x == x, losses)) and losses[-1] < 0.6 * losses[0]
    assert summary["history"][-1]["dev_loss"] < losses[0]
