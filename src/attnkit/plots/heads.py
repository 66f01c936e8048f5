"""The head atlas as a figure: one layers x heads grid per detector, the heads it flags outlined,
and each head's ablation effect and importance beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

COLUMNS = 5  # panels a row
WIDTH = 8.5  # inches: 1,100 pixels at the 130 dpi figures are saved at


@dataclass(frozen=True)
class Grid:
    """One panel: ``values`` (layers, heads) with its title. ``scale``: "share" (0 to 1, one
    colour scale for every such panel), "tokens" (0 to its largest), "effect" (diverging about 0)
    or "importance" (0 to its largest); ``threshold``: heads at or past it are outlined."""

    title: str
    values: np.ndarray
    scale: str = "share"
    threshold: float | None = None
    unit: str = ""
    marks: dict[tuple[int, int], str] | None = None  # text written in a flagged cell (an offset)


def plot_atlas(kinds: Sequence[tuple[str, list[Grid]]], *, title: str = "") -> Figure:
    """One block of panels per attention kind (its label, its grids), ``COLUMNS`` panels a row.
    Cells carry their values where the grid is small enough to read them."""
    layout = [(label, grids, -(-len(grids) // COLUMNS)) for label, grids in kinds]
    cols = min(COLUMNS, max(len(g) for _, g, _ in layout))
    panel_w = WIDTH / cols
    layers, heads = layout[0][1][0].values.shape
    panel_h = float(np.clip(panel_w * 0.8 * layers / heads, 1.0, 4.5)) + 0.9  # the grid, title and colour bar
    heights = [rows * panel_h + 0.35 for _, _, rows in layout]
    fig = Figure(figsize=(WIDTH, sum(heights) + (0.4 if title else 0)), layout="constrained")
    subs = fig.subfigures(len(layout), 1, height_ratios=heights, squeeze=False)[:, 0]
    for sub, (label, grids, rows) in zip(subs, layout):
        sub.suptitle(label, fontsize=12, fontweight="bold", x=0.01, ha="left")
        axes = sub.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[len(grids) :]:
            ax.set_visible(False)
        for ax, grid in zip(axes.flat, grids):
            _panel(sub, ax, grid, numbers=panel_w / heads >= 0.4)
    if title:
        fig.suptitle(title, fontsize=12)
    return fig


def _limits(grid: Grid) -> tuple[str, float, float]:
    finite = grid.values[np.isfinite(grid.values)]
    top = float(np.abs(finite).max()) if finite.size else 1.0
    if grid.scale == "share":
        return "viridis", 0.0, 1.0
    if grid.scale == "effect":
        return "RdBu_r", -(top or 1.0), top or 1.0
    return "magma", 0.0, top or 1.0


def _panel(fig, ax, grid: Grid, *, numbers: bool) -> None:
    values = grid.values
    layers, heads = values.shape
    cmap, lo, hi = _limits(grid)
    im = ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, aspect="auto", interpolation="nearest")
    ax.set_title(grid.title, fontsize=10)
    step = max(1, -(-heads // 8))
    ax.set_xticks(range(0, heads, step))
    ax.set_yticks(range(0, layers, max(1, -(-layers // 10))))
    ax.tick_params(labelsize=9, length=2)
    ax.set_xlabel("head", fontsize=9, labelpad=1)
    ax.set_ylabel("layer", fontsize=9, labelpad=1)
    if grid.threshold is not None:
        for li, h in zip(*np.nonzero(values >= grid.threshold)):
            ax.add_patch(Rectangle((h - 0.5, li - 0.5), 1, 1, fill=False, edgecolor="#ff2d55", lw=2.0))
    for li in range(layers):
        for h in range(heads):
            v = values[li, h]
            text = (grid.marks or {}).get((li, h)) or (_short(v, grid.scale, hi) if numbers and np.isfinite(v) else "")
            if text:
                dark = (v - lo) / ((hi - lo) or 1.0)
                light = dark < 0.55 if cmap != "RdBu_r" else abs(dark - 0.5) > 0.3
                colour = "white" if light else "black"
                ax.text(h, li, text, ha="center", va="center", fontsize=8 if len(text) < 5 else 7, color=colour)
    bar = fig.colorbar(im, ax=ax, orientation="horizontal", fraction=0.08, pad=0.02, aspect=18)
    if grid.scale == "share":
        bar.set_ticks([0, 0.5, 1])
    else:
        bar.ax.xaxis.set_major_locator(MaxNLocator(3, symmetric=grid.scale == "effect"))
    bar.ax.tick_params(labelsize=8)
    if grid.unit:
        bar.set_label(grid.unit, fontsize=9)


def _short(v: float, scale: str, top: float) -> str:
    """A cell's value in at most five characters, the leading zero dropped."""
    if scale == "tokens":
        return f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}"
    digits = 3 if top < 0.1 else 2
    text = f"{v:+.{digits}f}" if scale == "effect" else f"{v:.{digits}f}"
    text = text.replace("0.", ".", 1) if abs(v) < 1 else text
    return "0" if float(text.replace("+", "") or 0) == 0 else text
