"""``attnkit patch``, ``paths``, ``qk``, ``ov`` and ``logits`` as a user runs them: what they print and write, and
one line for bad input."""

from __future__ import annotations

import csv
import json

import pytest

from attnkit.cli import main
from tiny_hf import build


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return str(build("gpt2", tmp_path_factory.mktemp("hf") / "gpt2"))


def test_patch_prints_the_heads_and_writes_every_unit(gpt2, tmp_path, capsys):
    table = tmp_path / "patching.csv"
    argv = ["patch", gpt2, "--task", "repeated", "--n", "2", "--length", "6", "--table", str(table), "--top", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "activation patching, 8 units" in out and "attribution patching, 8 units" in out
    assert "agreement (Pearson r of the effects): " in out
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 16 and {r["method"] for r in rows} == {"activation", "attribution"}
    assert {r["unit"] for r in rows} == {f"blocks.{li}.attn.h{h}" for li in range(2) for h in range(4)}


def test_patch_reads_pairs_from_a_file(gpt2, tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"clean": "the dog runs", "corrupt": "the man runs", "answer": " in", "foil": " on"}))
    out = tmp_path / "p.json"
    assert (
        main(["patch", gpt2, "--pairs", str(pairs), "--of", "resid", "--method", "activation", "--table", str(out)])
        == 0
    )
    saved = json.loads(out.read_text())
    assert saved["pairs"] == 1 and len(saved["rows"]) == 2 * 3  # 2 layers x 3 positions


def test_paths_prints_the_paths_and_writes_every_one(gpt2, tmp_path, capsys):
    table = tmp_path / "paths.json"
    argv = ["paths", gpt2, "--task", "repeated", "--n", "2", "--length", "6", "--via", "q,k", "--table", str(table)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "32 paths, largest effect first" in out and "-composition" in out  # 4 senders x 4 receivers x 2
    saved = json.loads(table.read_text())
    assert len(saved["rows"]) == 32 and {r["via"] for r in saved["rows"]} == {"q", "k"}
    assert all(r["sender"].startswith("blocks.0.") and r["receiver"].startswith("blocks.1.") for r in saved["rows"])


def test_qk_prints_the_terms_of_the_brightest_cell(gpt2, tmp_path, capsys):
    table = tmp_path / "qk.csv"
    argv = ["qk", gpt2, "the dog runs in the park", "--site", "blocks.1.attn", "--head", "1", "--table", str(table)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "blocks.1.attn head 1, query 5 " in out and "through the query:" in out and "through the key:" in out
    rows = list(csv.DictReader(table.open()))
    writers = 1 + 4 + 1 + 1 + 1  # the embeddings, layer 0's heads, its attention bias, its MLP, the constant
    assert len(rows) == writers * writers
    assert sum(float(r["score"]) for r in rows) == pytest.approx(float(out.split("score ")[1].split(";")[0]), abs=1e-3)


def test_ov_prints_every_heads_copying_and_one_heads_top_tokens(gpt2, tmp_path, capsys):
    table = tmp_path / "ov.json"
    assert main(["ov", gpt2, "the dog runs in the park", "--table", str(table)]) == 0
    out = capsys.readouterr().out
    assert "8 heads' OV circuits" in out and out.count(" copying ") == 8
    saved = json.loads(table.read_text())
    assert len(saved["rows"]) == 8 and all(-1 <= r["copying"] <= 1 for r in saved["rows"])
    one = tmp_path / "one.json"
    assert main(["ov", gpt2, "the dog runs", "--heads", "blocks.1.attn.h2", "--k", "2", "--table", str(one)]) == 0
    out = capsys.readouterr().out
    assert "1 head's OV circuits" in out
    assert "blocks.1.attn.h2: attending to each token (at its first position), the 2 tokens it raises most" in out
    assert out.count("  -> ") == len(json.loads(one.read_text())["sources"])  # one line per token read


def test_logits_sums_the_terms_and_reads_the_lens(gpt2, capsys):
    assert main(["logits", gpt2, "the dog runs in the", "--answer", " park", "--foil", " car"]) == 0
    out = capsys.readouterr().out
    assert "the logit of ' park' less ' car' at the last position is" in out
    assert "layer  0: answer rank" in out and "layer  1: answer rank" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--task", "repeated", "--pairs", "PAIRS"],
            "give pairs from a file (--pairs) or built ones (--task), not both",
        ),
        (["--task", "names"], "name-swapped pairs need two names of one token each"),
        (["--task", "repeated", "--of", "patterns", "--method", "attribution"], "not patterns"),
        (["paths", "--task", "repeated", "--senders", "blocks.0.attn"], "'blocks.0.attn' is not a head"),
        (["paths", "--task", "repeated", "--via", "q,x"], "unknown path 'x'"),
        (["qk", "the dog runs", "--site", "blocks.1.attn", "--head", "7"], "has heads 0 to 3, not 7"),
        (["qk", "the dog runs", "--site", "blocks.1.attn", "--head", "0", "--key", "2", "--query", "1"], "cannot see"),
    ],
)
def test_bad_patch_input_is_one_line(gpt2, tmp_path, capsys, extra, message):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("{}\n")
    command, *rest = extra if extra[0] in ("paths", "qk") else ["patch", *extra]
    given = [str(pairs) if x == "PAIRS" else x for x in rest]
    argv = [command, gpt2, *given]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
