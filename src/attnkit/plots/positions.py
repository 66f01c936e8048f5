"""Positional-encoding figures (seed 003): the PE matrix, chosen sinusoids, and
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
