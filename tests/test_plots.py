"""Every figure type, drawn from small arrays and checked for what keeps a figure honest:
token labels on the axes, a labelled colour bar for every heatmap (one stated shared scale
where panels share one), and no text outside the canvas."""

import matplotlib.colors
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.image import AxesImage
from matplotlib.text import Text

from attnkit import plots
from attnkit.inspection.explain import Walkthrough
from attnkit.plots.inspection import (
    plot_contextual,
    plot_head_statistics,
    plot_walkthrough,
)

RNG = np.random.default_rng(0)
SRC = ["▁a", "b", "␣", "longer", "</s>"]
TGT = ["x", "y", "z", "</s>"]


def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _walkthrough():
    s, d = 5, 8
    q, k, v = RNG.normal(size=d), RNG.normal(size=(s, d)), RNG.normal(size=(s, d))
    raw = k @ q
    weights = _softmax(raw / np.sqrt(d))
    return Walkthrough(
        kind="encoder",
        layer=0,
        head=1,
        query=2,
        query_token="␣",
        key_tokens=SRC,
        x=q,
        q=q,
        k=k,
        v=v,
        raw=raw,
        scale=d**-0.5,
        bias=None,
        scaled=raw / np.sqrt(d),
        weights=weights,
        unscaled_weights=_softmax(raw),
        context=weights @ v,
        model_weights=weights,
    )


def _recurrent_walkthrough():
    """local-p: keys 1..3 inside the window around p_t = 2.2, a Gaussian on the softmax."""
    s, d = 5, 8
    q, k = RNG.normal(size=d), RNG.normal(size=(s, d))
    raw, allowed = k @ q, np.array([False, True, True, True, False])
    scaled = np.where(allowed, raw, -np.inf)
    gauss = np.exp(-((np.arange(s) - 2.2) ** 2) / 2)
    weights = _softmax(scaled) * gauss
    return Walkthrough(
        kind="cross",
        layer=0,
        head=0,
        query=1,
        query_token="Hund",
        key_tokens=SRC,
        x=q,
        q=q,
        k=k,
        v=k,
        raw=raw,
        scale=1.0,
        bias=None,
        scaled=scaled,
        weights=weights,
        unscaled_weights=weights,
        context=weights @ k,
        model_weights=weights,
        score="(W_aᵀ h_t) · h̄_s",
        terms_formula="(W_aᵀ h_t) ⊙ h̄_s",
        terms=q[None] * k,
        allowed=allowed,
        p_t=2.2,
        window=1,
        gauss=gauss,
        recurrent=True,
    )


