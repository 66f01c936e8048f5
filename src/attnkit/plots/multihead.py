"""Multi-head attention as a diagram of one layer on one input, every matrix drawn from the
model's own numbers (a ``LayerWalk``), and the measured reason for the 1/sqrt(d_k) (a ``Scaling``)."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import FuncFormatter, NullLocator
from matplotlib.transforms import offset_copy

from .layout import WIDTH, fit_height, upright_spaces

HEAD_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
ACTIVATION_CMAP = "RdBu_r"  # signed values: blue below 0, red above, white at 0
SCALED, UNSCALED = "#2563eb", "#9ca3af"  # with 1/sqrt(d_k), and the what-if without it (grey, as explain draws it)
TICK = 9.0  # points: 13 px at the 880 px of a docs column


def plot_layer_walk(walk, scaling, *, model: str = "") -> Figure:
    """Four rows: X projected into Q, K and V with the heads' columns marked; every head's map;
    the heads' outputs concatenated and projected by W^O into the layer's output; and the
    division by sqrt(d_k) measured on random vectors. Activations share one signed scale."""
    grid = 1 if walk.heads <= 3 else 2  # rows of head maps: each large enough for its token labels
    fig = Figure(figsize=(WIDTH, 11.5 + 2.9 * (grid - 1)), layout="constrained")
    rows = fig.subfigures(5, 1, height_ratios=[2.3, 2.4 + 2.9 * (grid - 1), 2.1, 0.35, 2.4], squeeze=False)[:, 0]
    matrices = [walk.x, *(_joined(a) for a in (walk.q, walk.k, walk.v)), walk.concat, walk.out]
    lim = float(np.quantile(np.abs(np.concatenate([m.ravel() for m in matrices])), 0.99))
    memory = "X" if walk.kind != "cross" else "M"
    _project_row(rows[0], walk, lim, memory)
    _heads_row(rows[1], walk, grid)
    im = _output_row(rows[2], walk, lim)
    cax = rows[3].add_axes((0.25, 0.55, 0.5, 0.2))
    rows[3].colorbar(im, cax=cax, orientation="horizontal", extend="both")
    cax.set_title(
        f"parts 1 and 3: activation value, one scale for every matrix (beyond ±{lim:.2f}, 1% of them, at the ends)",
        fontsize=9,
    )
    cax.tick_params(labelsize=TICK)
    _scaling_row(rows[4], walk, scaling)
    d_model = walk.x.shape[-1]
    label = walk.kind.replace("encoder", "encoder self").replace("decoder", "decoder self")
    fig.suptitle(
        textwrap.fill(
            f"{model + ', ' if model else ''}{label}-attention, layer {walk.layer}: {walk.heads} heads of "
            f"d_k = {d_model} / {walk.heads} = {walk.d_k}, every number the model's own on this input",
            int(WIDTH * 11),
        ),
        fontsize=11,
    )
    fit_height(fig)
    return fig


def _row_title(sub: SubFigure, title: str, subtitle: str) -> None:
    """A row's step, in bold, and a line under it in plain type."""
    sub.suptitle(" \n ", fontsize=10.5)  # room for the two lines, which the layout would not count
    top = sub.transSubfigure
    sub.text(0.5, 1, title, fontsize=10.5, fontweight="bold", ha="center", va="top", transform=top)
    under = offset_copy(top, fig=sub.figure, y=-15, units="points")
    sub.text(0.5, 1, subtitle, fontsize=9, ha="center", va="top", transform=under)


def _joined(per_head: np.ndarray) -> np.ndarray:
    """(h, t, d_k) -> (t, h d_k): the heads' columns side by side, as the projection made them."""
    return np.concatenate(list(per_head), axis=-1)


