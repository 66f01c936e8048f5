"""End to end on digit scenes: a CNN + LSTM captioner learns to name one or two digits
from scans it never saw, and its attention falls on them; a killed captioning run resumes."""

import numpy as np
import pytest
import torch

from attnkit.config import config_from_dict
from attnkit.data.scenes import make_scenes
from attnkit.evaluation.captioning import score_captions
from attnkit.inference.caption import caption_images
from attnkit.loading.model_dir import ModelDir, load_checkpoint, load_model
from attnkit.training.trainer import train

pytest.importorskip("sklearn")
pytestmark = pytest.mark.slow  # trains a captioner for about half a minute


def config(out, **train_keys):
    return config_from_dict(
        {
            "out_dir": str(out),
            "data": {"task": "caption", "scenes": {"train": 4000, "dev": 100, "digits": [1, 2]}},
            "model": {
                "arch": "rnn",
                "d_model": 32,
                "layers": 1,
                "dropout": 0.0,
                "image": {"encoder": "cnn"},
                "rnn": {"hidden": 64},
            },
            "train": {
                "max_steps": 400,
                "batch_tokens": 300,
                "lr": 0.003,
                "schedule": "cosine",
                "warmup": 20,
                "eval_every": 200,
                "label_smoothing": 0.0,
                "clip_norm": 1.0,
                **train_keys,
            },
        }
    )


def test_a_captioner_learns_held_out_digits_and_attends_to_them(tmp_path):
    summary = train(config(tmp_path / "m"), quiet=True)
    assert summary["history"][-1]["dev_exact"] > 50
    model, vocab, _cfg = load_model(tmp_path / "m", task="caption")
    scenes = make_scenes(200, held_out=True, seed=77, count=(1, 2))
    scores = score_captions(caption_images(model, vocab, np.stack([s.image for s in scenes]), max_words=4), scenes)
    assert scores.exact > 50
    assert scores.correctness.score > 4 * scores.correctness.uniform  # the attention is on the digit it names


def test_a_captioning_run_resumed_ends_like_an_uninterrupted_one(tmp_path):
    train(config(tmp_path / "whole", max_steps=6, eval_every=3), quiet=True)
    train(config(tmp_path / "split", max_steps=3, eval_every=3), quiet=True)
    train(config(tmp_path / "split", max_steps=6, eval_every=3), resume=True, quiet=True)
    whole = load_checkpoint(ModelDir(tmp_path / "whole").last)["model"]
    split = load_checkpoint(ModelDir(tmp_path / "split").last)["model"]
    for k in whole:
        torch.testing.assert_close(whole[k], split[k], rtol=0, atol=0)
