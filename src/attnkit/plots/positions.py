"""Positional-encoding figures: the PE matrix, chosen sinusoids, and
why sinusoids encode relative offset (similarity depends on distance only)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import cast

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Circle, Rectangle
from matplotlib.transforms import blended_transform_factory

from .layout import COSINE, WIDTH

GOLD = "#b07800"  # a mark that is not on the diverging map's red-white-blue scale


def plot_positional_encoding(
    pe: np.ndarray,
    *,
    dims: Sequence[int] | None = None,
    title: str = "",
    learned: bool = False,
    centre: bool = False,
    columns: int = 2,
    width: float | None = None,
    sin_cos: bool = False,
) -> Figure:
    """Four panels: the (t, d) matrix, a few dimensions over positions (one curve each, stacked so
    none hides another), the cosine similarity of every pair of positions, and that similarity
    seen from position 0 and from the middle one; in two rows of two (``columns`` 2: a docs
    column's width) or one row (4). ``learned``: a trained table,
    described as such (no claims of the sinusoids' properties). ``centre``: each dimension minus
    its mean over the positions (for an encoding with large constant parts, such as an MLP's
    output), said in the figure. ``width``: the two rows' width in inches (a docs column's by
    default; narrower for a pane, where the same type is larger beside the panels). ``sin_cos``:
    the table's even dimensions are sines and its odd ones cosines (the sinusoidal encoding): its
    panel shows the sines, then the cosines, each half a smooth sweep of falling frequency where
    the alternating columns would read as stripes."""
    width = width or WIDTH
    if centre:
        pe = pe - pe.mean(axis=0, keepdims=True)
    d = pe.shape[1]
    if dims is None:  # high to low frequency: the first pair, then even dims spread over d
        dims = sorted({0, 1, *(2 * (d // k // 2) for k in (16, 8, 4))})
    dims = [j for j in dims if j < d]
    if columns not in (2, 4):
        raise ValueError(f"columns must be 4 (one row) or 2 (two rows), got {columns}")
    if columns == 4:
        fig = Figure(figsize=(18, 4.4), layout="constrained")
        ax_m, ax_s, ax_c, ax_d = fig.subplots(1, 4, width_ratios=[1, 1, 0.9, 1])
    else:
        # wider gaps: a colour bar's label apart from the next panel's
        fig = Figure(figsize=(width, 7.6 * width / WIDTH), layout=ConstrainedLayoutEngine(wspace=0.12))
        (ax_m, ax_s), (ax_c, ax_d) = fig.subplots(2, 2)

    lim = _table_panel(fig, ax_m, pe, learned, centre, sin_cos)
    _dims_panel(ax_s, pe, dims, lim, learned, columns, centre)
    _similarity_panels(fig, ax_c, ax_d, pe, learned, centre)
    for ax in (ax_m, ax_s, ax_c, ax_d):
        ax.title.set_fontsize(10)
    if title:
        fig.suptitle(textwrap.fill(title, int(width * 11)))  # within the figure's width
    return fig


def _table_panel(fig: Figure, ax_m, pe: np.ndarray, learned: bool, centre: bool, sin_cos: bool) -> float:
    """The (t, d) table as a heatmap with its colour bar; returns the colour limit."""
    # a trained table has a few large outliers: its colours stop at the 99th percentile of |value|
    lim = 1.0 if not learned else float(np.percentile(np.abs(pe), 99)) or 1.0
    d = pe.shape[1]
    shown = np.concatenate([pe[:, 0::2], pe[:, 1::2]], axis=1) if sin_cos else pe
    # a trained table has no order across its dimensions: more columns than pixels are averaged, not
    # sampled (sampling would alias into stripes that are not in it)
    smooth = "antialiased" if learned and shown.shape[1] > 256 else "nearest"
    im = ax_m.imshow(shown, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation=smooth)
    if sin_cos:  # each half counts its frequencies i from 0: sin in dimension 2i, cos in 2i + 1
        half = (d + 1) // 2
        ax_m.axvline(half - 0.5, color="black", lw=1.0)
        ticks = [0, half // 2, half, half + (d - half) // 2]
        ax_m.set_xticks(ticks, [str(t if t < half else t - half) for t in ticks])
        halves = ax_m.secondary_xaxis("top")
        halves.set_xticks([half / 2 - 0.5, half + (d - half) / 2 - 0.5], ["sin: dim 2i", "cos: dim 2i + 1"])
        halves.tick_params(length=0, labelsize=9)
    ax_m.set(xlabel="pair i (the frequency falls with i)" if sin_cos else "dimension", ylabel="position")
    ax_m.set_title(
        ("the table, each dimension minus its mean" if centre else "the table: one row per position")
        + ("\n(colours clipped at the 99th percentile)" if learned else ""),
        pad=9 if sin_cos else 6,  # clear of the sin and cos labels over the halves
    )
    fig.colorbar(im, ax=ax_m, shrink=0.85, label=f"value (±{lim:.2g}" + (", clipped)" if learned else ")"))
    return lim


def _dims_panel(
    ax_s, pe: np.ndarray, dims: Sequence[int], lim: float, learned: bool, columns: int, centre: bool = False
) -> None:
    """A few dimensions over the positions, one curve each, stacked so that none hides another."""
    t = pe.shape[0]
    # a trained table: curves spaced by their 99th percentile of |value|, so that one outlier (position 0's
    # values, often) does not flatten every curve
    step = 2.2 * (float(np.percentile(np.abs(pe[:, dims]), 99)) if learned else lim)
    for k, j in enumerate(dims):
        # the positions are integers: their samples marked, so that a fast dimension reads as samples, not a zigzag
        ax_s.plot(np.arange(t), pe[:, j] - k * step, lw=1.0, marker="." if t <= 128 and not learned else None, ms=3)
        kind = "" if learned else (" sin" if j % 2 == 0 else " cos")
        # each curve's name just past the panel's right edge: the axis ends where the positions do
        ax_s.text(1.02, -k * step, f"dim {j}{kind}", fontsize=9, va="center", clip_on=False,
                  transform=blended_transform_factory(ax_s.transAxes, ax_s.transData))  # fmt: skip
    ax_s.set_yticks([])
    ax_s.set_xlim(-0.03 * (t - 1), t - 1)  # position 0 clear of the axis line
    ax_s.set(
        xlabel="position",
        ylabel=f"value (curves offset by {step:.2g})",
        title="a few dimensions"
        + (", centred" if centre else "")
        + ("" if learned else ":" + ("\n" if columns == 2 else " ") + "the frequency falls with the index"),
    )


def _corner_inset(ax, cos: np.ndarray, odd: int, cmap, norm) -> None:
    """The map's corner around position ``odd`` magnified in the lower triangle (which mirrors the
    upper: nothing is hidden), its row and column outlined in gold: one position's cells are a pixel or
    two wide on the whole map."""
    n = 10
    a = max(0, min(odd - n // 2, cos.shape[0] - n))
    inset = ax.inset_axes((0.03, 0.03, 0.33, 0.33))  # the lower-left corner, a ninth of the map: under the diagonal
    inset.imshow(
        cos[a : a + n, a : a + n],
        cmap=cmap,
        norm=norm,
        interpolation="nearest",
        extent=(a - 0.5, a + n - 0.5, a + n - 0.5, a - 0.5),
    )
    for xy, w, h in (((a - 0.5, odd - 0.5), n, 1), ((odd - 0.5, a - 0.5), 1, n)):
        inset.add_patch(Rectangle(xy, w, h, fill=False, edgecolor=GOLD, lw=1.2))
    inset.set_xticks([])
    inset.set_yticks([])
    # its name over its top edge from its left end (inside the map's frame), on white: it lies on the map
    inset.text(0.0, 1.02, f"positions {a}–{a + n - 1}, enlarged", transform=inset.transAxes, ha="left", va="bottom",
               fontsize=9, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})  # fmt: skip
    ax.indicate_inset_zoom(inset, edgecolor="#333333", lw=0.8)


def _similarity_panels(fig: Figure, ax_c, ax_d, pe: np.ndarray, learned: bool, centre: bool) -> None:
    """The cosine similarity of every pair of positions, and two of its rows."""
    t = pe.shape[0]
    unit = pe / np.maximum(np.linalg.norm(pe, axis=1, keepdims=True), 1e-12)
    cos = unit @ unit.T
    im = ax_c.imshow(cos, interpolation="nearest", **COSINE)
    label = "cosine" + (", centred" if centre else "") + f" (−1 to 1; least here {cos.min():.2f})"
    rest = (cos.sum(1) - np.diag(cos)) / max(1, t - 1)  # each position's mean similarity to the others
    title = "cosine similarity of " + ("centred encodings PE(i), PE(j)" if centre else "positions i and j")
    if learned and not centre:  # a trained table: the position least like the others, named on both axes
        odd = int(np.argmin(rest))
        # marked outside the map, so that its cells stay in view: on both axes a long, thick gold tick points at
        # its row and its column, under a gold label (every label pushed out past the long tick)
        ticks = sorted({*(int(v) for v in np.arange(0, t, 20)), odd})
        ax_c.tick_params(pad=8)
        for axis in (ax_c.xaxis, ax_c.yaxis):
            axis.set_ticks(ticks, [str(v) for v in ticks])
            for tick, v in zip(axis.get_major_ticks(), ticks):
                if v == odd:
                    tick.tick1line.set(markeredgecolor=GOLD, markersize=9, markeredgewidth=2.4)
                    tick.label1.set(color=GOLD)
        title += f"\n(in gold: position {odd}, the least like the rest)"
        _corner_inset(ax_c, cos, odd, im.cmap, im.norm)
    ax_c.set(xlabel="position j", ylabel="position i", title=title)
    fig.colorbar(im, ax=ax_c, shrink=0.85, label=label)

    # the two rows against the offset j - i: where the similarity depends on the distance alone, they lie on
    # one curve (the wide one under the narrow)
    mid = t // 2
    ax_d.plot(np.arange(t), cos[0], lw=3.0, alpha=0.55, label="from position 0")
    ax_d.plot(np.arange(t) - mid, cos[mid], lw=1.3, label=f"from position {mid}")
    ax_d.axvline(0, color="grey", lw=0.5)
    low = float(min(cos[0].min(), cos[mid].min()))
    ax_d.axhline(0, color="grey", lw=0.5)
    ax_d.set(
        xlabel="offset j − i",
        ylabel="cosine similarity" + (" (centred vectors)" if centre else ""),
        ylim=(min(low, 0.0) - 0.05, 1.05),  # down to the data's least, and 0
        xlim=(-mid, t - 1),
        title=f"rows 0 and {mid} of it, by offset"
        + (f"\n(mean to the other positions: {rest[0]:.2f} and {rest[mid]:.2f})" if learned and not centre else "")
        + (":\nit depends on |i − j| only" if not learned else "")
        + ("\n(the dips below 0 come from the centring)" if centre else ""),
    )
    # in the panel, in whichever corner the curves leave most free (matplotlib's "best"), on a white box
    ax_d.legend(fontsize=9, loc="best", framealpha=0.9, handlelength=1.6, borderaxespad=0.3)


def plot_score_bias(bias: np.ndarray, *, title: str = "", max_heads: int = 8, width: float | None = None) -> Figure:
    """Bias added to the attention scores by a relative scheme, (heads, t, t): each head's
    matrix, all on one colour scale so that heads compare, and every head's bias seen from
    the middle query as a function of the offset j - i. ``width``: in inches (a docs column's by
    default; narrower for a pane, where the same type is larger)."""
    width = width or WIDTH
    heads, t, _ = bias.shape
    shown = list(range(min(heads, max_heads)))
    cols = min(4, len(shown))
    rows = -(-len(shown) // cols)
    side = (width - 1.3) / cols  # the heads' grid above, the figure's width; the offsets below
    # a row's titles clear of the panels above them
    layout = ConstrainedLayoutEngine(h_pad=0.06, hspace=0.06)
    fig = Figure(figsize=(width, side * rows + 3.9 + (0.3 if title else 0)), layout=layout)
    top, bottom = cast(np.ndarray, fig.subfigures(2, 1, height_ratios=[side * rows + 0.8, 3.1]))  # 2 x 1: an array
    grid = top.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    axes = np.atleast_1d(grid).ravel()
    low, high = float(bias[shown].min()), float(bias[shown].max())
    if low >= 0 or high <= 0:  # one sign (ALiBi: a penalty): a sequential scale from 0
        cmap, vmin, vmax = ("viridis", low, 0.0) if high <= 0 else ("viridis", 0.0, high)
    else:  # both signs (a learned bias): a diverging scale centred on 0
        lim = max(-low, high)
        cmap, vmin, vmax = "RdBu_r", -lim, lim
    slopes = _linear_slopes(bias)
    norm: Normalize = Normalize(vmin, vmax)
    steepest = np.abs(bias[shown]).reshape(len(shown), -1).max(1)
    logarithmic = bool(slopes) and steepest.min() > 0 and steepest.max() / steepest.min() > 20
    linear_within = float(steepest.min()) / 16
    if logarithmic:  # slopes a factor apart: on a linear scale the gentlest heads look flat
        norm = SymLogNorm(linthresh=linear_within, vmin=vmin, vmax=vmax, base=10)
    im = None
    for n, (ax, h) in enumerate(zip(axes, shown)):
        im = ax.imshow(bias[h], cmap=cmap, norm=norm, interpolation="nearest")
        # a panel narrower than its title on one line: the slope under the head's number
        ax.set_title(f"head {h}" + ((": " if side > 1.6 else "\n") + f"m = {slopes[h]}" if slopes else ""), fontsize=10)
        if n // cols == rows - 1 or n + cols >= len(shown):  # axis names on the outer panels only
            ax.set_xlabel("key j", fontsize=9)
        else:  # the panel below has the key axis: no tick marks into its title
            ax.tick_params(bottom=False, labelbottom=False)
        if n % cols == 0:
            ax.set_ylabel("query i", fontsize=9)
        ax.tick_params(labelsize=9)
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    bar = top.colorbar(im, ax=list(axes[: len(shown)]), shrink=0.9)
    if logarithmic:  # plain numbers at each power of ten and at the scale's end, not "−10^1"
        # each power of ten, but for one within a quarter decade of the end (their labels would meet)
        decades = [
            -(10.0**k) for k in range(-6, 6) if vmin < -(10.0**k) < -linear_within and -vmin > 10.0 ** (k + 0.25)
        ]
        ends = [vmin, *sorted(decades), 0.0]
        bar.set_ticks(ends, labels=[f"{v:g}".replace("-", "−") for v in ends])
        bar.minorticks_off()  # no unlabelled marks between them
    scale = f"log scale, linear within ±{linear_within:.2g}; " if logarithmic else ""
    what = f"{scale}{vmin:.3g} to {vmax:.3g}, every head".replace("-", "−")
    bar.set_label("bias added to the score\n" + textwrap.fill(f"({what})", round(side * rows * 16)), fontsize=9)
    top.suptitle(
        f"the score bias of each head (one {'logarithmic ' if logarithmic else ''}scale, every panel)", fontsize=10
    )
    ax_l = bottom.subplots()
    mid = t // 2
    offsets = np.arange(t) - mid
    for h in range(heads):
        ax_l.plot(offsets, bias[h, mid], lw=1.4, label=f"head {h}" + (f": −{slopes[h]} |j − i|" if slopes else ""))
    ax_l.set(xlabel="offset j − i", ylabel="bias added to the score")
    seen = f"each head's bias seen from query i = {mid}"
    if slopes:  # the gentlest slopes look flat on the steepest's scale
        seen += "\nm halves from head to head, so the last heads' lines lie close to 0"
    ax_l.set_title(seen, fontsize=10)
    if heads <= 8:
        ax_l.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    if title:
        fig.suptitle(_fill(title, width), fontsize=11)
    return fig


def _fill(title: str, width: float) -> str:
    """Each line of ``title`` wrapped within a figure ``width`` inches wide (a line with TeX in it
    kept whole: a break inside it would show the raw TeX)."""
    return "\n".join(line if "$" in line else textwrap.fill(line, round(width * 11)) for line in title.splitlines())


def _linear_slopes(bias: np.ndarray) -> list[str]:
    """Each head's m, written as a fraction where it is one over a power of two, when every head's
    bias is exactly -m |j - i| (ALiBi); else none."""
    t = bias.shape[-1]
    distance = np.abs(np.arange(t)[:, None] - np.arange(t)[None, :])
    m = -bias[:, 0, 1] if t > 1 else np.zeros(len(bias))
    if t < 2 or not np.allclose(bias, -m[:, None, None] * distance, rtol=1e-5, atol=1e-6):
        return []
    out = []
    for value in m:
        power = np.log2(1 / value) if value > 0 else np.nan
        exact = np.isfinite(power) and abs(power - round(power)) < 1e-6
        out.append(f"1/{2 ** round(power)}" if exact and power >= 1 else f"{value:.3g}")
    return out


def plot_relative_index(
    index: np.ndarray,
    max_distance: int,
    *,
    buckets: bool = False,
    scalars: np.ndarray | None = None,
    unreached: Sequence[int] = (),
    title: str = "",
    width: float | None = None,
) -> Figure:
    """Which learned parameter each (query, key) pair uses: Shaw's clipped offset
    clip(j - i, -k, k) (a diverging scale: the two clipped ends in opposite colours) or T5's
    log-spaced bucket; that index against the offset; and, with ``scalars`` (heads, buckets),
    the learned scalar each head adds for each bucket, the ``unreached`` buckets hatched. ``width``:
    in inches (a docs column's by default; narrower for a pane, where the same type is larger)."""
    width = width or WIDTH
    t = index.shape[0]
    if scalars is None:
        fig = Figure(figsize=(width, 3.6), layout=ConstrainedLayoutEngine(wspace=0.12))  # a colour bar apart
        ax_m, ax_l = fig.subplots(1, 2)
    else:  # the learned scalars below, the figure's width
        fig = Figure(figsize=(width, 6.8), layout="constrained")
        grid = fig.subplot_mosaic([["index", "offset"], ["scalars", "scalars"]])
        ax_m, ax_l = grid["index"], grid["offset"]
    if buckets:
        im = ax_m.imshow(index, cmap="viridis", interpolation="nearest")
        fig.colorbar(im, ax=ax_m, shrink=0.85, label=f"bucket (0 to {int(index.max())})")
        ax_m.set(xlabel="key j", ylabel="query i", title="bucket of (i, j)")
        ax_m.title.set_fontsize(9)
    else:
        offset = index - max_distance  # the table row is the clipped offset + k
        im = ax_m.imshow(offset, cmap="RdBu_r", vmin=-max_distance, vmax=max_distance, interpolation="nearest")
        fig.colorbar(im, ax=ax_m, shrink=0.85, label=f"clip(j − i, −{max_distance}, {max_distance})")
        ax_m.set(
            xlabel="key j",
            ylabel="query i",
            title=f"clipped offset of (i, j);{' ' if width >= WIDTH else chr(10)}its table row is the offset + {max_distance}",
        )
        ax_m.title.set_fontsize(9)
    mid = t // 2
    ax_l.step(np.arange(t) - mid, index[mid], where="mid")
    ax_l.set(
        xlabel="offset j − i",
        ylabel="bucket" if buckets else f"row = clip(j − i, −{max_distance}, {max_distance}) + {max_distance}",
        title=(
            "nearby offsets get their own bucket,\nfar ones share log-spaced buckets"
            if buckets
            else f"offsets beyond ±{max_distance} share a row"
        ),
    )
    ax_l.title.set_fontsize(9)
    if scalars is not None:
        ax_b = grid["scalars"]
        # the scale from the trained buckets: an untrained one keeps its random start and may lie past them
        reached = np.ones(scalars.shape[1], dtype=bool)
        reached[list(unreached)] = False
        lim = float(np.abs(scalars[:, reached] if reached.any() else scalars).max()) or 1.0
        im = ax_b.imshow(scalars, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
        clipped = np.abs(scalars).max() > lim  # an untrained scalar past the trained ones: drawn at the scale's end
        fig.colorbar(im, ax=ax_b, shrink=0.85, label=f"scalar added to the score\n(±{lim:.2g}: the trained buckets')")
        panel = "the learned scalar of each head and bucket" + (
            " (untrained ones clipped to the scale)" if clipped else ""
        )
        ax_b.set(xlabel="bucket", ylabel="head", title=panel)
        for b in unreached:  # never trained: hatched over in white lines edged in black, read on any colour
            for colour, line in (("black", 2.4), ("white", 1.0)):
                ax_b.add_patch(Rectangle((b - 0.5, -0.5), 1, scalars.shape[0], fill=False, hatch="//",
                                         edgecolor=colour, hatch_linewidth=line, lw=0))  # fmt: skip
        ax_b.set_yticks(range(scalars.shape[0]))
        ax_b.title.set_fontsize(9)
    if title:  # each line kept within the figure's width
        fig.suptitle(_fill(title, width), fontsize=10.5)
    return fig


def plot_rotary(angles: np.ndarray, scores: np.ndarray, *, title: str = "", width: float | None = None) -> Figure:
    """RoPE: rotation angle m * theta_i of each 2-D pair over positions (t, d/2),
    and the score q . k between the same vectors placed at positions m and m + k,
    for several m: the curves coincide because RoPE scores depend on the offset n only (the
    first is drawn as a line, the others as markers on it, so that every one is seen). ``width``: in
    inches (a docs column's by default; narrower for a pane, where the same type is larger)."""
    width = width or WIDTH
    _t, _pairs = angles.shape
    fig = Figure(figsize=(width, 3.9 if width < WIDTH else 4.2), layout="constrained")
    if width >= WIDTH:  # a docs column: the rotation of one pair first
        ax_r, ax_a, ax_s = fig.subplots(1, 3, width_ratios=[1.0, 1.0, 1.25])
        _one_pair(ax_r, angles)
    else:
        ax_a, ax_s = fig.subplots(1, 2)
    im = ax_a.imshow(np.cos(angles), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_a.set(
        xlabel="dimension pair i",
        ylabel="position m",
        title=r"$\cos(m\,\theta_i)$: fast pairs left," + "\nslow pairs right",
    )
    ax_a.title.set_fontsize(10)
    fig.colorbar(im, ax=ax_a, shrink=0.85, ticks=[-1, -0.5, 0, 0.5, 1], label=r"$\cos(m\,\theta_i)$ (−1 to 1)")
    markers = ["o", "x", "+", "^"]
    for m, row in enumerate(scores):
        x = np.arange(len(row))
        if m == 0:
            ax_s.plot(x, row, lw=2.0, color="#9ca3af", label=f"query at m = {m * 17}")
        else:
            ax_s.plot(x, row, ls="none", marker=markers[(m - 1) % len(markers)], ms=4, label=f"query at m = {m * 17}")
    ax_s.set(
        xlabel="offset n (the key at m + n)",
        ylabel="q · k after rotation",
        title="the score depends on the\noffset only: the curves coincide",
    )
    ax_s.title.set_fontsize(10)
    if width >= WIDTH:  # three panels: the key under its own panel, on no point
        handles, labels = ax_s.get_legend_handles_labels()
        ax_s.legend(handles, [x.removeprefix("query at ") for x in labels], title="query at", fontsize=9,
                    title_fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=3, frameon=False)  # fmt: skip
        engine = fig.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):
            engine.set(wspace=0.06)  # the colour bar's label apart from the next panel's
    else:
        fig.legend(
            *ax_s.get_legend_handles_labels(), fontsize=9, loc="outside lower right", ncol=3, frameon=False
        )  # on no point
    if title:
        fig.suptitle(_fill(title, width), fontsize=11)
    return fig


def _one_pair(ax, angles: np.ndarray, pair: int = 1, positions: int = 4) -> None:
    """One pair of dimensions (x_2i, x_2i+1) of the same vector at positions 0 .. positions - 1:
    each step turns it by theta_i, so two positions' vectors meet at an angle set by their offset."""
    theta = float(angles[1, pair]) if len(angles) > 1 else 0.0
    ax.add_patch(Circle((0, 0), 1.0, fill=False, color="#d1d5db", lw=0.8))
    shades = colormaps["viridis"](np.linspace(0.0, 0.8, positions))
    base = 0.15  # the vector's own angle before any rotation
    for m in range(positions):
        a = base + m * theta
        ax.annotate("", xy=(np.cos(a), np.sin(a)), xytext=(0, 0),
                    arrowprops={"arrowstyle": "-|>", "color": shades[m], "lw": 1.6}, annotation_clip=True)  # fmt: skip
        ax.text(
            1.08 * np.cos(a),
            1.08 * np.sin(a),
            f"m = {m}",
            fontsize=9,
            ha="left",
            va="center",
            color=shades[m],
            clip_on=True,
        )
    arc = np.linspace(base, base + 2 * theta, 30)  # two steps apart: the angle (n - m) theta_i
    ax.plot(0.42 * np.cos(arc), 0.42 * np.sin(arc), color="#c026d3", lw=1.4)
    below = base - 0.12  # under the arc's first side, clear of the arrows
    ax.text(0.42 * np.cos(below), 0.42 * np.sin(below), "2θ: m = 0 to 2", fontsize=9, color="#c026d3", va="top",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})  # fmt: skip
    turned = base + theta * np.arange(positions)
    xs, ys = np.cos(turned), np.sin(turned)  # the arrows' ends: the view holds them and their labels
    ax.set(
        xlim=(min(xs.min(), 0) - 0.35, max(xs.max(), 0) + 0.6), ylim=(min(ys.min(), 0) - 0.35, max(ys.max(), 0) + 0.3)
    )
    ax.set(aspect="equal", xticks=[], yticks=[])
    ax.set_xlabel(
        f"dimension {2 * pair}\nturned by their positions, q and k\nmeet at an angle set by n alone", fontsize=9
    )
    ax.set_ylabel(f"dimension {2 * pair + 1}", fontsize=9)
    ax.set_title(
        f"pair i = {pair} (dimensions {2 * pair}, {2 * pair + 1}):\nturned {theta:.2f} rad a position", fontsize=10
    )
