"""Attention heatmaps: target tokens (rows) attending to source tokens (columns).
Token labels are drawn as given (``data.readable`` turns subword pieces into them)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps, patheffects
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle
from matplotlib.transforms import offset_copy

from ..data.tokenizer import SPACE
from .layout import WIDTH, fit_height, upright_spaces

WINDOW_COLOUR = "#ff9f1c"  # local attention's window: orange reads on every viridis colour and on white


def plot_alignment(
    weights: np.ndarray,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    *,
    title: str = "",
    p_t: np.ndarray | None = None,
    window: int | None = None,
    xlabel: str = "source",
    ylabel: str = "output",
    vmax: float | None = 1.0,
) -> Figure:
    """Heatmap of a (t, s) attention matrix, rows ``tgt_tokens`` and columns ``src_tokens``, on the
    scale 0 .. ``vmax`` (None: 0 .. the largest weight, said on the colour bar); optionally local
    attention's p_t and window [p_t - D, p_t + D], the window open where the matrix's edge cuts it
    (a p_t past the last key's cell, possible as p_t = S * sigmoid(.), is marked just past the edge)."""
    t, s = weights.shape
    if len(src_tokens) != s or len(tgt_tokens) != t:
        raise ValueError(f"weights are {t}x{s} but got {len(tgt_tokens)} target and {len(src_tokens)} source tokens")
    cell = min(0.42, (WIDTH - 2.4) / max(s, 1))  # square cells, the figure at most a docs column wide
    label = 0.075 * max(map(len, [*src_tokens, *tgt_tokens]), default=1)  # inches for the token labels
    width = max(4.0, 1.2 + label + cell * s)
    # room for the title's lines and, for local attention, the key's rows under the figure
    lines = sum(len(textwrap.wrap(line, int(width * 12))) or 1 for line in title.split("\n")) if title else 0
    key = (3.5 if width < 7 else 2) * 0.22 if p_t is not None else 0.0
    fig = Figure(figsize=(width, max(3.0, 1.3 + label + cell * t) + 0.2 * lines + key), layout="constrained")
    ax = fig.subplots()
    top = max(1e-9, float(weights.max())) if vmax is None else vmax
    im = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=top, aspect="equal", interpolation="nearest")
    fs = min(10.0, max(7.0, cell * 72 * 0.65))  # a label about two thirds of its cell
    short = max(map(len, src_tokens), default=0) <= 3  # short labels stay upright
    ax.set_xticks(
        range(s),
        list(src_tokens),
        rotation=0 if short else 60,
        ha="center" if short else "right",
        rotation_mode="anchor",
        fontsize=fs,
    )
    ax.set_yticks(range(t), list(tgt_tokens), fontsize=fs)
    upright_spaces(ax)
    if SPACE in src_tokens or SPACE in tgt_tokens:
        xlabel += f"   ({SPACE}: a space of its own, before the next word)"
    ax.set_xlabel(textwrap.fill(xlabel, int(fig.get_figwidth() * 11)))  # within the figure's width
    ax.set_ylabel(ylabel)
    if p_t is not None:
        _draw_local_window(ax, np.asarray(p_t, dtype=float), window, s)
        columns = 2 if fig.get_figwidth() >= 7 else 1  # a narrow figure: its key in one column, inside it
        fig.legend(
            loc="outside lower center", ncol=columns, fontsize=9, frameon=False
        )  # below the figure: covers no cell
    ax.set_xlim(-0.5, s - 0.5)
    ax.set_ylim(t - 0.5, -0.5)
    scale = "0 to 1" if vmax == 1.0 else f"0 to {top:.2g}, this figure's largest" if vmax is None else f"0 to {top:g}"
    # what a local window's weights are, by their scale: why a row may sum to less than 1
    # (wrapped to the bar: about 0.6 of the figure's height, a character 6 points)
    local = "softmax in the window (local-p: × a Gaussian, a row sums to < 1)" if window is not None else ""
    local = "".join("\n" + line for line in textwrap.wrap(local, int(fig.get_figheight() * 0.6 * 72 / 6)))
    fig.colorbar(im, ax=ax, shrink=0.8, label=f"attention weight ({scale}){local}")
    if title:  # wrapped to the figure's width: a title never runs off the canvas
        width = int(fig.get_figwidth() * 12)
        ax.set_title("\n".join(textwrap.fill(line, width) for line in title.split("\n")), fontsize=10)
    fit_height(fig)  # the room made for the title and the key, less what they did not take
    return fig