FIGURES = {
    "alignment": lambda: plots.plot_alignment(_softmax(RNG.normal(size=(4, 5))), SRC, TGT, title="cross-attention"),
    "alignment with p_t": lambda: plots.plot_alignment(
        _softmax(RNG.normal(size=(4, 5))), SRC, TGT, p_t=np.array([0.5, 1.2, 2.8, 3.9]), window=1, title="local-p"
    ),
    "grid": lambda: plots.plot_attention_grid(_softmax(RNG.normal(size=(2, 3, 4, 5))), TGT, SRC, title="grid"),
    "positional encoding": lambda: plots.plot_positional_encoding(RNG.normal(size=(40, 16)), title="sinusoidal"),
    "learned table": lambda: plots.plot_positional_encoding(RNG.normal(size=(40, 16)), title="learned", learned=True),
    "positional encoding, two rows": lambda: plots.plot_positional_encoding(
        RNG.normal(size=(40, 16)), title="sinusoidal", columns=2
    ),
    "score bias": lambda: plots.plot_score_bias(
        RNG.normal(size=(8, 12, 12)) * np.logspace(0, -2, 8)[:, None, None], title="ALiBi"
    ),
    "relative index": lambda: plots.plot_relative_index(
        np.arange(144).reshape(12, 12) % 7, 3, buckets=True, title="T5"
    ),
    "rotary": lambda: plots.plot_rotary(RNG.normal(size=(40, 4)), RNG.normal(size=(3, 6)), title="RoPE"),
    # drawn for the studio's pane (6.6 in): the same type beside narrower panels
    "score bias, pane": lambda: plots.plot_score_bias(
        -np.abs(np.arange(48)[:, None] - np.arange(48)) * np.array([1 / 4, 1 / 16, 1 / 64, 1 / 256])[:, None, None],
        title="ALiBi: a fixed linear distance penalty per head",
        width=6.6,
    ),
    "relative index, pane": lambda: plots.plot_relative_index(
        np.arange(144).reshape(12, 12) % 7,
        3,
        buckets=True,
        scalars=RNG.normal(size=(4, 7)),
        unreached=[5, 6],
        title="T5 bias of a run, Transformer (d_model 64, 4 heads, t5 positions)\n" + "a long note " * 12,
        width=6.6,
    ),
    "rotary, pane": lambda: plots.plot_rotary(
        RNG.normal(size=(40, 16)),
        RNG.normal(size=(3, 14)),
        title="rotary position embedding (RoPE): head dimension 32\n$\\theta_i = 10000^{-2i/32}$",
        width=6.6,
    ),
    "head statistics": lambda: plot_head_statistics(
        [("encoder self-attention", RNG.random((2, 4)), RNG.random((2, 4)))]
    ),
    "walkthrough": lambda: plot_walkthrough(_walkthrough()),
    "recurrent walkthrough": lambda: plot_walkthrough(_recurrent_walkthrough()),
    "steps": lambda: plots.plot_attention_steps(
        [(TGT, SRC, [(100 * i, _softmax(RNG.normal(size=(4, 5)))) for i in range(1, 4)])], title="forming"
    ),
    "contextual": lambda: plot_contextual(
        [f"t{i} (1)" for i in range(6)],
        [("static", np.eye(6)), ("layer 2", np.eye(6))],
        [("static", RNG.normal(size=(6, 2))), ("layer 2", RNG.normal(size=(6, 2)))],
        {0: 0, 3: 1},
        words=["t0"],
    ),
}


@pytest.mark.parametrize("name", FIGURES)
def test_figures_are_labelled_and_fit_their_canvas(name):
    fig = FIGURES[name]()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    images = [a for ax in fig.get_axes() for a in ax.get_children() if isinstance(a, AxesImage)]
    bars = [im.colorbar for im in images if im.colorbar is not None]
    if images:
        assert bars, "a heatmap without a colour bar"
        assert all(bar.ax.get_ylabel() or bar.ax.get_xlabel() for bar in bars), "a colour bar without a label"
        if len(bars) < len(images):  # panels share a scale: the figure must say so
            texts = " ".join(t.get_text() for t in fig.findobj(Text))
            assert "every panel" in texts or "one scale" in texts or "own colour scale" in texts
    # everything drawn (titles, labels, ticks, legends) lies within the canvas
    drawn = fig.get_tightbbox(renderer)  # inches
    width, height = fig.get_size_inches()
    assert drawn.x0 >= -0.02 and drawn.y0 >= -0.02 and drawn.x1 <= width + 0.02 and drawn.y1 <= height + 0.02, (
        f"something is drawn outside the {width:.1f} x {height:.1f} in canvas: {drawn}"
    )


@pytest.mark.parametrize("name", [name for name in FIGURES if name.endswith(", pane")])
def test_a_figure_drawn_for_the_pane_keeps_its_titles_apart(name):
    fig = FIGURES[name]()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    titles = [ax.title.get_window_extent(renderer) for ax in fig.get_axes() if ax.get_title()]
    for i, one in enumerate(titles):
        assert not any(one.overlaps(other) for other in titles[i + 1 :]), f"{name}: two panel titles meet"
    assert all(line.count("$") % 2 == 0 for line in fig.get_suptitle().splitlines())  # wrapped, TeX kept whole


@pytest.mark.parametrize("name", ["alignment", "alignment with p_t", "grid"])
def test_attention_maps_show_their_tokens(name):
    fig = FIGURES[name]()
    FigureCanvasAgg(fig).draw()
    labels = {t.get_text() for ax in fig.get_axes() for t in ax.get_xticklabels() + ax.get_yticklabels() + ax.texts}
    assert set(SRC) <= labels and set(TGT) <= labels
    for ax in fig.get_axes():  # a bare word boundary reads upright on every axis
        assert all(t.get_rotation() == 0 for t in ax.texts if t.get_text() == "␣")


