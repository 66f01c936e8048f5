"""`attnkit capture | plot | view | explain | heads | positions` on the trained toy models."""

import numpy as np
import pytest

from attnkit.cli import main
from attnkit.inspection import load_records


def run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_capture_then_plot_and_view_from_the_file(capsys, trained_toys, tmp_path, arch):
    model = str(trained_toys[arch])
    maps = tmp_path / "maps.npz"
    code, out, err = run(capsys, ["capture", model, "a b c", "d e f g", "-o", str(maps)])
    assert code == 0, err
    records, info = load_records(maps)
    assert len(records) == 2 and info["arch"] == arch
    code, out, err = run(capsys, ["plot", str(maps), "-o", str(tmp_path / "a.svg")])
    assert code == 0, err
    assert (tmp_path / "a_1.svg").read_text().startswith("<?xml") and (tmp_path / "a_2.svg").is_file()
    code, out, err = run(capsys, ["view", str(maps), "-o", str(tmp_path / "v.html")])
    assert code == 0 and "2 sentence(s)" in out
    page = (tmp_path / "v.html").read_text()
    assert page.rstrip().endswith("</html>") and '"source":"a b c"' in page and '"source":"d e f g"' in page


def test_plot_kinds_heads_and_grid(capsys, trained_toys, tmp_path):
    model = str(trained_toys["transformer"])
    for extra in (["--kind", "encoder", "--head", "1"], ["--kind", "decoder", "--layer", "0"], ["--head", "all"]):
        out = tmp_path / f"{extra[-1]}.png"
        code, stdout, err = run(capsys, ["plot", model, "a b c d", "-o", str(out), *extra])
        assert code == 0, err
        assert out.read_bytes()[:4] == b"\x89PNG" and "->" in stdout


def test_forced_target(capsys, trained_toys, tmp_path):
    maps = tmp_path / "m.npz"
    assert main(["capture", str(trained_toys["transformer"]), "a b c", "--target", "c b a", "-o", str(maps)]) == 0
    [r], _ = load_records(maps)
    assert r.output == "c b a" and r.tgt_out_tokens[-1] == "</s>"


def test_explain_prints_and_draws(capsys, trained_toys, tmp_path):
    fig = tmp_path / "explain.pdf"
    code, out, err = run(
        capsys, ["explain", str(trained_toys["transformer"]), "a b c d", "--query", "c", "--head", "1", "-o", str(fig)]
    )
    assert code == 0, err
    assert "query 2 'c'" in out and "sqrt" in out and "saturates" in out and "match the model's forward pass" in out
    assert fig.read_bytes()[:4] == b"%PDF"
    code, out, err = run(
        capsys, ["explain", str(trained_toys["transformer"]), "a b", "--kind", "cross", "--query-pos", "-1"]
    )
    assert code == 0, err
    assert (
        "cross-attention" in out and "</s>" in out and "match the model's forward pass" in out
    )  # the last output step


def test_explain_all_heads_prints_and_draws(capsys, trained_toys, tmp_path):
    fig = tmp_path / "layer.png"
    code, out, err = run(
        capsys, ["explain", str(trained_toys["transformer"]), "a b c", "--kind", "cross", "--all-heads", "-o", str(fig)]
    )
    assert code == 0, err
    assert "cross-attention, layer 0" in out and "matches the layer's output" in out and "var(q.k)" in out
    assert fig.read_bytes()[:4] == b"\x89PNG"


def test_heads_statistics(capsys, trained_toys, tmp_path):
    src = tmp_path / "s.txt"
    src.write_text("a b c\n\nh g f e\n")
    code, out, err = run(
        capsys, ["heads", str(trained_toys["transformer"]), "-i", str(src), "-o", str(tmp_path / "h.png")]
    )
    assert code == 0, err
    assert out.count("most focused") == 3 and (tmp_path / "h.png").is_file()


