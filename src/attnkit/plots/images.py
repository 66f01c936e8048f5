"""Attention over an image: each generated word's weights over the image regions, laid on
the image (Xu et al. 2015, fig. 2/3 style), one panel per word.

The heat map is drawn region by region, not smoothed: a region's weight fills exactly the
region x region pixels it covers (``upsample``), so what is lit is what the model attended
to. Colour and opacity both grow with the weight, on one scale shared by all panels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..data.scenes import Box

OPACITY = 0.85  # of the heat map where the weight is largest (the viewer uses the same)


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
) -> Figure:
    """image (H, W) in [0, 1]; attention (t, gh, gw), one map per word of ``words``; ``boxes``:
    where each word's object really is (outlined), ``inside``: the share of the word's
    attention inside its box (``evaluation.attention_in_box``), written under the word."""
    if attention.ndim != 3 or len(attention) != len(words):
        raise ValueError(f"attention must be (words, rows, columns) for {len(words)} word(s), got {attention.shape}")
    for name, given in (("boxes", boxes), ("shares inside", inside)):
        if given is not None and len(given) != len(words):
            raise ValueError(f"{len(given)} {name} for {len(words)} words")
    n = len(words) + 1
    fig = Figure(figsize=(1.9 * n + 0.9, 2.6), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    extent = (-0.5, image.shape[1] - 0.5, image.shape[0] - 0.5, -0.5)  # pixel centres at integers
    vmax = max(1e-9, float(attention.max()))
    axes[0].imshow(image, cmap="gray", vmin=0.0, vmax=1.0, extent=extent)
    axes[0].set_title("image", fontsize=9)
    heat = None
    for i, (ax, word) in enumerate(zip(axes[1:], words)):
        ax.imshow(image, cmap="gray", vmin=0.0, vmax=1.0, extent=extent)
        pixels = upsample(attention[i], image.shape)
        # opacity follows the weight too: a region the word ignores leaves the image as it is
        heat = ax.imshow(
            pixels,
            cmap="inferno",
            vmin=0.0,
            vmax=vmax,
            alpha=OPACITY * pixels / vmax,
            extent=extent,
            interpolation="nearest",
        )
        label = f"“{word}”"
        box = boxes[i] if boxes is not None else None
        if box is not None:
            ax.add_patch(
                Rectangle(
                    (box.left - 0.5, box.top - 0.5),
                    box.width,
                    box.height,
                    fill=False,
                    edgecolor="cyan",
                    lw=1.2,
                    ls="--",
                )
            )
        share = inside[i] if inside is not None else None
        if share is not None:
            label += f"  {100 * share:.0f}% in box"
        ax.set_title(label, fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    if heat is not None:
        bar = fig.colorbar(ScalarMappable(heat.norm, heat.cmap), ax=list(axes[1:]), shrink=0.8)  # opaque colours
        bar.set_label("weight of the region")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
