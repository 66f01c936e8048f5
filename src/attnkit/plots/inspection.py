"""Figures for the Q/K/V walk-through and the per-head diagnostics."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.lines import Line2D

from .attention import window_cells
from .layout import COSINE, TURNED_AMISS, WIDTH, math, plain, upright_spaces, wrap_math

QUERY_COLOUR = "#b54708"  # the query, and its own key where it is one of the keys


def plot_walkthrough(w, *, dims: int = 32, model: str = "") -> Figure:
    """Five panels for one query (a ``Walkthrough``): q and the keys; q ⊙ k_j, whose rows sum
    to the scores; raw and scaled scores; softmax with and without 1/sqrt(d_k); the values
    weighted into z. Every heatmap has its colour bar."""
    s = w.k.shape[0]
    wide = s > 20  # a long input's key labels stand upright, and its weighted values are those worth drawing
    # a long input's weighted rows: those with a weight worth drawing (the rest are 0 at two decimals)
    kept = np.flatnonzero(w.weights >= 0.005) if wide else np.arange(s)
    # inches: a line a key, the axis label; the scores and the weights each the figure's width, for their labels
    keys, bars, values = (
        1.0 + 0.19 * s + 0.2 * (w.k.shape[1] > dims),
        3.0 if wide else 2.5,
        max(1.8, 1.0 + 0.2 * (len(kept) + 1)),
    )
    # the query has a row of its own above the keys, so that panels 1 and 2 share one row per key
    layout: list[Any] = [["q", "note"], ["qk", "prod"], ["scores"] * 2, ["softmax"] * 2, ["values"] * 2]
    heights = [0.6, keys, bars, bars, values]
    # a docs column wide; 0.1 inches between rows, so that turned key labels clear the next panel's title
    fig = Figure(figsize=(WIDTH, sum(heights) + 0.7), layout=ConstrainedLayoutEngine(h_pad=0.1, w_pad=0.1))
    axes = fig.subplot_mosaic(layout, height_ratios=heights)
    ticks: dict[str, Any] = dict(fontsize=9 if s <= 40 else 7)
    # the dimensions of largest terms (Σ_j |q_d k_jd|), and the share of all the terms' magnitude they hold; the
    # values', those of z (an RNN's values are its keys, the encoder states: the same dimensions)
    chosen = _top(w.terms, dims)
    share = np.abs(w.terms[:, chosen]).sum() / (np.abs(w.terms).sum() or 1.0)
    by = "with the largest Σ |term| over the rows" + (
        f"\n({share:.0%} of the sum over all {w.terms.shape[1]})" if len(chosen) < w.terms.shape[1] else ""
    )
    summed: tuple[np.ndarray, str] = (chosen, "shown in panels 1 and 2")
    if not w.recurrent:
        summed = (_top(w.context[None], dims), f"with the largest |{math('z')}|")
    # a column of panels 1 and 2 is about 6 points wide: its numbers in panel 5 where it shows the same ones
    _vector_panels(fig, axes, w, chosen, by, 0 if w.recurrent else 2, ticks)

    x, labels = np.arange(s), [_named(t) for t in w.key_tokens]  # a lone mark quoted in every panel
    # key labels level where each fits its key's width; else a short input's lean, easier to read, and a long
    # one's stand upright side by side (a character about 0.6 of the type's size, the panel about the figure's width)
    level = max(map(len, labels)) * 0.6 * ticks["fontsize"] + 6 < (WIDTH - 1.4) * 72 / s
    slant: dict[str, Any] = (
        dict(rotation=0, ha="center")
        if level
        else dict(rotation=60, ha="right", rotation_mode="anchor")
        if s <= 20
        else dict(rotation=90, ha="center")
    )
    _scores_panel(axes["scores"], w, x, labels, dict(slant, **ticks))
    _softmax_panel(axes["softmax"], w, x, labels, dict(slant, **ticks))
    if w.p_t is not None and w.window is not None:  # local attention: the window the weights are confined to
        _window(axes, w, s)
    for name in ("scores", "softmax"):
        _key_above(axes[name], columns=2)
    _values_panel(fig, axes["values"], w, kept, *summed, ticks)
    if not w.recurrent and w.kind != "cross":  # self-attention: the query is one of the keys
        _mark_query(axes, w, kept)
    for ax in axes.values():
        ax.title.set_fontsize(10)
    query_label = getattr(w, "query_label", f"query {w.query_token!r}")
    where = " of the RNN decoder (Luong)," if w.recurrent else f", layer {w.layer}, head {w.head},"
    query_label += " (counted from 0)" if w.recurrent else " (all counted from 0)"
    fig.suptitle(textwrap.fill(f"{model + ': ' if model else ''}{w.kind_label}{where} {query_label}", 100), fontsize=11)
    return fig


def _key_above(ax, *, columns: int) -> None:
    """The panel's key just above it, its bars first, and its title above the key, so that the key
    covers no bar and the panel's y-range is its data's."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(handles)), key=lambda i: not isinstance(handles[i], BarContainer))
    size, gap = 9, 0.2  # the key's type, and its gap to the panel in units of that type
    key = ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=size, loc="lower left",
                    bbox_to_anchor=(0, 1), ncol=columns, frameon=False, borderaxespad=gap, borderpad=0,
                    handlelength=1.2, columnspacing=1.5)  # fmt: skip
    canvas = ax.figure.canvas if isinstance(ax.figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(ax.figure)
    tall = key.get_window_extent(canvas.get_renderer()).height * 72 / ax.figure.dpi  # points
    ax.set_title(ax.get_title(), pad=tall + gap * size + 4)  # over the key and the gap under it


def _mark_query(axes, w, kept: np.ndarray) -> None:
    """The query's own key in bold and in the query row's colour, wherever a panel names it."""
    j = w.query
    labels = [axes["qk"].get_yticklabels()[j], axes["prod"].get_yticklabels()[j], axes["q"].get_yticklabels()[0],
              axes["scores"].get_xticklabels()[j], axes["softmax"].get_xticklabels()[j]]  # fmt: skip
    if j in kept:
        labels.append(axes["values"].get_yticklabels()[int(np.flatnonzero(kept == j)[0])])
    for label in labels:
        label.set(color=QUERY_COLOUR, fontweight="bold")


def _named(token: str) -> str:
    """A key as an upright label names it: a lone mark in quotes, so that a full stop is seen as a token."""
    return f"“{token}”" if token in TURNED_AMISS else token


def _top(rows: np.ndarray, dims: int) -> np.ndarray:
    """The ``dims`` dimensions with the largest Σ over ``rows`` of |value|, in index order (all, if no more)."""
    if rows.shape[1] <= dims:
        return np.arange(rows.shape[1])
    return np.sort(np.argsort(-np.abs(rows).sum(axis=0), kind="stable")[:dims])


def _dimensions(ax, w, chosen: np.ndarray, by: str, name: str = "", step: int = 1) -> None:
    """A walk-through heatmap's x axis: which dimensions it shows, of how many; the chosen ones named,
    every ``step``-th where a column is too narrow for its number, none (0) where panel 5 names the same
    ones. Each column keeps a tick."""
    d = w.v.shape[1] if name == "d_v" else w.k.shape[1]
    name = math(name or ("H" if w.recurrent else "d_k"))
    if len(chosen) == d:
        if d <= 64:  # one spacing in every panel, wide or narrow
            ax.set_xticks(range(0, d, 5 if d <= 40 else 10))
        ax.set_xlabel(f"dimension ({name} = {d})")
        return
    if step:  # turned: a column is narrower than a number (the full width: 32 of them about 14 points each)
        ax.set_xticks(range(0, len(chosen), step), [str(c) for c in chosen[::step]], fontsize=7 if step > 1 else 9,
                      rotation=90)  # fmt: skip
    else:
        ax.set_xticks([])
    ax.set_xticks(range(len(chosen)), minor=True)
    ax.tick_params(axis="x", which="both", length=2, pad=1)
    named = {0: " (named in panel 5)", 1: "", 2: " (every other named)"}[min(step, 2)]
    ax.set_xlabel(f"dimension{named}: the {len(chosen)} of {name} = {d}{chr(10) if named else ' '}{by}", fontsize=9)


def _range(lim: float) -> str:
    """A colour scale's limit as the studio prints it: two decimals."""
    return f"{lim:.2f}" if lim < 100 else f"{lim:.0f}"


def _heatmap(fig, ax, rows, title, colour_label, wrap=44, whole: np.ndarray | None = None) -> None:
    """A diverging heatmap with its colour bar, as tall as its rows; its scale that of ``whole`` (every
    dimension, of which ``rows`` shows some) where given."""
    lim = float(np.abs(rows if whole is None else whole).max()) or 1.0
    im = ax.imshow(rows, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    # a bar about 0.14 inches wide whatever its length (a row about 0.22 inches), its label by its ticks
    fig.colorbar(im, ax=ax, shrink=1.0, aspect=max(20.0, len(rows) / 0.65), label=f"{colour_label} (±{_range(lim)})")
    ax.set_title(wrap_math(title, wrap))


def _strip(fig, ax, row: np.ndarray, chosen: np.ndarray, name: str, label: str, ticks: dict[str, Any]) -> None:
    """One vector (``name``, its row ``label``) as a strip on its own scale (a query's size often differs
    greatly from its keys'), with a short colour bar of its own, named level beside it."""
    lim = float(np.abs(row).max()) or 1.0  # over every dimension: the strip shows ``row[chosen]`` of it
    im = ax.imshow(row[chosen][None], cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    bar = fig.colorbar(im, ax=ax, shrink=1.0, aspect=4)
    bar.set_ticks([])  # its range named beside it, as the other bars name theirs (white: 0)
    bar.set_label(f"{name} (±{_range(lim)})", rotation=0, ha="left", va="center", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([0], [label], **ticks)


def _vector_panels(fig, axes, w, chosen: np.ndarray, by: str, step: int, ticks: dict[str, Any]) -> None:
    """1. the query (its own row, on its own scale) over the keys; 2. the terms q ⊙ k_j, one row per key;
    both on the ``chosen`` dimensions, named every ``step``-th (0: in panel 5)."""
    s, d_k = w.k.shape
    # an RNN's query as its score multiplies each encoder state by (general: W_aᵀ h_t), so that panel 2 is
    # panel 1's strip times each of its rows
    factor = w.recurrent and w.factor is not None
    query, key = (math(w.factor_formula if factor else "h_t"), math("h̄_s")) if w.recurrent else (math("q"), math("k"))
    strip = w.factor if factor else w.q
    title = (  # the query's scale its own, the keys' one they share
        f"1. {query} (on its own scale) and the encoder states {key}"
        if w.recurrent
        else "1. the query (on its own scale) and the keys"
    )
    if w.recurrent and w.factor_transforms:
        title += f" ({math('h_t')}: the decoder state)"
    labels = [_named(t) for t in w.key_tokens]
    # the vectors' symbol once, on the colour bar that reads them; the axis says what a row is
    entry = f"{key}, encoder state" if w.recurrent else key
    _heatmap(fig, axes["qk"], w.k[:, chosen], "", entry, whole=w.k)
    _dimensions(axes["qk"], w, chosen, by, step=step)
    # a cross-attention query is the state that predicts its token, not the token's own vector
    label = f"{query} (→ {plain(w.query_token)})" if w.kind == "cross" else f"{query}: {plain(w.query_token)}"
    _strip(fig, axes["q"], strip, chosen, query, label, ticks)
    axes["q"].set_title(wrap_math(title, 50))
    axes["qk"].set_yticks(range(s), [plain(t) for t in labels], **ticks)
    axes["qk"].set_ylabel(f"one row per {'source token' if w.recurrent else 'key'}", fontsize=9)

    terms = math(w.terms_formula if w.recurrent else "q ⊙ k_j")
    sums = (
        f"each row sums to the score{'' if w.recurrent else ' ' + math('q · k_j')}"
        if len(chosen) == d_k
        else f"a row's sum over all {d_k} dimensions ({len(chosen)} shown) is the score"
    )
    _heatmap(fig, axes["prod"], w.terms[:, chosen], "", "term", whole=w.terms)
    _dimensions(axes["prod"], w, chosen, by, step=step)
    axes["prod"].set_yticks(range(s), labels, **ticks)  # the same rows as panel 1's keys
    note = axes["note"]  # panel 2's title level with panel 1's; under it, how a row is made
    note.set_axis_off()
    note.set_title(wrap_math(f"2. {terms}: {sums}", 44))
    row = "s" if w.recurrent else "j"
    note.text(
        0.5,
        0.4,
        wrap_math(f"row {math(row)} = the strip {query} × row {math(row)} of panel 1, cell by cell", 34),
        transform=note.transAxes,
        ha="center",
        va="center",
        fontsize=10,
        color="#1f2937",
        in_layout=False,
    )


def _values_panel(fig, ax, w, kept: np.ndarray, chosen: np.ndarray, by: str, ticks: dict[str, Any]) -> None:
    """5. the kept keys' values, each times its weight, over their sum z (an RNN: the encoder states
    into the context c_t), the figure's width, on the ``chosen`` dimensions."""
    s = w.k.shape[0]
    labels = list(w.key_tokens)
    value, total = (math("h̄_s"), math("c_t = Σ a_s h̄_s")) if w.recurrent else (math("v"), math("z = Σ a_j v_j"))
    weighted_name, total_name = (math("a_s h̄_s"), math("c_t")) if w.recurrent else (math("a_j v_j"), math("z"))
    title = f"5. weighted {'encoder states' if w.recurrent else 'values'} {weighted_name}"
    if len(kept) < s:
        inside = int(np.count_nonzero(w.allowed))
        of = f"of {inside} in the window, {s} in all" if inside < s else f"of {s}"
        title += f" of the {len(kept)} keys of weight ≥ 0.005 ({of}), and {total_name}, the sum over all"
    else:
        title += f" and their sum {total_name}"
    title += "; one scale: a small weight makes a pale row"
    weighted = w.weights[kept, None] * w.v[kept][:, chosen]
    whole = np.vstack([w.weights[kept, None] * w.v[kept], w.context[None]])
    _heatmap(fig, ax, np.vstack([weighted, w.context[None, chosen]]), title, "value", wrap=90, whole=whole)
    _dimensions(ax, w, chosen, by, "H" if w.recurrent else "d_v")
    ax.axhline(len(kept) - 0.5, color="black", lw=1.5)
    vector = math("h̄") if w.recurrent else value  # a row names its key by token, not by index
    rows = [f"{w.weights[j]:.2f} × {vector}({plain(_named(labels[j]))})" for j in kept]
    ax.set_yticks(range(len(kept) + 1), rows + [total], **ticks)


def _scores_panel(ax, w, x: np.ndarray, labels: list[str], ticks: dict[str, Any]) -> None:
    """3. the scores: an RNN's (those outside a local window grey), or raw and scaled beside each other."""
    finite = np.isfinite(w.scaled)
    d_k = w.k.shape[1]
    if w.recurrent:
        ax.bar(x[finite], w.raw[finite], width=0.6, label=f"score {math(w.score)}", color="#2563eb")
        if (~finite).any():
            ax.bar(x[~finite], w.raw[~finite], width=0.6, label="outside the window", color="#d1d5db")
        ax.set(title="3. scores")
    else:
        ax.bar(x - 0.2, w.raw, width=0.4, label=math("q · k_j"), color="#9ca3af")
        ax.bar(
            x[finite] + 0.2,
            w.scaled[finite],
            width=0.4,
            label=math(f"q · k_j / √{d_k}") + (" + positional bias" if w.bias is not None else ""),
            color="#2563eb",
        )
        ax.set(title="3. scores, raw and scaled")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xticks(x, labels, **ticks)
    upright_spaces(ax)
    ax.set(ylabel="score")


def _softmax_panel(ax, w, x: np.ndarray, labels: list[str], ticks: dict[str, Any]) -> None:
    """4. the weights: an RNN's (local-p's Gaussian beside them), or with and without the scaling."""
    if w.recurrent:
        if w.gauss is not None:  # the softmax before the Gaussian: a wider hollow bar behind the weight it becomes
            some = w.in_window >= 0.005  # a hollow bar of height 0 would draw a line on the axis
            ax.bar(x[some], w.in_window[some], width=0.8, facecolor="none", edgecolor="#1e3a8a", lw=0.9,
                   label="softmax in the window")  # fmt: skip
            top = int(np.argmax(w.weights))  # its product printed beside it, low, under the Gaussian
            ax.annotate(f"{w.in_window[top]:.4f} × {w.gauss[top]:.4f} = {w.weights[top]:.4f}",
                        (top + 0.45, w.weights[top] * 0.15), xytext=(3, 0), textcoords="offset points", ha="left",
                        va="center", fontsize=10, bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1))  # fmt: skip
        product = " = softmax × Gaussian" if w.gauss is not None else ""
        ax.bar(x, w.weights, width=0.5 if w.gauss is not None else 0.6, color="#2563eb",
               label=f"weight {math('a_s')}{product}")  # fmt: skip
        if w.gauss is not None:  # the Gaussian where it weighs keys (in the window), its curve faint outside
            inside = w.weights > 0 if w.window is None else np.abs(x - w.p_t) <= w.window
            ax.plot(x[inside], w.gauss[inside], color="#dc2626", marker=".", lw=1,
                    label=f"Gaussian around {math('p_t')} ({math('σ = D/2')}), faint outside the window")  # fmt: skip
            ax.plot(x, w.gauss, color="#dc2626", lw=0.8, alpha=0.35)
        title = "4. the weights: softmax in the window × Gaussian" if w.gauss is not None else "4. the weights: softmax"
        if w.window is not None:
            title += " (window and " + math("p_t") + " as in 3)"
    else:
        unscaled = f"softmax({math('q · k_j')}): without the scaling (a what-if)"  # grey: the raw scores' colour
        ax.bar(x - 0.2, w.unscaled_weights, width=0.4, label=unscaled, color="#9ca3af")
        ax.bar(x + 0.2, w.weights, width=0.4, label="softmax(scaled): the weights", color="#2563eb")
        for shift, row in ((-0.2, w.unscaled_weights), (0.2, w.weights)):  # each series' largest weight, printed
            top = int(np.argmax(row))
            ax.annotate(f"{row[top]:.2f}", (top + shift, row[top]), xytext=(0, 1), textcoords="offset points",
                        ha="center", va="bottom", fontsize=10)  # fmt: skip
        title = "4. softmax, unscaled and scaled"
    ax.set_xticks(x, labels, **ticks)
    upright_spaces(ax)
    ylabel = f"weight {math('a_s')}; Gaussian factor" if w.recurrent and w.gauss is not None else "weight"
    ax.set(ylim=(0, 1.05), yticks=np.linspace(0, 1, 6), title=title, ylabel=ylabel)


def _window(axes, w, s: int) -> None:
    """Local attention's window p_t ± D shaded on the scores and the weights."""
    for panel in (axes["scores"], axes["softmax"]):  # named in panel 3's key, once
        named = panel is axes["scores"]
        lo, hi = window_cells(w.p_t, w.window, s)  # the cells of the keys the model attends to
        panel.axvspan(lo, hi, color="#ff9f1c", alpha=0.18, lw=0, zorder=0,
                      label=f"window: the keys within {math('p_t ± D')} ({math('D')} = {w.window})" if named else None)  # fmt: skip
        panel.axvline(min(w.p_t, s - 0.5), color="#ff9f1c", lw=1.2, ls="--", alpha=0.8, zorder=3,  # over the bars
                      label=f"{math('p_t')} = {w.p_t:.2f}" if named else None)  # fmt: skip
        panel.set_xlim(-0.5, s - 0.5)


def plot_head_statistics(
    panels: Sequence[tuple[str, np.ndarray, np.ndarray]],
    *,
    sinks: Sequence[np.ndarray | None] = (),
    sink_keys: int = 1,
    title: str = "",
) -> Figure:
    """One row per attention kind (label, normalised entropy (L, h), mean largest weight (L, h)):
    its entropy beside its largest weight, each measure on one scale down its column. ``sinks``
    (per kind, the mean weight on the first key (L, h)) marks the heads that park most of their
    weight on the first key, so that a focused head is told apart from a sink (in causal attention
    counted over the queries that see ``sink_keys`` keys or more)."""
    rows = len(panels)
    marked = any(sink is not None and (sink >= SINK_MARK).any() for sink in sinks)
    fig = Figure(figsize=(WIDTH, 2.2 * rows + 1.0 + (0.3 if title else 0) + (0.25 if marked else 0)),
                 layout="constrained")  # fmt: skip
    axes = fig.subplots(rows, 2, squeeze=False)
    measures = (("normalised entropy (1 = uniform)", "magma"), ("mean largest weight", "viridis"))
    images: list[Any] = [None, None]
    for ri, (label, normalised, max_weight) in enumerate(panels):
        sink = sinks[ri] if ri < len(sinks) else None
        for ci, (values, (name, cmap)) in enumerate(zip((normalised, max_weight), measures)):
            ax = axes[ri, ci]
            images[ci] = ax.imshow(values, cmap=cmap, vmin=0, vmax=1, aspect="auto")
            _head_values(ax, values, sink if ci == 1 else None)  # the sink says where the largest weight goes
            layers, heads = values.shape
            ax.set_xticks(range(heads))
            ax.set_yticks(range(layers))
            ax.tick_params(labelsize=8)
            ax.set_ylabel(f"{label}\nlayer" if ci == 0 else "layer", fontsize=9)
            if ri == rows - 1:
                ax.set_xlabel("head", fontsize=9)
            if ri == 0:
                ax.set_title(name, fontsize=10)
    for ci, (name, _) in enumerate(measures):
        fig.colorbar(images[ci], ax=list(axes[:, ci]), location="bottom", shrink=0.8, aspect=30, pad=0.01, label=name)
    if title:
        fig.suptitle(textwrap.fill(title, int(WIDTH * 12)), fontsize=11)
    if marked:
        narrow = " (• where a cell is narrow)" if max(p[2].shape[1] for p in panels) > 8 else ""
        note = (
            "Largest weight: each query's largest weight, averaged over the queries. “1st key x”: the head's sink "
            "score, its mean weight on the first key (<s> where the sequence starts with it; in causal attention over "
            f"the queries that see {sink_keys} keys or more), written where it is {SINK_MARK:.0%} or more{narrow}: "
            "such a head parks most of its weight there. A head can put all of each query's weight on one key (largest "
            "weight 1.00) and only some of it on the first (1st key 0.75)."
        )
        fig.supxlabel(textwrap.fill(note, int(fig.get_figwidth() * 14)), fontsize=8.5, ha="left", x=0.01)
    return fig


SINK_MARK = 0.5  # the mean weight on the first key from which a head is marked as a sink


def _head_values(ax: Axes, values: np.ndarray, sink: np.ndarray | None) -> None:
    """Each head's value in its cell, and its weight on the first key under it where the head is a sink."""
    layers, heads = values.shape
    for li in range(layers):
        for h in range(heads):
            colour = "white" if values[li, h] < 0.6 else "black"
            text = f"{values[li, h]:.2f}"
            if sink is not None and sink[li, h] >= SINK_MARK:
                text += f"\n1st key {sink[li, h]:.2f}" if heads <= 8 else "\n•"
            ax.text(h, li, text, ha="center", va="center", fontsize=8, color=colour, linespacing=1.1)


def plot_contextual(
    labels: Sequence[str],
    similarities: Sequence[tuple[str, np.ndarray]],
    projections: Sequence[tuple[str, np.ndarray]],
    marked: dict[int, int],
    *,
    words: Sequence[str] = (),
    sentences: Sequence[str] = (),
    texts: Sequence[str] = (),
    paired: str = "",
    title: str = "",
) -> Figure:
    """Contextual word vectors. Top: cosine similarity matrices (name, (N, N)), e.g. static token
    vectors beside the last layer's, on one scale. Bottom: 2-D projections (name, (N, 2)) of all
    token vectors, one per depth; ``marked`` maps a token index to its sentence (its colour,
    named by ``sentences``, each written out from ``texts`` in the key); tokens drawn at the same
    place share one label; ``paired``: the word whose pairs' cosines a projection's name gives
    on its second line."""
    n = len(labels)
    cols = min(3, len(projections))  # three a row: near square, as a map drawn at one scale is
    rows = -(-len(projections) // cols)
    side = (WIDTH - 2.5) / 2  # a similarity panel, inches: two and their colour bar a docs column wide
    high = 3.2 * rows + (0.9 if len(projections) % cols == 0 else 0.0)  # the key under a full grid
    fig = Figure(figsize=(WIDTH, side + 1.3 + high), layout="constrained")
    top, bottom = cast(np.ndarray, fig.subfigures(2, 1, height_ratios=[side + 1.3, high]))
    fs = min(9.0, max(5.0, side / n * 72 * 0.65))  # a label about 0.65 of its row
    axes = top.subplots(1, len(similarities))
    for ax, (name, sim) in zip(np.atleast_1d(axes), similarities):
        im = ax.imshow(sim, interpolation="nearest", **COSINE)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=fs)
        upright_spaces(ax)
        ax.set_yticks(range(n), labels, fontsize=fs)
        ax.set_title(f"cosine similarity: {name}", fontsize=10)
    top.colorbar(im, ax=axes, shrink=0.8, label="cosine similarity\n(−1 to 1, both panels)")
    colours = ["#dc2626", "#2563eb", "#16a34a", "#9333ea", "#ea580c"]
    grid = bottom.subplots(rows, cols, squeeze=False)
    for ax, (name, _) in zip(grid.flat, projections):
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in grid.flat[len(projections) :]:
        ax.axis("off")
    # an uncased tokenizer's tokens: the texts have capitals, the tokens (less their "A4" names) none
    lowered = any(c.isupper() for t in texts for c in t) and not any(
        c.isupper() for label in labels for c in label.rsplit(" ", 1)[0]
    )
    _contextual_key(bottom, grid, len(projections), colours, marked, words, sentences, texts, lowered)
    pairs = (
        f";\nunder each name, the cosine similarity of each pair of “{paired}”s, whose distances the map keeps"
        if paired
        else ""
    )
    bottom.suptitle(
        "Where each token's vector lies: maps whose distances stand for cosine distances (1 − cos), one per depth\n"
        f"(metric MDS, one scale across and up; two dimensions keep only part of each distance{pairs})",
        fontsize=9,
    )
    top.suptitle(
        "Static vectors are one and the same for a word wherever it stands;\nafter self-attention each occurrence "
        "carries its context.",
        fontsize=9,
    )
    if title:
        fig.suptitle(title, fontsize=11)
    # the panels' sizes settled before their points go in: a length across is then the same length up
    if (layout := fig.get_layout_engine()) is not None:
        layout.execute(fig)
        fig.set_layout_engine("none")
    for ax, (_, xy) in zip(grid.flat, projections):
        _projection_panel(ax, xy, marked, labels, colours)
    return fig


def _contextual_key(bottom, grid, panels: int, colours, marked: dict[int, int], words, sentences, texts,
                    lowered: bool) -> None:  # fmt: skip
    """The projections' key: each sentence's colour, written out, and how a token is named (``lowered``:
    the tokenizer writes the texts in lower case); in the grid's first free cell, else under the panels."""
    marked_words = " and ".join(f"“{w}”" for w in words)
    handles = [
        Line2D(
            [],
            [],
            ls="none",
            marker="o",
            markerfacecolor="none",
            markeredgecolor=colours[k % len(colours)],
            markeredgewidth=RING_WIDTH,
            label=f"{marked_words} in sentence {name}",
        )
        for k, name in enumerate(sentences)
        if k in set(marked.values())
    ] + [Line2D([], [], ls="none", marker="o", ms=4, color="#9ca3af", label="every other token")]
    naming = (
        "A token is named by its sentence and its position in it ([CLS] = 0; special tokens are not drawn); "
        "tokens at one place share one label, their rings one inside another."
        + (" The tokenizer writes every token in lower case." if lowered else "")
    )
    free = panels < grid.size  # the key in the first free cell of the grid, else below
    columns = 40 if free else 120
    written = [
        textwrap.fill(f"{name}: “{text}”", columns, subsequent_indent="    ") for name, text in zip(sentences, texts)
    ]
    key = "\n".join([textwrap.fill(naming, columns), *written])
    if free:
        grid.flat[panels].legend(handles=handles, loc="center", fontsize=9, frameon=False, title=key,
                                           title_fontsize=9, alignment="left")  # fmt: skip
    else:
        bottom.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)), fontsize=9,
                      frameon=False, title=key, title_fontsize=9)  # fmt: skip


