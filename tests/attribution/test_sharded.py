"""Dataset-level runs over several processes: `attnkit attribute --input` and `attnkit heads`
started by torchrun with 2 CPU processes (gloo) give what one process gives, and only the
first process writes and prints."""

import os
import subprocess
import sys

import numpy as np
import pytest

from attnkit.cli import main

pytestmark = pytest.mark.slow  # torchrun: several processes, a trained toy model

SENTENCES = ["a b c d", "b c", "d a b", "c c d a b", "a", "b d", "d d c"]


def _torchrun(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "attnkit"]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=300, env=env)


def test_two_processes_equal_one(trained_toys, tmp_path, capsys):
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    model = str(trained_toys["transformer"])
    assert main(["attribute", model, "--input", str(source), "-o", str(tmp_path / "one.npz")]) == 0
    capsys.readouterr()
    assert main(["heads", model, "--input", str(source)]) == 0
    single_heads = capsys.readouterr().out.strip()

    run = _torchrun("attribute", model, "--input", str(source), "-o", str(tmp_path / "two.npz"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("  -> ") == len(SENTENCES)  # the first process alone prints and writes
    for i in range(1, len(SENTENCES) + 1):
        with np.load(tmp_path / f"one_{i}.npz") as a, np.load(tmp_path / f"two_{i}.npz") as b:
            assert str(a["source"]) == str(b["source"]) == SENTENCES[i - 1]
            assert list(a["methods"]) == list(b["methods"]) and list(a["rows"]) == list(b["rows"])
            np.testing.assert_allclose(a["scores"], b["scores"], atol=1e-5)
    run = _torchrun("heads", model, "--input", str(source))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == single_heads


def test_a_bad_sentence_in_another_process_is_one_line(trained_toys, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("a b\nc d\n")
    run = _torchrun(
        "attribute",
        str(trained_toys["rnn"]),
        "--input",
        str(source),
        "--method",
        "rollout",
        "-o",
        str(tmp_path / "x.npz"),
    )
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.startswith("attnkit attribute: error:")]
    assert lines and all("one attention over its source" in line for line in lines)  # one line a process
    assert "site-packages/attnkit" not in run.stderr and "src/attnkit" not in run.stderr  # torchrun's own report only
    assert not list(tmp_path.glob("x*.npz"))


def test_ablation_over_two_processes_equals_one(trained_toys, tmp_path, capsys):
    """Each head ablated (mean ablation: the means over every input, on every process) and each
    input's importance, shared out over two processes: the table of one process. The table
    rounds to 6 decimals, and sums in another order differ in float noise, so a value on a
    rounding edge may move by one unit of the 6th decimal: that is the tolerance."""
    import json

    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    model = str(trained_toys["transformer"])
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["heads", model, "--input", str(source), "--ablate", "mean", "--table", str(one)]) == 0
    single = capsys.readouterr().out
    run = _torchrun("heads", model, "--input", str(source), "--ablate", "mean", "--table", str(two))
    assert run.returncode == 0, run.stderr
    assert run.stdout.replace("two.json", "one.json") == single  # printed once, by the first process
    a, b = json.loads(one.read_text())["heads"], json.loads(two.read_text())["heads"]
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in ("ablation", "importance", "sink"):
            assert abs(x[key] - y[key]) <= 1e-6 + 1e-12, (key, x, y)
