"""How each head attends, over a set of sentences: entropy of its attention
distributions (low = focused on few tokens, high = spread out) and the mean
largest weight (how much of a query's attention its favourite key gets)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..attention.record import head_stats
from .capture import KINDS, LABELS, AttentionRecord


@dataclass
class HeadStats:
    """Per (layer, head) averages over every query row of every sentence."""

    kind: str
    entropy: np.ndarray  # (L, h) mean entropy, nats
    normalised: np.ndarray  # (L, h) mean entropy / log(number of visible keys), in [0, 1]
    max_weight: np.ndarray  # (L, h) mean largest weight
    rows: int  # query rows averaged
    sink: np.ndarray | None = None  # (L, h) the head atlas's sink score, where known (``heads.atlas.sink_scores``)

    def report(self) -> str:
        layers, heads = self.entropy.shape
        lines = [
            f"{LABELS[self.kind]}: {self.rows} query rows; per head: entropy in nats "
            "(normalised: 0 = one key, 1 = uniform) / mean largest weight"
        ]
        lines.append("layer  " + "  ".join(f"{'head ' + str(h):>18}" for h in range(heads)))
        for li in range(layers):
            cells = [
                f"{self.entropy[li, h]:5.2f} ({self.normalised[li, h]:.2f}) / {self.max_weight[li, h]:.2f}"
                for h in range(heads)
            ]
            lines.append(f"{li:>5}  " + "  ".join(f"{c:>18}" for c in cells))
        flat = self.normalised.ravel()
        lo, hi = int(flat.argmin()), int(flat.argmax())
        lines.append(
            f"most focused: layer {lo // heads} head {lo % heads}; most spread: layer {hi // heads} head {hi % heads}"
        )
        return "\n".join(lines)


def head_statistics(records: list[AttentionRecord], kind: str) -> HeadStats:
    """Entropy and concentration of every head of ``kind`` over ``records``, streamed from each
    record (``attention.record.head_stats``: no map formed, any length)."""
    if kind not in KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; choose from {', '.join(KINDS)}")
    sums: dict[str, np.ndarray] = {}
    rows = 0
    for r in records:
        n_layers, _, t, _ = r.maps.shape(kind)
        for layer in range(n_layers):
            stats = head_stats(r.maps.call(kind, layer))
            for name in ("entropy", "normalised", "max_weight"):
                sums.setdefault(name, np.zeros((n_layers, len(stats[name]))))[layer] += stats[name] * t
        rows += t
    if not rows:
        raise ValueError("no attention rows to summarise")
    return HeadStats(kind, sums["entropy"] / rows, sums["normalised"] / rows, sums["max_weight"] / rows, rows)


def head_statistics_figure(stats: list[HeadStats], *, title: str = "", sink_keys: int = 1):
    """``plots.plot_head_statistics`` of one or more kinds' statistics."""
    from ..plots.inspection import plot_head_statistics

    return plot_head_statistics(
        [(LABELS[st.kind], st.normalised, st.max_weight) for st in stats],
        sinks=[st.sink for st in stats],
        sink_keys=sink_keys,
        title=title,
    )
