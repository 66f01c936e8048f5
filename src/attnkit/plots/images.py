"""Attention over an image: each generated word's weights over the image regions, one panel
per word beside the image (Xu et al. 2015, fig. 2/3 style).

The heat map is drawn region by region, not smoothed: a region's weight fills exactly the
region x region pixels it covers (``upsample``), so what is lit is what the model attended
to. The heat is opaque, so every colour in a panel is a colour of the colour bar, and the
image is traced over it (its ink's outline) to show where the weight lies. The scale is
fixed at 0-1 unless asked otherwise, so figures of different models compare.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import cast

import numpy as np
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Rectangle

from ..data.images import Box, greyscale
from .layout import WIDTH, end_ticks

CMAP = "viridis"  # dark for no weight, so a low weight stays visible against a high one
BOX_COLOUR = "#ff5a5a"  # where the word's object is: red reads on every viridis colour
PER_ROW = 4  # panels a row of a caption's figure: image and words


def upsample(weights: np.ndarray, image_shape: tuple[int, int]) -> np.ndarray:
    """(gh, gw) region weights -> (H, W): each pixel gets the weight of the region it lies in."""
    gh, gw = weights.shape
    h, w = image_shape
    if h % gh or w % gw:
        raise ValueError(f"a {gh} x {gw} grid does not tile a {h} x {w} image")
    return np.kron(weights, np.ones((h // gh, w // gw), dtype=weights.dtype))


def plot_caption(
    image: np.ndarray,
    words: Sequence[str],
    attention: np.ndarray,
    *,
    boxes: Sequence[Box | None] | None = None,
    inside: Sequence[float | None] | None = None,
    title: str = "",
    vmax: float = 1.0,
    ink: bool = True,
) -> Figure:
    """image (H, W) greyscale or (H, W, 3) RGB in [0, 1]; attention (t, gh, gw), one map per word
    of ``words``, drawn on the scale 0 .. ``vmax``; ``boxes``: where each word's object really
    is (outlined), ``inside``: the share of the word's attention inside its box
    (``evaluation.attention_in_box``), written over the panel; ``ink``: trace the outline of a
    scene's ink (its digits) over each map (a photograph has none)."""
    if attention.ndim != 3 or len(attention) != len(words):
        raise ValueError(f"attention must be (words, rows, columns) for {len(words)} word(s), got {attention.shape}")
    for name, given in (("boxes", boxes), ("shares inside", inside)):
        if given is not None and len(given) != len(words):
            raise ValueError(f"{len(given)} {name} for {len(words)} words")
    if not vmax > 0:
        raise ValueError(f"vmax must be > 0, got {vmax}")
    n = len(words) + 1
    rows = -(-n // PER_ROW)  # a docs column wide: more words, more rows,
    columns = -(-n // rows)  # as even as they go (6 panels: 2 rows of 3)
    # square panels packed together (compressed), the figure no wider than they need
    fig = Figure(figsize=(min(WIDTH, 2.3 * columns + 1.3), 2.3 * rows + 0.9), layout="compressed")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    heat = None
    for i, (ax, word) in enumerate(zip(axes[1:], words)):
        heat = _heat(ax, image, attention[i], vmax, ink=ink)
        label = f"“{word}”"
        _box(ax, boxes[i] if boxes is not None else None)
        share = inside[i] if inside is not None else None
        if share is not None:
            label += f"  {100 * share:.0f}% in box"
        ax.set_title(label, fontsize=9)
    _image(axes[0], image)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[n:]:
        ax.set_visible(False)
    if heat is not None:
        bar = fig.colorbar(heat, ax=list(axes[1:n]), shrink=0.85)
        bar.set_label(f"attention weight (0 to {vmax:g})", fontsize=9)
    _suptitle(fig, title, 12)
    _key(fig, boxes is not None, inside is not None and any(v is not None for v in inside), ink=ink)
    return fig


def _suptitle(fig, title: str, per_inch: int) -> None:
    """The figure's title, each of its lines wrapped to the figure's width (``per_inch`` characters
    an inch) alone: a line break the caller chose stays."""
    if title:
        width = int(fig.get_figwidth() * per_inch)
        fig.suptitle("\n".join(textwrap.fill(line, width) for line in title.split("\n")), fontsize=10)


def _key(
    fig, boxes: bool, inside: bool = False, cited: Sequence[str] = (), shown: str = "attention", ink: bool = True
) -> None:
    """What the marks over the heat maps are, in small type under the panels (and ``cited``: the
    methods' papers, where the rows name the methods alone; ``shown``: what the maps are)."""
    marks = ["white: the outline of the image's ink (each digit)"] if ink else []
    marks += ["dashed red: where the word's object really is"] if boxes else []
    marks += [f"% in box: the share of the word's {shown} inside it"] if inside else []
    if not marks and not cited:
        return
    text = " ".join(
        ([("; ".join(marks) + ".")] if marks else []) + ([f"Methods: {'; '.join(cited)}."] if cited else [])
    )
    fig.supxlabel(textwrap.fill(text, int(fig.get_figwidth() * 13)), fontsize=10, color="#1f2937")


def _box(ax, box: Box | None) -> None:
    """Where the word's object really is: a dashed outline."""
    if box is not None:
        ax.add_patch(
            Rectangle(
                (box.left - 0.5, box.top - 0.5),
                box.width,
                box.height,
                fill=False,
                edgecolor=BOX_COLOUR,
                lw=1.4,
                ls="--",
            )
        )


def _extent(shape: tuple[int, ...]) -> tuple[float, float, float, float]:
    return (-0.5, shape[1] - 0.5, shape[0] - 0.5, -0.5)  # pixel centres at integers


def _image(ax, image: np.ndarray) -> None:
    ax.imshow(image, cmap="gray", vmin=0.0, vmax=1.0, extent=_extent(image.shape), interpolation="nearest")
    ax.set_title("image", fontsize=9)


def _heat(ax, image: np.ndarray, weights: np.ndarray, vmax: float, *, ink: bool = True):
    """One word's (gh, gw) region weights over the image, opaque, the ink's outline traced over."""
    shape = image.shape[:2]
    heat = ax.imshow(
        upsample(weights, shape), cmap=CMAP, vmin=0.0, vmax=vmax, extent=_extent(shape), interpolation="nearest"
    )
    luma = greyscale(image)
    low, high = float(luma.min()), float(luma.max())  # the ink's outline: half-way between them
    if ink and high - low > 0.1:
        ax.contour(
            np.arange(shape[1]), np.arange(shape[0]), luma, levels=[(low + high) / 2], colors="white", linewidths=0.6
        )
    return heat


def plot_caption_methods(
    image: np.ndarray,
    words: Sequence[str],
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    boxes: Sequence[Box | None] | None = None,
    inside: Sequence[Sequence[float | None]] | None = None,
    title: str = "",
) -> Figure:
    """One row per attribution method ((label, (words, gh, gw)) each row's words summing to 1), the
    image first, then each word's map, every panel on one scale (0 to the largest share);
    ``boxes``: where each word's object really is (outlined); ``inside``: per method, each word's
    share inside its box (written in the panel's corner)."""
    if not panels:
        raise ValueError("no method to draw")
    for label, maps in panels:
        if maps.ndim != 3 or len(maps) != len(words):
            raise ValueError(f"{label}: maps must be (words, rows, columns) for {len(words)} word(s), got {maps.shape}")
    top = max(1e-9, max(float(maps.max()) for _, maps in panels))
    n = len(words)
    # the maps on the left, a row per method named without its paper (the key under the panels cites
    # them); the image once, over the colour bar, on the right
    side = min(1.7, (WIDTH - 2.4) / n)
    # a margin on the right past constrained layout's own, where the colour bar's label ends
    layout = ConstrainedLayoutEngine(rect=(0, 0, 0.992, 1))
    fig = Figure(figsize=(2.4 + side * n, side * len(panels) + 1.0), layout=layout)
    left, right = cast(np.ndarray, fig.subfigures(1, 2, width_ratios=[1.0 + side * n, 1.4]))  # 1 x 2: an array
    axes = left.subplots(len(panels), n, squeeze=False)
    heat = None
    named = [label.partition(" (") for label, _ in panels]  # (method, " (", its paper + ")")
    for r, (row, (_, maps), (name, _, _)) in enumerate(zip(axes, panels, named)):
        # the method names its row, set level (a turned label longer than the row would run into the next)
        row[0].set_ylabel(
            textwrap.fill(name, 12, break_long_words=False),
            fontsize=9,
            rotation=0,
            ha="right",
            va="center",
            labelpad=4,
        )
        for i, (ax, word, weights) in enumerate(zip(row, words, maps)):
            heat = _heat(ax, image, weights, top)
            _box(ax, boxes[i] if boxes is not None else None)
            share = inside[r][i] if inside is not None else None
            if share is not None:  # under the panel: over it, the number would cover the map
                ax.set_xlabel(f"{100 * share:.0f}% in box", fontsize=9, labelpad=2)
            if r == 0:  # every row has the same words: their names once, over the top row
                ax.set_title(f"“{word}”", fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
    assert heat is not None  # panels and words are not empty
    # the image and the colour bar in figures of their own: the bar's labels leave the image the column's width
    above, below = cast(np.ndarray, right.subfigures(2, 1, height_ratios=[1, 1.3]))  # 2 x 1: an array
    picture, scale = above.subplots(), below.subplots()
    _image(picture, image)
    picture.set_xticks([])
    picture.set_yticks([])
    bar = below.colorbar(heat, cax=scale)
    end_ticks(bar, top)
    bar.set_label(f"share of the word\n(one scale: 0 to {top:.2g})", fontsize=9)
    scale.set_box_aspect(6)
    _suptitle(fig, title, 12)
    shares = inside is not None and any(v is not None for row in inside for v in row)
    cited = [f"{name}, {cite.rstrip(')')}" for name, _, cite in named if cite]
    _key(fig, boxes is not None, shares, cited=cited, shown="attention or attribution")
    return fig


def plot_patch_attention(
    image: np.ndarray,
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    title: str = "",
    vmax: float | None = None,
    uniform: float | None = None,
) -> Figure:
    """A vision transformer's attention over its patches: the image (H, W, 3) in [0, 1], then one
    opaque heat map per panel ((label, (rows, columns) weights), each patch filling the pixels it
    covers, the patch grid drawn), on one shared scale 0 .. ``vmax`` (default: the largest weight
    shown); ``uniform``: the weight every token would get from uniform attention, marked on the bar."""
    if not panels:
        raise ValueError("no attention to draw")
    top = float(max(w.max() for _, w in panels)) if vmax is None else vmax
    if not top > 0:
        raise ValueError(f"vmax must be > 0, got {top}")
    shape = image.shape[:2]
    n = len(panels) + 1
    columns = min(n, 4)  # a docs column wide: more panels, more rows
    rows = -(-n // columns)
    fig = Figure(figsize=(min(WIDTH, 1.9 * columns + 1.0), 2.1 * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    extent = (-0.5, shape[1] - 0.5, shape[0] - 0.5, -0.5)
    axes[0].imshow(image, extent=extent, interpolation="nearest")
    axes[0].set_title("image", fontsize=9)
    heat = None
    for ax, (label, weights) in zip(axes[1:], panels):
        heat = ax.imshow(
            upsample(weights, shape), cmap=CMAP, vmin=0.0, vmax=top, extent=extent, interpolation="nearest"
        )
        ax.set_title(label, fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[n:]:
        ax.set_visible(False)
    if heat is not None:
        bar = fig.colorbar(heat, ax=list(axes[1:n]), shrink=0.85)
        bar.set_label(f"attention weight (0 to {top:.3g})", fontsize=8)
        if uniform is not None and uniform <= top:
            bar.ax.axhline(uniform, color="black", lw=1.5)
            bar.ax.text(
                1.5, uniform, f" uniform {uniform:.3g}", transform=bar.ax.get_yaxis_transform(), fontsize=7, va="center"
            )
    _suptitle(fig, title, 13)
    return fig
