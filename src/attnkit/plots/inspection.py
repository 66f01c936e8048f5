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


def plot_head_statistics(stats: Sequence, *, title: str = "") -> Figure:
    """Per (layer, head) normalised entropy and mean largest weight, one column per attention kind."""
    from ..inspection.capture import LABELS

    fig = Figure(figsize=(4.2 * len(stats), 6.0), layout="constrained")
    axes = fig.subplots(2, len(stats), squeeze=False)
    for ci, st in enumerate(stats):
        for ri, (values, name, cmap) in enumerate(
            ((st.normalised, "normalised entropy (1 = uniform)", "magma"), (st.max_weight, "mean largest weight", "viridis"))
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
            ax.set(xlabel="head", ylabel="layer", title=f"{LABELS[st.kind]}\n{name}")
            ax.title.set_fontsize(9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
