"""Attention over sound: a speech model's output tokens, each a row of its cross-attention over the
encoder's positions in time, under the spectrogram the encoder heard (an alignment over time, as
Chan et al. 2016 and Whisper's timestamps read one).

Both panels share one time axis in seconds, so a bright cell lies under the sound it attended to.
The weights are drawn on one stated scale (0 to the largest weight, or a given one), never rescaled
row by row; what a row puts on the padding after the sound is written beside it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from .layout import WIDTH

CMAP = "viridis"  # as every attention map: dark for no weight
SOUND_CMAP = "magma"


def plot_audio_alignment(
    spectrogram: np.ndarray,
    tokens: Sequence[str],
    weights: np.ndarray,
    *,
    seconds: float,
    padding: Sequence[float] | None = None,
    title: str = "",
    vmax: float | None = None,
) -> Figure:
    """``spectrogram`` (bins, n) in [0, 1], low frequencies first; ``weights`` (t, n): each of
    ``tokens``' attention over the n encoder positions that hold sound, ``seconds`` apart, on the
    scale 0 .. ``vmax`` (default: the largest weight); ``padding``: each row's weight on the
    positions after the sound, written at the row's end."""
    bins, n = spectrogram.shape
    if weights.ndim != 2 or weights.shape != (len(tokens), n):
        raise ValueError(f"weights must be ({len(tokens)} tokens, {n} positions), got {weights.shape}")
    if padding is not None and len(padding) != len(tokens):
        raise ValueError(f"{len(padding)} padding shares for {len(tokens)} tokens")
    top = float(vmax if vmax is not None else weights.max()) or 1.0
    t = len(tokens)
    high = 1.0 + 0.24 * t  # a row of ~0.24 inch per token: 10.5-point labels stay apart
    fig = Figure(figsize=(WIDTH, 1.9 + high), layout="constrained")
    sound, align = fig.subplots(2, 1, sharex=True, height_ratios=[1.5, high])
    end = n * seconds
    sound.imshow(spectrogram, origin="lower", aspect="auto", cmap=SOUND_CMAP, extent=(0, end, 0, bins))
    sound.set_yticks([])
    sound.set_ylabel("log-mel\n(pitch ↑)", fontsize=10.5)
    heat = align.imshow(
        weights, aspect="auto", cmap=CMAP, vmin=0, vmax=top, interpolation="nearest", extent=(0, end, t - 0.5, -0.5)
    )
    align.set_yticks(range(t), [_short(w) for w in tokens], fontsize=10.5)
    align.set_ylabel("token written", fontsize=10.5)
    align.set_xlabel("time (s): the encoder's positions that hold sound", fontsize=10.5)
    align.tick_params(axis="x", labelsize=10.5)
    if padding is not None:
        side = align.secondary_yaxis("right")
        side.set_yticks(range(t), [f"{100 * p:.0f}%" for p in padding], fontsize=10.5)
        side.set_ylabel("share on padding", fontsize=10.5)
    bar = fig.colorbar(heat, ax=[sound, align], location="bottom", shrink=0.5, aspect=40, pad=0.02)
    bar.set_label(f"cross-attention weight (0 to {top:.3g}, the largest drawn)", fontsize=10.5)
    bar.ax.tick_params(labelsize=10.5)
    if title:
        width = int(WIDTH * 12)
        fig.suptitle("\n".join(textwrap.fill(line, width) for line in title.split("\n")), fontsize=10)
    return fig


def _short(token: str, longest: int = 18) -> str:
    return token if len(token) <= longest else token[: longest - 1] + "…"
