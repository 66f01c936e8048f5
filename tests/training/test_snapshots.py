"""Attention during training: snapshots of the same dev sentences at every validation, a
step slider in the viewer and a figure of selected steps; taking them changes nothing else."""

import json
import re

import numpy as np
import pytest
import torch

from attnkit.cli import main
from attnkit.config import config_from_dict
from attnkit.inspection.snapshots import load_snapshots, pick, pick_by_change, steps_figure
from attnkit.loading.model_dir import ModelDir, load_checkpoint
from attnkit.training.trainer import train

pytestmark = pytest.mark.slow  # trains toy models


@pytest.fixture(scope="module")
def run(reversal, toy_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("snap") / "run"
    train(config_from_dict(toy_config(reversal, out, "transformer", max_steps=300, attention_snapshots=2)), quiet=True)
    return out


EARLY = [0, 12, 25, 50]  # before the first validation: step 0 and eval_every / 8, / 4, / 2
STEPS = [*EARLY, 100, 200, 300]


def test_a_snapshot_at_every_validation_and_at_early_steps(run, reversal):
    snaps = load_snapshots(run)
    assert [step for step, _, _ in snaps] == STEPS
    dev_src = (reversal / "dev.src").read_text().splitlines()[:2]
    dev_tgt = (reversal / "dev.tgt").read_text().splitlines()[:2]
    for step, records, info in snaps:
        assert info["step"] == step and "dev_loss" in info and info["arch"] == "transformer"
        assert [r.source for r in records] == dev_src and [r.output for r in records] == dev_tgt  # reference targets
        assert records[0].get("cross").shape == snaps[0][1][0].get("cross").shape  # the same rows and columns
    first, last = snaps[0][1][0].select("cross", -1, "mean"), snaps[-1][1][0].select("cross", -1, "mean")
    assert not np.allclose(first, last)  # the attention changed as it learned
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["kind"] == "valid"] == [100, 200, 300]  # early snapshots are no validations
    assert all("dev_bleu" not in info for step, _, info in snaps if step in EARLY)


def test_snapshots_change_nothing_else(run, reversal, toy_config, tmp_path):
    """Taking snapshots uses no randomness: the run ends with the same weights as one without."""
    plain = tmp_path / "plain"
    train(config_from_dict(toy_config(reversal, plain, "transformer", max_steps=300)), quiet=True)
    a, b = load_checkpoint(ModelDir(run).last)["model"], load_checkpoint(ModelDir(plain).last)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not ModelDir(plain).snapshots.exists()


def test_resume_drops_the_snapshots_of_lost_steps(reversal, toy_config, tmp_path):
    out = tmp_path / "run"
    cfg = toy_config(reversal, out, "transformer", max_steps=200, attention_snapshots=1)
    train(config_from_dict(cfg), quiet=True)
    md = ModelDir(out)
    lost = md.snapshots / "step_900.npz"  # as if a killed run had snapshotted beyond its last checkpoint
    lost.write_bytes((md.snapshots / "step_200.npz").read_bytes())
    cfg["train"]["max_steps"] = 300
    train(config_from_dict(cfg), resume=True, quiet=True)
    assert [s for s, _ in md.snapshot_files()] == STEPS


def test_view_has_a_step_slider_and_plot_draws_the_steps(run, tmp_path, capsys):
    assert main(["view", str(run), "-o", str(tmp_path / "forming.html")]) == 0
    page = (tmp_path / "forming.html").read_text()
    data = json.loads(re.search(r'id="attnkit-data">(.*?)</script>', page, re.DOTALL).group(1))
    assert [s["step"] for s in data["steps"]] == STEPS and len(data["steps"][0]["examples"]) == 2
    assert "7 of 7 training steps" in capsys.readouterr().out
    assert main(["view", str(run), "-o", str(tmp_path / "two.html"), "--max-steps", "2"]) == 0
    assert "2 of 7 training steps" in capsys.readouterr().out
    assert main(["plot", str(run), "--steps", "4", "-o", str(tmp_path / "forming.png")]) == 0
    assert (tmp_path / "forming.png").stat().st_size > 10_000


def test_the_steps_figure_takes_the_steps_where_attention_changes_with_their_dev_scores(run):
    fig = steps_figure(run, steps=4, sentences=1)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    steps = [int(t.split("\n")[0].removeprefix("step ")) for t in titles]
    assert len(steps) == 4 and steps[0] == 0 and steps[-1] == 300 and steps == sorted(steps)
    assert all("dev loss" in t for t in titles) and "BLEU" in titles[-1]  # the last validation measured BLEU
    assert "Transformer (d_model" in fig.get_suptitle() and str(run.name) not in fig.get_suptitle()


def test_picks_by_change_split_the_total_change_evenly():
    items = list(range(8))
    # all the change happens between items 3 and 6: the middle picks land there
    change = [0, 0, 0, 0, 1, 1, 1, 0]
    assert pick_by_change(items, 4, change) == [0, 4, 5, 7]
    assert pick_by_change(items, 99, change) == items and pick_by_change(items, 1, change) == [7]
    assert pick_by_change(items, 3, [0] * 8) == [0, 4, 7]  # no change: evenly spread
    assert len(set(pick_by_change(list(range(50)), 9, [0] + [1.0] * 49))) == 9  # never one step twice
    with pytest.raises(ValueError):
        pick_by_change(items, 0, change)


def test_pick_spreads_evenly():
    assert pick(list(range(10)), 3) == [0, 4, 9] and pick([1, 2], 5) == [1, 2] and pick([1, 2, 3], 1) == [3]
    with pytest.raises(ValueError):
        pick([1], 0)


def test_no_snapshots_is_one_clear_error(trained_toys, tmp_path, capsys):
    assert main(["plot", str(trained_toys["rnn"]), "--steps", "-o", str(tmp_path / "x.png")]) == 1
    assert "no attention snapshots" in capsys.readouterr().err


def test_the_step_slider_in_a_browser(browser, run, tmp_path):
    assert main(["view", str(run), "-o", str(tmp_path / "forming.html")]) == 0
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((tmp_path / "forming.html").as_uri())
    page.wait_for_selector("#lines line", state="attached")
    assert page.is_visible("#step-box") and "300" in page.inner_text("#step-label")
    last = page.inner_html("#lines")
    page.fill("#step", "0")  # a range input: fill sets its value and fires input
    assert page.inner_text("#step-label").startswith("0 ·") and page.inner_html("#lines") != last
    page.close()
    assert errors == []
