"""The atlas figure: one grid per detector with the flagged heads outlined, the ablation effect and
importance beside them, sized for a docs column."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from attnkit.heads.atlas import Atlas, atlas_figure


def _atlas():
    scores = {
        "induction": np.array([[0.1, 0.0, 0.2], [0.7, 0.5, 0.1]]),
        "positional": np.array([[0.95, 0.2, 0.3], [0.1, 0.1, 0.1]]),
        "distance": np.array([[1.0, 12.0, 3.0], [4.0, 5.0, 6.0]]),
    }
    ablation = np.array([[0.01, np.nan, -0.02], [1.2, 0.4, 0.0]])
    return Atlas("decoder", scores, np.array([[-1, 0, 2], [0, 0, 0]]), 4, ablation, np.ones((2, 3)) * 0.1)


def test_each_detector_has_its_grid_and_the_flagged_heads_are_outlined():
    fig = atlas_figure([_atlas()], title="planted")
    grids = [ax for ax in fig.axes if ax.get_xlabel().startswith("head")]
    titles = [ax.get_title().split("\n")[0] for ax in grids]
    assert titles == ["each head", "importance", "induction", "positional", "distance"]  # the causal proof first
    outlined = {t: [p.get_xy() for p in ax.patches if isinstance(p, Rectangle)] for t, ax in zip(titles, grids)}
    assert sorted(outlined["induction"]) == [(-0.5, 0.5), (0.5, 0.5)]  # heads 0 and 1 of layer 1 (>= 0.4)
    assert outlined["positional"] == [(-0.5, -0.5)] and not outlined["distance"]
    positional = [t.get_text() for t in grids[3].texts]
    assert "\u22121" in positional  # the flagged head's offset
    ablated = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text() for t in grids[0].texts}
    assert (1, 0) not in ablated and ablated[(0, 1)] == "1.2" and ablated[(2, 0)] == "0"  # NaN: no number
    small = Atlas("decoder", {"sink": np.zeros((2, 3))}, None, 1, np.array([[0.0123, -0.002, 0], [0, 0, 0]]))
    cells = [t.get_text() for t in atlas_figure([small]).axes[0].texts]
    assert cells[:3] == ["12", "\u22122", "0"]  # below 1: thousandths (the colour bar says so)
    width, _ = fig.get_size_inches() * 130
    assert round(width) == 1105  # a docs column at the dpi figures are saved at


def test_several_kinds_put_the_causal_proof_first_and_say_when_every_head_is_flagged():
    cross = Atlas("cross", {"sink": np.full((2, 3), 0.6)}, None, 4, np.ones((2, 3)) * 0.2, np.ones((2, 3)) * 0.3)
    fig = atlas_figure([_atlas(), cross])
    grids = [ax for ax in fig.axes if ax.get_xlabel().startswith("head")]
    titles = [ax.get_title() for ax in grids]
    assert titles[:4] == ["ablated alone\ndecoder", "ablated alone\ncross-attention", "importance\ndecoder",
                          "importance\ncross-attention"]  # fmt: skip
    sink = grids[titles.index("sink\nevery head \u2265 0.3")]
    assert not [p for p in sink.patches if isinstance(p, Rectangle)]  # no outline on every cell
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 2  # one colour bar for the ablations, one for the importances; the shares have none
    assert grids[-1].get_xlabel() == "head\nweight"  # a share's unit under it