def _projection_panel(ax, xy: np.ndarray, marked: dict[int, int], labels: Sequence[str],
                      colours: Sequence[str]) -> None:  # fmt: skip
    """One depth's 2-D projection: every token a grey dot, the marked ones a ring in their sentence's
    colour (hollow: a grey dot under one stays in view); tokens at one place drawn as rings one inside
    the other and named by one label."""
    other = np.setdiff1d(np.arange(len(xy)), list(marked))
    ax.scatter(xy[other, 0], xy[other, 1], s=8, color="#9ca3af", zorder=2)
    places: list[list[int]] = []  # the marked tokens by place: those within NEAR of a place's first share it
    unit = _one_scale(ax, xy)
    for i in sorted(marked):
        at = next((members for members in places if np.abs(unit[i] - unit[members[0]]).max() < NEAR), None)
        if at is None:
            places.append([i])
        else:
            at.append(i)
    for members in places:  # tokens at one place: one ring per sentence, one inside the other
        shown = list(dict.fromkeys(marked[i] for i in members))
        for rank, k in enumerate(shown):
            first = next(i for i in members if marked[i] == k)
            size = RING * (1 + 1.3 * (len(shown) - 1 - rank))
            ax.scatter(xy[first, 0], xy[first, 1], s=size, facecolors="none", edgecolors=colours[k % len(colours)],
                       linewidths=RING_WIDTH, zorder=3 + rank)  # fmt: skip
    # each label clear of its place's outer ring: the ring's radius and half its line, in points
    rings = {m[0]: (RING * (1 + 1.3 * (len({marked[i] for i in m}) - 1))) ** 0.5 / 2 + RING_WIDTH for m in places}
    _place_labels(
        ax, xy, unit, [(members[0], _shared_label([labels[i] for i in members])) for members in places], rings
    )


