import os
import random
from pathlib import Path

import pytest
import torch

# toy models that learn to reverse a letter sequence in a few seconds: (model section, lr, steps)
TOY_MODELS = {
    "transformer": (
        {"arch": "transformer", "d_model": 32, "layers": 1, "dropout": 0.0, "transformer": {"ffn": 64, "heads": 2}},
        0.01,
        400,
    ),
    "rnn": (
        {"arch": "rnn", "d_model": 32, "layers": 1, "dropout": 0.0, "tie_embeddings": False, "rnn": {"hidden": 64}},
        0.005,
        600,
    ),
}


SLOW_FIXTURES = {"trained_toys", "copier_path", "ioi_path"}  # train toy models (15-30 s each, once per session)


def pytest_collection_modifyitems(config, items):
    """Tests that need the trained toy models are slow too (`pytest -m "not slow"` skips them)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def copier_path(tmp_path_factory) -> Path:
    """A tiny Llama trained to copy a repeated segment (``induction_model``): its heads' roles are
    known (about 30 s on 2 cores, once per session)."""
    import induction_model

    return induction_model.train(tmp_path_factory.mktemp("induction"))


@pytest.fixture(scope="session")
def ioi_path(tmp_path_factory) -> Path:
    """A tiny Llama trained on an indirect-object task (``ioi_model``): the answer is known, the
    heads that find it are not told (about 30 s on 2 cores, once per session)."""
    import ioi_model

    return ioi_model.train(tmp_path_factory.mktemp("ioi"))


@pytest.fixture(scope="session")
def reversal(tmp_path_factory) -> Path:
    """Reverse a sequence of letters: 'a c b' -> 'b c a'; train.* and dev.* files."""
    d = tmp_path_factory.mktemp("reversal")
    rng = random.Random(0)
    words = [[rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))] for _ in range(3000)]
    src, tgt = [" ".join(w) for w in words], [" ".join(reversed(w)) for w in words]
    for name, lines in (
        ("train.src", src[:2800]),
        ("train.tgt", tgt[:2800]),
        ("dev.src", src[2800:]),
        ("dev.tgt", tgt[2800:]),
    ):
        (d / name).write_text("\n".join(lines) + "\n")
    return d


def _toy_config(data: Path, out: Path, arch: str, **train) -> dict:
    model, lr, steps = TOY_MODELS[arch]
    return {
        "out_dir": str(out),
        "data": {
            "train_src": str(data / "train.src"),
            "train_tgt": str(data / "train.tgt"),
            "dev_src": str(data / "dev.src"),
            "dev_tgt": str(data / "dev.tgt"),
        },
        "tokenizer": {"vocab_size": 30},
        "model": model,
        "train": {
            "max_steps": steps,
            "batch_tokens": 600,
            "lr": lr,
            "warmup": 50,
            "eval_every": 100,
            "log_every": 50,
            "label_smoothing": 0.0,
            **train,
        },
    }


@pytest.fixture(scope="session")
def toy_config():
    """toy_config(data_dir, out_dir, arch, **train_overrides) -> config dict."""
    return _toy_config


@pytest.fixture(scope="session")
def trained_toys(reversal, tmp_path_factory) -> dict[str, Path]:
    """Model directories of a trained toy Transformer and RNN (trained once per session)."""
    from attnkit.config import config_from_dict
    from attnkit.training.trainer import train

    dirs = {}
    for arch in TOY_MODELS:
        out = tmp_path_factory.mktemp(f"toy_{arch}")
        train(config_from_dict(_toy_config(reversal, out, arch)), quiet=True)
        dirs[arch] = out
    return dirs


@pytest.fixture(scope="session")
def tiny_captioner(tmp_path_factory) -> Path:
    """A ViT + Transformer captioner trained for 3 steps on digit scenes (untrained in effect:
    for shapes and plumbing, not for what it says)."""
    pytest.importorskip("sklearn")
    from attnkit.config import config_from_dict
    from attnkit.training.trainer import train

    out = tmp_path_factory.mktemp("captioner") / "model"
    cfg = {
        "out_dir": str(out),
        "data": {"task": "caption", "scenes": {"train": 60, "dev": 4}},
        "model": {
            "arch": "transformer",
            "d_model": 16,
            "layers": 1,
            "image": {"encoder": "vit"},
            "transformer": {"heads": 2, "ffn": 16},
        },
        "train": {"max_steps": 3, "eval_every": 3, "batch_tokens": 60, "warmup": 1},
    }
    summary = train(config_from_dict(cfg), quiet=True)
    assert summary["step"] == 3 and "dev_exact" in summary["history"][-1]
    return out


REQUIRE_BROWSER = os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")  # per module: Playwright's sync API cannot nest (the screenshot test starts its own)
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if REQUIRE_BROWSER:
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed")
    from attnkit.viewer.screenshot import find_browser

    exe = find_browser()
    if exe is None:
        if REQUIRE_BROWSER:
            pytest.fail("no chromium found (apt-get install chromium)")
        pytest.skip("no chromium on this machine")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()
