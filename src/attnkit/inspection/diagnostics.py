"""How each head attends, over a set of sentences: entropy of its attention
distributions (low = focused on few tokens, high = spread out) and the mean
largest weight (how much of a query's attention its favourite key gets)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .capture import KINDS, LABELS, AttentionRecord


@dataclass
class HeadStats:
    """Per (layer, head) averages over every query row of every sentence."""

    kind: str
    entropy: np.ndarray  # (L, h) mean entropy, nats
    normalised: np.ndarray  # (L, h) mean entropy / log(number of visible keys), in [0, 1]
    max_weight: np.ndarray  # (L, h) mean largest weight
    rows: int  # query rows averaged

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
    """Entropy and concentration of every head of ``kind`` over ``records``."""
    if kind not in KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; choose from {', '.join(KINDS)}")
    ent_sum = norm_sum = max_sum = None
    rows = 0
    for r in records:
        maps = r.get(kind).astype(np.float64)  # (L, h, t, s)
        p = np.clip(maps, 1e-12, 1.0)
        ent = -(maps * np.log(p)).sum(-1)  # (L, h, t)
        visible = (maps > 0).sum(-1) if kind != "decoder" else np.arange(1, maps.shape[2] + 1)[None, None, :]
        visible = np.maximum(visible, 2)  # log(1) = 0: a single visible key counts as fully focused
        norm = ent / np.log(visible)
        if ent_sum is None:
            ent_sum, norm_sum, max_sum = np.zeros(maps.shape[:2]), np.zeros(maps.shape[:2]), np.zeros(maps.shape[:2])
        ent_sum += ent.sum(-1)
        norm_sum += np.clip(norm, 0.0, 1.0).sum(-1)
        max_sum += maps.max(-1).sum(-1)
        rows += maps.shape[2]
    if not rows:
        raise ValueError("no attention rows to summarise")
    assert ent_sum is not None and norm_sum is not None and max_sum is not None  # set by the first record
    return HeadStats(kind, ent_sum / rows, norm_sum / rows, max_sum / rows, rows)


def head_statistics_figure(stats: list[HeadStats], *, title: str = ""):
    """``plots.plot_head_statistics`` of one or more kinds' statistics."""
    from ..plots.inspection import plot_head_statistics

    return plot_head_statistics([(LABELS[st.kind], st.normalised, st.max_weight) for st in stats], title=title)