def _one_scale(ax, xy: np.ndarray) -> np.ndarray:
    """Set the panel's limits so that a length across is the same length up (a distance on the page is
    one distance in the data, whichever way it runs) and the points fill it to its margins; returns the
    points scaled so that 0..1 spans the panel within its margins, as labels are placed."""
    size = np.array(_size_in_points(ax))
    low, high = xy.min(0), xy.max(0)
    per_point = max(float(((high - low) / size).max()), 1e-12)  # data units a point: one axis filled
    half = size * per_point * (1 + 2 * MARGIN) / 2
    centre = (low + high) / 2
    ax.set_xlim(centre[0] - half[0], centre[0] + half[0])
    ax.set_ylim(centre[1] - half[1], centre[1] + half[1])
    return (xy - (centre - half)) / (2 * half) * (1 + 2 * MARGIN) - MARGIN


def _size_in_points(ax) -> tuple[float, float]:
    """The panel's width and height in points, as laid out."""
    dpi = ax.get_figure(root=True).dpi
    return ax.bbox.width * 72 / dpi, ax.bbox.height * 72 / dpi


def _shared_label(labels: list[str]) -> str:
    """One label for tokens drawn at one place: a word named once before its places ("apple A4, A10"),
    else each token's own label."""
    parts = [label.rsplit(" ", 1) for label in labels]
    if len(parts) > 1 and all(len(p) == 2 and p[0] == parts[0][0] for p in parts):
        return f"{parts[0][0]} " + ", ".join(p[1] for p in parts)
    return ", ".join(labels)


