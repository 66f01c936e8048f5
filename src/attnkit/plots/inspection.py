"""Figures for the Q/K/V walk-through and the per-head diagnostics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure


def plot_walkthrough(w, *, dims: int = 32) -> Figure:
    """Four panels for one query (a ``Walkthrough``): q and the keys; raw and scaled
    scores; softmax with and without 1/sqrt(d_k); the values weighted into z."""
    s, d_k = w.k.shape
    shown = min(d_k, dims)
    fig = Figure(figsize=(13, 3.2 + 0.22 * s), layout="constrained")
    (ax_qk, ax_sc), (ax_sm, ax_v) = fig.subplots(2, 2)
    labels = list(w.key_tokens)
    ticks = dict(fontsize=8)

    qk = np.vstack([w.q[None, :shown], w.k[:, :shown]])
    lim = float(np.abs(qk).max()) or 1.0
    ax_qk.imshow(qk, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    ax_qk.axhline(0.5, color="black", lw=1.5)
    ax_qk.set_yticks(range(s + 1), [f"q: {w.query_token}"] + [f"k: {t}" for t in labels], **ticks)
    ax_qk.set(xlabel=f"dimension (first {shown} of d_k = {d_k})", title="1. query and keys of this head")

    x = np.arange(s)
    finite = np.isfinite(w.scaled)
    ax_sc.bar(x - 0.2, w.raw, width=0.4, label="q · k_j", color="#9ca3af")
    ax_sc.bar(x[finite] + 0.2, w.scaled[finite], width=0.4,
              label=f"q · k_j / sqrt({d_k})" + (" + bias" if w.bias is not None else ""), color="#2563eb")
    ax_sc.axhline(0, color="black", lw=0.5)
    ax_sc.set_xticks(x, labels, rotation=60, ha="right", rotation_mode="anchor", **ticks)
    ax_sc.set(title="2. scores, raw and scaled")
    ax_sc.legend(fontsize=8)

    ax_sm.bar(x - 0.2, w.unscaled_weights, width=0.4, label="softmax without scaling (saturates)", color="#f59e0b")
    ax_sm.bar(x + 0.2, w.weights, width=0.4, label="softmax(scaled): the attention weights", color="#2563eb")
    ax_sm.set_xticks(x, labels, rotation=60, ha="right", rotation_mode="anchor", **ticks)
    ax_sm.set(ylim=(0, 1.05), title="3. softmax")
    ax_sm.legend(fontsize=8)

    weighted = w.weights[:, None] * w.v[:, :shown]
    rows = np.vstack([weighted, w.context[None, :shown]])
    lim = float(np.abs(rows).max()) or 1.0
    ax_v.imshow(rows, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    ax_v.axhline(s - 0.5, color="black", lw=1.5)
    ax_v.set_yticks(range(s + 1), [f"{a:.2f} · v: {t}" for a, t in zip(w.weights, labels)] + ["z = Σ a_j v_j"], **ticks)
    ax_v.set(xlabel=f"dimension (first {shown})", title="4. weighted values and their sum z")
    fig.suptitle(f"{w.kind} attention, layer {w.layer}, head {w.head}: query {w.query_token!r}", fontsize=11)
    return fig


def plot_head_statistics(
    panels: Sequence[tuple[str, np.ndarray, np.ndarray]], *, title: str = ""
) -> Figure:
    """One column per attention kind: (label, normalised entropy (L, h), mean largest weight (L, h))."""
    fig = Figure(figsize=(4.2 * len(panels), 6.0), layout="constrained")
    axes = fig.subplots(2, len(panels), squeeze=False)
    for ci, (label, normalised, max_weight) in enumerate(panels):
        for ri, (values, name, cmap) in enumerate(
            ((normalised, "normalised entropy (1 = uniform)", "magma"), (max_weight, "mean largest weight", "viridis"))
        ):
            ax = axes[ri, ci]
            im = ax.imshow(values, cmap=cmap, vmin=0, vmax=1, aspect="auto")
            layers, heads = values.shape
            for li in range(layers):
                for h in range(heads):
                    ax.text(h, li, f"{values[li, h]:.2f}", ha="center", va="center", fontsize=8,
                            color="white" if values[li, h] < 0.6 else "black")
            ax.set_xticks(range(heads))
            ax.set_yticks(range(layers))
            ax.set(xlabel="head", ylabel="layer", title=f"{label}\n{name}")
            ax.title.set_fontsize(9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_contextual(
    labels: Sequence[str],
    similarities: Sequence[tuple[str, np.ndarray]],
    projections: Sequence[tuple[str, np.ndarray]],
    marked: dict[int, int],
    *,
    words: Sequence[str] = (),
    title: str = "",
) -> Figure:
    """Contextual word vectors. Top: cosine similarity matrices (name, (N, N)), e.g. static token
    vectors beside the last layer's. Bottom: 2-D projections (name, (N, 2)) of all token
    vectors, one per depth; ``marked`` maps a token index to its colour group (its sentence)."""
    n = len(labels)
    fig = Figure(figsize=(max(12, 2.3 * len(projections)), 6.4 + 0.12 * n), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.4 + 0.02 * n, 1])
    fs = 8 if n <= 30 else 6
    for ax, (name, sim) in zip(top.subplots(1, len(similarities)), similarities):
        im = ax.imshow(sim, cmap="viridis", vmin=-0.2, vmax=1)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=fs)
        ax.set_yticks(range(n), labels, fontsize=fs)
        ax.set_title(f"cosine similarity: {name}", fontsize=10)
    top.colorbar(im, ax=top.axes, shrink=0.8)
    colours = ["#dc2626", "#2563eb", "#16a34a", "#9333ea", "#ea580c"]
    for ax, (name, xy) in zip(bottom.subplots(1, len(projections)), projections):
        ax.scatter(xy[:, 0], xy[:, 1], s=8, color="#9ca3af")
        for i, group in sorted(marked.items()):
            ax.scatter(xy[i, 0], xy[i, 1], s=30, color=colours[group % len(colours)])
            ax.annotate(labels[i], xy[i], fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    bottom.suptitle("2-D projection (PCA) of all token vectors; marked: " + ", ".join(words) + "  (n) = sentence", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