def test_heads_detect_prints_the_atlas_and_writes_every_heads_scores(capsys, trained_toys, tmp_path):
    import json

    src = tmp_path / "s.txt"
    src.write_text("a b c a b c\nh g f e h g f e\n")
    model, table = str(trained_toys["transformer"]), tmp_path / "atlas.json"
    code, out, err = run(capsys, ["heads", model, "-i", str(src), "--detect", "all", "--table", str(table)])
    assert code == 0, err
    assert "encoder self-attention" in out and "cross-attention" in out and "head(s) flagged" in out
    assert "sink: weight on the first token (Gu et al. 2024; flagged at >= 0.3)" in out
    atlas = json.loads(table.read_text())
    kinds = {row["kind"] for row in atlas["heads"]}
    assert kinds == {"encoder", "decoder", "cross"}
    cross = next(row for row in atlas["heads"] if row["kind"] == "cross")
    assert "induction" not in cross and "previous_token" not in cross and 0 <= cross["sink"] <= 1
    assert atlas["detectors"]["sink"] == {
        "paper": "Gu et al. 2024",
        "threshold": 0.3,
        "means": "weight on the first token",
    }
    code, out, err = run(
        capsys, ["heads", model, "-i", str(src), "--detect", "sink,broad", "--table", str(tmp_path / "a.csv")]
    )
    assert code == 0, err
    header = (tmp_path / "a.csv").read_text().splitlines()[0]
    assert header == "kind,layer,head,sink,broad"
    code, out, err = run(capsys, ["heads", model, "-i", str(src), "--detect", "copying"])
    assert code == 2 and "unknown detector 'copying'" in err
    code, out, err = run(capsys, ["heads", model, "-i", str(src), "--table", str(tmp_path / "b.csv")])
    assert code == 1 and "add --detect" in err and not (tmp_path / "b.csv").exists()