LABEL_SIZE = 9  # a projection label's type size, points
RING, RING_WIDTH = 32, 1.8  # a marked token's ring: its size (points squared) and its line's width
MARGIN = 0.09  # a projection panel's data margins, of its width and height
FLOOR = 0.025  # a label's lowest place in a projection panel (axes fraction): clear of its bottom frame
NEAR = 0.004  # of a projection's extent: tokens closer than this on both axes are drawn at one place, one label


class _Spots:
    """Where a projection panel's labels may go, in axes fractions: the points (``unit``: 0..1 spans
    the panel within its margins), the labelled ones, and the labels placed so far, each (left, bottom, width) of
    ``height``."""

    def __init__(self, unit: np.ndarray, labelled: list[int], height: float, aspect: float = 1.0) -> None:
        self.unit, self.height = unit, height
        self.scale = np.array([aspect, 1.0])  # axes fractions to lengths on one scale (the panel's height)
        self.at = (MARGIN + unit) / (1 + 2 * MARGIN)  # every point, in axes fractions
        self.marks = {i: self.at[i] for i in labelled}
        self.placed: list[tuple[float, float, float]] = []
        self.leaders: list[np.ndarray] = []  # the leaders drawn so far, each a few points along it

    def place(self, left: float, ty: float, width: float, right: bool, own: int, slid: float) -> bool:
        """Keep the label's place (and its leader's); whether it has a leader."""
        self.placed.append((left, ty, width))
        drawn = self.leader(ty, own, slid)
        if drawn:
            self.leaders.append(self._along(left, ty, width, right, own))
        return drawn

    def _along(self, left: float, ty: float, width: float, right: bool, own: int) -> np.ndarray:
        end = np.array([left + width if right else left, ty + self.height / 2])
        return end + np.linspace(0.0, 1.0, 24)[:, None] * (self.marks[own] - end)

    def _inside(self, pts: np.ndarray, left: float, ty: float, width: float) -> bool:
        x, y = pts[:, 0], pts[:, 1]
        return bool(((left < x) & (x < left + width) & (ty - 0.005 < y) & (y < ty + self.height + 0.005)).any())

    def crossed(self, left: float, ty: float, width: float, right: bool, own: int, slid: float) -> bool:
        """Whether the label would lie on a leader drawn before, or its leader run through a label."""
        if any(self._inside(line, left, ty, width) for line in self.leaders):
            return True
        if not self.leader(ty, own, slid):
            return False
        line = self._along(left, ty, width, right, own)[1:]  # its own end lies on its label
        return any(self._inside(line, px, py, pw) for px, py, pw in self.placed)

    def apart(self, j: int, own: int) -> bool:  # not drawn at one place with ``own``
        return bool(np.abs(self.unit[j] - self.unit[own]).max() >= NEAR)

    def clash(self, left: float, ty: float, width: float) -> bool:  # on a label placed before
        return any(abs(ty - py) < self.height and left < px + pw and px < left + width for px, py, pw in self.placed)

    def covers(self, left: float, ty: float, width: float, own: int, every: bool) -> bool:
        """Whether the label would lie on a point (``every``: any, else a labelled one) not at its own place."""
        among = np.ones(len(self.unit), dtype=bool) if every else np.isin(np.arange(len(self.unit)), list(self.marks))
        away = among & (np.abs(self.unit - self.unit[own]).max(1) >= NEAR)
        x, y = self.at[:, 0], self.at[:, 1]
        inside = (left - 0.01 < x) & (x < left + width + 0.01) & (ty - 0.015 < y) & (y < ty + self.height)
        return bool((away & inside).any())

    def leader(self, ty: float, own: int, slid: float) -> bool:  # a label set apart from its point: a line to it
        return abs(ty + self.height / 2 - self.marks[own][1]) > 0.03 or slid > 0.05

    def astray(self, left: float, ty: float, width: float, right: bool, own: int, every: bool) -> bool:
        """Whether the label would seem to name another point: one lies between the label and its own
        point, by the far end of its leader, or on its leader (``every``; else a grey point only closer
        to that end or to the leader)."""
        end = np.array([left + width if right else left, ty + self.height / 2])
        lo, hi = sorted((end[0], self.marks[own][0]))
        for j, p in enumerate(self.at):
            if j != own and self.apart(j, own) and lo - 0.01 < p[0] < hi + 0.01 and ty < p[1] < ty + self.height:
                return True
        # the distances below as lengths: a fraction of the panel's height, across as up
        far = np.array([left if right else left + width, ty + self.height / 2]) * self.scale  # the end off its point
        for j in self.marks:  # a labelled point by the label's far end: the label would seem to name it
            if j != own and self.apart(j, own) and np.hypot(*(self.marks[j] * self.scale - far)) < 0.06:
                return True
        end, seg = end * self.scale, (self.marks[own] - end) * self.scale
        reach = float(np.hypot(*seg))
        for j, p in enumerate(self.at * self.scale):
            if j == own or not self.apart(j, own):
                continue
            strict = every or j in self.marks
            if reach > 0.06 and np.hypot(*(p - end)) < (0.09 if strict else 0.05):  # by the leader's far end
                return True
            t = float(np.clip(np.dot(p - end, seg) / max(float(np.dot(seg, seg)), 1e-12), 0.0, 1.0))
            if np.hypot(*(end + t * seg - p)) < (0.025 if strict else 0.015):  # on the leader
                return True
        return False

    def candidates(self, x: float, start: float, width: float, gap: float, sides: list[bool]) -> list:
        """Places (right, left, bottom, slide) for a label ``width`` wide beside a point at ``x``, its line
        at ``start``: right of it or left of it (``sides``; on the left its right end by the point), ``gap``
        clear of it, slid a little along its line or up to six lines up or down; inside the panel, the
        nearest first (a slide of 0.1 of the panel's width counts as a line up or down)."""
        spots = []
        for lines in (0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6):
            for right in sides:
                step = -1 if right else 1  # a slide away from the point
                base = x - gap - 0.015 - width if right else x + gap
                slides = (0.0, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3)
                spots += [(right, base + step * d, start + lines * self.height, d) for d in slides]
        spots = [sp for sp in spots if sp[1] >= 0.0 and sp[1] + width <= 1.0 and FLOOR <= sp[2] <= 0.92]
        spots.sort(key=lambda sp: round(abs(sp[2] - start) / self.height + 10 * sp[3], 6))  # a stable sort
        return spots

    def below(self, left: float, start: float, width: float, own: int) -> float:
        """Where no place fits: down from ``start``, the first line free of labels and of points, else of
        labelled points, else of labels."""
        down = [start - k * self.height for k in range(12)]
        free = [t for t in down if not self.clash(left, t, width)]
        inside = [t for t in free if t >= FLOOR]
        ty = next((t for every in (True, False) for t in inside if not self.covers(left, t, width, own, every)), None)
        return ty if ty is not None else next(iter(inside or free), down[-1])

    def fits(self, spot: tuple[bool, float, float, float], own: int, width: float, every: bool) -> bool:
        """Whether a label may go at ``spot`` (right, left, bottom, slide): on no label, leader or point,
        and seeming to name no other point (``every``), else no other labelled point."""
        right, left, ty, slid = spot
        return not (
            self.clash(left, ty, width)
            or self.crossed(left, ty, width, right, own, slid)
            or self.covers(left, ty, width, own, True)
            or self.astray(left, ty, width, right, own, every)
        )