def test_a_lone_punctuation_mark_reads_upright_among_turned_keys():
    # turned by 60 degrees, a comma reads as a backtick, an apostrophe as a hyphen, and a full stop is a
    # speck beside its tick
    keys = ["sunday", ",", "woman", "'", "##s", "a", "."]
    fig = plots.plot_alignment(_softmax(RNG.normal(size=(2, len(keys)))), keys, ["x", "y"])
    FigureCanvasAgg(fig).draw()
    ax = fig.get_axes()[0]
    turned = [t.get_text() for t in ax.get_xticklabels()]
    assert turned == ["sunday", "", "woman", "", "##s", "a", ""]  # a word reads right turned
    upright = {t.get_text(): t.get_rotation() for t in ax.texts}
    assert upright == {",": 0.0, "'": 0.0, ".": 0.0}


def test_projection_labels_neither_overlap_nor_leave_their_panel():
    # eight marked tokens bunched in two tight clusters, one at the right edge: labels must be moved apart
    # (a label per place: points 0.09 apart fall in different places, but their labels would touch)
    points = np.array(
        [[0.09 * i, 0.09 * i] for i in range(4)]
        + [[1.0 - 0.09 * i, 0.7 + 0.09 * i] for i in range(4)]
        + [[0.5, 0.5], [0.3, 0.1]]
    )
    labels = [f"a long label ({i})" for i in range(10)]
    fig = plot_contextual(labels, [("static", np.eye(10))], [("layer 1", points)], {i: i % 2 for i in range(8)})
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    panel = fig.get_axes()[-1]
    notes = [t for t in panel.texts if t.get_text()]
    assert len(notes) == 8
    boxes = [Text.get_window_extent(t, renderer) for t in notes]  # the words alone, not their leaders
    frame = panel.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.x0 - 1 <= a.x0 and a.x1 <= frame.x1 + 1, f"{notes[i].get_text()} leaves its panel"
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), "two labels overlap"
    for note in notes:  # a leader runs through no other label
        if note.arrow_patch is not None:
            path = note.arrow_patch.get_path().transformed(note.arrow_patch.get_transform())
            along = path.interpolated(50).vertices
            for other, box in zip(notes, boxes):
                if other is not note:
                    crossing = [box.contains(x, y) for x, y in along]
                    assert not any(crossing), f"{note.get_text()}'s leader crosses {other.get_text()}"
    # the two unmarked points lie in open space: no label is set on them
    for x, y in panel.transData.transform(points[8:]):
        assert not any(a.x0 - 2 <= x <= a.x1 + 2 and a.y0 - 2 <= y <= a.y1 + 2 for a in boxes), (x, y)


def test_tokens_at_one_place_share_one_label_at_the_docs_type_size():
    """Three "apple"s drawn at one place: one label, the word named once; a label at 9 pt or more."""
    labels = ["apple A4", "apple A10", "apple B1", "“.” A11", "red A9"]
    points = np.array([[0.0, 0.0], [0.001, 0.0], [0.0, 0.001], [1.0, 1.0], [0.5, 0.2]])
    fig = plot_contextual(labels, [("static", np.eye(5))], [("layer 1", points)], {0: 0, 1: 0, 2: 1, 3: 0})
    notes = [t for t in fig.get_axes()[-1].texts if t.get_text()]
    assert sorted(t.get_text() for t in notes) == ["apple A4, A10, B1", "“.” A11"]
    assert min(t.get_fontsize() for t in notes) >= 9


