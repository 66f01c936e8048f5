"""The head atlas as a figure: per attention kind, each head's ablation effect and importance,
then one layers x heads grid per detector with the heads it flags outlined."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

import numpy as np
from matplotlib.colors import Normalize, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from .layout import WIDTH

MINUS = "\u2212"
FLAG = "#e020c0"  # a flagged head's outline: magenta, apart from the red of the ablation's scale
NOTE_CHARS = round(WIDTH * 11)  # characters of a 10.5 pt bold line across the figure


@dataclass(frozen=True)
class Grid:
    """One panel: ``values`` (layers, heads) with its title. ``scale``: "share" (0 to 1),
    "tokens" (0 to ``top``), "effect" (diverging about 0, -``top`` to ``top``) or "importance"
    (0 to ``top``); ``top`` is shared by the grids it should compare (default: the grid's own
    largest); ``threshold``: heads at or past it are outlined; ``marks``: text written in a cell
    (a positional head's offset)."""

    title: str
    values: np.ndarray
    scale: str = "share"
    threshold: float | None = None
    unit: str = ""
    marks: dict[tuple[int, int], str] | None = None
    top: float | None = None


def plot_atlas(kinds: Sequence[tuple[str, str, list[Grid]]], *, title: str = "", footnote: str = "") -> Figure:
    """One block of panels per heading (its heading, a note under it, its grids). Cells carry their
    values where a cell is wide enough to read them: shares to two digits, tokens to one decimal,
    effects and importance in thousandths when they are below 1. Grids of a row that share a scale
    share one colour bar; shares (0 to 1) and distances have none of their own: a key over the
    first block that has one gives their scales."""
    heads = max(g.values.shape[1] for _, _, grids in kinds for g in grids)
    layers = max(g.values.shape[0] for _, _, grids in kinds for g in grids)
    columns = 6 if heads <= 6 else 4
    # grids of one size in every block: a block that fills whole rows of `columns` keeps them; the
    # others share the fewest slots a row (at least 4) that holds each in as few rows as `columns` would
    rows = [-(-len(grids) // columns) for _, _, grids in kinds]
    full = [len(grids) % columns == 0 for _, _, grids in kinds]
    share = max([max(4, -(-len(g) // r)) for (_, _, g), r, f in zip(kinds, rows, full) if not f] or [columns])
    slots = [columns if f else min(columns, share) for f in full]
    rows = [-(-len(grids) // s) for (_, _, grids), s in zip(kinds, slots)]
    square = layers <= 1.5 * heads  # square cells where the grid is not much taller than wide
    # a square grid is as wide as its slot less its tick labels and margins (about 0.45 in), so its
    # height is too; a tall grid takes 0.78 of the slot's width per head
    side = [WIDTH / c - 0.45 if square else WIDTH / c * 0.78 for c in slots]
    grid_h = [float(np.clip(w * layers / heads, 0.9, 4.5)) for w in side]
    notes = [textwrap.fill(n, NOTE_CHARS, break_on_hyphens=False).count("\n") + 1 if n else 0 for _, n, _ in kinds]
    # a block's rows are alike in height: each has room for a colour bar if one of them has one
    barred = [any(_barred(g) for g in grids) for _, _, grids in kinds]
    heights = [r * (g + 1.05 + 0.25 * b) + 0.35 + 0.2 * n for r, g, b, n in zip(rows, grid_h, barred, notes)]
    foot = 0.2 * (textwrap.fill(footnote, round(WIDTH * 14)).count("\n") + 1) + 0.1 if footnote else 0
    unbarred = sorted({g.scale for _, _, grids in kinds for g in grids if not _barred(g)}, key=list(KEYS).index)
    # the scales of the grids without a colour bar: one row of keys over the first block that has such a grid
    at = next((i for i, (_, _, grids) in enumerate(kinds) if not all(map(_barred, grids))), len(kinds))
    key = [0.8] if unbarred else []
    ratios = heights[:at] + key + heights[at:]
    fig = Figure(figsize=(WIDTH, sum(ratios) + (0.45 if title else 0) + foot), layout="constrained")
    subs = list(fig.subfigures(len(ratios), 1, height_ratios=ratios, squeeze=False)[:, 0])
    key_sub = subs.pop(at) if unbarred else None
    for sub, (label, note, grids), r, cols in zip(subs, kinds, rows, slots):
        note = textwrap.fill(note, NOTE_CHARS, break_on_hyphens=False)  # a long note wraps within the page
        sub.suptitle(label + (f"\n{note}" if note else ""), fontsize=10.5, x=0.01, ha="left", fontweight="bold")
        axes = sub.subplots(r, cols, squeeze=False)
        for ax in axes.flat[len(grids) :]:
            ax.set_visible(False)
        cell = WIDTH / cols * 0.8 / heads  # inches
        drawn = [
            (ax, grid, _panel(ax, grid, cell=cell, square=square, first=i % cols == 0))
            for i, (ax, grid) in enumerate(zip(axes.flat, grids))
        ]
        for start in range(0, len(drawn), cols):  # one colour bar under each run of a row's grids on one scale
            for _, run in groupby(drawn[start : start + cols], key=lambda d: _scale(d[1])):
                same = list(run)
                _, grid, image = same[0]
                if _barred(grid):
                    _bar(sub, [ax for ax, _, _ in same], image, grid)
    if key_sub is not None:
        _key(key_sub, unbarred)
    if title:
        fig.suptitle(title, fontsize=13, fontweight="bold")
    if footnote:  # how to read the outlines and ranks, under every block
        fig.supxlabel(textwrap.fill(footnote, round(WIDTH * 12.5)), fontsize=10, ha="left", x=0.01, color="#1f2937")
    return fig


KEYS = {  # the scales of grids without a colour bar: (colour map, label, the bar's end)
    "share": ("viridis", "weights and shares (the unit under each grid)", "1"),
    "tokens": ("magma", "distances, in tokens", "its grid's longest"),
}


def _key(sub, scales: list[str]) -> None:
    """One short colour bar per scale that no grid's own bar shows, side by side."""
    from matplotlib.cm import ScalarMappable

    sub.suptitle("the scales of the grids below without a colour bar of their own:", fontsize=9, x=0.01, ha="left")
    grid = sub.subplots(1, 5, squeeze=False, width_ratios=[0.2, 1, 0.3, 1, 0.5])[0]
    for ax in grid[[0, 2, 4]]:
        ax.set_visible(False)
    axes = grid[[1, 3]]
    for ax, scale in zip(axes, scales):
        cmap, label, end = KEYS[scale]
        bar = sub.colorbar(ScalarMappable(Normalize(0, 1), cmap), cax=ax, orientation="horizontal")
        bar.set_ticks([0, 0.5, 1], labels=["0", "", end] if end != "1" else ["0", "0.5", "1"])
        bar.ax.tick_params(labelsize=9)
        bar.set_label(label, fontsize=9)
    for ax in axes[len(scales) :]:
        ax.set_visible(False)


def _barred(grid: Grid) -> bool:
    """Whether a grid's scale needs a colour bar: an effect's or an importance's does (their ends
    are read off it); a share's (0 to 1) or a distance's (tokens) is said once in the footnote, and
    every cell carries its value."""
    return grid.scale in ("effect", "importance")


def _scale(grid: Grid) -> tuple:
    """What a colour bar says: grids alike in it can share one."""
    return grid.scale, _limits(grid), grid.unit


def _limits(grid: Grid) -> tuple[str, float, float]:
    finite = grid.values[np.isfinite(grid.values)]
    top = grid.top if grid.top is not None else float(np.abs(finite).max()) if finite.size else 1.0
    top = top or 1.0
    if grid.scale == "share":
        return "viridis", 0.0, 1.0
    if grid.scale == "effect":
        return "RdBu_r", -top, top
    return "magma", 0.0, top


def _panel(ax, grid: Grid, *, cell: float, square: bool, first: bool):
    """One grid, its image returned for a colour bar; ``cell``: a cell's width in inches (its value
    written in it from 0.24, in type that grows with it). Where it has no colour bar, its unit is
    the x label's second line."""
    values = grid.values
    layers, heads = values.shape
    cmap, lo, hi = _limits(grid)
    # an effect's scale is shared by every kind, so one costly head sets it: symmetric-log, so that
    # the small effects of the other kinds still show (linear within a fiftieth of the largest)
    norm = SymLogNorm(hi / 50, vmin=lo, vmax=hi) if grid.scale == "effect" else Normalize(lo, hi)
    im = ax.imshow(values, cmap=cmap, norm=norm, aspect="equal" if square else "auto", interpolation="nearest")
    flagged = np.zeros_like(values, dtype=bool) if grid.threshold is None else values >= grid.threshold
    title = grid.title
    if flagged.all():  # outlining every cell says nothing a word cannot
        title = title.replace("flagged at", "every head") if "flagged at" in title else title + "\nevery head flagged"
        flagged[:] = False
    ax.set_title(title, fontsize=10)
    ax.set_xticks(range(0, heads, max(1, -(-heads // 8))))
    ax.set_yticks(range(0, layers, max(1, -(-layers // 10))))
    ax.tick_params(labelsize=9, length=2)
    unit = grid.unit if not _barred(grid) else ""  # the colour bar's label gives the others
    ax.set_xlabel("head" + (f"\n{unit}" if unit else ""), fontsize=9, labelpad=1)
    if first:
        ax.set_ylabel("layer", fontsize=9, labelpad=1)
    for li, h in zip(*np.nonzero(flagged)):
        ax.add_patch(Rectangle((h - 0.5, li - 0.5), 1, 1, fill=False, edgecolor=FLAG, lw=2.0))
    thousandths = grid.scale in ("effect", "importance") and hi < 1
    size = float(np.clip(cell * 72 * 0.42, 9, 12))
    for li in range(layers):
        for h in range(heads):
            v = values[li, h]
            text = (grid.marks or {}).get((li, h)) or (_cell(v, grid.scale, thousandths) if cell >= 0.24 else "")
            if text and np.isfinite(v):
                level = float(norm(v))
                light = abs(level - 0.5) > 0.3 if cmap == "RdBu_r" else level < 0.55
                ax.text(h, li, text, ha="center", va="center", fontsize=size if len(text) < 4 else size - 1,
                        color="white" if light else "black")  # fmt: skip
    return im


def _bar(fig, axes, im, grid: Grid) -> None:
    """One colour bar under ``axes`` (grids on one scale), its ticks at the scale's ends."""
    _, _, hi = _limits(grid)
    thousandths = grid.scale in ("effect", "importance") and hi < 1
    bar = fig.colorbar(im, ax=axes, orientation="horizontal", fraction=0.08, pad=0.02, aspect=18 * len(axes))
    if grid.scale == "effect":  # the ends of the scale, so its largest value is read off, and on the
        # symmetric-log scale each power of ten between its linear part and the ends
        inner = [10.0**k for k in range(-6, 3) if hi / 50 * 2 < 10.0**k < hi / 3]
        # the colours stay symmetric (a fall as pale as a rise of its size); the bar shows only the range
        # the grids reach, and at least the linear part below 0
        least = min(float(np.nanmin(ax.get_images()[0].get_array())) for ax in axes)
        left = min(least, -hi / 50)
        bar.ax.set_xlim(left, hi)
        bar.set_ticks([left, *(-t for t in reversed(inner) if -t > left), 0, *inner, hi])
    elif grid.scale == "importance":
        bar.set_ticks([0, hi / 2, hi])
    else:
        bar.ax.xaxis.set_major_locator(MaxNLocator(3))
    if thousandths:
        bar.ax.xaxis.set_major_formatter(
            lambda x, _: _signed(round(x * 1000)) if grid.scale == "effect" else f"{x * 1000:.0f}"
        )
    bar.ax.tick_params(labelsize=8)
    if grid.unit:
        bar.set_label(grid.unit.replace("{k}", "10\u207b\u00b3 " if thousandths else ""), fontsize=9)


def _signed(n: float) -> str:
    """A rise as it is, a fall with a minus sign (the colours say which too)."""
    return "0" if n == 0 else f"{n:g}" if n > 0 else f"{MINUS}{-n:g}"


def _cell(v: float, scale: str, thousandths: bool) -> str:
    """A cell's value in at most four characters."""
    if scale == "tokens":
        return f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}"
    if thousandths:
        n = round(v * 1000)
        return _signed(n) if scale == "effect" else f"{n}"
    if scale == "effect":
        return _signed(round(v, 1))
    text = f"{v:.2f}"
    return "0" if float(text) == 0 else text.replace("0.", ".", 1) if abs(v) < 1 else f"{v:.1f}"
