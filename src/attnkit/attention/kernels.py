"""Scaled dot-product attention's kernels: the one place its rules (causal alignment, masks,
biases, a query that sees no key) are implemented. ``attention`` is what attnkit's own models
run (training and decoding); ``fused``, ``fused_with_lse``, ``explicit`` and ``blockwise`` take
the scale and an additive term as transformers' families pass them, and record from them.

softmax(scale q k^T + additive) v, where ``additive`` holds a boolean mask as -inf where it
forbids a key and any additive bias (T5's buckets, ALiBi); ``causal``: key j is visible to
query i only if j <= i + (s - t) (bottom-right aligned, right for a block of queries at the
end of a cached sequence). ``fused`` runs PyTorch's fused kernels and keeps no weight;
``fused_with_lse`` also returns each query's log-sum-exp, as FlashAttention keeps it (Dao et
al. 2022, sec. 3.1), from which any weight is exact later; ``explicit`` forms the weights (in
the autograd graph). A query that sees no key gets output 0 and log-sum-exp -inf.

Two terms some families add, both exact here: a logit soft-cap (Gemma 2's
``attn_logit_softcapping``: each scaled score s becomes cap * tanh(s / cap) before the mask
and bias are added), for which ``blockwise`` runs a block of rows at a time, and a learned
sink (GPT-OSS's per-head logit in the softmax's denominator, a key with no value), for which
``with_sink`` rescales any kernel's output: the weights then sum to less than 1 and the
log-sum-exp counts the sink.

Shapes: q (b, h, t, d); k, v (b, h, s, d), key and value heads already repeated for grouped
queries (``groups``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import causal_mask
from .scores import scaled_dot

BLOCK = 1 << 22  # scores computed at once by a view on the CPU (16 MB in float32)
ON_ACCELERATOR = 16  # times more on a GPU (256 MB): fewer, larger kernels; small blocks spend the time launching


def block_size(device: torch.device) -> int:
    """How many scores a view computes at once on ``device``."""
    return BLOCK if device.type == "cpu" else BLOCK * ON_ACCELERATOR


def row_blocks(
    t: int, s: int, *, per_row: int, device: torch.device, causal: bool = False, rows: slice | None = None
) -> Iterator[tuple[slice, int]]:
    """The one blockwise walk over a map's queries that every statistic, overview, view and
    log-sum-exp takes: (a block of query rows, the keys any of them may see), at most
    ``block_size`` scores a block where a row costs ``per_row`` (its keys times the heads taken at
    once). A causal map's block sees keys up to its last row's i + s - t: past them every weight is
    exactly 0 and no score is formed. ``rows``: only those queries (default: all t)."""
    rows = rows or slice(0, t)
    step = max(1, block_size(device) // max(1, per_row))
    for a in range(rows.start, rows.stop, step):
        block = slice(a, min(rows.stop, a + step))
        yield block, max(1, min(s, block.stop + s - t)) if causal else s


def additive_term(mask: Tensor | None, bias: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """One term added to the scaled scores from a boolean mask (True = may attend: -inf where
    it forbids) and a bias, broadcast together; None when there is neither."""
    if mask is None:
        return None if bias is None else bias.to(dtype)
    floor = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return floor if bias is None else bias.to(dtype) + floor


def scaled(q: Tensor, k: Tensor, scale: float, cap: float | None = None) -> Tensor:
    """scale q k^T (..., t, s), soft-capped to cap * tanh(s / cap) where ``cap`` is given: the
    score every kernel and view starts from, before masks and biases."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    return s if cap is None else torch.tanh(s / cap) * cap


def _block_scores(
    q: Tensor, k: Tensor, rows: slice, scale: float, causal: bool, additive: Tensor | None, cap: float | None
) -> Tensor:
    """The scores of a block of query rows (b, h, r, s) in float32, every rule applied."""
    t, s = q.shape[-2], k.shape[-2]
    sc = scaled(q[..., rows, :].float(), k.float(), scale, cap)
    if additive is not None:
        sc = sc + (additive[..., rows, :] if additive.shape[-2] > 1 else additive).float()
    if causal:
        i = torch.arange(rows.start, rows.stop, device=q.device)[:, None] + (s - t)
        sc = sc.masked_fill(torch.arange(s, device=q.device)[None, :] > i, float("-inf"))
    return sc


def _lse_blockwise(
    q: Tensor, k: Tensor, scale: float, causal: bool, additive: Tensor | None, cap: float | None = None
) -> Tensor:
    """log sum_j exp(s_ij) (b, h, t) in float32, at most ``block_size`` scores per (b, h) at once."""
    b, h, t, _ = q.shape
    s = k.shape[-2]
    out = torch.empty(b, h, t, device=q.device)
    for block, _ in row_blocks(t, s, per_row=s, device=q.device):
        out[..., block] = torch.logsumexp(_block_scores(q, k, block, scale, causal, additive, cap), -1)
    return out


