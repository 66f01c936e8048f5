"""Where attention parks: the mass each head gives the first token, delimiters and a learned sink
logit, and how little of its output that mass carries.

Per head of one recorded call, each a mean over the queries that see at least ``SINK_KEYS`` keys
(a query that sees fewer gives the first token a large share by spreading its weight evenly):

first        w_i0, the weight on the first token (Xiao et al. 2023's attention sink)
delimiters   the weight on delimiter tokens after the first ([SEP], </s>, punctuation: Clark et al.
             2019 find BERT's heads park on [SEP])
learned      exp(sink - lse_i), the share a learned sink logit takes from the keys (GPT-OSS's
             per-head ``sinks``; 0 for a family without one)
value_ratio  ||v_0|| over the mean ||v_j|| of the other keys: a sink's value is small (Gu et al.
             2024, sec. 6; the value before the output projection)
value_share  w_i0 ||v_0|| / sum_j w_ij ||v_j||: the first token's share of what the head reads once
             each weight is scaled by its value's norm (Kobayashi et al. 2020's view)

``sink_share`` is Gu et al. 2024's metric: the share of heads whose first-token weight exceeds
0.3 (they take 64-token inputs; ``attnkit heads --probe-tokens 64`` gives such).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import write_table
from ..attention.record import AttentionCall, head_block
from .detectors import DELIMITERS, SINK_KEYS

GU_THRESHOLD = 0.3
MEASURES = ("first", "delimiters", "learned", "value_ratio", "value_share")


@torch.no_grad()
def sink_sums(call: AttentionCall, keys: list[str]) -> tuple[dict[str, np.ndarray], int]:
    """Each measure summed over the queries it counts (h,), and how many those are, for one call
    whose key tokens are ``keys``; the value measures where the call kept its values (NaN else)."""
    h, t, s = call.shape
    if len(keys) != s:
        raise ValueError(f"the call has {s} keys; got {len(keys)} tokens")
    device = call.q.device if call.q is not None else call.weights.device  # type: ignore[union-attr]
    delim = torch.tensor([j > 0 and k in DELIMITERS for j, k in enumerate(keys)], device=device)
    norms = None
    if call.v is not None:  # (h, s): each head reads its group's values
        norms = call.v.float().norm(dim=-1).repeat_interleave(h // call.v.shape[0], 0)
    sums = {m: torch.zeros(h, dtype=torch.float64, device=device) for m in MEASURES}
    counted = 0
    for rows, w, valid, _ in head_block(call):
        i = torch.arange(rows.start, rows.stop, device=device) + s - t
        use = valid & ((i + 1 >= SINK_KEYS) if call.causal else torch.ones_like(i, dtype=torch.bool))[None, :]
        u = use.double()
        c = w.shape[-1]
        sums["first"] += (w[..., 0].double() * u).sum(-1)
        sums["delimiters"] += ((w * delim[None, None, :c]).sum(-1).double() * u).sum(-1)
        if call.sink is not None and call.lse is not None:
            sink = call.sink.float().expand(h, t)[:, rows]
            sums["learned"] += (torch.exp(sink - call.lse[:, rows].float()).double() * u).sum(-1)
        if norms is not None:
            read = (w * norms[:, None, :c]).sum(-1)  # (h, r)
            share = torch.where(read > 0, w[..., 0] * norms[:, None, 0] / read.clamp_min(1e-30), 0.0)
            sums["value_share"] += (share.double() * u).sum(-1)
        counted += int(use[0].sum())
    if norms is not None:
        rest = norms[:, 1:].mean(-1) if s > 1 else torch.ones(h, device=device)
        sums["value_ratio"] = (norms[:, 0] / rest.clamp_min(1e-30)).double() * counted
    else:
        sums["value_ratio"] = sums["value_share"] = torch.full((h,), float("nan"), dtype=torch.float64)
    return {m: x.cpu().numpy() for m, x in sums.items()}, counted


@dataclass
class SinkAccount:
    """Each measure (layers, heads) of one attention kind, the mean over every input's counted
    queries (``value_ratio``: over the inputs)."""

    kind: str
    measures: dict[str, np.ndarray]
    inputs: int
    tokens: int  # the longest input's keys

    @property
    def sink_share(self) -> float:
        """Gu et al. 2024's metric: the share of heads whose first-token weight exceeds 0.3."""
        return float((self.measures["first"] > GU_THRESHOLD).mean())

    def report(self) -> str:
        """One line per layer (the mean over its heads, the most of any head) and Gu et al.'s share."""
        first = self.measures["first"]
        layers, heads = first.shape
        shown = [m for m in MEASURES if not np.isnan(self.measures[m]).all() and (m != "learned" or
                 self.measures[m].any())]  # fmt: skip
        lines = [
            f"{self.kind}: {layers} layers x {heads} heads over {self.inputs} input(s) of up to {self.tokens:,} "
            f"tokens; sink heads (first token > {GU_THRESHOLD}, Gu et al. 2024): {int((first > GU_THRESHOLD).sum())} "
            f"of {first.size} ({100 * self.sink_share:.1f} %)",
            "  layer  " + "  ".join(f"{m:>17}" for m in shown) + "   (mean over heads / most)",
        ]
        for li in range(layers):
            cells = [f"{np.nanmean(self.measures[m][li]):7.3f} / {np.nanmax(self.measures[m][li]):7.3f}" for m in shown]
            lines.append(f"  {li:>5}  " + "  ".join(cells))
        return "\n".join(lines)


