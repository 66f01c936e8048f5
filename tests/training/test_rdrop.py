"""R-Drop in the trainer (``train.rdrop``): every training batch run twice, two dropout masks."""

import json

import pytest
import torch

from attnkit.config import config_from_dict
from attnkit.loading.model_dir import load_checkpoint
from attnkit.training.trainer import train


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_without_dropout_both_passes_agree_and_the_run_is_the_plain_one(arch, reversal, toy_config, tmp_path):
    """No dropout: the two passes are one, the KL term vanishes, and the updates are the plain run's."""
    runs = {}
    for name, rdrop in (("plain", 0.0), ("rdrop", 5.0)):
        cfg = toy_config(reversal, tmp_path / name, arch, max_steps=15, eval_every=15, rdrop=rdrop, label_smoothing=0.1)
        train(config_from_dict(cfg), quiet=True)
        runs[name] = load_checkpoint(tmp_path / name / "checkpoints" / "last.pt")["model"]
    for k, ref in runs["plain"].items():
        ours = runs["rdrop"][k]
        if k.endswith("in_proj_bias"):  # the key bias: softmax ignores it, so its gradient is rounding
            d = ref.shape[0] // 3  # noise, which Adam scales to full steps; queries and values are compared
            ours, ref = torch.cat([ours[:d], ours[2 * d :]]), torch.cat([ref[:d], ref[2 * d :]])
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5, msg=k)


def test_with_dropout_a_run_learns_the_task(reversal, toy_config, tmp_path):
    cfg = toy_config(reversal, tmp_path / "m", "transformer", rdrop=5.0)
    cfg["model"] = {**cfg["model"], "dropout": 0.1}
    train(config_from_dict(cfg), quiet=True)
    log = [json.loads(line) for line in (tmp_path / "m" / "log.jsonl").read_text().splitlines()]
    bleu = [r["dev_bleu"] for r in log if r["kind"] == "valid"]
    assert bleu[0] < 20 and bleu[-1] > 50  # 400 updates with dropout: most of the reversals right