def test_a_projection_is_drawn_at_one_scale_across_and_up():
    """A map of distances drawn as it is: a data unit is as long across as up on the saved page (to 0.5 %),
    however tall or flat the points lie, and every point inside its panel."""
    labels = [f"t{i} A{i}" for i in range(6)]
    flat = np.array([[0.0, 0.0], [4.0, 0.1], [1.0, -0.1], [3.0, 0.05], [2.0, 0.0], [0.5, 0.02]])
    fig = plot_contextual(labels, [("static", np.eye(6))], [("flat", flat), ("tall", flat[:, ::-1])], {0: 0})
    FigureCanvasAgg(fig).draw()
    for ax, xy in zip([ax for ax in fig.axes if ax.get_title() in ("flat", "tall")], (flat, flat[:, ::-1])):
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        across, up = (x1 - x0) / ax.bbox.width, (y1 - y0) / ax.bbox.height
        assert abs(across / up - 1) < 0.005, ax.get_title()
        assert (xy[:, 0] > x0).all() and (xy[:, 0] < x1).all() and (xy[:, 1] > y0).all() and (xy[:, 1] < y1).all()


def test_contextual_key_says_when_the_tokenizer_lowercases():
    """Texts with capitals and tokens without: the key says the tokenizer writes tokens in lower case."""
    labels = ["apple A1", "red A2", "apple B1"]
    points = np.array([[0.0, 0.0], [0.5, 0.2], [1.0, 1.0]])
    keys = []
    for texts in (["A red apple.", "Apple pie."], ["a red apple.", "apple pie."]):
        fig = plot_contextual(labels, [("static", np.eye(3))], [("layer 1", points)], {0: 0, 2: 1},
                              sentences=["A", "B"], texts=texts, words=["apple"])  # fmt: skip
        (key,) = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + [k for s in fig.subfigs for k in s.legends]
        keys.append(" ".join(key.get_title().get_text().split()))
    assert "lower case" in keys[0] and "lower case" not in keys[1]


def test_tokens_near_but_apart_keep_their_own_labels():
    """Two "apple"s 1.5 % of the map apart (a cosine distance of 0.03 on a map a unit wide) are two
    places, each with its own label: one shared label would say their vectors are the same."""
    labels = ["apple A4", "apple A10", "red A9", "a A8"]
    points = np.array([[0.0, 0.0], [0.015, 0.0], [1.0, 1.0], [0.5, 0.2]])
    fig = plot_contextual(labels, [("static", np.eye(4))], [("layer 1", points)], {0: 0, 1: 0})
    notes = sorted(t.get_text() for t in fig.get_axes()[-1].texts if t.get_text())
    assert notes == ["apple A10", "apple A4"]


def test_contextual_key_writes_out_each_sentence():
    """The key names the sentences the token labels point to (A, B), each written out in full."""
    labels = ["apple A1", "red A2", "apple B1"]
    points = np.array([[0.0, 0.0], [0.5, 0.2], [1.0, 1.0]])
    texts = ["A red apple and a long sentence that must wrap in the key's narrow cell.", "Apple makes phones."]
    fig = plot_contextual(labels, [("static", np.eye(3))], [("layer 1", points)], {0: 0, 2: 1},
                          sentences=["A", "B"], texts=texts, words=["apple"])  # fmt: skip
    (key,) = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + [k for sub in fig.subfigs for k in sub.legends]
    written = " ".join(key.get_title().get_text().split())
    assert "A: “A red apple and a long sentence that must wrap in the key's narrow cell.”" in written
    assert "B: “Apple makes phones.”" in written


def test_positional_encoding_in_two_rows_keeps_its_four_panels():
    """A narrow page's layout: the same four panels, two to a row."""
    wide = plots.plot_positional_encoding(RNG.normal(size=(40, 16)), columns=4)
    narrow = plots.plot_positional_encoding(RNG.normal(size=(40, 16)), columns=2)
    titles = lambda fig: [ax.get_title().replace("\n", " ") for ax in fig.axes if ax.get_title()]
    assert titles(wide) == titles(narrow) and len(titles(narrow)) == 4
    narrow.canvas.draw()
    boxes = [ax.get_position() for ax in narrow.axes if ax.get_title()]
    assert min(b.y0 for b in boxes[:2]) > max(b.y1 for b in boxes[2:])  # two rows of two
    with pytest.raises(ValueError, match="columns must be 4"):
        plots.plot_positional_encoding(RNG.normal(size=(40, 16)), columns=3)