def test_heads_patterns_draws_each_detectors_strongest_head_with_its_cells(capsys, trained_toys, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.patches import Rectangle

    import attnkit
    from attnkit.heads.atlas import head_atlas, patterns_figure
    from attnkit.heads.detectors import counted_cells

    src = tmp_path / "s.txt"
    src.write_text("a b c a b c\nh g f e h g f e\n")
    model = str(trained_toys["transformer"])
    out_png = tmp_path / "p.png"
    code, out, err = run(
        capsys, ["heads", model, "-i", str(src), "--detect", "previous-token,sink", "--patterns", str(out_png)]
    )
    assert code == 0 and out_png.is_file() and f"patterns: {out_png}" in out, err
    code, _, err = run(capsys, ["heads", model, "-i", str(src), "--patterns", str(tmp_path / "q.png")])
    assert code == 1 and "add --detect" in err and not (tmp_path / "q.png").exists()
    records = attnkit.load(model).attention(src.read_text().splitlines(), beam=1)
    atlas = head_atlas(records, "encoder", ["previous_token", "sink"])
    fig = patterns_figure(records, [atlas])
    panels = [ax for ax in fig.axes if ax.get_title() and ax.images and ax.get_yticks().size]
    assert [ax.get_title().split(":")[0] for ax in panels] == ["previous-token", "sink"]
    for ax, name in zip(panels, ["previous_token", "sink"]):
        layer, head = np.unravel_index(np.argmax(atlas.scores[name]), atlas.scores[name].shape)
        assert f"layer {layer} head {head}" in ax.get_title()
        cells, _ = counted_cells(name, records[0].queries("encoder"), records[0].keys("encoder"), False)
        outlined = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert len(outlined) == cells.sum() > 0  # every counted cell outlined, and nothing else


def test_heads_ablate_puts_each_heads_effect_beside_its_role(capsys, tmp_path):
    import csv

    src, table = tmp_path / "s.txt", tmp_path / "atlas.csv"
    src.write_text("A man is riding a bike .\nTwo dogs play in the snow .\n")
    code, out, err = run(capsys, ["heads", "multi30k-en-de", "-i", str(src), "--ablate", "zero", "--table", str(table)])
    assert code == 0, err
    assert (
        "loss (nats per output token) with every head:" in out
        and "ablated alone, costliest (loss):" in out
        and "importance (Michel" in out
    )
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 3 * 16 and all(float(r["importance"]) >= 0 for r in rows)
    assert {"ablation", "importance", "sink"} <= set(rows[0])
    refs = tmp_path / "refs.txt"
    refs.write_text("Ein Mann fährt Fahrrad .\n")
    code, out, err = run(capsys, ["heads", "multi30k-en-de", "-i", str(src), "--references", str(refs)])
    assert code == 1 and "add --ablate" in err
    code, out, err = run(
        capsys, ["heads", "multi30k-en-de", "-i", str(src), "--references", str(refs), "--ablate", "zero"]
    )
    assert code == 1 and "2 sentences but 1 references" in err
    maps = tmp_path / "maps.npz"
    assert run(capsys, ["capture", "multi30k-en-de", "A dog runs .", "-o", str(maps)])[0] == 0
    code, out, err = run(capsys, ["heads", str(maps), "--ablate", "zero"])
    assert code == 1 and "give the model, not a saved .npz" in err


@pytest.mark.slow  # draws every scheme's figure
def test_positions_every_scheme(capsys, tmp_path):
    code, out, err = run(
        capsys, ["positions", "--scheme", "all", "--heads", "4", "--length", "60", "-o", str(tmp_path / "pe.png")]
    )
    assert code == 0, err
    for scheme in ("sinusoidal", "learned", "fourier", "relative", "t5", "rope", "alibi"):
        assert (tmp_path / f"pe_{scheme}.png").is_file()
    rope = float(out.split("largest difference across m = ")[1].split()[0])
    assert rope < 1e-4  # RoPE scores depend on the offset only


@pytest.mark.parametrize(
    "argv, message, code",
    [
        (["plot", "{model}"], "give at least one sentence", 1),
        (["plot", "{model}", "a b", "--layer", "7"], "layer 7 out of range", 1),
        (["plot", "{model}", "a b", "--head", "5"], "head 5 out of range", 1),
        (["plot", "{model}", "a b", "-o", "x.gif"], "must end in one of", 2),
        (["plot", "{model}", ""], "expected a non-empty sentence", 2),
        (["view", "{tmp}/missing.npz"], "no attention file", 1),
        (["view", "{tmp}/missing_model", "a"], "model directory not found", 1),
        (["explain", "{model}", "a b", "--query", "zz"], "is not one of the tokens", 1),
        (["capture", "{model}", "a b", "-o", "{tmp}/m.json"], "must end in .npz", 2),
        (["capture", "{model}", "a b"], "required: -o/--output", 2),
        (["explain", "{rnn}", "a b", "--kind", "cross", "--head", "1"], "the RNN's attention has one head", 1),
        (["explain", "{rnn}", "a b", "--kind", "cross", "--all-heads"], "is GlobalAttention, not multi-head", 1),
        (["plot", "{model}", "a b", "--checkpoint", "average", "--average-last", "-1"], "expected an integer >= 0", 2),
    ],
)
def test_one_line_errors(capsys, trained_toys, tmp_path, argv, message, code):
    """Values found wrong at work exit 1; command lines that do not parse exit 2; both in one line."""
    argv = [a.format(model=trained_toys["transformer"], rnn=trained_toys["rnn"], tmp=tmp_path) for a in argv]
    got, _out, err = run(capsys, argv)
    assert got == code and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_corrupt_maps_file(capsys, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, something=np.zeros(3))
    code, _out, err = run(capsys, ["view", str(bad)])
    assert code == 1 and "not a readable attnkit attention file" in err


def test_heads_probe_draws_inputs_for_the_models_tokenizer(capsys, tmp_path):
    table = tmp_path / "atlas.json"
    code, out, err = run(
        capsys,
        [
            "heads",
            "multi30k-en-de",
            "--probe",
            "needle",
            "--probe-tokens",
            "80",
            "--probes",
            "3",
            "--detect",
            "all",
            "--table",
            str(table),
            "-o",
            str(tmp_path / "atlas.png"),
        ],
    )
    assert code == 0, err
    assert "over 3 input(s)" in out and "rare-word, highest:" in out
    assert (tmp_path / "atlas.png").stat().st_size > 50_000  # the atlas figure: every kind's grids
    import json

    saved = json.loads(table.read_text())
    assert "rare_word" in saved["detectors"] and len(saved["heads"]) == 3 * 16
    src = tmp_path / "s.txt"
    src.write_text("A man is riding a bike .\n")
    code, out, err = run(capsys, ["heads", "multi30k-en-de", "-i", str(src), "--probe", "repeated", "--detect", "all"])
    assert code == 1 and "draws its own inputs" in err
    code, out, err = run(capsys, ["heads", "multi30k-en-de", "-i", str(src), "--detect", "retrieval"])
    assert code == 1 and "the retrieval detector scores a query with an end that repeats an earlier span" in err


def test_heads_on_an_empty_input_file_is_one_line_and_writes_nothing(capsys, tmp_path):
    empty, table = tmp_path / "empty.txt", tmp_path / "atlas.json"
    empty.write_text("\n  \n")
    code, _, err = run(capsys, ["heads", "multi30k-en-de", "-i", str(empty), "--detect", "all", "--table", str(table)])
    assert code == 1 and "holds no sentence" in err and len(err.strip().splitlines()) == 1
    assert not table.exists()
