"""Positional-encoding figures: the PE matrix, chosen sinusoids, and
why sinusoids encode relative offset (similarity depends on distance only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure


def position_similarity(pe: np.ndarray) -> np.ndarray:
    """(t, t) dot products PE(i) . PE(j)."""
    return pe @ pe.T


def plot_positional_encoding(pe: np.ndarray, *, dims: Sequence[int] | None = None, title: str = "") -> Figure:
    """Three panels: the (t, d) matrix, a few dimensions over positions, and
    the similarity of every position to position 0 and to the middle one."""
    t, d = pe.shape
    if dims is None:  # high to low frequency: the first pair, then even dims spread over d
        dims = sorted({0, 1, *(2 * (d // k // 2) for k in (16, 8, 4))})
    fig = Figure(figsize=(15, 4.2), layout="constrained")
    ax_m, ax_s, ax_d = fig.subplots(1, 3)

    im = ax_m.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_m.set(xlabel="dimension", ylabel="position", title="PE matrix (position x dimension)")
    fig.colorbar(im, ax=ax_m, shrink=0.85)

    for j in (j for j in dims if j < d):
        ax_s.plot(np.arange(t), pe[:, j], label=f"dim {j} ({'sin' if j % 2 == 0 else 'cos'})")
    ax_s.set(xlabel="position", ylabel="value", title="dimensions: frequency falls with the index")
    ax_s.legend(fontsize=8, loc="lower left")

    sim = position_similarity(pe)
    mid = t // 2
    ax_d.plot(np.arange(t), sim[0], label="PE(0) . PE(j)")
    ax_d.plot(np.arange(t), sim[mid], label=f"PE({mid}) . PE(j)")
    ax_d.axvline(mid, color="grey", lw=0.5)
    ax_d.set(xlabel="position j", ylabel="dot product",
             title="PE(i).PE(j) depends on |i - j| only")
    ax_d.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def plot_score_bias(bias: np.ndarray, *, title: str = "", max_heads: int = 8) -> Figure:
    """Bias added to the attention scores by a relative scheme, (heads, t, t):
    the matrix of a few heads, and every head's bias seen from the middle query
    as a function of the offset j - i."""
    heads, t, _ = bias.shape
    shown = list(range(min(heads, max_heads)))
    fig = Figure(figsize=(2.3 * len(shown) + 4.5, 2.9), layout="constrained")
    axes = fig.subplots(1, len(shown) + 1, width_ratios=[1] * len(shown) + [2.0])
    lim = float(np.abs(bias).max()) or 1.0
    for ax, h in zip(axes, shown):
        im = ax.imshow(bias[h], cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key j", fontsize=8)
        ax.set_ylabel("query i", fontsize=8) if h == 0 else None
        ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=axes[: len(shown)], shrink=0.8)
    mid = t // 2
    offsets = np.arange(t) - mid
    for h in range(heads):
        axes[-1].plot(offsets, bias[h, mid], lw=1.2, label=f"head {h}" if heads <= 8 else None)
    axes[-1].set(xlabel="offset j - i", ylabel="bias", title=f"bias seen from query i = {mid}")
    axes[-1].title.set_fontsize(9)
    if heads <= 8:
        axes[-1].legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_relative_index(index: np.ndarray, max_distance: int, *, buckets: bool = False, title: str = "") -> Figure:
    """Which learned parameter each (query, key) pair uses: Shaw's clipped distance
    clip(j - i, -k, k) or T5's log-spaced bucket; and that index against the offset."""
    t = index.shape[0]
    fig = Figure(figsize=(9.5, 3.6), layout="constrained")
    ax_m, ax_l = fig.subplots(1, 2)
    im = ax_m.imshow(index, cmap="twilight_shifted" if not buckets else "viridis", interpolation="nearest")
    ax_m.set(xlabel="key j", ylabel="query i", title="bucket of (i, j)" if buckets else "table row of (i, j)")
    fig.colorbar(im, ax=ax_m, shrink=0.85)
    mid = t // 2
    ax_l.step(np.arange(t) - mid, index[mid], where="mid")
    ax_l.set(xlabel="offset j - i", ylabel="bucket" if buckets else "row = clip(j - i, -k, k) + k",
             title=("nearby offsets get their own bucket, far ones share log-spaced buckets" if buckets
                    else f"offsets beyond ±{max_distance} share a row"))
    ax_l.title.set_fontsize(9)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_rotary(angles: np.ndarray, scores: np.ndarray, *, title: str = "") -> Figure:
    """RoPE: rotation angle m * theta_i of each 2-D pair over positions (t, d/2),
    and the score q . k between the same vectors placed at positions m and m + k,
    for several m: the curves coincide because RoPE scores depend on k only."""
    t, pairs = angles.shape
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax_a, ax_s = fig.subplots(1, 2)
    im = ax_a.imshow(np.cos(angles), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_a.set(xlabel="dimension pair i", ylabel="position m", title="cos(m θ_i): fast pairs left, slow pairs right")
    ax_a.title.set_fontsize(9)
    fig.colorbar(im, ax=ax_a, shrink=0.85)
    for m, row in enumerate(scores):
        ax_s.plot(np.arange(len(row)), row, lw=1.5 if m == 0 else 1.0, ls="-" if m == 0 else "--",
                  label=f"query at m = {m * 17}")
    ax_s.set(xlabel="offset k (key at m + k)", ylabel="q · k after rotation",
             title="the score depends on the offset only")
    ax_s.title.set_fontsize(9)
    ax_s.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
