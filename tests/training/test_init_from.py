"""``train.init_from``: a run that starts from a trained model's vocabulary and weights."""

import json

import pytest
import torch
import yaml

from attnkit.config import config_from_dict
from attnkit.inference.translate import translate
from attnkit.loading.model_dir import load_checkpoint, load_model
from attnkit.training.trainer import train
from checkpoints import assert_same_weights


def _starting_from(toy_config, reversal, out, source, arch="transformer", **train_keys):
    return toy_config(reversal, out, arch, init_from=str(source), **train_keys)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_a_run_starts_from_the_trained_weights_and_vocabulary(trained_toys, reversal, toy_config, tmp_path, arch):
    source = trained_toys[arch]
    # an lr of 1e-9 moves no weight by more than ~1e-9 in one Adam step: what is saved is what was loaded
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", source, arch, max_steps=1, eval_every=1, lr=1e-9)
    cfg["model"] = {**cfg["model"], "dropout": 0.1}  # dropout shapes no weight: it may differ
    cfg["tokenizer"] = {"vocab_size": 99, "sampling": 0.1}  # the vocabulary is the source's, the sampling this run's
    train(config_from_dict(cfg), quiet=True)
    before, tok_before, _ = load_model(source)
    after, tok_after, saved = load_model(tmp_path / "tuned", checkpoint_name="last")
    for (name, a), b in zip(before.state_dict().items(), after.state_dict().values()):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=0, msg=name)
    assert (tmp_path / "tuned" / "spm.joint.model").read_bytes() == (source / "spm.joint.model").read_bytes()
    assert saved.tokenizer.vocab_size == 30  # the config written says which vocabulary the run used
    assert saved.tokenizer.sampling == 0.1 and (tmp_path / "tuned" / "subwords").is_dir()
    assert yaml.safe_load((tmp_path / "tuned" / "config.yaml").read_text())["train"]["init_from"] == str(source)
    # and it translates as the model it started from: the toy task is already learned
    lines = (reversal / "dev.src").read_text().splitlines()[:20]
    assert translate(after, tok_after, lines) == translate(before, tok_before, lines)


def test_training_from_a_trained_model_goes_on_from_its_loss(trained_toys, reversal, toy_config, tmp_path):
    """A fresh run starts near log(vocabulary); one started from the trained toy starts where it ended."""
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", trained_toys["transformer"], max_steps=50)
    cfg["train"]["log_every"] = 10
    train(config_from_dict(cfg), quiet=True)
    first = json.loads((tmp_path / "tuned" / "log.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "train" and first["loss"] < 0.5


def test_a_model_of_another_shape_is_refused_before_anything_is_written(trained_toys, reversal, toy_config, tmp_path):
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", trained_toys["transformer"])
    cfg["model"] = {**cfg["model"], "d_model": 64, "transformer": {**cfg["model"]["transformer"], "heads": 4}}
    with pytest.raises(ValueError, match=r"has model\.d_model=32, this config 64 \(and model\.transformer\.heads\)"):
        train(config_from_dict(cfg), quiet=True)
    assert not (tmp_path / "tuned").exists()


def test_another_architecture_and_a_missing_model_are_refused(trained_toys, reversal, toy_config, tmp_path):
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", trained_toys["rnn"])
    with pytest.raises(ValueError, match=r"has model\.arch='rnn', this config 'transformer'"):
        train(config_from_dict(cfg), quiet=True)
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"train\.init_from=.*nowhere: model directory not found"):
        train(config_from_dict(cfg), quiet=True)
    assert not (tmp_path / "tuned").exists()


def test_a_stopped_run_resumes_from_its_own_checkpoint(trained_toys, reversal, toy_config, tmp_path):
    """init_from names where a run began; a resumed run goes on from its checkpoint and ends
    where an uninterrupted one does (were the source's weights loaded again, it would not)."""
    source = trained_toys["transformer"]
    straight = _starting_from(toy_config, reversal, tmp_path / "straight", source, max_steps=30, eval_every=10)
    train(config_from_dict(straight), quiet=True)
    stopped = _starting_from(toy_config, reversal, tmp_path / "stopped", source, max_steps=20, eval_every=10)
    train(config_from_dict(stopped), quiet=True)
    stopped["train"]["max_steps"] = 30
    train(config_from_dict(stopped), resume=True, quiet=True)
    assert_same_weights(tmp_path / "stopped", tmp_path / "straight")


def test_a_captioner_starts_from_a_trained_captioner(tiny_captioner, tmp_path):
    """Captioning runs take the source's word vocabulary and weights the same way; a
    translation model is not a captioner's starting point."""
    from attnkit.config import load_config

    cfg = load_config(tiny_captioner / "config.yaml").to_dict()
    cfg["out_dir"] = str(tmp_path / "tuned")
    cfg["train"].update(init_from=str(tiny_captioner), max_steps=1, eval_every=1, lr=1e-9)
    train(config_from_dict(cfg), quiet=True)
    before = load_checkpoint(tiny_captioner / "checkpoints" / "best.pt")["model"]
    after = load_checkpoint(tmp_path / "tuned" / "checkpoints" / "last.pt")["model"]
    for k in before:
        torch.testing.assert_close(after[k], before[k], atol=1e-6, rtol=0, msg=k)
    assert (tmp_path / "tuned" / "words.txt").read_text() == (tiny_captioner / "words.txt").read_text()


def test_a_translation_model_is_no_start_for_a_captioner(trained_toys, tiny_captioner, tmp_path):
    from attnkit.config import load_config

    cfg = load_config(tiny_captioner / "config.yaml").to_dict()
    cfg["out_dir"] = str(tmp_path / "tuned")
    cfg["train"]["init_from"] = str(trained_toys["transformer"])
    with pytest.raises(ValueError, match=r"is a translation model; this run is data.task=caption"):
        train(config_from_dict(cfg), quiet=True)


def test_keys_the_architecture_does_not_read_may_differ(trained_toys, reversal, toy_config, tmp_path):
    """An RNN key in a Transformer config is ignored by the model, so it is no difference of shape."""
    cfg = _starting_from(toy_config, reversal, tmp_path / "tuned", trained_toys["transformer"], max_steps=1)
    cfg["model"] = {**cfg["model"], "rnn": {"hidden": 999}}
    train(config_from_dict(cfg), quiet=True)
    assert (tmp_path / "tuned" / "checkpoints" / "last.pt").is_file()