def test_a_trained_tables_odd_position_is_marked_and_enlarged_on_the_cosine_map():
    """The position least like the rest, found from the table: gold ticks on both axes of the cosine
    map, and an enlarged corner (under the diagonal, which mirrors the map above it) with that
    position's row and column outlined in gold."""
    from matplotlib.patches import Rectangle

    from attnkit.plots.positions import GOLD

    t = 40
    base = np.cos(np.arange(t)[:, None] * np.linspace(0.05, 1.0, 16)[None, :])  # smooth: neighbours alike
    base[3] = -base.mean(0)  # one position unlike the rest: it points away from them
    fig = plots.plot_positional_encoding(base, learned=True)
    FigureCanvasAgg(fig).draw()
    cosine = next(ax for ax in fig.axes if ax.get_title().startswith("cosine similarity"))
    assert "position 3, the least like the rest" in cosine.get_title()
    gold = [tick.get_text() for axis in (cosine.xaxis, cosine.yaxis) for tick in axis.get_ticklabels()
            if tick.get_color() == GOLD]  # fmt: skip
    assert gold == ["3", "3"]
    (inset,) = cosine.child_axes
    box = inset.get_position()
    assert box.x1 < 0.5 * (cosine.get_position().x0 + cosine.get_position().x1)  # in the lower-left half
    outlined = sorted(
        (p.get_x() + 0.5, p.get_y() + 0.5, p.get_width(), p.get_height())
        for p in inset.patches
        if isinstance(p, Rectangle) and p.get_edgecolor()[:3] == pytest.approx(matplotlib.colors.to_rgb(GOLD))
    )
    first = int(inset.images[0].get_extent()[0] + 0.5)
    assert outlined == [(first, 3, 10, 1), (3, first, 1, 10)]  # position 3's row and column in the corner
    assert first <= 3 < first + 12


def test_local_window_outlines_the_keys_the_model_attends_to():
    """The outline round a local-p row spans exactly the keys LocalAttention may weigh: those whose
    weight can be non-zero, and every one of them (a window cut at either end of the source)."""
    import torch

    from attnkit.attention.recurrent import LocalAttention
    from attnkit.plots.attention import window_cells

    torch.manual_seed(0)
    s, window = 9, 2
    attention = LocalAttention(query_dim=8, key_dim=8, mode="local-p", window=window)
    keys = torch.randn(1, s, 8)
    out = attention(torch.randn(1, 12, 8) * 3, keys, keys, need_weights=True)
    for centre, row in zip(out.p_t[0].tolist(), out.weights[0]):
        first, last = window_cells(centre, window, s)
        inside = np.arange(s)
        inside = (inside > first) & (inside < last)  # the cells between the outline's edges
        assert (row[torch.from_numpy(~inside)] == 0).all(), (centre, row)
        assert (row[torch.from_numpy(inside)] > 0).all(), (centre, row)


