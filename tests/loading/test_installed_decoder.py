"""The installed decoder, ``stdlib-lm``: a Hugging Face directory that loads by name, checked
against its manifest on every load, listed by ``attnkit models``, and a language model of
Python source (its own held-out loss beats a unigram model's by far)."""

from __future__ import annotations

import shutil

import pytest
import torch

import attnkit
from attnkit.cli import main
from attnkit.loading import packaged

SOURCE = '''def read(path):
    """Return the text of the file at path."""
    with open(path, encoding="utf-8") as f:
        return f.read()
'''


def test_it_loads_by_name_and_is_listed(capsys):
    model = attnkit.load("stdlib-lm", device="cpu")
    assert model.capabilities.summary == "decoder-only model" and list(model.kinds) == ["decoder"]
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "stdlib-lm  (" in out and "held-out loss (nats/token)" in out and "standard library" in out


def test_it_predicts_python(capsys):
    model = attnkit.load("stdlib-lm", device="cpu")
    tok, net = model.hf.tokenizer, model.hf.model
    ids = torch.tensor([tok(SOURCE)["input_ids"]])
    with torch.no_grad():
        loss = float(net(input_ids=ids, labels=ids).loss)
    assert loss < 3.0  # nats per token; a unigram model of its training text is above 6


def test_a_changed_file_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "shipped"
    shutil.copytree(packaged.SHIPPED / "stdlib-lm", root / "stdlib-lm")
    monkeypatch.setattr(packaged, "SHIPPED", root)
    config = root / "stdlib-lm" / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 4', '"num_hidden_layers": 3'))
    with pytest.raises(ValueError, match="does not match the SHA-256 in manifest.json"):
        attnkit.load("stdlib-lm", device="cpu")