def _matrix(ax, m: np.ndarray, lim: float, title: str, heads: int, tokens: list[str] | None):
    """One activation matrix, rows = tokens, its head blocks marked along the top."""
    im = ax.imshow(m, cmap=ACTIVATION_CMAP, vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    ax.set_title(title, fontsize=9.5)
    width = m.shape[1]
    if heads:
        d_k = width // heads
        for h in range(heads):
            if h:  # the border between two heads' columns
                ax.axvline(h * d_k - 0.5, color="black", lw=0.8)
            ax.axhspan(-0.5, -1.3, xmin=h / heads, xmax=(h + 1) / heads, color=HEAD_COLOURS[h % 8], clip_on=False)
        ax.set_xticks([(h + 0.5) * d_k - 0.5 for h in range(heads)], [f"h{h}" for h in range(heads)], fontsize=TICK)
    else:
        ax.set_xticks([0, width - 1], ["0", str(width - 1)], fontsize=TICK)
    ax.tick_params(axis="x", length=0)
    if tokens is None:
        ax.set_yticks([])
    else:
        ax.set_yticks(range(len(tokens)), tokens, fontsize=TICK)
        upright_spaces(ax)
    ax.set_ylim(m.shape[0] - 0.5, -1.3)
    return im


def _project_row(sub: SubFigure, walk, lim: float, memory: str) -> None:
    t, s, d_model = walk.q.shape[1], walk.k.shape[1], walk.x.shape[-1]
    _row_title(
        sub,
        rf"1. Project, $Q = XW^Q$, $K = {memory}W^K$, $V = {memory}W^V$, and split each into {walk.heads} heads",
        f"of {walk.d_k} columns (coloured); one row per token",
    )
    axes = sub.subplots(1, 4)
    _matrix(axes[0], walk.x, lim, f"X: the layer's input ({t} × {d_model})", 0, walk.queries)
    _matrix(axes[1], _joined(walk.q), lim, f"Q ({t} × {d_model})", walk.heads, None)  # X's rows
    _matrix(axes[2], _joined(walk.k), lim, f"K ({s} × {d_model})", walk.heads, walk.keys)
    _matrix(axes[3], _joined(walk.v), lim, f"V ({s} × {d_model})", walk.heads, None)  # K's rows


def _heads_row(sub: SubFigure, walk, grid: int) -> None:
    _row_title(
        sub,
        rf"2. Each head attends with its own columns: $A_h = \mathrm{{softmax}}(Q_h K_h^\top / \sqrt{{{walk.d_k}}})$",
        f"over each map: its queries' largest weight, mean (in brackets: the same without the √{walk.d_k}, a what-if)",
    )
    big, big_raw = walk.largest(walk.weights), walk.largest(walk.unscaled)
    columns = -(-walk.heads // grid)
    axes = sub.subplots(grid, columns, squeeze=False)
    t, s = walk.weights.shape[1:]
    im = None
    for h, ax in enumerate(axes.flat):
        if h >= walk.heads:
            ax.set_visible(False)
            continue
        im = ax.imshow(walk.weights[h], cmap="viridis", vmin=0, vmax=1, aspect="equal", interpolation="nearest")
        ax.set_title(f"head {h}: {big[h]:.2f} ({big_raw[h]:.2f})", fontsize=10, color=HEAD_COLOURS[h % 8])
        for side in ax.spines.values():
            side.set_edgecolor(HEAD_COLOURS[h % 8])
            side.set_linewidth(2)
        fs = TICK if max(t, s) <= 14 else max(7.5, TICK * 14 / max(t, s))
        first, bottom = h % columns == 0, h + columns >= walk.heads  # the same tokens on every map: labelled once
        ax.set_xticks(range(s), walk.keys if bottom else [""] * s, rotation=90, fontsize=fs)
        ax.set_yticks(range(t), walk.queries if first else [""] * t, fontsize=fs)
        upright_spaces(ax)
    assert im is not None  # a layer has at least one head
    bar = sub.colorbar(im, ax=list(axes.flat), shrink=0.8, pad=0.01)
    bar.set_label("weight (0-1)", fontsize=9)
    bar.ax.tick_params(labelsize=TICK)


def _output_row(sub: SubFigure, walk, lim: float):
    t, d_model = walk.out.shape
    last = walk.heads - 1
    _row_title(
        sub,
        rf"3. Concatenate the heads' $Z_h = A_h V_h$ and project: $[Z_0 | \ldots | Z_{last}]\,W^O + b^O$",
        f"the layer's output, equal to the model's own to {walk.output_error:.0e}",
    )
    axes = sub.subplots(1, 2)
    _matrix(axes[0], walk.concat, lim, rf"$[Z_0 | \ldots | Z_{last}]$ ({t} × {d_model})", walk.heads, walk.queries)
    return _matrix(axes[1], walk.out, lim, rf"$\times\, W^O$ ({d_model} × {d_model}), $+\, b^O$: the output", 0, None)


def _scaling_row(sub: SubFigure, walk, scaling) -> None:
    _row_title(
        sub,
        r"4. Why divide by $\sqrt{d_k}$: $q \cdot k$ has variance $d_k$ and saturates the softmax",
        f"measured on random q and k with unit-variance components: {scaling.samples:,} queries × "
        f"{scaling.keys} keys for each d_k",
    )
    axes = sub.subplots(1, 3)
    panels = [
        ("variance of the scores", scaling.variance, "log"),
        ("softmax's largest weight, mean", scaling.largest, "linear"),
        ("gradient reaching the scores, ‖∂a/∂s‖", scaling.gradient, "linear"),
    ]
    for ax, (title, values, yscale) in zip(axes, panels):
        ax.plot(scaling.d_k, values[0], "o-", color=UNSCALED, ms=3.5, label="q · k")
        ax.plot(scaling.d_k, values[1], "o-", color=SCALED, ms=3.5, label="q · k / √d_k")
        ax.set_xscale("log", base=2)
        ax.set_yscale(yscale)
        ticks = [int(d) for d in scaling.d_k[::3]]  # plain numbers: exponents would be too small to read
        ax.set_xticks(ticks, [str(d) for d in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel("d_k", fontsize=9)
        ax.axvline(walk.d_k, color="#111", lw=0.8, ls=":")
        ax.tick_params(labelsize=TICK)
        ax.grid(alpha=0.3, lw=0.5)
    axes[0].plot(scaling.d_k, scaling.d_k, color="#111", lw=0.6, ls="--", label="d_k")
    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    axes[0].legend(fontsize=8.5, frameon=False)
    axes[1].set_ylim(0, 1)
    axes[1].axhline(1 / scaling.keys, color="#111", lw=0.6, ls="--")
    axes[1].text(scaling.d_k[0], 1 / scaling.keys + 0.02, f"uniform, 1/{scaling.keys}", fontsize=8.5)
    axes[2].set_ylim(0, None)
    axes[1].text(walk.d_k * 1.1, 0.5, f"this layer's\nd_k = {walk.d_k}", fontsize=8.5)
    var, big, big_raw = walk.score_variance(), walk.largest(walk.weights), walk.largest(walk.unscaled)
    sub.supxlabel(
        textwrap.fill(
            f"The trained layer's own scores are wider than the random ones: q · k has variance {var.min():.0f} "
            f"to {var.max():.0f} across its heads (training grows q and k), so even divided by √{walk.d_k} its "
            f"heads' largest weights are {big.min():.2f} to {big.max():.2f}, and undivided they would be "
            f"{big_raw.min():.2f} to {big_raw.max():.2f}.",
            int(WIDTH * 13),
        ),
        fontsize=9,
        ha="left",
        x=0.01,
    )
