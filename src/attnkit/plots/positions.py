"""Positional-encoding figures: the PE matrix, chosen sinusoids, and
why sinusoids encode relative offset (similarity depends on distance only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from matplotlib.figure import Figure


def position_similarity(pe: np.ndarray) -> np.ndarray:
    """(t, t) dot products PE(i) . PE(j)."""
    return pe @ pe.T


def plot_positional_encoding(
    pe: np.ndarray,
    *,
    dims: Sequence[int] | None = None,
    title: str = "",
    learned: bool = False,
    centre: bool = False,
) -> Figure:
    """Three panels: the (t, d) matrix, a few dimensions over positions (one curve each,
    stacked so none hides another), and the similarity of every position to position 0 and
    to the middle one. ``learned``: a trained table, described as such (no claims of the
    sinusoids' properties). ``centre``: each dimension minus its mean over the positions
    (for an encoding with large constant parts, such as an MLP's output), said in the figure."""
    if centre:
        pe = pe - pe.mean(axis=0, keepdims=True)
    t, d = pe.shape
    if dims is None:  # high to low frequency: the first pair, then even dims spread over d
        dims = sorted({0, 1, *(2 * (d // k // 2) for k in (16, 8, 4))})
    dims = [j for j in dims if j < d]
    fig = Figure(figsize=(15, 4.4), layout="constrained")
    ax_m, ax_s, ax_d = fig.subplots(1, 3)

    lim = 1.0 if not learned else float(np.abs(pe).max()) or 1.0
    im = ax_m.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    ax_m.set(
        xlabel="dimension",
        ylabel="position",
        title="the table: one row per position" + (",\neach dimension minus its mean over positions" if centre else ""),
    )
    fig.colorbar(im, ax=ax_m, shrink=0.85, label="value")

    step = 2.2 * lim
    for k, j in enumerate(dims):
        ax_s.plot(np.arange(t), pe[:, j] - k * step, lw=1.1)
        kind = "" if learned else (" sin" if j % 2 == 0 else " cos")
        ax_s.text(t + 0.01 * t, -k * step, f"dim {j}{kind}", fontsize=8, va="center")
    ax_s.set_yticks([])
    ax_s.set_xlim(0, t * 1.18)
    ax_s.set(
        xlabel="position",
        ylabel=f"value (curves offset by {step:.2g})",
        title="a few dimensions" + ("" if learned else ": the frequency falls with the index"),
    )

    sim = position_similarity(pe)
    mid = t // 2
    ax_d.plot(np.arange(t), sim[0], label="PE(0) · PE(j)")
    ax_d.plot(np.arange(t), sim[mid], label=f"PE({mid}) · PE(j)")
    ax_d.axvline(mid, color="grey", lw=0.5)
    ax_d.set(
        xlabel="position j",
        ylabel="dot product" + (" (centred vectors)" if centre else ""),
        title="similarity of positions" + ("" if learned else ": it depends on |i − j| only"),
    )
    ax_d.legend(fontsize=8)
    for ax in (ax_m, ax_s, ax_d):
        ax.title.set_fontsize(10)
    if title:
        fig.suptitle(title)
    return fig


def plot_score_bias(bias: np.ndarray, *, title: str = "", max_heads: int = 8) -> Figure:
    """Bias added to the attention scores by a relative scheme, (heads, t, t): each head's
    matrix on its own colour scale (the heads' magnitudes differ by orders), and every
    head's bias seen from the middle query as a function of the offset j - i."""
    heads, t, _ = bias.shape
    shown = list(range(min(heads, max_heads)))
    cols = min(4, len(shown))
    rows = -(-len(shown) // cols)
    fig = Figure(figsize=(3.1 * cols + 5.0, 2.7 * rows + 0.6), layout="constrained")
    left, right = cast(np.ndarray, fig.subfigures(1, 2, width_ratios=[3.1 * cols, 5.0]))  # 1 x 2: an array
    axes = np.atleast_1d(left.subplots(rows, cols, squeeze=False)).ravel()
    for ax, h in zip(axes, shown):
        lim = float(np.abs(bias[h]).max()) or 1.0
        im = ax.imshow(bias[h], cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key j", fontsize=8)
        ax.set_ylabel("query i", fontsize=8)
        ax.tick_params(labelsize=7)
        bar = left.colorbar(im, ax=ax, shrink=0.8)
        bar.set_label("bias", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    left.suptitle("score bias per head (each head on its own colour scale)", fontsize=9)
    ax_l = right.subplots()
    mid = t // 2
    offsets = np.arange(t) - mid
    for h in range(heads):
        ax_l.plot(offsets, bias[h, mid], lw=1.2, label=f"head {h}")
    ax_l.set(xlabel="offset j − i", ylabel="bias added to the score", title=f"bias seen from query i = {mid}")
    ax_l.title.set_fontsize(9)
    if heads <= 8:
        ax_l.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
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
    fig.colorbar(im, ax=ax_m, shrink=0.85, label="bucket" if buckets else "table row")
    mid = t // 2
    ax_l.step(np.arange(t) - mid, index[mid], where="mid")
    ax_l.set(
        xlabel="offset j − i",
        ylabel="bucket" if buckets else "row = clip(j − i, −k, k) + k",
        title=(
            "nearby offsets get their own bucket,\nfar ones share log-spaced buckets"
            if buckets
            else f"offsets beyond ±{max_distance} share a row"
        ),
    )
    ax_l.title.set_fontsize(9)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_rotary(angles: np.ndarray, scores: np.ndarray, *, title: str = "") -> Figure:
    """RoPE: rotation angle m * theta_i of each 2-D pair over positions (t, d/2),
    and the score q . k between the same vectors placed at positions m and m + k,
    for several m: the curves coincide because RoPE scores depend on k only."""
    _t, _pairs = angles.shape
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax_a, ax_s = fig.subplots(1, 2)
    im = ax_a.imshow(np.cos(angles), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_a.set(xlabel="dimension pair i", ylabel="position m", title="cos(m θ_i): fast pairs left, slow pairs right")
    ax_a.title.set_fontsize(9)
    fig.colorbar(im, ax=ax_a, shrink=0.85, label="cos(m θ_i)")
    for m, row in enumerate(scores):
        ax_s.plot(
            np.arange(len(row)),
            row,
            lw=1.5 if m == 0 else 1.0,
            ls="-" if m == 0 else "--",
            label=f"query at m = {m * 17}",
        )
    ax_s.set(
        xlabel="offset k (key at m + k)", ylabel="q · k after rotation", title="the score depends on the offset only"
    )
    ax_s.title.set_fontsize(9)
    ax_s.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
