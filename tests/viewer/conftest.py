import pytest

from attnkit.inspection import capture, model_info
from attnkit.loading.model_dir import load_model


@pytest.fixture(scope="session")
def toy_records(trained_toys):
    """{arch: (records, model info)} for the toy Transformer and RNN, two sentences each."""
    out = {}
    for arch, path in trained_toys.items():
        model, tok, cfg = load_model(path)
        out[arch] = (capture(model, tok, ["a b c d e", "h g f"]), model_info(model, cfg))
    return out
