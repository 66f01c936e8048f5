"""The head atlas: every head of one attention kind scored by every detector that applies
(``detectors``), averaged over a set of inputs, with the heads each detector flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import write_table
from ..inspection.capture import LABELS, AttentionRecord
from .detectors import DETECTORS, PATTERNS, SINK_KEYS, Sums, counted_cells, detect_sums, fitting, frequencies


@dataclass
class Atlas:
    """Scores (layers, heads) of one kind by detector, each the mean over every query it applies
    to in every input (weighted by the queries of each input)."""

    kind: str
    scores: dict[str, np.ndarray]
    offsets: np.ndarray | None  # the positional detector's offset per head, where it ran
    inputs: int
    ablation: np.ndarray | None = None  # how much worse the measure is with each head ablated alone (``ablation``)
    importance: np.ndarray | None = None  # Michel et al.'s importance of each head
    measure: str = "loss"  # what ``ablation`` measures, in a few words, larger worse: "loss", "BLEU drop"
    unscored: list[str] = field(default_factory=list)  # detectors asked for that no query of the inputs takes
    applicable: list[str] = field(default_factory=list)  # the detectors that apply to this attention

    @property
    def shape(self) -> tuple[int, int]:
        first = next(iter(self.scores.values()))
        return int(first.shape[0]), int(first.shape[1])

    def flagged(self) -> list[tuple[str, int, int, float]]:
        """(detector, layer, head, score) of every head at or past its detector's threshold,
        strongest first within each detector."""
        out = []
        for name, s in self.scores.items():
            limit = DETECTORS[name].threshold
            if limit is None:
                continue
            hits = [(name, int(li), int(h), float(s[li, h])) for li, h in zip(*np.nonzero(s >= limit))]
            out += sorted(hits, key=lambda x: -x[3])
        return out

    def report(self) -> str:
        """One line per flagged head with every role it is flagged for, then the highest heads of
        the ranking detectors (``legend`` says what each detector measures)."""
        layers, heads = self.shape
        roles: dict[tuple[int, int], list[str]] = {}
        for name, layer, head, score in self.flagged():
            at = f" at {int(self.offsets[layer, head]):+d}" if name == "positional" and self.offsets is not None else ""
            roles.setdefault((layer, head), []).append(f"{_label(name)} {score:.2f}{at}")
        lines = [f"{LABELS[self.kind]}: {layers} layers x {heads} heads over {self.inputs} input(s); "
                 f"{len(roles)} head(s) flagged"]  # fmt: skip
        for (layer, head), found in sorted(roles.items()):
            effect = (
                f"; ablated: {self.measure} {_signed(self.ablation[layer, head])}" if self.ablation is not None else ""
            )
            lines.append(f"  layer {layer:>2} head {head:>2}  " + ", ".join(found) + effect)
        lines += self._by_role(heads)
        for name, values, unit in ((f"ablated alone, costliest ({self.measure})", self.ablation, "+.3f"),
                                   ("importance (Michel et al. 2019), highest", self.importance, ".3f")):  # fmt: skip
            if values is not None:
                top = np.argsort(-np.nan_to_num(values, nan=-np.inf), axis=None)[:3]
                best = ", ".join(
                    f"layer {i // heads} head {i % heads} "
                    + (_signed(values.flat[i]) if unit.startswith("+") else f"{values.flat[i]:{unit}}")
                    for i in top
                )
                lines.append(f"  {name}: {best}")
        for name in self.unscored:
            lines.append(f"  {_label(name)}: not scored: it needs {DETECTORS[name].needs}; these inputs have none")
        for name in ("rare_word", "broad", "distance"):
            if name in self.scores:
                lines.append(f"  {_label(name)}{_ranked(self.scores[name], heads)}")
        return "\n".join(lines)

    def _by_role(self, heads: int, shown: int = 5) -> list[str]:
        """Each role's flagged heads ranked, strongest first: where one role flags most heads (a sink
        on short inputs), its order says which heads it is strongest in."""
        ranked: dict[str, list[tuple[int, int, float]]] = {}
        for name, layer, head, score in self.flagged():  # strongest first within each detector
            ranked.setdefault(name, []).append((layer, head, score))
        if not ranked:
            return []
        lines = ["  by role, strongest first:"]
        total = self.shape[0] * heads
        for name, hits in ranked.items():
            best = ", ".join(f"{i + 1}. layer {li} head {h} {v:.2f}" for i, (li, h, v) in enumerate(hits[:shown]))
            more = f", and {len(hits) - shown} more" if len(hits) > shown else ""
            most = " (most heads pass its threshold here: read the order)" if len(hits) > total / 2 else ""
            lines.append(f"    {_label(name)}: {len(hits)} of {total} heads{most}: {best}{more}")
        return lines

    def rows(self) -> list[dict]:
        """One row per (layer, head) with every score (and the positional offset)."""
        layers, heads = self.shape
        out = []
        for li in range(layers):
            for h in range(heads):
                row: dict = {"kind": self.kind, "layer": li, "head": h}
                row.update({name: round(float(s[li, h]), 6) for name, s in self.scores.items()})
                if self.offsets is not None:
                    row["positional_offset"] = int(self.offsets[li, h])
                for name, values in (("ablation", self.ablation), ("importance", self.importance)):
                    if values is not None:
                        row[name] = round(float(values[li, h]), 6)
                out.append(row)
        return out


def _ranked(s: np.ndarray, heads: int, shown: int = 3) -> str:
    """The highest heads of a ranking detector, or, where more heads than are shown tie at the top
    (too little input to tell them apart: one short input's rarest token), how many."""
    top = np.argsort(-s, axis=None, kind="stable")[:shown]
    tied = int(np.isclose(s, s.flat[top[0]], rtol=0, atol=1e-6).sum())
    if tied > shown:
        return f": {tied} of {s.size} heads tie at {s.flat[top[0]]:.2f} on these inputs: too little input to rank them"
    return ", highest: " + ", ".join(f"layer {i // heads} head {i % heads} {s.flat[i]:.2f}" for i in top)


def _signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign, 0 without one (no "-0.000")."""
    return f"{value:+.{digits}f}" if round(float(value), digits) != 0 else f"{0:.{digits}f}"


def _label(name: str) -> str:
    return name.replace("_", "-")


def head_atlas(records: list[AttentionRecord], kind: str, names: list[str] | None = None) -> Atlas:
    """Every head of ``kind`` scored by the detectors ``names`` (default: every one that applies)
    over ``records``, streamed from each record's calls (any length): each score the mean over
    every query it applies to in every input. The rare-word detector counts rarity over every
    input's keys."""
    if not records:
        raise ValueError("no inputs to score the heads on")
    frequency = frequencies([list(r.keys(kind)) for r in records])
    pooled: list[Sums] = []
    for r in records:
        queries, keys = r.queries(kind), r.keys(kind)
        for layer in range(r.maps.shape(kind)[0]):
            got = detect_sums(r.maps.call(kind, layer), queries, keys, names, frequency)
            if layer == len(pooled):
                pooled.append(got)
            else:
                into = pooled[layer]
                for name in got.counts:
                    if name in got.sums:
                        into.sums[name] += got.sums[name]
                    into.counts[name] += got.counts[name]
                into.hist += got.hist
    layers = [p.means() for p in pooled]
    means = {n: np.stack([m[n] for m in layers]) for n in layers[0] if n != "positional_shares"}
    offsets = means.pop("positional_offset", None)
    empty = {n for p in pooled for n, c in p.counts.items() if not bool((c > 0).any())}
    order = [n for n in DETECTORS if n in means and n not in empty]
    r = records[0]
    fits = fitting(r.maps.call(kind, 0), r.queries(kind), r.keys(kind))
    return Atlas(kind, {n: means[n] for n in order}, offsets, len(records), unscored=sorted(empty), applicable=fits)


def write_atlas(atlases: list[Atlas], path: Path) -> None:
    """Every head's scores as JSON (with each detector's paper and threshold) or CSV, by suffix."""
    rows = [row for a in atlases for row in a.rows()]
    used = {n for a in atlases for n in a.scores}
    detectors = {
        n: {"paper": d.paper, "threshold": d.threshold, "means": d.means} for n, d in DETECTORS.items() if n in used
    }
    flagged = [
        {"kind": a.kind, "detector": n, "layer": li, "head": h, "score": round(s, 6)}
        for a in atlases
        for n, li, h, s in a.flagged()
    ]
    write_table(path, rows, {"detectors": detectors, "flagged": flagged}, "the atlas's scores")


def legend(atlases: list[Atlas]) -> str:
    """What each detector of ``atlases`` measures, its paper and its threshold, one line each."""
    names = [n for n in DETECTORS if any(n in a.scores for a in atlases)]
    lines = []
    for name in names:
        d = DETECTORS[name]
        flag = f"flagged at >= {d.threshold}" if d.threshold is not None else "ranked"
        lines.append(f"{_label(name)}: {d.means} ({d.paper}; {flag})")
    return "\n".join(lines)


UNITS = {"positional": "share of queries", "retrieval": "share of answer tokens", "rare_word": "share of queries",
         "broad": "entropy / log(keys)", "distance": "tokens"}  # fmt: skip


def atlas_figure(atlases: list[Atlas], *, title: str = ""):
    """Every kind's atlas as grids (``plots.heads.plot_atlas``): each head's ablation effect and
    importance first (one scale each across the kinds), then one layers x heads grid per detector
    (the heads it flags outlined). Under each kind's heading: the detectors it does not show, and
    why."""
    from ..plots.heads import Grid, plot_atlas

    def top(values: list[np.ndarray | None]) -> float | None:
        found = [float(np.nanmax(np.abs(v))) for v in values if v is not None and np.isfinite(v).any()]
        return max(found) if found else None

    effect_top, importance_top = top([a.ablation for a in atlases]), top([a.importance for a in atlases])
    distance_top = top([a.scores.get("distance") for a in atlases])  # one scale of tokens for every kind

    def effect(a: Atlas, title: str) -> Grid:  # called only where the atlas has it
        assert a.ablation is not None
        return Grid(
            title, a.ablation, "effect", None, {"loss": "loss rise, {k}nats"}.get(a.measure, a.measure), top=effect_top
        )

    def importance(a: Atlas, title: str) -> Grid:
        assert a.importance is not None
        return Grid(title, a.importance, "importance", None, "{k}|\u2202loss/\u2202gate|", top=importance_top)

    # several kinds: the causal proof first, a row of its own, each measure on one scale across the kinds
    apart = len(atlases) > 1
    kinds = []
    short = {"encoder": "encoder", "decoder": "decoder", "cross": "cross-attention"}
    proof = [effect(a, f"ablated alone\n{short[a.kind]}") for a in atlases if a.ablation is not None and apart]
    proof += [importance(a, f"importance\n{short[a.kind]}") for a in atlases if a.importance is not None and apart]
    if proof:
        kinds.append(
            (
                "Whether the model needs each head",
                "the loss with it ablated alone, and its importance (Michel et al. 2019): one scale per measure",
                proof,
            )
        )
    for a in atlases:
        grids = []
        if a.ablation is not None and not apart:
            grids.append(effect(a, "each head\nablated alone"))
        if a.importance is not None and not apart:
            grids.append(importance(a, "importance\n(Michel et al. 2019)"))
        for name, values in a.scores.items():
            d = DETECTORS[name]
            head = _label(name) + (f"\nflagged at \u2265 {d.threshold:g}" if d.threshold is not None else "\nranked")
            marks = None
            if name == "positional" and a.offsets is not None and d.threshold is not None:
                flagged = zip(*np.nonzero(values >= d.threshold))
                marks = {(int(li), int(h)): f"{int(a.offsets[li, h]):+d}".replace("-", "\u2212") for li, h in flagged}
            scale = "tokens" if name == "distance" else "share"
            grids.append(Grid(head, values, scale, d.threshold, UNITS.get(name, "weight"), marks, top=distance_top))
        counts = {b.inputs for b in atlases}  # one count for every kind: the caller's title gives it
        inputs = "" if len(counts) == 1 else f", {a.inputs} input" + ("s" if a.inputs != 1 else "")
        if grids:
            kinds.append(
                (f"{LABELS[a.kind]}: {a.shape[0]} layers \u00d7 {a.shape[1]} heads{inputs}", _missing(a), grids)
            )
    note = (
        "Outlined in magenta: a head at or past its paper's threshold (\u2265 in the panel's title); ranked: the paper "
        "gives no threshold. The ablation and importance scales are shared by every kind; the ablation's is "
        "symmetric-log (linear within a fiftieth of its end), so that small effects show beside large ones. "
        "Sink: the mean weight on the first token, over every query (in causal attention, over the "
        f"queries that see {SINK_KEYS} keys or more). Grids without a colour bar of their own use "
        "the two colour bars above the first of them (weights and shares 0 to 1; distances 0 to the grid's longest); each "
        "head's value is written in its cell."
    )
    return plot_atlas(kinds, title=title, footnote=note)


def _missing(a: Atlas) -> str:
    """The detectors an atlas does not show, and why, in a few words."""
    shown = set(a.scores)
    unscored = [n for n in a.unscored if n not in shown]
    other = [n for n in DETECTORS if n not in a.applicable] if a.applicable else []
    parts = []
    if other:
        parts.append("not for this attention: " + ", ".join(_label(n) for n in other))
    if unscored:
        parts.append("no query of these inputs to score: " + ", ".join(_label(n) for n in unscored))
    return "; ".join(parts)


def patterns_figure(records: list[AttentionRecord], atlases: list[Atlas], *, title: str = ""):
    """Each pattern detector's strongest head (``detectors.PATTERNS``) drawn on the first input:
    its map with the cells the detector sums outlined, its score over every input and on this one.
    The picture of what the atlas's numbers count."""
    from ..plots.attention import Panel, plot_alignment_panels

    record = records[0]
    panels, drawn = [], []
    for a in atlases:
        queries, keys = record.queries(a.kind), record.keys(a.kind)
        for name in (n for n in PATTERNS if n in a.scores and n not in a.unscored):
            values = a.scores[name]
            layer, head = (int(x) for x in np.unravel_index(int(np.nanargmax(values)), values.shape))
            weights = record.select(a.kind, layer, head)
            cells, scored = counted_cells(name, queries, keys, record.maps.call(a.kind, layer).causal)
            here = float((weights * cells).sum(-1)[scored].mean()) if scored.any() else float("nan")
            d = DETECTORS[name]
            flag = "flagged" if values[layer, head] >= (d.threshold or np.inf) else "not flagged"
            where = f"{LABELS[a.kind]}, " if len(atlases) > 1 else ""
            over = (
                f"score {here:.2f}"
                if a.inputs == 1
                else f"score {values[layer, head]:.2f} over {a.inputs} inputs, {here:.2f} on this one"
            )
            panels.append(
                Panel(
                    weights,
                    keys,
                    queries,
                    f"{_label(name)}: {where}layer {layer} head {head}\n{over} (threshold {d.threshold:g}: {flag})",
                    cells=cells,
                )
            )
            drawn.append(name)
    if not panels:
        raise ValueError(f"--patterns draws {', '.join(n.replace('_', '-') for n in PATTERNS)}: ask for one of them")
    columns = 2 if len(panels) in (2, 4) else 3
    grid = [panels[i : i + columns] for i in range(0, len(panels), columns)]
    counts = {
        "previous_token": "the key just before",
        "duplicate_token": "earlier copies of the query's token",
        "induction": "the key after an earlier copy of the query's token",
        "sink": f"the first key, for the queries that see {SINK_KEYS} keys or more (all, without a causal mask)",
        "delimiter": "punctuation and separators after the first key",
    }
    said = "; ".join(f"{_label(n)}: {counts[n]}" for n in dict.fromkeys(drawn))
    note = (
        "Each panel: the head its detector scores highest over the inputs, drawn on the first input. Outlined in "
        f"magenta: the cells whose weight the detector sums for a query ({said}); the score is that sum's mean over "
        "the queries it scores (a row without outlines is not scored). A boxed key label: a punctuation mark, set upright."
    )
    return plot_alignment_panels(grid, title=title, footnote=note)
