"""What a key-value cache keeps, per head, and attention over what it keeps: the policies that make
long contexts cheap, replayed exactly within one forward pass.

Each policy says, for each head and each query i (queries come one at a time, as decoding makes
them), which of the keys 0..i it still holds; the head then attends over those keys alone (the
softmax renormalised over them, a learned sink logit kept, every other rule of the call kept).
A budget counts the keys a head holds.

SinkWindow    StreamingLLM (Xiao et al. 2023, sec. 3.2): the first ``sinks`` keys and the
              ``window`` most recent ones
HeavyHitters  H2O (Zhang et al. 2023, alg. 1): the ``recent`` most recent keys and ``heavy`` others,
              those with the most attention accumulated over the queries so far (each query's
              weights under the cache it had); when a key leaves the recent window it competes
              with the heavy ones and the one with the least is evicted
SnapKV        Li et al. 2024 (sec. 4): the prompt's ``prompt`` queries see every key (the prefill);
              then the cache holds the prompt's last ``observe`` keys, the ``budget - observe``
              earlier prompt keys the observation window's queries weigh most (their weights summed
              over those queries, averaged over ``pool`` neighbouring keys), and every key after the
              prompt. Selected per query head (key/value heads repeated first)

Shapes: q (b, h, t, d); k, v (b, h, s, d), key and value heads already repeated; queries at the
end of the keys (query i sits at key position i' = i + s - t).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from . import kernels


@dataclass(frozen=True)
class Rules:
    """What else a call's scores obey: an additive term (b|1, h|1, t, s), a soft-cap, a learned sink
    logit (broadcast to (b, h, t)), a sliding window of the layer's own."""

    scale: float
    additive: Tensor | None = None
    cap: float | None = None
    sink: Tensor | None = None
    window: int | None = None


class Policy(ABC):
    """A cache policy: attention over the keys it keeps, (out (b, h, t, d_v), lse (b, h, t))."""

    name: str = ""

    @property
    @abstractmethod
    def budget(self) -> int:
        """Keys a head holds at most."""

    @abstractmethod
    def attend(self, q: Tensor, k: Tensor, v: Tensor, rules: Rules) -> tuple[Tensor, Tensor]: ...

    def check(self, length: int) -> None:
        """One line for an input the cache holds whole: nothing would be dropped."""
        if self.budget >= length:
            raise ValueError(
                f"a {self.name} cache of {self.budget:,} keys holds every key of an input of {length:,} tokens: "
                "nothing is dropped; give a smaller budget or a longer input"
            )


@dataclass(frozen=True)
class SinkWindow(Policy):
    sinks: int = 4
    window: int = 1020
    name: str = "StreamingLLM"

    def __post_init__(self) -> None:
        if self.sinks < 0 or self.window < 1:
            raise ValueError(
                f"a cache keeps `sinks` >= 0 and a `window` of at least 1 key; got {self.sinks} and {self.window}"
            )

    @property
    def budget(self) -> int:
        return self.sinks + self.window

    def attend(self, q: Tensor, k: Tensor, v: Tensor, rules: Rules) -> tuple[Tensor, Tensor]:
        return kernels.sink_window(
            q, k, v, scale=rules.scale, sinks=self.sinks, window=self.window, additive=rules.additive,
            cap=rules.cap, sink=rules.sink, rule_window=rules.window,
        )  # fmt: skip


def _whole(q: Tensor, k: Tensor, name: str) -> None:
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"the {name} cache is replayed over a whole sequence in one forward pass, not one decoding step "
            f"({q.shape[-2]} queries over {k.shape[-2]} keys)"
        )


def _step_scores(q: Tensor, k: Tensor, rules: Rules, add: Tensor | None) -> Tensor:
    """Scores (n, c) of one query a row (n, d) over its keys (n, c, d), float32, cap and term applied."""
    sc = torch.einsum("nd,ncd->nc", q.float(), k.float()) * rules.scale
    if rules.cap is not None:
        sc = torch.tanh(sc / rules.cap) * rules.cap
    return sc if add is None else sc + add