def test_a_local_window_cut_by_the_matrix_is_open_on_that_side():
    """A window that would hold keys before the first or after the last is drawn open on that side
    (it goes on past the matrix); one that ends at the first or last key exactly is closed."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Polygon

    from attnkit.plots.attention import _draw_local_window, window_cells

    s, window = 9, 2
    cases = {0.5: "left", 7.5: "right", 4.0: "closed", 2.0: "closed", 6.0: "closed"}
    fig = Figure()
    ax = fig.add_subplot()
    _draw_local_window(ax, np.array(list(cases)), window, s)
    outlines = [p for p in ax.patches if isinstance(p, Polygon) and p.get_xy()[:, 1].min() > -1]
    assert len(outlines) == len(cases)
    for outline, (centre, side) in zip(outlines, cases.items()):
        xs = outline.get_xy()[:, 0]
        first, last = window_cells(centre, window, s)
        assert {round(x, 6) for x in xs} == {first, last}, (centre, xs)
        assert outline.get_closed() == (side == "closed"), centre
        if side != "closed":  # the open side is the path's two ends
            ends = {xs[0], xs[-1]}
            assert ends == ({first} if side == "left" else {last}), (centre, xs)
    ax.cla()
    _draw_local_window(ax, np.array([4.0]), 10, s)  # cut at both ends: only its top and bottom lines
    lines = [p for p in ax.patches if isinstance(p, Polygon) and p.get_xy()[:, 1].min() > -1]
    assert len(lines) == 2 and not any(line.get_closed() for line in lines)


def test_every_score_formula_sets_as_maths():
    """The walk-through writes each score function's formulas, as the model and the RNN rename
    them, in mathtext: each must parse, vectors bold and indices not."""
    from matplotlib.mathtext import MathTextParser

    from attnkit.attention import scores
    from attnkit.plots.layout import math, wrap_math

    parser = MathTextParser("agg")
    formulas = {"q ⊙ k_j", "q · k_j / √32", "z = Σ_j a_j v_j", "c_t = Σ_s a_s h̄_s", "p_t ± D", "d_k"}
    for cls in vars(scores).values():
        if isinstance(cls, type) and issubclass(cls, scores.ScoreFunction) and "formula" in vars(cls):
            for f in (cls.formula, cls.terms_formula):
                formulas |= {f, f.replace("q", "h_t").replace("k", "h̄_s")}
    for f in formulas:
        parser.parse(math(f), dpi=100)  # raises on a malformed formula
    assert math("d_k") == "$d_k$" and math("q · k_j") == r"$\mathbf{q} \cdot \mathbf{k}_j$"
    long = "2. " + math("v_a ⊙ tanh(W_a h_t + U_a h̄_s)") + ": each row, over all 256 dimensions, sums to the score"
    assert all(line.count("$") % 2 == 0 for line in wrap_math(long, 44).splitlines())  # never broken inside


def test_a_walkthrough_marks_the_querys_own_key_and_keeps_its_keys_off_the_bars():
    for walkthrough in (_walkthrough(), _recurrent_walkthrough()):
        fig = plot_walkthrough(walkthrough)
        fig.canvas.draw()  # tick labels as drawn
        legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == 2  # the scores and the weights
        for ax, legend in legends:
            key, frame, title = (a.get_window_extent() for a in (legend, ax, ax.title))
            assert frame.y1 <= key.y0 < frame.y1 + 6  # just above the panel, over none of its bars
            assert key.y1 <= title.y0  # under the panel's title
            assert key.x1 <= frame.x1 + 1  # no wider than its panel (else the layout narrows the other panels)
            ends = [e for bars in ax.containers for p in bars for e in (p.get_y(), p.get_y() + p.get_height())]
            top, span = max(ends), max(ends) - min(ends)
            assert ax.get_ylim()[1] <= max(1.05, top + 0.06 * span)  # no head room made for a key in the panel
            handles = legend.legend_handles
            assert type(handles[0]).__name__ == "Rectangle" and handles[0].get_facecolor()[:3] != (1, 1, 1)
    fig = plot_walkthrough(_walkthrough())
    fig.canvas.draw()
    bold = [sum(t.get_fontweight() == "bold" for t in ax.get_yticklabels() + ax.get_xticklabels()) for ax in fig.axes]
    assert sorted(b for b in bold if b) == [1] * 6  # q, and key 2 in each of the five panels


def test_attribution_panels_name_the_keys_over_the_top_row_and_under_the_last():
    from attnkit.plots.attribution import plot_methods

    rows, cols = ["Ein", "Mann"], ["A", "\u2423", "man"]
    scores = np.full((2, 3), 1 / 3)
    fig = plot_methods([(f"method {i}", scores) for i in range(4)], rows, cols)
    FigureCanvasAgg(fig).draw()
    grids = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    per_row = len({round(ax.get_position().y0, 3) for ax in grids})
    assert per_row == 2  # two rows of two panels

    def shown(ax, top):
        ticks = ax.xaxis.get_major_ticks()
        return [
            (t.label2 if top else t.label1).get_text() for t in ticks if (t.label2 if top else t.label1).get_visible()
        ]

    assert shown(grids[0], top=True) == ["A", "", "man"] and shown(grids[0], top=False) == []  # the space: upright
    assert shown(grids[-1], top=False) == ["A", "", "man"] and shown(grids[-1], top=True) == []
    space = [t for t in grids[0].texts if t.get_text() == "\u2423"]
    assert len(space) == 1 and space[0].get_va() == "bottom"  # drawn above the top row, not under it


def test_a_walkthrough_draws_the_query_on_its_own_scale_and_names_a_lone_mark():
    import dataclasses

    w = _walkthrough()
    w = dataclasses.replace(w, q=w.q / 10, key_tokens=[*w.key_tokens[:-1], "."])  # a query far smaller than its keys
    fig = plot_walkthrough(w)
    fig.canvas.draw()
    panel = {ax.get_label(): ax for ax in fig.axes}
    strip, keys = (next(a for a in panel[name].get_children() if isinstance(a, AxesImage)) for name in ("q", "qk"))
    assert strip.get_clim()[1] == pytest.approx(np.abs(w.q).max()) and keys.get_clim()[1] == pytest.approx(
        np.abs(w.k).max()
    )
    assert (
        strip.colorbar is not None and strip.colorbar.ax.get_ylabel() == f"$\\mathbf{{q}}$ (±{np.abs(w.q).max():.2f})"
    )
    rows = [t.get_text() for t in panel["qk"].get_yticklabels()]
    assert rows[-1] == "“.”"  # quoted where it stands upright, so that it is seen as a token


def test_a_walkthrough_shows_the_dimensions_that_decide_the_scores_and_names_them():
    """Of more dimensions than it shows, a walk-through shows those with the largest Σ_s |term| (no dimension
    left out weighs more than one shown), each column at its own dimension's cells, named on the axis; an RNN's
    weighted states show the same dimensions, and the window and p_t are named once, in panel 3's key."""
    w = _recurrent_walkthrough()
    fig = plot_walkthrough(w, dims=3)
    fig.canvas.draw()
    panel = {ax.get_label(): ax for ax in fig.axes}
    weight = np.abs(w.terms).sum(axis=0)
    shown = sorted(np.argsort(weight)[-3:])  # the three heaviest by the terms themselves
    assert weight[shown].min() >= np.delete(weight, shown).max()
    for name in ("qk", "prod", "values"):
        ticks = {*panel[name].get_xticks(), *panel[name].get_xticks(minor=True)}
        assert sorted(ticks) == [0, 1, 2], name  # a tick on every column, named or not
    image = {
        n: next(a for a in panel[n].get_children() if isinstance(a, AxesImage)).get_array()
        for n in ("qk", "prod", "values")
    }
    np.testing.assert_array_equal(image["qk"], w.k[:, shown])
    np.testing.assert_array_equal(image["prod"], w.terms[:, shown])
    np.testing.assert_allclose(image["values"][-1], w.context[shown])  # c_t on the same dimensions
    assert [t.get_text() for t in panel["values"].get_xticklabels()] == [str(d) for d in shown]
    assert panel["qk"].get_xticklabels() == [] and "(named in panel 5)" in panel["prod"].get_xlabel()
    assert "the 3 of" in panel["prod"].get_xlabel() and "shown in panels 1 and 2" in panel["values"].get_xlabel()
    keys = [[t.get_text() for t in panel[n].get_legend().get_texts()] for n in ("scores", "softmax")]
    named = [[t for t in key if t.startswith("window") or f"{w.p_t:.2f}" in t] for key in keys]
    assert len(named[0]) == 2 and named[1] == []  # the window and p_t, in panel 3's key only


def test_a_transformer_walkthrough_names_every_other_dimension_and_shows_the_values_of_largest_z():
    w = _walkthrough()
    fig = plot_walkthrough(w, dims=4)
    fig.canvas.draw()
    panel = {ax.get_label(): ax for ax in fig.axes}
    shown = sorted(np.argsort(np.abs(w.terms).sum(axis=0))[-4:])
    assert [t.get_text() for t in panel["qk"].get_xticklabels()] == [str(d) for d in shown[::2]]
    by_z = sorted(np.argsort(np.abs(w.context))[-4:])  # the values' own: those of largest |z|
    assert [t.get_text() for t in panel["values"].get_xticklabels()] == [str(d) for d in by_z]
    values = next(a for a in panel["values"].get_children() if isinstance(a, AxesImage)).get_array()
    np.testing.assert_allclose(values[:-1], w.weights[:, None] * w.v[:, by_z])
