"""One record of every attention call, and its maps computed only where someone looks.

While a ``recording()`` is open, every attention call hands itself to the open
``Recorder`` as one ``AttentionCall``: its queries and keys after positions (RoPE rotates
them first), the scale, the mask as a rule (causal, key padding) or a boolean tensor,
an additive bias (T5's buckets, Shaw's relative keys, ALiBi), and each query's
log-sum-exp of its scores, as FlashAttention keeps it (Dao et al. 2022, sec. 3.1). Any
weight is then exact without the map ever being formed:

    s_ij = scale * q_i . k_j + bias_ij  (-inf where the mask forbids j)
    w_ij = exp(s_ij - lse_i)

A score that does not factor through q . k (Luong's concat, a local window's Gaussian)
keeps its weights densely instead (``weights``); an RNN's maps are small.

``MapView`` answers, for one head (or the mean of heads) of one call: an exact block, the
whole map, an overview pooled to a given size (max or mean of the cells each pixel
covers), each query's strongest keys, and per-query statistics. Each is computed block
by block: at most ``block_size`` scores are in flight, so memory grows with t, not t x s.

Shapes: ``h`` query heads, ``h_kv`` key/value heads (grouped-query attention: query head
i reads key head i // (h / h_kv)), ``t`` queries, ``s`` keys, ``d`` per-head size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import causal_mask

BLOCK = 1 << 22  # scores computed at once by a view on the CPU (16 MB in float32)
ON_ACCELERATOR = 16  # times more on a GPU (256 MB): fewer, larger kernels; small blocks spend the time launching


def block_size(device: torch.device) -> int:
    """How many scores a view computes at once on ``device``."""
    return BLOCK if device.type == "cpu" else BLOCK * ON_ACCELERATOR


@dataclass
class Tap:
    """Weights in the autograd graph, the very tensor an attend step mixed the values with, and,
    where they cover a window rather than every key (local attention), how a tensor of their
    shape spreads onto the full (..., t, s) map."""

    weights: Tensor
    dense: Callable[[Tensor], Tensor] | None = None

    def spread(self, x: Tensor) -> Tensor:
        """``x`` (the weights' shape) on the full map."""
        return x if self.dense is None else self.dense(x)


@dataclass(eq=False)
class AttentionCall:
    """One attention call of one input (the first row of its batch).

    q (h, t, d) and k (h_kv, s, d): after positions, kept in the recording's dtype.
    lse (h, t) float32: log sum_j exp(s_ij), -inf for a query that sees no key.
    causal: key j is visible to query i only if j <= i + (s - t) (bottom-right aligned).
    key_mask (s,) and mask (1|h, t, s): boolean, True = may attend.
    bias (1|h, t, s): added to the scaled scores.
    weights (h, t, s): the weights themselves, for a score that does not factor through q . k;
    then q, k and lse may be None.
    v (h_kv, s, d_v): kept when a consumer asks (value-norm, the walk-through).
    graph: the weights in the autograd graph, when a gradient method asks (a ``graph``
    recording): one Tap (b, h, t, s), or one per step of a model that attends step by step.
    """

    kind: str
    layer: int
    q: Tensor | None = None
    k: Tensor | None = None
    scale: float = 1.0
    lse: Tensor | None = None
    causal: bool = False
    key_mask: Tensor | None = None
    mask: Tensor | None = None
    bias: Tensor | None = None
    weights: Tensor | None = None
    v: Tensor | None = None
    graph: list[Tap] | None = None
    module: Any = None  # the attention module of the model that made the call (not saved)
    extra: dict[str, Tensor] = field(default_factory=dict)  # a kind's own (local attention's p_t)

    @property
    def heads(self) -> int:
        return int(self.weights.shape[0] if self.weights is not None else _req(self.q).shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """(heads, queries, keys)."""
        if self.weights is not None:
            h, t, s = self.weights.shape
            return int(h), int(t), int(s)
        q, k = _req(self.q), _req(self.k)
        return int(q.shape[0]), int(q.shape[1]), int(k.shape[1])

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads."""
        return head // (self.heads // _req(self.k).shape[0])

    def allowed(self, head: int, rows: slice, cols: slice) -> Tensor | None:
        """Which of the block's keys each query may attend to (None: all)."""
        _, t, s = self.shape
        out: Tensor | None = None
        if self.causal:
            i = torch.arange(rows.start, rows.stop, device=_device(self))[:, None] + (s - t)
            out = torch.arange(cols.start, cols.stop, device=i.device)[None, :] <= i
        if self.key_mask is not None:
            km = self.key_mask[cols][None, :]
            out = km if out is None else out & km
        if self.mask is not None:
            m = self.mask[head if self.mask.shape[0] > 1 else 0, rows, cols]
            out = m if out is None else out & m
        return out

    def scores(self, head: int, rows: slice, cols: slice) -> Tensor:
        """s_ij for one head's block (r, c), float32, -inf where the mask forbids."""
        q = _req(self.q)[head, rows].float()
        k = _req(self.k)[self.kv_head(head), cols].float()
        s = (q @ k.T) * self.scale
        if self.bias is not None:
            s = s + self.bias[head if self.bias.shape[0] > 1 else 0, rows, cols].float()
        allowed = self.allowed(head, rows, cols)
        return s if allowed is None else s.masked_fill(~allowed, float("-inf"))

    def block(self, head: int, rows: slice, cols: slice) -> Tensor:
        """Exact weights w_ij of one head's block (r, c), float32."""
        if self.weights is not None:
            return self.weights[head, rows, cols].float()
        lse = _req(self.lse)[head, rows].float()[:, None]
        w = torch.exp(self.scores(head, rows, cols) - lse)
        return w.nan_to_num_(0.0)  # a query that sees no key: -inf - -inf


def _req(x: Tensor | None) -> Tensor:
    assert x is not None  # a factored call has q, k and lse; a dense one its weights
    return x


def _device(call: AttentionCall) -> torch.device:
    return (call.weights if call.weights is not None else _req(call.q)).device


# -- views --------------------------------------------------------------------------------------


def _span(x: int | slice | tuple[int, int] | None, n: int, what: str) -> slice:
    """A block's rows or columns as a slice within 0..n, or a one-line error."""
    if x is None:
        return slice(0, n)
    if isinstance(x, (int, np.integer)):
        x = (int(x), int(x) + 1)
    if isinstance(x, slice):
        if x.step not in (None, 1):
            raise ValueError(f"a block's {what} are a contiguous range, got step {x.step}")
        x = (0 if x.start is None else x.start, n if x.stop is None else x.stop)
    a, b = int(x[0]), int(x[1])
    if not 0 <= a < b <= n:
        raise ValueError(f"{what} {a}..{b - 1} out of range: the map has {n} {what} (0..{n - 1})")
    return slice(a, b)


class MapView:
    """One head's map of one call, or the mean of its heads (``head="mean"``), as a view:
    nothing is formed until asked, and then only block by block."""

    def __init__(self, call: AttentionCall, head: int | str) -> None:
        heads = call.heads
        if head == "mean":
            self.heads = list(range(heads))
        elif isinstance(head, (int, np.integer)) and not isinstance(head, bool) and -heads <= head < heads:
            self.heads = [int(head) % heads]
        else:
            raise ValueError(f"head {head!r} out of range: {heads} head(s) (0..{heads - 1}) or 'mean'")
        self.call = call
        self.head = head
        _, self.queries, self.keys = call.shape

    @property
    def shape(self) -> tuple[int, int]:
        return self.queries, self.keys

    def _block(self, rows: slice, cols: slice) -> Tensor:
        out = self.call.block(self.heads[0], rows, cols)
        for h in self.heads[1:]:
            out = out + self.call.block(h, rows, cols)
        return out / len(self.heads) if len(self.heads) > 1 else out

    def block(self, rows=None, cols=None) -> np.ndarray:
        """Exact weights of rows x cols (each an index, a (start, stop) pair or a slice), float32."""
        r, c = _span(rows, self.queries, "rows"), _span(cols, self.keys, "columns")
        if (r.stop - r.start) * (c.stop - c.start) > 64 * BLOCK:
            need = (r.stop - r.start) * (c.stop - c.start) * 4 / 2**30
            raise ValueError(
                f"a {r.stop - r.start} x {c.stop - c.start} block is {need:.1f} GiB: ask for a smaller one"
            )
        return self._block(r, c).cpu().numpy()

    def dense(self) -> np.ndarray:
        """The whole (t, s) map (for a long input ``Maps`` first checks that it fits in memory)."""
        return self._block(slice(0, self.queries), slice(0, self.keys)).cpu().numpy()

    def _visible(self, rows: slice) -> int:
        """Keys past which no query of ``rows`` sees anything (causal): the rest are exact zeros."""
        if not self.call.causal or self.call.weights is not None:
            return self.keys
        return max(1, min(self.keys, rows.stop + self.keys - self.queries))

    def row_blocks(self, rows: slice | None = None) -> Iterator[tuple[slice, Tensor]]:
        """(rows, weights (r, k)) over all queries, at most ``block_size`` scores each; past ``k`` every
        weight of those rows is 0 (a causal map's upper triangle is never computed)."""
        rows = rows or slice(0, self.queries)
        step = max(1, block_size(_device(self.call)) // self.keys)
        for a in range(rows.start, rows.stop, step):
            r = slice(a, min(rows.stop, a + step))
            yield r, self._block(r, slice(0, self._visible(r)))

    def overview(self, size: int | tuple[int, int] = 512, reduce: str = "max", *, rows=None, cols=None) -> np.ndarray:
        """The map (or its ``rows`` x ``cols`` region: each an index, a (start, stop) pair or a
        slice) pooled to at most ``size`` pixels a side: each pixel the max (or mean) of the cells
        it covers, pixel i covering rows start + floor(i n / pixels) onwards; a side shorter than
        ``size`` keeps one pixel per cell."""
        if reduce not in ("max", "mean"):
            raise ValueError(f"reduce is 'max' or 'mean', got {reduce!r}")
        ph, pw = (size, size) if isinstance(size, int) else size
        if ph < 1 or pw < 1:
            raise ValueError(f"an overview needs at least one pixel a side, got {ph} x {pw}")
        r, c = _span(rows, self.queries, "rows"), _span(cols, self.keys, "columns")
        nr, nc = r.stop - r.start, c.stop - c.start
        ph, pw = min(ph, nr), min(pw, nc)
        row_edges = r.start + (np.arange(ph + 1) * nr) // ph
        col_edges = (np.arange(pw + 1) * nc) // pw  # from the region's first column
        device = _device(self.call)
        col_of = torch.as_tensor(np.repeat(np.arange(pw), np.diff(col_edges)), device=device)
        out = torch.zeros(ph, pw, device=device)
        pixel_of = np.repeat(np.arange(ph), np.diff(row_edges))  # each row's pixel row, from the region's first
        step = max(1, block_size(device) // nc)
        for a in range(r.start, r.stop, step):  # a block of map rows at a time, whatever pixels it spans
            block = slice(a, min(r.stop, a + step))
            seen = min(self._visible(block), c.stop) - c.start
            if seen <= 0:
                continue  # above a causal map's diagonal: exact zeros
            w = self._block(block, slice(c.start, c.start + seen))  # (r, seen)
            n = int(col_of[seen - 1]) + 1
            first = int(pixel_of[a - r.start])
            row_of = torch.as_tensor(pixel_of[block.start - r.start : block.stop - r.start] - first, device=device)
            m = int(row_of[-1]) + 1
            if reduce == "max":
                part = _max_pool(w, col_of[:seen], n, row_of, m)
                out[first : first + m, :n] = torch.maximum(out[first : first + m, :n], part)
            else:
                pooled = torch.zeros(w.shape[0], n, device=device).index_add_(1, col_of[:seen], w)
                out[first : first + m, :n] += torch.zeros(m, n, device=device).index_add_(0, row_of, pooled)
        if reduce == "mean":
            cells = torch.as_tensor(np.outer(np.diff(row_edges), np.diff(col_edges)), dtype=out.dtype, device=device)
            out = out / cells
        return out.cpu().numpy()

    def top_keys(self, k: int = 8, *, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """Each query's ``k`` strongest keys, strongest first: (indices (t, k) int64, weights (t, k));
        ``rows``: only those queries (an index, a (start, stop) pair or a slice)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        span = _span(rows, self.queries, "rows")
        k = min(k, self.keys)
        idx = np.zeros((span.stop - span.start, k), dtype=np.int64)
        val = np.zeros((span.stop - span.start, k), dtype=np.float32)
        for r, w in self.row_blocks(span):
            n = min(k, w.shape[1])
            top = torch.topk(w, n, dim=-1)
            at = slice(r.start - span.start, r.stop - span.start)
            idx[at, :n] = top.indices.cpu().numpy()
            val[at, :n] = top.values.cpu().numpy()
            if n < k:  # keys past the visible ones weigh exactly 0
                idx[at, n:] = np.arange(n, k)
        return idx, val

    def row_stats(self, *, sink: int = 1, band: int = 8) -> dict[str, np.ndarray]:
        """Per query (t,), streamed: ``entropy`` (nats) of its weights, ``sink`` (mass on the
        first ``sink`` keys), ``local`` (mass on keys within ``band`` positions of it, aligned
        as causal masks align) and ``distance`` (mean |i - j| under its weights)."""
        out = {name: np.zeros(self.queries, dtype=np.float64) for name in ("entropy", "sink", "local", "distance")}
        offset = self.keys - self.queries
        for rows, w in self.row_blocks():
            device = w.device
            i = torch.arange(rows.start, rows.stop, device=device)[:, None] + offset
            j = torch.arange(w.shape[1], device=device)[None, :]
            dist = (i - j).abs().float()
            plogp = torch.where(w > 0, w * torch.log(w.clamp_min(1e-45)), 0.0)
            out["entropy"][rows] = (-plogp.sum(-1)).double().cpu().numpy()
            out["sink"][rows] = w[:, :sink].sum(-1).double().cpu().numpy()
            out["local"][rows] = torch.where(dist <= band, w, 0.0).sum(-1).double().cpu().numpy()
            out["distance"][rows] = (w * dist).sum(-1).double().cpu().numpy()
        return out


HEAD_STATS = ("entropy", "normalised", "max_weight", "sink", "local", "distance")


@torch.no_grad()
def head_stats(call: AttentionCall, *, sink: int = 1, band: int = 8) -> dict[str, np.ndarray]:
    """Every head's summaries (h,), each the mean over the queries that see a key, streamed over
    blocks of rows with all heads at once (memory grows with T, not T²):

    entropy      H_i = -sum_j w_ij log w_ij (nats)
    normalised   H_i / log(keys query i may see; formed weights: keys with any weight): 0 = one
                 key, 1 = uniform over them
    max_weight   max_j w_ij: how much of its attention a query's favourite key gets
    sink         weight on the first ``sink`` keys (an attention sink parks its weight there)
    local        weight on keys within ``band`` positions (i and j aligned as causal masks are)
    distance     sum_j w_ij |i - j|: how far back (or ahead) a query looks, in tokens
    """
    if sink < 1 or band < 0:
        raise ValueError(f"sink must be >= 1 and band >= 0, got {sink} and {band}")
    h, t, s = call.shape
    device = _device(call)
    sums = torch.zeros(len(HEAD_STATS), h, dtype=torch.float64, device=device)
    counted = torch.zeros(h, dtype=torch.float64, device=device)
    for rows, w, valid, keys in head_block(call):
        i = torch.arange(rows.start, rows.stop, device=device)[:, None] + s - t
        dist = (i - torch.arange(w.shape[-1], device=device)[None, :]).abs().float()  # (r, c), shared by the heads
        entropy = -torch.where(w > 0, w * torch.log(w.clamp_min(1e-45)), 0.0).sum(-1)
        parts = (
            entropy,
            torch.where(keys > 1, entropy / keys.clamp_min(2).log(), 0.0),
            w.amax(-1),
            w[..., :sink].sum(-1),
            (w * (dist <= band)).sum(-1),
            (w * dist).sum(-1),
        )
        for n, x in enumerate(parts):
            sums[n] += torch.where(valid, x, 0.0).double().sum(-1)
        counted += valid.double().sum(-1)
    means = (sums / counted.clamp_min(1)).cpu().numpy()
    return {name: means[n] for n, name in enumerate(HEAD_STATS)}


def head_block(call: AttentionCall) -> Iterator[tuple[slice, Tensor, Tensor, Tensor]]:
    """Blocks of rows of every head's exact weights at once: (rows, w (h, r, c), valid (h, r),
    keys (h, r)), at most ``block_size`` scores each. c: the keys any of these queries may see (past
    them a causal map is exactly 0); valid: the query sees a key; keys: how many it may see
    (formed weights: how many it gives any weight)."""
    h, t, s = call.shape
    device = _device(call)
    dense = call.weights is not None
    step = max(1, block_size(device) // max(1, s * h))
    for a in range(0, t, step):
        rows = slice(a, min(t, a + step))
        seen = s if not call.causal or dense else max(1, min(s, rows.stop + s - t))
        cols = slice(0, seen)
        allowed = _allowed_heads(call, rows, cols)
        if dense:
            w = _req(call.weights)[:, rows, cols].float()
            valid = w.sum(-1) > 0
        else:
            lse = _req(call.lse)[:, rows].float()
            valid = torch.isfinite(lse)
            w = _scores_heads(call, rows, cols, allowed).sub_(torch.where(valid, lse, 0.0)[..., None]).exp_()
        if allowed is not None:
            keys = allowed.sum(-1).float().expand(h, -1)
        elif dense:
            keys = (w > 0).sum(-1).float()
        elif call.causal:
            keys = (torch.arange(rows.start, rows.stop, device=device) + s - t + 1).clamp(max=s).float().expand(h, -1)
        else:
            keys = torch.full((h, rows.stop - rows.start), float(s), device=device)
        yield rows, w, valid, keys


@torch.no_grad()
def layer_overviews(call: AttentionCall, size: int | tuple[int, int] = 512) -> np.ndarray:
    """Every head's map of ``call`` and the mean of its heads, each pooled to at most ``size``
    pixels a side by the max of the cells a pixel covers (as ``MapView.overview``): (heads + 1,
    rows, cols), the mean last. One pass over blocks of rows for all heads at once."""
    ph, pw = (size, size) if isinstance(size, int) else size
    if ph < 1 or pw < 1:
        raise ValueError(f"an overview needs at least one pixel a side, got {ph} x {pw}")
    h, t, s = call.shape
    ph, pw = min(ph, t), min(pw, s)
    row_edges, col_edges = (np.arange(ph + 1) * t) // ph, (np.arange(pw + 1) * s) // pw
    device = _device(call)
    col_of = torch.as_tensor(np.repeat(np.arange(pw), np.diff(col_edges)), device=device)
    pixel_of = np.repeat(np.arange(ph), np.diff(row_edges))
    out = torch.zeros(h + 1, ph, pw, device=device)
    for rows, w, _, _ in head_block(call):
        seen = w.shape[-1]
        w = torch.cat([w, w.mean(0, keepdim=True)])  # (h + 1, r, seen)
        n, first = int(col_of[seen - 1]) + 1, int(pixel_of[rows.start])
        row_of = torch.as_tensor(pixel_of[rows] - first, device=device)
        m = int(row_of[-1]) + 1
        part = _max_pool(w, col_of[:seen], n, row_of, m)
        out[:, first : first + m, :n] = torch.maximum(out[:, first : first + m, :n], part)
    return out.cpu().numpy()


def _max_pool(w: Tensor, col_of: Tensor, n: int, row_of: Tensor, m: int) -> Tensor:
    """Weights (..., r, c) pooled into (..., m, n) pixels by their max: column j into pixel
    col_of[j], row i into pixel row_of[i]. Weights are >= 0, so the zeros start every max."""
    lead, r = w.shape[:-2], w.shape[-2]
    pooled = w.new_zeros(*lead, r, n).scatter_reduce_(-1, col_of.expand(*lead, r, -1), w, "amax", include_self=False)
    rows = row_of[:, None].expand(*lead, -1, n)
    return w.new_zeros(*lead, m, n).scatter_reduce_(-2, rows, pooled, "amax", include_self=False)


def _allowed_heads(call: AttentionCall, rows: slice, cols: slice) -> Tensor | None:
    """Which keys each query may attend to, (1|h, r, c), for every head at once (None: all)."""
    if call.mask is not None and call.mask.shape[0] > 1:
        return torch.stack([_req(call.allowed(head, rows, cols)) for head in range(call.heads)])
    out = call.allowed(0, rows, cols)
    return None if out is None else out[None]


FLOOR = -1e30  # a masked score in the summaries: exp(FLOOR - lse) is exactly 0, and 0 * FLOOR too


def _scores_heads(call: AttentionCall, rows: slice, cols: slice, allowed: Tensor | None) -> Tensor:
    """s_ij of every head's block (h, r, c), float32, FLOOR where ``allowed`` forbids: one batched
    product per key/value head (its query heads share its keys)."""
    q, k = _req(call.q), _req(call.k)
    h, h_kv = q.shape[0], k.shape[0]
    qs = q[:, rows].float().reshape(h_kv, h // h_kv, rows.stop - rows.start, -1)
    scores = (qs @ k[:, cols].float().transpose(-1, -2)[:, None]).reshape(h, rows.stop - rows.start, -1)
    scores.mul_(call.scale)
    if call.bias is not None:
        scores.add_(call.bias[:, rows, cols].float())
    if allowed is not None:
        scores.masked_fill_(~allowed, FLOOR)
    return scores


# -- recording ----------------------------------------------------------------------------------


@dataclass
class Recorder:
    """The calls of one forward pass. ``values``: keep v too (value-norm, the walk-through);
    ``graph``: keep the weights in the autograd graph (gradient methods); ``dtype``: how q, k
    and v are kept (float16 halves a long input's record). ``kinds``: id(module) -> kind, for
    models whose attention function is shared by modules of several kinds."""

    values: bool = False
    graph: bool = False
    dtype: torch.dtype = torch.float32
    kinds: dict[int, str] = field(default_factory=dict)
    calls: list[AttentionCall] = field(default_factory=list)
    _layers: dict[str, int] = field(default_factory=dict)
    _steps: dict[int, list[tuple[Tap, dict[str, Tensor]]]] = field(default_factory=dict)

    def step(
        self, module: Any, weights: Tensor, spread: Callable[[Tensor], Tensor] | None = None, **parts: Tensor
    ) -> None:
        """One step of an attention a model calls step by step (an RNN decoder's): its weights in
        the graph (a ``graph`` recording) and ``parts`` (its query, keys, values: a ``values``
        recording), kept until the model hands the whole call over (``steps``)."""
        if self.graph or self.values:
            self._steps.setdefault(id(module), []).append((Tap(weights, spread), parts))

    def steps(self, module: Any) -> tuple[list[Tap] | None, dict[str, list[Tensor]]]:
        """What ``module``'s steps left since it last handed a call over: (the weights in the
        graph, or None for a recording without gradients; {part: one tensor per step})."""
        taken = self._steps.pop(id(module), [])
        graph = [tap for tap, _ in taken] if self.graph else None
        parts: dict[str, list[Tensor]] = {}
        if self.values:
            for _, step in taken:
                for name, x in step.items():
                    parts.setdefault(name, []).append(x.detach())
        return graph, parts

    def kind_of(self, module: Any, default: str = "encoder") -> str:
        return self.kinds.get(id(module), default)

    def add(self, kind: str, **parts: Any) -> AttentionCall:
        """Keep one call; its layer is its place among the calls of its kind."""
        layer = self._layers.get(kind, 0)
        self._layers[kind] = layer + 1
        keep: dict[str, Any] = {
            name: (None if x is None else self._keep(name, x)) if isinstance(x, Tensor) or x is None else x
            for name, x in parts.items()
        }
        call = AttentionCall(kind, layer, **keep)
        if call.lse is not None and call.q is not None and call.q.dtype != parts["q"].dtype:
            call.lse = lse_of(call)  # of the q and k kept (rounded): every row sums to 1 again
        self.calls.append(call)
        return call

    def add_scores(
        self,
        module: Any,
        q: Tensor,
        k: Tensor,
        *,
        scale: float,
        causal: bool = False,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        v: Tensor | None = None,
        graph: Tensor | None = None,
        x: Tensor | None = None,
    ) -> AttentionCall:
        """Keep a call whose weights are softmax(scale q k^T + bias) under ``mask``, computed by
        the model's own kernel: its log-sum-exp is taken here (``lse_of``), from the first row. q (b, h, t, d); k, v (b, h_kv, s, d); mask bool broadcastable to (b, h, t, s);
        bias broadcastable to (b, h, t, s); ``graph``: the weights the model mixed with, kept in
        the autograd graph by a ``graph`` recording; ``x`` (b, t, d_model): the queries' layer
        input, kept by a ``values`` recording (the walk-through shows q = x W^Q)."""
        t, s = q.shape[-2], k.shape[-2]
        key_mask = rule = None
        if mask is not None:
            m = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))[0]  # (h|1, t|1, s)
            if m.shape[0] == 1 and m.shape[1] == 1:
                key_mask = m[0, 0].expand(s)
            else:
                rule = m.expand(-1, t, s)
        b = None if bias is None else bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))[0].expand(-1, t, s)
        call = self.add(
            self.kind_of(module),
            q=q[0],
            k=k[0],
            scale=scale,
            causal=causal,
            key_mask=key_mask,
            mask=rule,
            bias=b,
            v=None if v is None or not self.values else v[0],
            graph=[Tap(graph)] if graph is not None and self.graph else None,
            module=module,
            extra={"x": x[0].detach()} if x is not None and self.values else {},
        )
        call.lse = lse_of(call)  # of the q and k kept, the rules applied block by block
        return call

    def _keep(self, name: str, x: Tensor) -> Tensor:
        if name == "graph":
            return x
        x = x.detach()
        if name in ("q", "k", "v") and x.is_floating_point():
            return x.to(self.dtype)
        if name in ("lse", "bias", "weights"):
            return x.float()
        return x

    def by_kind(self) -> dict[str, list[AttentionCall]]:
        out: dict[str, list[AttentionCall]] = {}
        for c in self.calls:
            out.setdefault(c.kind, []).append(c)
        return out


_recorder: ContextVar[Recorder | None] = ContextVar("attnkit_recorder", default=None)


def active() -> Recorder | None:
    """The open recorder, or None (attention then runs its fastest path, keeping nothing)."""
    return _recorder.get()


@contextmanager
def recording(
    *,
    values: bool = False,
    graph: bool = False,
    dtype: torch.dtype = torch.float32,
    kinds: dict[int, str] | None = None,
) -> Iterator[Recorder]:
    """Within: every attention call of every model is handed to the yielded recorder."""
    if dtype not in (torch.float16, torch.float32):
        raise ValueError(f"a record keeps q and k in float16 or float32, not {dtype}")
    rec = Recorder(values=values, graph=graph, dtype=dtype, kinds=kinds or {})
    token = _recorder.set(rec)
    try:
        yield rec
    finally:
        _recorder.reset(token)
        rec._steps.clear()  # a step-by-step attention whose call was never handed over


# -- the fused kernel with its log-sum-exp ------------------------------------------------------


def additive_term(mask: Tensor | None, bias: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """One term added to the scaled scores from a boolean mask (True = may attend: -inf where
    it forbids) and a bias, broadcast together; None when there is neither."""
    if mask is None:
        return None if bias is None else bias.to(dtype)
    floor = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return floor if bias is None else bias.to(dtype) + floor


def _lse_blockwise(q: Tensor, k: Tensor, scale: float, causal: bool, additive: Tensor | None) -> Tensor:
    """log sum_j exp(s_ij) (b, h, t) in float32, at most ``block_size`` scores per (b, h) at once."""
    b, h, t, _ = q.shape
    s = k.shape[-2]
    out = torch.empty(b, h, t, device=q.device)
    step = max(1, block_size(q.device) // s)
    for a in range(0, t, step):
        z = min(t, a + step)
        sc = torch.matmul(q[..., a:z, :].float(), k.float().transpose(-1, -2)) * scale
        if additive is not None:
            sc = sc + additive[..., a:z, :].float() if additive.shape[-2] > 1 else sc + additive.float()
        if causal:
            i = torch.arange(a, z, device=q.device)[:, None] + (s - t)
            sc = sc.masked_fill(torch.arange(s, device=q.device)[None, :] > i, float("-inf"))
        out[..., a:z] = torch.logsumexp(sc, -1)
    return out


@torch.no_grad()
def lse_of(call: AttentionCall) -> Tensor:
    """Each query's log-sum-exp (h, t) of the call's own q, k and rules, float32. Where the scores
    exceed one block (``block_size``) and the only rule is a causal one over a square map or a key
    mask, a fused kernel takes it (no score is formed; 3.4x faster at 8,192 tokens on 2 cores);
    else a block of rows at a time, every head at once, a causal map's invisible keys skipped."""
    h, t, s = call.shape
    compact = call.mask is None and call.bias is None and (not call.causal or (t == s and call.key_mask is None))
    if compact and h * t * s > block_size(_device(call)):
        q = _req(call.q).float()[None]
        k = groups(_req(call.k).float()[None], h)
        key_mask = None if call.key_mask is None else call.key_mask[None, None, None, :]
        _, lse = fused_with_lse(q, k, k, scale=call.scale, causal=call.causal, additive=additive_term(key_mask, None))
        return lse[0]
    return _lse_by_rows(call)


def _lse_by_rows(call: AttentionCall) -> Tensor:
    """``lse_of`` one block of rows at a time, from the scores."""
    h, t, s = call.shape
    q = _req(call.q).float()
    k = groups(_req(call.k).float()[None], h)[0]  # (h, s, d)
    out = torch.empty(h, t, device=q.device)
    step = max(1, block_size(q.device) // (s * h))
    per_head = call.mask is not None and call.mask.shape[0] > 1
    for a in range(0, t, step):
        rows = slice(a, min(t, a + step))
        cols = slice(0, max(1, min(s, rows.stop + s - t)) if call.causal else s)
        sc = torch.matmul(q[:, rows], k[:, cols].transpose(-1, -2)) * call.scale  # (h, r, c)
        if call.bias is not None:
            sc = sc + call.bias[:, rows, cols].float()
        allowed = (
            torch.stack([cast(Tensor, call.allowed(i, rows, cols)) for i in range(h)])
            if per_head
            else call.allowed(0, rows, cols)
        )
        if allowed is not None:
            sc = sc.masked_fill(~allowed, float("-inf"))
        out[:, rows] = torch.logsumexp(sc, -1)
    return out


def _no_key(lse: Tensor, additive: Tensor | None) -> Tensor:
    """-inf, not the kernel's 0, for a query that sees no key."""
    if additive is None:
        return lse
    dead = torch.isneginf(additive).all(-1)  # (b|1, h|1, t)
    return lse.masked_fill(dead, float("-inf")) if bool(dead.any()) else lse


def _kernel_mask(q: Tensor, k: Tensor, causal: bool, additive: Tensor | None) -> tuple[bool, Tensor | None]:
    """(is_causal, the additive mask) as PyTorch's kernels take them: they align a causal mask
    top-left, so a causal call with more keys than queries gets its mask as a term instead."""
    t, s = q.shape[-2], k.shape[-2]
    is_causal = causal and t == s
    if not causal or is_causal:
        return is_causal, additive
    floor = additive_term(causal_mask(t, s, device=q.device), None, q.dtype)
    assert floor is not None  # a mask was given
    return False, floor if additive is None else additive + floor


def fused(
    q: Tensor, k: Tensor, v: Tensor, *, scale: float, causal: bool = False, additive: Tensor | None = None
) -> Tensor:
    """softmax(scale q k^T + additive) v by PyTorch's fused kernels, gradients included, no weight
    kept: (b, h, t, d_v). q (b, h, t, d); k, v (b, h, s, d), heads already repeated for grouped
    queries, so that the flash and memory-efficient kernels take them."""
    is_causal, extra = _kernel_mask(q, k, causal, additive)
    if is_causal and extra is not None:  # the kernel takes a causal rule or a mask, not both (T5's decoder)
        floor = additive_term(causal_mask(q.shape[-2], k.shape[-2], device=q.device), None, q.dtype)
        assert floor is not None  # a mask was given
        is_causal, extra = False, extra + floor
    mask = None if extra is None else extra.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)


def fused_with_lse(
    q: Tensor, k: Tensor, v: Tensor, *, scale: float, causal: bool = False, additive: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(scale q k^T + additive) v by a fused kernel, and each query's log-sum-exp:
    (out (b, h, t, d_v), lse (b, h, t) float32). q (b, h, t, d); k, v (b, h, s, d), heads
    already repeated for grouped queries. The log-sum-exp comes from the kernel where it
    returns one (PyTorch's CPU flash attention; CUDA's memory-efficient kernel), else from
    one blockwise pass over the scores."""
    t = q.shape[-2]
    is_causal, extra = _kernel_mask(q, k, causal, additive)
    if q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, is_causal, attn_mask=None if extra is None else extra.to(q.dtype), scale=scale
        )
        return out, _no_key(lse.float(), extra)
    if q.device.type == "cuda" and extra is None:
        try:
            out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, None, True, 0.0, is_causal, scale=scale
            )[:2]
            return out, _no_key(lse[..., :t].float(), extra)
        except RuntimeError:
            pass  # an unsupported shape or dtype: the generic path below
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=None if extra is None else extra.to(q.dtype), is_causal=is_causal, scale=scale
    )
    return out, _lse_blockwise(q, k, scale, is_causal, extra)


def explicit(
    q: Tensor, k: Tensor, v: Tensor, *, scale: float, causal: bool = False, additive: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The textbook path, the weights formed (and kept in the autograd graph): (out, weights)."""
    t, s = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if additive is not None:
        scores = scores + additive.to(scores.dtype)
    if causal:
        scores = scores.masked_fill(~causal_mask(t, s, device=q.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if not torch.isfinite(scores).any(-1).all():  # a query with no visible key: 0, not NaN
        weights = weights.nan_to_num(0.0)
    return torch.matmul(weights, v), weights


def groups(x: Tensor, heads: int) -> Tensor:
    """Key or value heads (b, h_kv, s, d) repeated for ``heads`` query heads (grouped-query attention)."""
    n = heads // x.shape[1]
    return x if n == 1 else x.repeat_interleave(n, dim=1)


__all__ = [
    "BLOCK",
    "HEAD_STATS",
    "AttentionCall",
    "MapView",
    "Recorder",
    "Tap",
    "active",
    "block_size",
    "explicit",
    "fused",
    "fused_with_lse",
    "groups",
    "head_stats",
    "layer_overviews",
    "recording",
]