def _dense(q: Tensor, k: Tensor, v: Tensor, rules: Rules, rows: slice) -> tuple[Tensor, Tensor, Tensor]:
    """Causal attention of query rows ``rows`` (the cache still holds every key), with the weights:
    (out, lse, weights (b, h, r, s))."""
    t, s = q.shape[-2], k.shape[-2]
    scores = kernels.scaled(q[..., rows, :].float(), k.float(), rules.scale, rules.cap)
    if rules.additive is not None:
        part = rules.additive[..., rows, :] if rules.additive.shape[-2] > 1 else rules.additive
        scores = scores + part.float()
    i = torch.arange(rows.start, rows.stop, device=q.device)[:, None] + s - t
    j = torch.arange(s, device=q.device)[None, :]
    hidden = j > i
    if rules.window is not None:
        hidden |= j <= i - rules.window
    scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    if rules.sink is not None:
        lse = torch.logaddexp(lse, rules.sink.float().expand(*q.shape[:2], t)[..., rows])
    w = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    return torch.matmul(w.to(v.dtype), v), lse, w


def _prefix(rules: Rules, n: int, t: int) -> Rules:
    """The rules of the first ``n`` queries over the first ``n`` keys (a square call of ``t``)."""
    add, sink = rules.additive, rules.sink
    if add is not None:
        add = add[..., : n if add.shape[-2] > 1 else 1, :n]
    if sink is not None and sink.shape[-1] == t:
        sink = sink[..., :n]
    return Rules(rules.scale, add, rules.cap, sink, rules.window)


def _rows_over_all(q: Tensor, k: Tensor, v: Tensor, rules: Rules, first: int) -> tuple[Tensor, Tensor]:
    """Causal attention of the queries from ``first`` on over every key they may see, a block of rows
    at a time (``kernels.blockwise``): (out, lse) of those rows."""
    t = q.shape[-2]
    add = rules.additive
    if add is not None and add.shape[-2] > 1:
        add = add[..., first:, :]
    if rules.window is not None:  # the layer's own sliding window, as a term
        i = torch.arange(first, t, device=q.device)[:, None]
        old = torch.zeros(t - first, t, device=q.device).masked_fill(
            torch.arange(t, device=q.device)[None, :] <= i - rules.window, float("-inf")
        )
        add = old if add is None else add + old
    out, lse = kernels.blockwise(q[..., first:, :], k, v, scale=rules.scale, causal=True, additive=add, cap=rules.cap)
    sink = rules.sink
    if sink is not None and sink.shape[-1] == t:
        sink = sink[..., first:]
    return kernels.with_sink(out, lse, sink)


@dataclass(frozen=True)
class HeavyHitters(Policy):
    heavy: int = 512
    recent: int = 512
    name: str = "H2O"

    def __post_init__(self) -> None:
        if self.heavy < 0 or self.recent < 1:
            raise ValueError(f"H2O keeps `heavy` >= 0 and `recent` >= 1 keys; got {self.heavy} and {self.recent}")

    @property
    def budget(self) -> int:
        return self.heavy + self.recent

    def attend(self, q: Tensor, k: Tensor, v: Tensor, rules: Rules) -> tuple[Tensor, Tensor]:
        """Query by query: the first ``budget`` queries see every key; then each query's cache is
        the heavy set and the recent window, and its weights add to each key's accumulated score."""
        _whole(q, k, self.name)
        b, h, t, d = q.shape
        full = min(t, self.budget)
        head = _prefix(rules, full, t)
        out0, lse0, w0 = _dense(q[..., :full, :], k[..., :full, :], v[..., :full, :], head, slice(0, full))
        if full == t:
            return out0, lse0
        n, R, H = b * h, self.recent, self.heavy
        qf, kf, vf = q.reshape(n, t, d), k.reshape(n, t, d), v.reshape(n, t, v.shape[-1])
        acc = F.pad(w0.reshape(n, full, full).sum(1), (0, t - full))  # (n, s): each key's attention so far
        heavy = torch.arange(H, device=q.device).expand(n, H).clone()  # (n, H) the heavy keys: 0..H-1 at first
        sink = None if rules.sink is None else rules.sink.float().expand(b, h, t).reshape(n, t)
        rows = torch.arange(n, device=q.device)
        outs, lses = [], []
        for i in range(full, t):
            newcomer = i - R  # leaves the recent window: competes with the heavy keys
            if H:
                scores = torch.cat([acc.gather(1, heavy), acc[:, newcomer, None]], 1)  # (n, H + 1)
                loser = scores.argmin(1)
                keep = loser < H  # else the newcomer itself has the least: it goes
                heavy[rows[keep], loser[keep]] = newcomer
            cols = torch.cat([heavy, torch.arange(i - R + 1, i + 1, device=q.device).expand(n, R)], 1)  # (n, c)
            ks, vs = kf[rows[:, None], cols], vf[rows[:, None], cols]  # (n, c, d)
            term = None
            if rules.additive is not None:
                row = rules.additive[..., i if rules.additive.shape[-2] > 1 else 0, :]  # (b|1, h|1, s)
                term = row.expand(b, h, t).reshape(n, t).gather(1, cols).float()
            if rules.window is not None:
                old = torch.zeros(cols.shape, device=q.device).masked_fill(cols <= i - rules.window, float("-inf"))
                term = old if term is None else term + old
            sc = _step_scores(qf[:, i], ks, rules, term)
            lse = torch.logsumexp(sc, -1)
            if sink is not None:
                lse = torch.logaddexp(lse, sink[:, i])
            w = torch.exp(sc - lse[:, None]).nan_to_num(0.0)  # (n, c)
            acc.scatter_add_(1, cols, w.detach())
            outs.append(torch.einsum("nc,ncd->nd", w.to(v.dtype), vs))
            lses.append(lse)
        out = torch.cat([out0, torch.stack(outs, 1).reshape(b, h, t - full, -1)], -2)
        return out, torch.cat([lse0, torch.stack(lses, 1).reshape(b, h, t - full)], -1)


