"""`attnkit attribute`: the methods on a trained model's output tokens and on its encoder, as a
figure and as scores."""

import argparse

import numpy as np
import pytest

import attnkit
from attnkit.attribution import attention_flow, attribute_model, rollout
from attnkit.cli import main
from attnkit.inspection import capture
from attnkit.loading.model_dir import load_model


def test_the_command_takes_the_librarys_methods():
    """``--method`` offers exactly the library's methods (and "all"), in the library's order."""
    from attnkit.attribution import ALL_METHODS
    from attnkit.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    method = next(a for a in commands.choices["attribute"]._actions if "--method" in a.option_strings)
    assert list(method.choices) == [*ALL_METHODS, "all"]


def test_encoder_scores_are_each_method_on_the_captured_maps(trained_toys, tmp_path, capsys):
    model_dir = trained_toys["transformer"]
    out = tmp_path / "scores.npz"
    assert main(["attribute", str(model_dir), "a b c d", "--rows", "encoder", "-o", str(out)]) == 0
    with np.load(out) as z:
        scores, methods, tokens, side = z["scores"], list(z["methods"]), list(z["tokens"]), str(z["side"])
    model, tok, _ = load_model(model_dir)
    (record,) = capture(model, tok, ["a b c d"])
    maps = record.maps["encoder"]
    assert methods == ["attention", "rollout", "flow", "value-norm"] and tokens == record.src_tokens
    assert side == "encoder"
    np.testing.assert_allclose(scores[0], maps[-1].mean(0), atol=1e-6)
    np.testing.assert_allclose(scores[1], rollout(maps), atol=1e-6)
    np.testing.assert_allclose(scores[2], attention_flow(maps), atol=1e-6)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_output_scores_are_the_librarys_for_every_method_the_model_takes(trained_toys, tmp_path, arch):
    out = tmp_path / "scores.npz"
    assert main(["attribute", str(trained_toys[arch]), "a b c d", "-o", str(out)]) == 0
    with np.load(out) as z:
        scores, methods, rows, tokens = z["scores"], list(z["methods"]), list(z["rows"]), list(z["tokens"])
        assert str(z["side"]) == "output"
    model = attnkit.load(str(trained_toys[arch]))
    (p,) = model.prepare(["a b c d"])
    expected = ["attention", "rollout", "value-norm"] if arch == "transformer" else ["attention"]
    assert methods == expected + ["grad-attention", "integrated-gradients", "input-x-gradient"]
    assert (
        rows == p.tgt_out_tokens and tokens == p.src_tokens and scores.shape == (len(methods), len(rows), len(tokens))
    )
    found = attribute_model(model, p, methods)
    for i, m in enumerate(methods):
        np.testing.assert_allclose(scores[i], found.scores[m], atol=1e-5, err_msg=m)
    record = model.capture(p)
    np.testing.assert_allclose(scores[0].sum(-1), 1.0, atol=1e-5)
    cross = record.maps["cross"][-1].mean(0)
    np.testing.assert_allclose(scores[0], cross / cross.sum(-1, keepdims=True), atol=1e-5)
    # what a figure calls raw attention: the toy Transformer's 2 heads are averaged, the RNN has one
    heads = record.maps["cross"].shape[1]
    assert found.heads == heads == (2 if arch == "transformer" else 1)
    expected_label = "raw attention, last layer, mean of heads" if heads > 1 else "raw attention (the single attention)"
    assert found.label("attention") == expected_label


def test_a_figure_per_sentence_and_one_line_for_what_a_model_cannot_take(trained_toys, tmp_path, capsys):
    fig = tmp_path / "a.png"
    assert (
        main(["attribute", str(trained_toys["transformer"]), "a b", "c d e", "--method", "rollout", "-o", str(fig)])
        == 0
    )
    for name in ("a_1.png", "a_2.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG" and (tmp_path / name).stat().st_size > 10_000
    capsys.readouterr()
    rnn, transformer = str(trained_toys["rnn"]), str(trained_toys["transformer"])
    for argv, message in (
        ([rnn, "a b", "--rows", "encoder"], "no encoder self-attention"),
        ([rnn, "a b", "--method", "rollout"], "one attention over its source"),
        (
            [rnn, "a b", "--method", "value-norm"],
            "value-norm is not run on an encoder-decoder (it takes: attention, grad",
        ),
        ([transformer, "a b", "--method", "flow"], "flow follows a stack of self-attention layers"),
        ([transformer, "a b", "--rows", "encoder", "--method", "grad-attention"], "explains an output (a token"),
        ([transformer, "", "--method", "grad-attention"], "expected a non-empty sentence"),
    ):
        assert main(["attribute", *argv, "-o", str(tmp_path / "bad.png")]) in (1, 2), argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and message in err, (argv, err)
        assert not (tmp_path / "bad.png").exists()


def test_figures_name_each_method_as_it_was_computed():
    """Rollout of an encoder-decoder's output follows Chefer et al.'s rules across the two attentions;
    of an encoder alone, Abnar and Zuidema's; one head's raw attention is no mean of heads."""
    from attnkit.attribution.methods import Attribution

    translator = Attribution("output", ["a"], ["b"], heads=4, layers=4, cross=True)
    encoder = Attribution("encoder", ["a"], ["b"], heads=4, layers=4)
    single = Attribution("output", ["a"], ["b"], heads=1, layers=1, cross=True)
    assert "Chefer" in translator.label("rollout") and "Chefer" not in encoder.label("rollout")
    assert single.label("attention") == "raw attention (the single attention)"