def sink_account(records: list, kind: str) -> SinkAccount:
    """The sink measures of every layer and head of ``kind`` over ``records`` (attention records;
    recorded with their values for the value measures)."""
    if not records:
        raise ValueError("no inputs to account the sinks on")
    layers = records[0].maps.shape(kind)[0]
    totals: list[dict[str, np.ndarray]] = []
    counts = [0] * layers
    for r in records:
        keys = r.keys(kind)
        for li in range(layers):
            got, n = sink_sums(r.maps.call(kind, li), keys)
            if li == len(totals):
                totals.append(got)
            else:
                totals[li] = {m: totals[li][m] + got[m] for m in MEASURES}
            counts[li] += n
    measures = {m: np.stack([totals[li][m] / max(1, counts[li]) for li in range(layers)]) for m in MEASURES}
    return SinkAccount(kind, measures, len(records), max(len(r.keys(kind)) for r in records))


def recorded_with_values(model: Any, prepared: Any) -> Any:
    """``model.capture(prepared)`` whose calls keep their values too (v, for the value measures): each
    call takes the values of the call at its site, of its shape, that a values recording heard."""
    from ..attention.record import recording

    with recording(values=True) as rec:
        record = model.capture(prepared)
    heard: dict[str, list[AttentionCall]] = {}
    for c in rec.calls:
        if c.site is not None and c.v is not None:
            heard.setdefault(c.site.name, []).append(c)
    for kind in record.kinds:
        for li in range(record.maps.shape(kind)[0]):
            call = record.maps.call(kind, li)
            if call.site is None or call.v is not None:
                continue
            twin = next((c for c in heard.get(call.site.name, []) if c.shape == call.shape), None)
            if twin is not None:
                call.v = twin.v
    return record


def write_accounts(accounts: list[SinkAccount], path: Path) -> None:
    """Every head's measures as JSON or CSV, by suffix."""
    rows = [
        {"kind": a.kind, "layer": li, "head": h, **{m: round(float(x[li, h]), 6) for m, x in a.measures.items()}}
        for a in accounts
        for li in range(a.measures["first"].shape[0])
        for h in range(a.measures["first"].shape[1])
    ]
    write_table(path, rows, {"gu_threshold": GU_THRESHOLD}, "the sink measures")
