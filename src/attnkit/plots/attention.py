"""Attention heatmaps: target tokens (rows) attending to source tokens (columns)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

WORD_START = "\u2581"  # sentencepiece's word-boundary mark


def readable(pieces: Sequence[str]) -> list[str]:
    """Subword pieces as a reader sees them: word starts lose the mark, a bare mark becomes '␣'."""
    out = []
    for p in pieces:
        if p == WORD_START:
            out.append("\u2423")
        elif p.startswith(WORD_START):
            out.append(p[1:])
        else:
            out.append(p)
    return out


def plot_alignment(
    weights: np.ndarray,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    *,
    title: str = "",
    p_t: np.ndarray | None = None,
    window: int | None = None,
) -> Figure:
    """Heatmap of a (t, s) attention matrix; optionally local attention's p_t and window [p_t - D, p_t + D]."""
    t, s = weights.shape
    if len(src_tokens) != s or len(tgt_tokens) != t:
        raise ValueError(f"weights are {t}x{s} but got {len(tgt_tokens)} target and {len(src_tokens)} source tokens")
    cell = 0.42
    fig = Figure(figsize=(max(4.0, 1.8 + cell * s), max(3.0, 1.4 + cell * t)), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(1e-9, float(weights.max())), aspect="equal")
    ax.set_xticks(range(s), readable(src_tokens), rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(t), readable(tgt_tokens))
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if p_t is not None:
        rows = np.arange(t)
        ax.plot(p_t, rows, color="white", marker="o", ms=3, lw=1, label="p_t")
        if window is not None:
            ax.plot(p_t - window, rows, color="white", ls="--", lw=0.8)
            ax.plot(p_t + window, rows, color="white", ls="--", lw=0.8, label="p_t ± D")
        ax.set_xlim(-0.5, s - 0.5)
        ax.legend(loc="lower left", fontsize=7, framealpha=0.6)
    fig.colorbar(im, ax=ax, shrink=0.8, label="attention weight")
    if title:
        ax.set_title(title, fontsize=10)
    return fig