def blockwise(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    causal: bool = False,
    additive: Tensor | None = None,
    cap: float | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(scores) v and each query's log-sum-exp, a block of query rows at a time (at most
    ``block_size`` scores per (b, h) at once): for a score no fused kernel takes (a soft-cap).
    Weights are formed in float32, as the families' eager attention upcasts its softmax."""
    b, h, t, _ = q.shape
    s = k.shape[-2]
    out = q.new_empty(b, h, t, v.shape[-1])
    lse = torch.empty(b, h, t, device=q.device)
    for block, _ in row_blocks(t, s, per_row=s, device=q.device):
        sc = _block_scores(q, k, block, scale, causal, additive, cap)
        part = torch.logsumexp(sc, -1)
        w = torch.exp(sc - part[..., None]).nan_to_num_(0.0)  # a query that sees no key: 0
        out[..., block, :] = torch.matmul(w.to(v.dtype), v)
        lse[..., block] = part
    return out, lse


def sink_window_kept(i: Tensor, j: Tensor, sinks: int, window: int) -> Tensor:
    """Which keys a StreamingLLM cache holds for each query (Xiao et al. 2023, sec. 3.2): the first
    ``sinks`` keys and the ``window`` most recent ones up to the query. i (r, 1): the queries'
    positions among the keys (aligned as causal masks align them); j (1, c): the keys'. (r, c)."""
    return (j <= i) & ((j < sinks) | (j > i - window))