@dataclass(frozen=True)
class SnapKV(Policy):
    prompt: int
    keep: int = 1024
    observe: int = 32
    pool: int = 5
    name: str = "SnapKV"

    def __post_init__(self) -> None:
        if self.observe < 1 or self.keep <= self.observe or self.pool < 1 or self.prompt <= self.keep:
            raise ValueError(
                f"SnapKV keeps `keep` > `observe` >= 1 keys of a `prompt` longer than `keep`, pooled over `pool` >= 1; "
                f"got keep {self.keep}, observe {self.observe}, prompt {self.prompt}, pool {self.pool}"
            )

    @property
    def budget(self) -> int:
        return self.keep

    def check(self, length: int) -> None:
        if self.prompt >= length:
            raise ValueError(
                f"SnapKV's prompt of {self.prompt:,} tokens leaves no token after it in an input of {length:,}: "
                "give a shorter `prompt`"
            )

    def attend(self, q: Tensor, k: Tensor, v: Tensor, rules: Rules) -> tuple[Tensor, Tensor]:
        _whole(q, k, self.name)
        b, h, t, _ = q.shape
        p = min(self.prompt, t)
        head = _prefix(rules, p, t)
        out0, lse0 = _rows_over_all(q[..., :p, :], k[..., :p, :], v[..., :p, :], head, 0)  # the prefill
        if p == t:
            return out0, lse0
        _, _, w = _dense(q[..., :p, :], k[..., :p, :], v[..., :p, :], head, slice(p - self.observe, p))
        votes = w[..., : p - self.observe].sum(-2)  # (b, h, p - observe)
        votes = F.avg_pool1d(votes.reshape(b * h, 1, -1), self.pool, 1, self.pool // 2, count_include_pad=False)
        votes = votes.reshape(b, h, -1)[..., : p - self.observe]
        chosen = votes.topk(min(self.keep - self.observe, p - self.observe), -1).indices  # (b, h, c)
        kept = torch.zeros(b, h, t, dtype=torch.bool, device=q.device)
        kept.scatter_(-1, chosen, True)
        kept[..., p - self.observe :] = True  # the window and every key after the prompt
        term = torch.zeros(b, h, 1, t, device=q.device).masked_fill(~kept[..., None, :], float("-inf"))
        additive = term if rules.additive is None else rules.additive + term  # every query after the prompt
        after = Rules(rules.scale, additive, rules.cap, rules.sink, rules.window)
        out1, lse1 = _rows_over_all(q, k, v, after, p)
        return torch.cat([out0, out1], -2), torch.cat([lse0, lse1], -1)