def window_cells(centre: float, window: int, s: int) -> tuple[float, float]:
    """The cell edges round the keys of a local window: the integer positions j with
    p_t - D <= j <= p_t + D among 0 .. s - 1 (those the model attends to), as (left, right)
    in data coordinates; left > right when none is inside."""
    first, last = max(math.ceil(centre - window), 0), min(math.floor(centre + window), s - 1)
    return first - 0.5, last + 0.5


def _draw_local_window(ax, p_t: np.ndarray, window: int | None, s: int) -> None:
    """p_t per output row (a white ring; a white triangle just past the right edge when it lies past
    the last key's cell) and the window [p_t - D, p_t + D] as an orange outline round the row's cells
    in it, open on a side the matrix's edge cuts (no frame there, so that the open side shows)."""
    edge = s - 0.5
    rows = np.arange(len(p_t))
    if window is not None:
        ax.spines[:].set_visible(False)
        for row, centre in enumerate(p_t):
            lo, hi = window_cells(centre, window, s)
            if lo > hi:  # no key within p_t ± D
                continue
            # an outline round the row's window: it belongs to its row and leaves the cells in view. Tall rows
            # (few of them): on the row's edges, its stroke over them, so that no sliver of a cell shows outside
            # it; short ones: a little inside them, so that two rows' outlines stay apart
            inset = 0.02 if len(p_t) <= 16 else 0.04
            top, bottom = row - 0.5 + inset, row + 0.5 - inset
            # a window cut by the matrix's edge (it would hold a key before the first or after the last) is open
            # on that side: it goes on past it
            cut_left, cut_right = math.ceil(centre - window) < 0, math.floor(centre + window) > s - 1
            box = [(lo, top), (hi, top), (hi, bottom), (lo, bottom)]  # open on the left; closed by the Polygon
            if cut_left and cut_right:
                lines = [box[:2], box[2:]]
            elif cut_right:
                lines = [[(hi, top), (lo, top), (lo, bottom), (hi, bottom)]]
            else:
                lines = [box]
            for line in lines:
                ax.add_patch(
                    Polygon(
                        line,
                        closed=not cut_left and not cut_right,
                        clip_on=False,  # a side on the matrix's edge drawn whole, not half
                        fill=False,
                        edgecolor=WINDOW_COLOUR,
                        lw=1.2,
                        zorder=2,
                        path_effects=[patheffects.withStroke(linewidth=2.2, foreground="black")],
                    )
                )
        # the key's swatch as the outline looks in the figure, round a cell of the scale's low end
        # (drawn off the axes, which clip it: it is there for the legend only)
        ax.add_patch(
            Rectangle(
                (-100, -100),
                1,
                1,
                facecolor=colormaps["viridis"](0.0),
                edgecolor=WINDOW_COLOUR,
                lw=1.2,
                path_effects=[patheffects.withStroke(linewidth=2.2, foreground="black")],
                label=f"window $p_t \\pm D$ ($D$ = {window}),\nopen where the matrix's edge cuts it",
            )
        )
    inside = p_t <= edge
    # each output step has its own centre: marks per row, never a line joining rows; a ring, white on
    # black, so that the cell under it stays in view
    ring = [patheffects.withStroke(linewidth=2.6, foreground="black")]
    ax.plot(p_t[inside], rows[inside], ls="none", marker="o", ms=6.5, mfc="none", mec="white", mew=1.3,
            path_effects=ring, label="$p_t$, the predicted centre", zorder=3, clip_on=False)  # fmt: skip
    if (~inside).any():  # just outside the matrix, clear of any dot on its edge
        beyond = offset_copy(ax.transData, fig=ax.get_figure(root=True), x=6, units="points")
        ax.plot(np.full((~inside).sum(), edge), rows[~inside], ls="none", color="white", marker=">", ms=7,
                mec="black", mew=0.8, label="$p_t$ past the matrix's right edge", zorder=3, clip_on=False,
                transform=beyond)  # fmt: skip


def _fontsize(n: int) -> float:
    """Token labels' size for n tokens: a sentence's as large as the docs' own small type."""
    return 10.5 if n <= 14 else 9.0 if n <= 20 else 7.0 if n <= 35 else 5.0


