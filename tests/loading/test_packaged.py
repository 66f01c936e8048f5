"""Installed models: packaged from a trained directory, 16-bit weights with ties kept, found by
name wherever a model directory is, checked against their manifest on every load."""

import pytest
import torch

from attnkit.cli import main
from attnkit.inference.translate import translate
from attnkit.loading import packaged
from attnkit.loading.model_dir import load_model
from attnkit.search import SearchOptions

pytestmark = pytest.mark.slow  # uses the trained toy models


@pytest.fixture()
def shipped(trained_toys, tmp_path, monkeypatch):
    """A tmp ``shipped`` folder holding the toy Transformer and RNN as installed models."""
    root = tmp_path / "shipped"
    monkeypatch.setattr(packaged, "SHIPPED", root)
    for arch, source in trained_toys.items():
        model, _, _ = load_model(source)
        info = {
            "architecture": f"toy {arch}",
            "parameters": sum(p.numel() for p in model.parameters()),
            "data": "letter reversal",
            "scores": [
                {"metric": "BLEU", "score": 99.5, "test_set": "dev", "signature": "nrefs:1|case:mixed|eff:no|tok:13a"}
            ],
        }
        packaged.package_directory(source, model, root / f"toy-{arch}", dtype=torch.float16, info=info, card="# toy\n")
    return root


def test_packaged_models_translate_like_their_source(shipped, trained_toys):
    for arch in ("transformer", "rnn"):
        ours, tok, _ = load_model(f"toy-{arch}")  # by name
        source, _, _ = load_model(trained_toys[arch])
        for (name, a), b in zip(ours.state_dict().items(), source.state_dict().values()):
            assert torch.allclose(a, b.half().float()), name  # exactly the 16-bit rounding
        if arch == "transformer":  # tied embeddings stay tied, stored once
            assert ours.output_projection.weight is ours.tgt_embed.embedding.weight
        lines = ["a b c", "d e f g", "h a b"]
        assert [t.output for t in translate(ours, tok, lines, SearchOptions(beam=1))] == [
            t.output for t in translate(source, tok, lines, SearchOptions(beam=1))
        ]
    size = sum(p.stat().st_size for p in (shipped / "toy-transformer").iterdir())
    assert (shipped / "toy-transformer" / "model.safetensors").stat().st_size < 0.6 * size + 60_000


def test_every_command_takes_an_installed_models_name(shipped, capsys, tmp_path):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "toy-transformer" in out and "toy rnn" in out and "BLEU 99.50 on dev" in out and "float16" in out
    assert main(["translate", "toy-transformer", "-i", str(_file(tmp_path, "a b c\n")), "--beam", "1"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["plot", "toy-rnn", "a b c", "-o", str(tmp_path / "p.png")]) == 0
    assert main(["view", "toy-transformer", "a b c", "-o", str(tmp_path / "v.html")]) == 0
    assert main(["explain", "toy-transformer", "a b c", "--kind", "cross", "--query-pos", "1"]) == 0
    capsys.readouterr()
    assert main(["translate", "toy-transformer", "--checkpoint", "average"]) == 1
    assert "installed model with one set of weights" in capsys.readouterr().err
    assert main(["translate", "toy-nothing"]) == 1
    assert "installed models: toy-rnn, toy-transformer" in capsys.readouterr().err


def test_a_changed_file_is_one_clear_error(shipped, capsys):
    weights = shipped / "toy-transformer" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert main(["translate", "toy-transformer"]) == 1
    err = capsys.readouterr().err
    assert "model.safetensors does not match the SHA-256 in manifest.json" in err and len(err.splitlines()) == 1
    (shipped / "toy-rnn" / "config.yaml").unlink()
    with pytest.raises(FileNotFoundError, match="config.yaml is missing from the packaged model toy-rnn"):
        load_model("toy-rnn")


def _file(tmp_path, text):
    path = tmp_path / "in.txt"
    path.write_text(text)
    return path
