"""Attribution figures: one panel per method, every panel on one scale, 0 to 1 (a row's
shares sum to 1), the scale of every attention map attnkit draws, so that the methods compare
with each other and with the attention figures."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from .layout import WIDTH, fit_height, upright_spaces


def plot_methods(
    panels: Sequence[tuple[str, np.ndarray]],
    row_tokens: Sequence[str],
    col_tokens: Sequence[str],
    *,
    title: str = "",
    row_label: str = "top-layer position",
    col_label: str = "input token",
) -> Figure:
    """panels: (method name, (rows, cols) scores in [0, 1], each row summing to 1)."""
    if not panels:
        raise ValueError("no method to draw")
    rows, cols = len(row_tokens), len(col_tokens)
    for name, scores in panels:
        if scores.shape != (rows, cols):
            raise ValueError(f"{name}: a {scores.shape} matrix for {rows} x {cols} tokens")
    side = max(2.6, min(5.0, 0.2 * max(rows, cols) + 1.2))
    ncols = max(1, min(len(panels), int((WIDTH - 1.4) // 2.6)))  # as many as fit a docs column, then more rows
    side = min(side, (WIDTH - 1.4) / ncols)
    nrows = -(-len(panels) // ncols)
    fs = 10 if max(rows, cols) <= 20 else 8 if max(rows, cols) <= 40 else 6
    turned = fs / 72 * 0.62 * max(map(len, col_tokens), default=1)  # inches of the turned key labels
    wrap = max(12, int(side * 11))  # a title's characters a line, within its panel
    titles = [textwrap.fill(name, wrap, break_on_hyphens=False) for name, _ in panels]
    lines = max(t.count("\n") + 1 for t in titles)
    # every panel has the same tokens: the key labels under the last panel of each column, and over
    # the first (the top row's columns are then read without looking down the figure)
    last_row = [i + ncols >= len(panels) for i in range(len(panels))]
    first_row = [i < ncols and not last for i, last in enumerate(last_row)]
    # a row of panels: its map and title; the figure: those rows, the key labels once, the title
    map_height = (side - 0.3) * min(1.3, rows / cols)
    title = "\n".join(textwrap.fill(line, 105) for line in title.splitlines())  # a docs column's width at 11 pt
    height = (
        nrows * (map_height + 0.2 + 0.2 * lines)
        + turned * (2 if any(first_row) else 1)
        + 0.45
        + (0.3 * (title.count("\n") + 1) if title else 0.2)
    )
    fig = Figure(figsize=(1.4 + side * ncols, height), layout="compressed")  # square cells, no gaps
    grid = np.atleast_1d(fig.subplots(nrows, ncols, sharey=True, squeeze=False)).ravel()
    for ax in grid[len(panels) :]:
        ax.set_visible(False)
    axes = grid[: len(panels)]
    im = None
    for ax, name, (_, scores), labelled, above in zip(axes, titles, panels, last_row, first_row):
        im = ax.imshow(scores, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_xticks(range(cols), list(col_tokens) if labelled or above else [], rotation=90, fontsize=fs)
        if labelled:
            ax.set_xlabel(col_label, fontsize=9)
        if above:
            ax.tick_params(axis="x", top=True, labeltop=True, bottom=False, labelbottom=False)
        ax.set_yticks(range(rows), list(row_tokens), fontsize=fs)
        upright_spaces(ax, top=above)
        ax.set_title(name, fontsize=10)
    for ax in axes[::ncols]:
        ax.set_ylabel(row_label, fontsize=9)
    assert im is not None  # panels is not empty
    top = max(float(scores.max()) for _, scores in panels)
    bar = fig.colorbar(im, ax=list(axes), shrink=0.8, label="share of each row (0 to 1, as every attention map)")
    if top < 0.95:  # how far up the scale the panels reach, marked where it is short of the end
        bar.ax.axhline(top, color="white", lw=1.2)
        bar.ax.text(
            -0.3,
            top,
            f"largest\n{top:.2f}",
            transform=bar.ax.get_yaxis_transform(),
            fontsize=10,
            va="center",
            ha="right",
        )
    if title:
        fig.suptitle(title, fontsize=11)
    fit_height(fig)
    return fig