def plot_attention_grid(
    maps: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    title: str = "",
    with_mean: bool = True,
) -> Figure:
    """A grid of (layers, heads) attention maps: one row per layer, one column per
    head, and a last column with the head average. Tokens label the outer axes."""
    layers, heads, t, s = maps.shape
    if len(query_tokens) != t or len(key_tokens) != s:
        raise ValueError(f"maps are {t}x{s} but got {len(query_tokens)} query and {len(key_tokens)} key tokens")
    cols = heads + (1 if with_mean and heads > 1 else 0)
    gap = 0.25 if cols > heads else 0.0  # the mean column set apart from the heads
    # at most a docs column wide (the colour bar under the panels); a panel as tall as 9-pt query labels need
    size = min(max(1.6, min(3.2, 0.13 * max(t, s))), (WIDTH - 1.0) / (cols + gap))
    tall = min(3.2, max(size, 0.17 * t)) if layers * t <= 60 else size
    fig = Figure(figsize=(1.0 + (cols + gap) * size, 1.1 + layers * tall), layout="constrained")
    ratios = [1.0] * heads + ([gap, 1.0] if gap else [])
    grid = np.atleast_2d(fig.subplots(layers, len(ratios), squeeze=False, width_ratios=ratios))
    if gap:
        for ax in grid[:, heads]:
            ax.set_visible(False)
        axes = np.concatenate([grid[:, :heads], grid[:, heads + 1 :]], axis=1)
    else:
        axes = grid
    # a label no taller than its row or column of cells, so that turned neighbours do not touch
    # (a glyph is about 0.7 of its size: rows keep apart)
    fs_q, fs_k = min(_fontsize(max(t, s)), tall * 72 / t), min(_fontsize(max(t, s)), size * 72 / s)
    for li in range(layers):
        for ci in range(cols):
            ax = axes[li, ci]
            w = maps[li, ci] if ci < heads else maps[li].mean(0)
            im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if li == 0:
                ax.set_title("mean of heads" if ci >= heads else f"head {ci}", fontsize=10.5)
            if ci == 0:
                ax.set_ylabel(f"layer {li}", fontsize=10.5)
                if layers * t <= 60:  # token labels only where they can be read
                    ax.set_yticks(range(t), list(query_tokens), fontsize=fs_q)
                    upright_spaces(ax)
            if li == layers - 1 and cols * s <= 160:
                ax.set_xticks(range(s), list(key_tokens), rotation=90, fontsize=fs_k)
                upright_spaces(ax)
    fig.colorbar(im, ax=grid, shrink=0.6, aspect=40, orientation="horizontal", pad=0.01,
                 label="attention weight (one scale, 0 to 1, for every panel)")  # fmt: skip
    if title:  # wrapped to the figure's width
        width = int(fig.get_figwidth() * 11)
        fig.suptitle("\n".join(textwrap.fill(line, width) for line in title.split("\n")), fontsize=11)
    return fig


def plot_attention_steps(
    rows: Sequence[tuple[Sequence[str], Sequence[str], Sequence[tuple[int | str, np.ndarray]]]],
    *,
    title: str = "",
    note: str = "",
    xlabel: str = "source",
    ylabel: str = "output",
) -> Figure:
    """Attention as training proceeds: one row per sentence, (query tokens, key tokens,
    [(step, (t, s) matrix), ...]); one column per step, every panel on one 0..1 scale. A step
    given as a string is the panel's title as it is (a step and its dev scores, say); ``note``:
    what the figure's reader needs to know, in small type under the panels. The figure is a docs
    column wide: four steps or fewer keep their token labels readable."""
    if not rows or not rows[0][2]:
        raise ValueError("no snapshots to draw")
    cols = len(rows[0][2])
    longest = max(max(len(q), len(k)) for q, k, _ in rows)
    size = min(max(1.8, min(3.0, 0.16 * longest)), (WIDTH - 1.0) / cols)  # at most a docs column wide
    queries, keys = max(len(q) for q, _, _ in rows), max(len(k) for _, k, _ in rows)
    tall = min(3.2, max(size, 0.2 * queries))  # a panel as tall as its query labels need at 9 pt
    # a label about 0.7 of its row's height, a turned key label 0.85 of its column's width
    fs_q, fs_k = min(9.0, max(6.0, tall / queries * 72 * 0.7)), min(9.0, max(6.0, size / keys * 72 * 0.85))
    label = fs_k / 9 * 0.09 * max(len(t) for _, k, _ in rows for t in k)  # inches under a row for its key labels
    width = 1.0 + cols * size  # the colour bar under the panels: the width is theirs
    note = "\n".join(textwrap.fill(line, int(width * 12.5)) for line in note.split("\n")) if note else ""
    height = 2.0 + len(rows) * (tall + 0.35 + label) + 0.19 * (note.count("\n") + 1 if note else 0)
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(len(rows), cols, squeeze=False)
    for r, (q, k, panels) in enumerate(rows):
        for c, (step, w) in enumerate(panels):
            ax = axes[r, c]
            if w.shape != (len(q), len(k)):
                raise ValueError(f"a {w.shape} map for {len(q)} query and {len(k)} key tokens")
            im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            ax.set_xticks(range(len(k)), list(k), rotation=90, fontsize=fs_k)
            ax.set_yticks(range(len(q)), list(q) if c == 0 else [], fontsize=fs_q)
            upright_spaces(ax)
            if r == 0:  # every row shows the same steps: their titles once, over the top row
                ax.set_title(
                    step if isinstance(step, str) else f"step {step}", fontsize=9.5 if isinstance(step, str) else 10
                )
            if c == 0:
                ax.set_ylabel(ylabel, fontsize=9)
            if r == len(rows) - 1:
                ax.set_xlabel(xlabel, fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.6, aspect=40, orientation="horizontal", pad=0.01,
                 label="attention weight (one scale, 0 to 1, for every panel)")  # fmt: skip
    if title:  # wrapped to the figure's width
        chars = int(width * 11)
        fig.suptitle("\n".join(textwrap.fill(line, chars) for line in title.split("\n")), fontsize=11)
    if note:
        fig.supxlabel(note, fontsize=10, ha="left", x=0.01, color="#1f2937")
    return fig


