"""A recorded call's maps as views: nothing is formed until asked, and then block by block.

``MapView`` answers, for one head (or the mean of heads) of one call: an exact block, the
whole map, an overview pooled to a given size (max or mean of the cells each pixel
covers), each query's strongest keys, and per-query statistics. ``head_stats``,
``head_block`` and ``layer_overviews`` take every head at once. At most ``block_size``
scores are in flight, so memory grows with t, not t x s.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..kernels import BLOCK, row_blocks, sink_window_kept
from .calls import AttentionCall, _device, _req


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

    def row_blocks(self, rows: slice | None = None) -> Iterator[tuple[slice, Tensor]]:
        """(rows, weights (r, k)) over all queries, at most ``block_size`` scores each; past ``k`` every
        weight of those rows is 0 (a causal map's upper triangle is never computed)."""
        for r, seen in self._row_blocks(self.keys, rows):
            yield r, self._block(r, slice(0, seen))

    def _row_blocks(self, per_row: int, rows: slice | None = None) -> Iterator[tuple[slice, int]]:
        """``kernels.row_blocks`` over this map: formed weights are read whole (no causal rule to skip by)."""
        causal = self.call.causal and self.call.weights is None
        device = _device(self.call)
        return row_blocks(self.queries, self.keys, per_row=per_row, device=device, causal=causal, rows=rows)

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
        for block, visible in self._row_blocks(nc, r):  # a block of map rows at a time, whatever pixels it spans
            a = block.start
            seen = min(visible, c.stop) - c.start
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


CACHE = (4, 1020)  # the StreamingLLM cache ``outside`` is measured against: 4 sinks, 1,020 recent keys


@torch.no_grad()
def head_stats(
    call: AttentionCall, *, sink: int = 1, band: int = 8, cache: tuple[int, int] = CACHE
) -> dict[str, np.ndarray]:
    """Every head's summaries (h,), each the mean over the queries that see a key, streamed over
    blocks of rows with all heads at once (memory grows with T, not T²):

    entropy      H_i = -sum_j w_ij log w_ij (nats)
    normalised   H_i / log(keys query i may see; formed weights: keys with any weight): 0 = one
                 key, 1 = uniform over them
    max_weight   max_j w_ij: how much of its attention a query's favourite key gets
    sink         weight on the first ``sink`` keys (an attention sink parks its weight there)
    local        weight on keys within ``band`` positions (i and j aligned as causal masks are)
    distance     sum_j w_ij |i - j|: how far back (or ahead) a query looks, in tokens
    outside      causal attention only: the weight on keys a StreamingLLM cache of ``cache`` = (sinks,
                 window) keys drops (Xiao et al. 2023), the mean over the queries that see more keys
                 than it holds (left out where none does)
    """
    stats = _Stats(call, sink, band, cache)
    for rows, w, valid, keys in head_block(call):
        stats.add(rows, w, valid, keys)
    return stats.result()


@torch.no_grad()
def overviews_and_stats(
    call: AttentionCall,
    size: int | tuple[int, int] = 512,
    *,
    sink: int = 1,
    band: int = 8,
    cache: tuple[int, int] = CACHE,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``layer_overviews`` and ``head_stats`` of ``call`` from one pass over its weights (each
    block formed once): what a page of every layer and head needs."""
    pooled = _Overviews(call, size)
    summaries = _Stats(call, sink, band, cache)
    for rows, w, valid, keys in head_block(call):
        pooled.add(rows, w)
        summaries.add(rows, w, valid, keys)
    return pooled.result(), summaries.result()


class _Stats:
    """``head_stats``' sums, block by block."""

    def __init__(self, call: AttentionCall, sink: int = 1, band: int = 8, cache: tuple[int, int] = CACHE) -> None:
        if sink < 1 or band < 0:
            raise ValueError(f"sink must be >= 1 and band >= 0, got {sink} and {band}")
        h, self.t, self.s = call.shape
        self.call, self.sink, self.band, self.cache = call, sink, band, cache
        self.device = device = _device(call)
        self.sums = torch.zeros(len(HEAD_STATS), h, dtype=torch.float64, device=device)
        self.counted = torch.zeros(h, dtype=torch.float64, device=device)
        self.past_sum = torch.zeros(h, dtype=torch.float64, device=device)
        self.past = 0  # queries past the cache

    def add(self, rows: slice, w: Tensor, valid: Tensor, keys: Tensor) -> None:
        device, cache = self.device, self.cache
        i = torch.arange(rows.start, rows.stop, device=device)[:, None] + self.s - self.t
        # a causal map whose rows sum to 1 (no learned sink): its weights past i are 0, so the sums over a
        # band or a window read only those columns, and the distance is i - sum_j w_ij j (one product)
        summed = self.call.causal and self.call.sink is None
        if summed:
            local, distance = (
                self._near(i, w, self.band + 1),
                i.T.float() - w @ torch.arange(w.shape[-1], device=device, dtype=w.dtype),
            )
        else:
            dist = (i - torch.arange(w.shape[-1], device=device)[None, :]).abs().float()  # (r, c), every head's
            local, distance = (w * (dist <= self.band)).sum(-1), (w * dist).sum(-1)
        if self.call.causal:
            over = (i[:, 0] >= sum(cache)) & valid[0]  # (r,)
            if summed:  # past the cache, its sinks and its window are apart: what it drops is the rest
                dropped = 1.0 - w[..., : cache[0]].sum(-1) - self._near(i, w, cache[1])
            else:
                kept = sink_window_kept(i, torch.arange(w.shape[-1], device=device)[None, :], *cache)
                dropped = (w * ~kept).sum(-1)  # (h, r)
            self.past_sum += (dropped.double() * over.double()).sum(-1)
            self.past += int(over.sum())
        entropy = self._entropy(rows, w, valid)
        parts = (
            entropy,
            torch.where(keys > 1, entropy / keys.clamp_min(2).log(), 0.0),
            w.amax(-1),
            w[..., : self.sink].sum(-1),
            local,
            distance,
        )
        for n, x in enumerate(parts):
            self.sums[n] += torch.where(valid, x, 0.0).double().sum(-1)
        self.counted += valid.double().sum(-1)

    @staticmethod
    def _near(i: Tensor, w: Tensor, width: int) -> Tensor:
        """sum_j w_ij over i - width < j <= i (h, r), reading only the columns those rows' spans cover."""
        lo, hi = max(0, int(i[0, 0]) - width + 1), min(w.shape[-1], int(i[-1, 0]) + 1)
        j = torch.arange(lo, hi, device=w.device)[None, :]
        return (w[..., lo:hi] * ((j > i - width) & (j <= i))).sum(-1)

    def _entropy(self, rows: slice, w: Tensor, valid: Tensor) -> Tensor:
        """-sum_j w_ij log w_ij (h, r). Where each score is q_i . k_j x scale (no bias, no soft-cap)
        and w_ij = exp(s_ij - lse_i), it is lse_i - scale q_i . (sum_j w_ij k_j): one product with
        the keys (the size of the scores' own) in place of a logarithm per weight, 4x as fast."""
        call = self.call
        if call.weights is not None or call.bias is not None or call.cap is not None or call.sink is not None:
            return -torch.special.xlogy(w, w).sum(-1)  # 0 log 0 = 0
        q, k, lse = _req(call.q), _req(call.k), _req(call.lse)
        h, h_kv, seen = q.shape[0], k.shape[0], w.shape[-1]
        mixed = w.reshape(h_kv, -1, seen) @ k[:, :seen].float()  # (h_kv, h / h_kv * r, d): sum_j w_ij k_j
        dot = (q[:, rows].float() * mixed.reshape(h, rows.stop - rows.start, -1)).sum(-1)
        return torch.where(valid, lse[:, rows].double() - call.scale * dot.double(), 0.0).float()

    def result(self) -> dict[str, np.ndarray]:
        means = (self.sums / self.counted.clamp_min(1)).cpu().numpy()
        out = {name: means[n] for n, name in enumerate(HEAD_STATS)}
        if self.past:
            out["outside"] = (self.past_sum / self.past).cpu().numpy()
        return out


def head_block(call: AttentionCall) -> Iterator[tuple[slice, Tensor, Tensor, Tensor]]:
    """Blocks of rows of every head's exact weights at once: (rows, w (h, r, c), valid (h, r),
    keys (h, r)), at most ``block_size`` scores each. c: the keys any of these queries may see (past
    them a causal map is exactly 0); valid: the query sees a key; keys: how many it may see
    (formed weights: how many it gives any weight)."""
    h, t, s = call.shape
    device = _device(call)
    dense = call.weights is not None
    for rows, seen in row_blocks(t, s, per_row=s * h, device=device, causal=call.causal and not dense):
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
    pooled = _Overviews(call, size)
    for rows, w, _, _ in head_block(call):
        pooled.add(rows, w)
    return pooled.result()


class _Overviews:
    """``layer_overviews``' pixels, block by block."""

    def __init__(self, call: AttentionCall, size: int | tuple[int, int]) -> None:
        ph, pw = (size, size) if isinstance(size, int) else size
        if ph < 1 or pw < 1:
            raise ValueError(f"an overview needs at least one pixel a side, got {ph} x {pw}")
        h, t, s = call.shape
        ph, pw = min(ph, t), min(pw, s)
        row_edges, col_edges = (np.arange(ph + 1) * t) // ph, (np.arange(pw + 1) * s) // pw
        self.device = device = _device(call)
        self.col_of = torch.as_tensor(np.repeat(np.arange(pw), np.diff(col_edges)), device=device)
        self.pixel_of = np.repeat(np.arange(ph), np.diff(row_edges))
        self.out = torch.zeros(h + 1, ph, pw, device=device)

    def add(self, rows: slice, w: Tensor) -> None:
        seen = w.shape[-1]
        n, first = int(self.col_of[seen - 1]) + 1, int(self.pixel_of[rows.start])
        row_of = torch.as_tensor(self.pixel_of[rows] - first, device=self.device)
        m = int(row_of[-1]) + 1
        for at, maps in ((slice(0, -1), w), (slice(-1, None), w.mean(0, keepdim=True))):  # the heads, their mean
            part = _max_pool(maps, self.col_of[:seen], n, row_of, m)
            old = self.out[at, first : first + m, :n]
            self.out[at, first : first + m, :n] = torch.maximum(old, part)

    def result(self) -> np.ndarray:
        return self.out.cpu().numpy()


def _max_pool(w: Tensor, col_of: Tensor, n: int, row_of: Tensor, m: int) -> Tensor:
    """Weights (..., r, c) pooled into (..., m, n) pixels by their max: column j into pixel
    col_of[j], row i into pixel row_of[i] (each non-decreasing: a pixel is a run of cells)."""
    return _pool_runs(_pool_rows(w, row_of, m), col_of, n)


def _pool_rows(w: Tensor, row_of: Tensor, m: int) -> Tensor:
    """The max of each run of rows (..., r, c) -> (..., m, c), rows first: each step a maximum of
    whole rows (contiguous, vectorised along c), and the columns are then pooled on m rows, not r."""
    counts = torch.bincount(row_of, minlength=m)
    longest = int(counts.max())
    if longest == 1:  # a pixel a row
        return w
    if m <= longest:  # few pixels of many rows (a block of a long map): one maximum over each run
        edges = [0, *torch.cumsum(counts, 0).tolist()]
        return torch.stack([w[..., a:b, :].amax(-2) for a, b in pairwise(edges)], -2)
    starts = torch.cumsum(counts, 0) - counts
    out = w.index_select(-2, starts)
    for extra in range(1, longest):
        at = torch.where(counts > extra, starts + extra, starts)  # a shorter run: its first row again
        out = torch.maximum(out, w.index_select(-2, at))
    return out


def _pool_runs(x: Tensor, pixel_of: Tensor, n: int) -> Tensor:
    """The max of each run of cells along the last dimension that ``pixel_of`` (non-decreasing, 0 .. n - 1)
    puts in one pixel: a sliding max over the narrowest run's width (one fused kernel) read at
    each run's start, then the cells past that width of the wider runs, one offset at a time."""
    lead, c = x.shape[:-1], x.shape[-1]
    counts = torch.bincount(pixel_of, minlength=n)
    first, k = int(counts[0]), int(counts[1:].max()) if n > 1 else 0
    # runs of one width, the first and the last perhaps cut short (a block of rows, a causal block's keys):
    # the first by itself, the rest by a pooling of stride k that takes the last one whole or not
    if n > 1 and first <= k and bool((counts[1:-1] == k).all()) and int(counts[-1]) <= k:
        if first == k:  # every run whole but perhaps the last: one pooling of the block as it lies
            return F.max_pool1d(x.reshape(-1, 1, c), k, stride=k, ceil_mode=True).reshape(*lead, n)
        head = x[..., :first].amax(-1, keepdim=True)
        rest = F.max_pool1d(x[..., first:].reshape(-1, 1, c - first), k, stride=k, ceil_mode=True)
        return torch.cat([head, rest.reshape(*lead, n - 1)], -1)
    starts = torch.cumsum(counts, 0) - counts
    k = int(counts.min())
    slid = F.max_pool1d(x.reshape(-1, 1, c), k, stride=1).reshape(*lead, c - k + 1) if k > 1 else x
    out = slid.index_select(-1, starts)
    for extra in range(k, int(counts.max())):
        wide = torch.nonzero(counts > extra).flatten()
        out[..., wide] = torch.maximum(out[..., wide], x.index_select(-1, starts[wide] + extra))
    return out


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
    # a key/value head's query heads are consecutive: theirs rows stacked, one product (no copy of the keys)
    qs = (q[:, rows].float() * call.scale).reshape(h_kv, h // h_kv * (rows.stop - rows.start), -1)
    scores = torch.bmm(qs, k[:, cols].float().transpose(-1, -2)).reshape(h, rows.stop - rows.start, -1)
    if call.cap is not None:
        scores = torch.tanh(scores / call.cap).mul_(call.cap)
    if call.bias is not None:
        scores.add_(call.bias[:, rows, cols].float())
    if allowed is not None and _only_causal(call):  # the forbidden cells lie in the last r columns: fill those
        r = rows.stop - rows.start
        scores[..., -r:].masked_fill_(~allowed[..., -r:], FLOOR)
    elif allowed is not None:
        scores.masked_fill_(~allowed, FLOOR)
    return scores


def _only_causal(call: AttentionCall) -> bool:
    """Whether a causal rule is a call's only rule: no mask, key mask or window."""
    return call.causal and call.mask is None and call.key_mask is None and call.window is None
