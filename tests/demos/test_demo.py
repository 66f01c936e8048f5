"""`attnkit demo` end to end with a few steps (CI runs the full demo)."""

import json

import pytest

from attnkit.demos.dates import MARKER, run_demo

pytestmark = pytest.mark.slow  # trains the demo models


def test_local_p_rnn_demo_writes_heatmap_and_viewer(tmp_path):
    out = tmp_path / "demo"
    result = run_demo(out, arch="rnn", attention="local-p", max_steps=20)
    assert (out / "attention.png").stat().st_size > 10_000
    html = (out / "attention.html").read_text()
    assert '"p_t":[' in html and '"window":3' in html  # local-p centres and window reach the viewer
    assert json.loads((out / MARKER).read_text())["attention"] == "local-p"
    assert result["steps"] == 20
    # the accuracy it reports is what its model does: translate the held-out dates again and count
    from attnkit.cli import main

    hyp = tmp_path / "dev.hyp"
    assert main(["translate", str(out), "-i", str(out / "data/dev.src"), "-o", str(hyp), "--beam", "1"]) == 0
    refs = (out / "data/dev.tgt").read_text().splitlines()
    hyps = hyp.read_text().splitlines()
    assert len(hyps) == len(refs) == 500
    assert result["accuracy"] == sum(h == r for h, r in zip(hyps, refs)) / len(refs)


def test_demo_refuses_what_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not an attnkit demo directory"):
        run_demo(tmp_path, max_steps=10)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="RNN"):
        run_demo(tmp_path / "x", arch="transformer", attention="local-p")