def _place_labels(
    ax,
    xy: np.ndarray,
    unit: np.ndarray,
    items: list[tuple[int, str]],
    rings: dict[int, float],
) -> None:
    """Label points ``xy[i]`` (``unit[i]``: the same where 0..1 spans the panel within its margins) with ``text``: beside
    the point and level with it, on its right or else its left (its right end by the point, as where
    the right would leave the panel), slid along its line or moved up to six lines up or down (with a
    thin leader line), the nearest place clear of the labels and leaders already placed and of every
    other point, where it seems to name no other point (none between it and its point, by its
    leader's far end or on its leader); else the same where it seems to name no other labelled point;
    where none is, down from the point, its white ground over the grey points it cannot clear."""
    wide, tall = _size_in_points(ax)
    height = 1.35 * LABEL_SIZE / tall  # a line of labels (its white ground a little more than the type), axes fractions
    spots_of = _Spots(unit, [i for i, _ in items], height, wide / tall)
    for i, text in sorted(items, key=lambda item: -unit[item[0], 1]):  # from the top down
        x, y = spots_of.marks[i]
        gap = (rings.get(i, 4.0) + 3.0) / wide  # past its ring, 3 points clear
        width = 0.62 * LABEL_SIZE * len(text) / wide  # DejaVu Sans: about 0.6 of its size a character
        start = min(y - height / 2, 0.92)  # level with the point
        # beside the point (right of it, else left of it: its right end by the point, clear of its ring), slid a
        # little along its line or up to three lines up or down
        sides = [True] if x + 0.02 + width > 1.0 else [False, True]
        spots = spots_of.candidates(x, start, width, gap, sides)
        # near places first (two lines, a slide of 0.1), seeming to name no other point, else no other labelled
        # one; then the same farther off: a short leader by a grey point reads better than a long one
        near = [sp for sp in spots if abs(sp[2] - start) <= 2.01 * height and sp[3] <= 0.1]
        found = next(
            (
                sp
                for group in (near, spots)
                for every in (True, False)
                for sp in group
                if spots_of.fits(sp, i, width, every)
            ),
            None,
        )
        if found is not None:
            right, left, ty, slid = found
        else:
            right, slid = sides[0], 0.0
            left = x - gap - 0.015 - width if right else x + gap
            ty = spots_of.below(left, start, width, i)
        leads = spots_of.place(left, ty, width, right, i, slid)
        ax.annotate(
            text,
            xy[i],
            # anchored by its near end (its width is estimated), its middle on the line the search kept
            xytext=(left + width if right else left, ty + height / 2),
            textcoords="axes fraction",
            fontsize=LABEL_SIZE,
            va="center",
            ha="right" if right else "left",
            bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none"},  # over a grey point it cannot clear
            zorder=6,
            # the leader from the label's near end (as the search measured it) to the point's ring
            arrowprops={
                "arrowstyle": "-",
                "lw": 0.4,
                "color": "#6b7280",
                "shrinkB": 4,
                "relpos": (1.0 if right else 0.0, 0.5),
            }
            if leads
            else None,
        )
