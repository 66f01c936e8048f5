"""`attnkit attribute`: the methods on a trained model's encoder, as a figure and as scores."""

import numpy as np
import pytest

from attnkit.attribution import attention_flow, rollout
from attnkit.cli import main
from attnkit.inspection import capture
from attnkit.loading.model_dir import load_model

pytestmark = pytest.mark.slow  # a trained toy model


def test_scores_are_each_method_on_the_captured_maps(trained_toys, tmp_path, capsys):
    model_dir = trained_toys["transformer"]
    out = tmp_path / "scores.npz"
    assert main(["attribute", str(model_dir), "a b c d", "-o", str(out)]) == 0
    with np.load(out) as z:
        scores, methods, tokens = z["scores"], list(z["methods"]), list(z["tokens"])
    model, tok, _ = load_model(model_dir)
    (record,) = capture(model, tok, ["a b c d"])
    maps = record.maps["encoder"]
    assert methods == ["attention", "rollout", "flow", "value-norm"] and tokens == record.src_tokens
    np.testing.assert_allclose(scores[0], maps[-1].mean(0), atol=1e-6)
    np.testing.assert_allclose(scores[1], rollout(maps), atol=1e-6)
    np.testing.assert_allclose(scores[2], attention_flow(maps), atol=1e-6)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


def test_a_figure_per_sentence_and_one_line_for_a_model_without_self_attention(trained_toys, tmp_path, capsys):
    fig = tmp_path / "a.png"
    assert (
        main(["attribute", str(trained_toys["transformer"]), "a b", "c d e", "--method", "rollout", "-o", str(fig)])
        == 0
    )
    for name in ("a_1.png", "a_2.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG" and (tmp_path / name).stat().st_size > 10_000
    capsys.readouterr()
    assert main(["attribute", str(trained_toys["rnn"]), "a b", "-o", str(tmp_path / "rnn.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no encoder self-attention" in err and not (tmp_path / "rnn.png").exists()
