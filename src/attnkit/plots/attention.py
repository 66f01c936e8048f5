"""Attention heatmaps: target tokens (rows) attending to source tokens (columns).
Token labels are drawn as given (``data.readable`` turns subword pieces into them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import patheffects
from matplotlib.figure import Figure

from ..data.tokenizer import SPACE


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
) -> Figure:
    """Heatmap of a (t, s) attention matrix, rows ``tgt_tokens`` and columns ``src_tokens``;
    optionally local attention's p_t and window [p_t - D, p_t + D]."""
    t, s = weights.shape
    if len(src_tokens) != s or len(tgt_tokens) != t:
        raise ValueError(f"weights are {t}x{s} but got {len(tgt_tokens)} target and {len(src_tokens)} source tokens")
    cell = 0.42
    fig = Figure(figsize=(max(4.0, 1.8 + cell * s), max(3.0, 1.4 + cell * t)), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(1e-9, float(weights.max())), aspect="equal")
    fs = _fontsize(max(t, s))
    short = max(map(len, src_tokens), default=0) <= 3  # short labels stay upright: a rotated ␣ reads as a glyph
    ax.set_xticks(
        range(s),
        list(src_tokens),
        rotation=0 if short else 60,
        ha="center" if short else "right",
        rotation_mode="anchor",
        fontsize=fs,
    )
    ax.set_yticks(range(t), list(tgt_tokens), fontsize=fs)
    if SPACE in src_tokens or SPACE in tgt_tokens:
        xlabel += f"   ({SPACE}: a space of its own, before the next word)"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if p_t is not None:
        # each output step has its own centre and window: marks per row, never a line joining rows
        ax.plot(
            p_t, np.arange(t), ls="none", color="white", marker="o", ms=6, mec="black", mew=0.8, label="p_t", zorder=3
        )  # over the window bars
        if window is not None:
            for row, centre in enumerate(p_t):
                ax.plot(
                    [centre - window, centre + window],
                    [row, row],
                    color="white",
                    lw=1.0,
                    path_effects=[patheffects.withStroke(linewidth=2.2, foreground="black")],  # seen on any cell
                    label="window p_t ± D" if row == 0 else None,
                )
        ax.set_xlim(-0.5, max(s - 0.5, float(np.max(p_t)) + 0.3))  # p_t = S * sigmoid(.) may pass the last key
        fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)  # below the figure: covers no cell
    fig.colorbar(im, ax=ax, shrink=0.8, label="attention weight")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def _fontsize(n: int) -> float:
    return 9.0 if n <= 20 else 7.0 if n <= 35 else 5.0


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
    size = max(1.6, min(3.2, 0.13 * max(t, s)))
    fig = Figure(figsize=(1.6 + cols * size, 0.9 + layers * size), layout="constrained")
    axes = np.atleast_2d(fig.subplots(layers, cols, squeeze=False))
    fs = _fontsize(max(t, s))
    for li in range(layers):
        for ci in range(cols):
            ax = axes[li, ci]
            w = maps[li, ci] if ci < heads else maps[li].mean(0)
            im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if li == 0:
                ax.set_title("mean" if ci >= heads else f"head {ci}", fontsize=9)
            if ci == 0:
                ax.set_ylabel(f"layer {li}", fontsize=9)
                if layers * t <= 60:  # token labels only where they can be read
                    ax.set_yticks(range(t), list(query_tokens), fontsize=fs)
            if li == layers - 1 and cols * s <= 160:
                ax.set_xticks(range(s), list(key_tokens), rotation=90, fontsize=fs)
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight (one scale, 0 to 1, for every panel)")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_attention_steps(
    rows: Sequence[tuple[Sequence[str], Sequence[str], Sequence[tuple[int, np.ndarray]]]],
    *,
    title: str = "",
    xlabel: str = "source",
    ylabel: str = "output",
) -> Figure:
    """Attention as training proceeds: one row per sentence, (query tokens, key tokens,
    [(step, (t, s) matrix), ...]); one column per step, every panel on one 0..1 scale."""
    if not rows or not rows[0][2]:
        raise ValueError("no snapshots to draw")
    cols = len(rows[0][2])
    longest = max(max(len(q), len(k)) for q, k, _ in rows)
    size = max(1.8, min(3.0, 0.16 * longest))
    label = 0.09 * max(len(t) for _, k, _ in rows for t in k)  # inches under each row for its rotated key labels
    fig = Figure(figsize=(1.8 + cols * size, 1.2 + len(rows) * (size + 0.6 + label)), layout="constrained")
    axes = fig.subplots(len(rows), cols, squeeze=False)
    fs = _fontsize(longest)
    for r, (q, k, panels) in enumerate(rows):
        for c, (step, w) in enumerate(panels):
            ax = axes[r, c]
            if w.shape != (len(q), len(k)):
                raise ValueError(f"a {w.shape} map for {len(q)} query and {len(k)} key tokens")
            im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            ax.set_xticks(range(len(k)), list(k), rotation=90, fontsize=fs)
            ax.set_yticks(range(len(q)), list(q) if c == 0 else [], fontsize=fs)
            ax.set_title(f"step {step}", fontsize=9)
            if c == 0:
                ax.set_ylabel(ylabel, fontsize=9)
            if r == len(rows) - 1:
                ax.set_xlabel(xlabel, fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.7, label="attention weight (one scale, 0 to 1, for every panel)")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
