"""R-Drop in the trainer (``train.rdrop``): every training batch run twice, two dropout masks."""

import json

import pytest

from attnkit.config import config_from_dict
from attnkit.training.trainer import train
from checkpoints import assert_same_weights


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_without_dropout_both_passes_agree_and_the_run_is_the_plain_one(arch, reversal, toy_config, tmp_path):
    """No dropout: the two passes are one, the KL term vanishes, and the updates are the plain run's."""
    for name, rdrop in (("plain", 0.0), ("rdrop", 5.0)):
        cfg = toy_config(reversal, tmp_path / name, arch, max_steps=15, eval_every=15, rdrop=rdrop, label_smoothing=0.1)
        train(config_from_dict(cfg), quiet=True)
    assert_same_weights(tmp_path / "rdrop", tmp_path / "plain", atol=1e-5, key_bias_atol=1e-3)


def test_with_dropout_a_run_learns_the_task(reversal, toy_config, tmp_path):
    cfg = toy_config(reversal, tmp_path / "m", "transformer", rdrop=5.0)
    cfg["model"] = {**cfg["model"], "dropout": 0.1}
    train(config_from_dict(cfg), quiet=True)
    log = [json.loads(line) for line in (tmp_path / "m" / "log.jsonl").read_text().splitlines()]
    bleu = [r["dev_bleu"] for r in log if r["kind"] == "valid"]
    assert bleu[0] < 20 and bleu[-1] > 50  # 400 updates with dropout: most of the reversals right


def test_a_captioner_without_dropout_trains_as_the_plain_run(tmp_path):
    """Images pass through the doubled batch too: no dropout, and the run is the plain one."""
    pytest.importorskip("sklearn")
    for name, rdrop in (("plain", 0.0), ("rdrop", 5.0)):
        cfg = {
            "out_dir": str(tmp_path / name),
            "data": {"task": "caption", "scenes": {"train": 60, "dev": 4}},
            "model": {
                "arch": "transformer",
                "d_model": 16,
                "layers": 1,
                "dropout": 0.0,
                "image": {"encoder": "vit"},
                "transformer": {"heads": 2, "ffn": 16},
            },
            "train": {"max_steps": 3, "eval_every": 3, "batch_tokens": 60, "warmup": 1, "rdrop": rdrop},
        }
        train(config_from_dict(cfg), quiet=True)
    assert_same_weights(tmp_path / "rdrop", tmp_path / "plain", atol=1e-5, key_bias_atol=1e-3)