@dataclass
class Panel:
    """One attention map among several: ``weights`` (queries, keys), its tokens and title; local
    attention's ``p_t`` and half-width ``window``; ``cells`` (queries, keys) a mask of the cells a
    measure counts, outlined."""

    weights: np.ndarray
    keys: Sequence[str]
    queries: Sequence[str]
    title: str
    p_t: np.ndarray | None = None
    window: int | None = None
    cells: np.ndarray | None = None


CELLS_COLOUR = "#ff4fd8"  # a measure's cells outlined: magenta, as the atlas outlines the heads it flags


def plot_alignment_panels(
    rows: Sequence[Sequence[Panel]],
    *,
    row_titles: Sequence[str] = (),
    title: str = "",
    footnote: str = "",
) -> Figure:
    """Maps side by side, a row of panels per question, every one on the same scale (0 to 1) and
    one colour bar: the design space of one mechanism on one input, or each detector's head on
    its probe."""
    columns = max(len(r) for r in rows)
    longest = max(max(len(p.keys), len(p.queries)) for r in rows for p in r)
    label = 0.07 * max(len(t) for r in rows for p in r for t in [*p.keys, *p.queries])  # inches of labels
    size = min(3.4, (WIDTH - 0.6 - columns * (label + 0.2)) / columns)
    fs = max(7.5, min(9.5, size * 72 / longest * 0.95))  # a label's height: its cell's
    fig = Figure(figsize=(WIDTH, len(rows) * (size + label + 0.9) + 1.2), layout="constrained")
    # a row of its own for the colour bar: every panel the same size
    subs = fig.subfigures(len(rows) + 1, 1, squeeze=False, height_ratios=[1.0] * len(rows) + [0.2])[:, 0]
    bar, subs = subs[-1], subs[:-1]
    im = None
    for r, (sub, panels) in enumerate(zip(subs, rows)):
        if r < len(row_titles):
            sub.suptitle(row_titles[r], fontsize=10.5, fontweight="bold")
        axes = sub.subplots(1, columns, squeeze=False)[0]
        for ax, p in zip(axes, panels):
            t, s = p.weights.shape
            im = ax.imshow(p.weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
            step = max(1, math.ceil(longest * fs / (size * 72)))  # every token labelled where they fit
            ax.set_xticks(range(0, s, step), list(p.keys)[::step], rotation=90, fontsize=fs)
            ax.set_yticks(range(0, t, step), list(p.queries)[::step], fontsize=fs)
            upright_spaces(ax)
            ax.set_title(p.title, fontsize=9.5)
            if p.p_t is not None:
                _draw_local_window(ax, np.asarray(p.p_t, dtype=float), p.window, s)
            if p.cells is not None:
                _outline_cells(ax, p.cells)
            ax.set_xlim(-0.5, s - 0.5)
            ax.set_ylim(t - 0.5, -0.5)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
    assert im is not None
    cax = bar.add_axes((0.25, 0.5, 0.5, 0.16))
    bar.colorbar(im, cax=cax, orientation="horizontal")
    cax.set_title("attention weight (one scale, 0 to 1, for every panel)", fontsize=10)  # ticks under the bar
    if title:
        fig.suptitle(textwrap.fill(title, int(WIDTH * 11)), fontsize=11)
    if footnote:
        fig.supxlabel(textwrap.fill(footnote, int(WIDTH * 13)), fontsize=9, ha="left", x=0.01, color="#111")
    fit_height(fig)
    return fig


def _outline_cells(ax, cells: np.ndarray) -> None:
    """An outline round each cell of ``cells`` (queries, keys), inside the cell: the weight stays in view."""
    for i, j in zip(*np.nonzero(cells)):
        ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, edgecolor=CELLS_COLOUR, lw=1.0, zorder=2))