def sink_window(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    sinks: int,
    window: int,
    additive: Tensor | None = None,
    cap: float | None = None,
    sink: Tensor | None = None,
    rule_window: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Causal attention over the keys a StreamingLLM cache holds (``sink_window_kept``): (out (b, h,
    t, d_v), lse (b, h, t) float32). Only those keys are read, a block of query rows at a time,
    each block by the fused kernel with the block's mask (the scores formed only for a soft-cap),
    so the cost is t x (sinks + window), not t x s. Every rule of the call kept: ``additive`` (b|1,
    h|1, t, s), a soft-cap, a learned ``sink`` logit (broadcast to (b, h, t)) and a sliding window of
    its own (``rule_window``). Queries sit at the end of the keys (i' = i + s - t)."""
    b, h, t, _ = q.shape
    s = k.shape[-2]
    outs, lses = [], []
    step = max(1, block_size(q.device) // max(1, b * h * (sinks + window)))
    for a in range(0, t, step):
        rows = slice(a, min(t, a + step))
        first, last = a + s - t, rows.stop - 1 + s - t  # the block's first and last query among the keys
        lead = min(sinks, last + 1)
        near = max(lead, first - window + 1)
        cols = torch.cat([torch.arange(lead, device=q.device), torch.arange(near, last + 1, device=q.device)])
        i = torch.arange(first, last + 1, device=q.device)[:, None]
        kept = sink_window_kept(i, cols[None, :], sinks, window)
        if rule_window is not None:
            kept &= cols[None, :] > i - rule_window
        kb = torch.cat([k[..., :lead, :], k[..., near : last + 1, :]], -2)  # (b, h, c, d)
        vb = torch.cat([v[..., :lead, :], v[..., near : last + 1, :]], -2)
        term = torch.zeros(kept.shape, device=q.device).masked_fill_(~kept, float("-inf"))  # (r, c)
        if additive is not None:
            part = additive[..., rows, :] if additive.shape[-2] > 1 else additive
            term = part.index_select(-1, cols).float() + term
        if cap is None:
            out, lse = fused_with_lse(q[..., rows, :], kb, vb, scale=scale, additive=term)
        else:
            sc = scaled(q[..., rows, :].float(), kb.float(), scale, cap) + term
            lse = torch.logsumexp(sc, -1)
            w = torch.exp(sc - lse[..., None]).nan_to_num(0.0)  # a query that sees no key: 0 (not in place: autograd)
            out = torch.matmul(w.to(v.dtype), vb)
        outs.append(out)
        lses.append(lse.float())
    return with_sink(torch.cat(outs, -2), torch.cat(lses, -1), sink)


def with_sink(out: Tensor, lse: Tensor, sink: Tensor | None) -> tuple[Tensor, Tensor]:
    """A kernel's (out, lse) with a learned sink logit in each softmax's denominator (a key that
    attends to nothing): lse' = log(exp(lse) + exp(sink)) and out scaled by exp(lse - lse').
    ``sink`` broadcasts to lse (b, h, t): a logit per head (1, h, 1), or per query."""
    if sink is None:
        return out, lse
    total = torch.logaddexp(lse, sink.float())
    return out * torch.exp(lse - total)[..., None].to(out.dtype), total


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
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    causal: bool = False,
    additive: Tensor | None = None,
    cap: float | None = None,
    sink: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The textbook path, the weights formed (and kept in the autograd graph): (out, weights).
    ``sink`` (broadcast to (b, h, t)): a logit in each softmax's denominator, its weight dropped."""
    t, s = q.shape[-2], k.shape[-2]
    scores = scaled(q, k, scale, cap)
    if additive is not None:
        scores = scores + additive.to(scores.dtype)
    if causal:
        scores = scores.masked_fill(~causal_mask(t, s, device=q.device), float("-inf"))
    if sink is not None:
        column = sink.to(scores.dtype).expand(scores.shape[:-1])[..., None]
        weights = torch.softmax(torch.cat([scores, column], -1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    if not torch.isfinite(scores).any(-1).all():  # a query with no visible key: 0, not NaN
        weights = weights.nan_to_num(0.0)
    return torch.matmul(weights, v), weights


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last (key) dimension with masked keys getting weight exactly 0.

    A query whose keys are all masked gets all-zero weights, never NaN.
    (PyTorch's softmax accumulates half-precision inputs in float32 itself.)
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    blocked = ~mask
    weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    # exp(-inf) makes masked weights exactly 0; only rows with every key blocked
    # are NaN. Checking the (small, broadcast) mask first saves a full pass over
    # the weights on CPU; on accelerators we skip the check to avoid a host sync.
    if weights.is_cpu and bool(mask.any(-1).all()):
        return weights
    # masked_fill's backward drops those rows' gradient, so no NaN reaches the scores.
    return weights.masked_fill(blocked, 0.0)


# Up to this many scores per (batch, head) the CPU runs attention as two matmuls and a
# softmax (quadratic memory, but small): 1.3-2x faster than the flash kernel, forward
# plus backward, for the 10-130-token sentences of translation (measured at h=4, d=32),
# and about 2x at one query per row (incremental decoding). Longer inputs take the
# flash kernel, whose memory is linear in the length.
SMALL_CPU_SCORES = 128 * 128


def _small_cpu_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None, p: float) -> Tensor:
    """softmax(Q K^T / sqrt(d) + bias) V with the mask as an additive term built on its own
    (broadcast, small) shape, added to the (b, h, t, s) scores in place."""
    scores = scaled_dot(q, k)
    if bias is not None:
        scores = scores.add_(bias) if bias.dtype == scores.dtype else scores + bias
    if mask is not None:
        # a finite floor, not -inf: a query with every key masked stays finite (zeroed below)
        scores = scores.add_(
            torch.zeros(mask.shape, dtype=scores.dtype).masked_fill_(~mask, torch.finfo(scores.dtype).min)
        )
    weights = torch.softmax(scores, dim=-1)
    if p > 0.0:
        weights = F.dropout(weights, p, True)
    context = torch.matmul(weights, v)
    # as the CPU kernels: 0, not an average (eager skips the multiply when every query sees a key;
    # a compiled graph always multiplies, since a data-dependent branch would break the graph)
    if mask is not None and (torch.compiler.is_compiling() or not bool(mask.any(-1).all())):
        context = context * mask.any(-1, keepdim=True).to(context.dtype)
    return context


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    bias: Tensor | None = None,
    causal: bool = False,
    need_weights: bool = False,
    dropout: float = 0.0,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q K^T / sqrt(d_k) + bias) V under a boolean ``mask`` (True = may attend) and the
    ``causal`` rule, with ``dropout`` on the weights that mix (training): (context, the weights
    before dropout where ``need_weights``, else None). The kernel a model's own attention runs:
    short inputs on the CPU as two matmuls and a softmax, else PyTorch's fused kernel, the
    weights formed only when asked. A query with no visible key gets 0 on every path."""
    t, s = q.shape[-2], k.shape[-2]
    p = dropout
    # one query per row (incremental decoding) has linear memory whatever s: always two matmuls
    small_cpu = q.is_cpu and not need_weights and (t * s <= SMALL_CPU_SCORES or t == 1)
    if causal:
        if mask is None and bias is None and t == s and not (need_weights or small_cpu):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True), None
        causal_m = causal_mask(t, s, device=q.device)
        mask = causal_m if mask is None else mask & causal_m
    if small_cpu:
        return _small_cpu_attention(q, k, v, mask, bias, p), None

    if not need_weights:
        attn_mask: Tensor | None = mask
        if bias is not None:
            attn_mask = bias.to(q.dtype) if mask is None else bias.to(q.dtype).masked_fill(~mask, float("-inf"))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        if mask is not None and not q.is_cpu:
            # CPU kernels return 0 for a query with no visible key; make every backend agree.
            context = context * mask.any(-1, keepdim=True).to(context.dtype)
        return context, None

    scores = scaled_dot(q, k)  # (b, h, t, s)
    if bias is not None:
        scores = scores + bias
    weights = masked_softmax(scores, mask)
    mixing = F.dropout(weights, p, True) if p > 0.0 else weights
    return mixing @ v, weights


def groups(x: Tensor, heads: int) -> Tensor:
    """Key or value heads (b, h_kv, s, d) repeated for ``heads`` query heads (grouped-query attention)."""
    n = heads // x.shape[1]
    return x if n == 1 else x.repeat_interleave(n, dim=1)
