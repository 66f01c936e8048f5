"""Attending: scores -> masked softmax -> weighted sum of values.

Shapes (one legend for the package): ``b`` batch, ``h`` heads, ``t`` queries
(target positions), ``s`` keys (source positions), ``d`` per-head or model
dimension. Masks are boolean, True = may attend, broadcastable to the scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import causal_mask
from .scores import scaled_dot


@dataclass(slots=True)
class AttentionOutput:
    """What an attention call returns.

    context: (..., t, d_v) the weighted sums of the values.
    weights: (..., t, s) the attention weights, or None when not requested.
    tap: the weights the values were mixed with, in the autograd graph (a step-by-step
    attention's, which a decoder hands on to its site: ``attention.sites.Tap``).
    """

    context: Tensor
    weights: Tensor | None = None
    tap: Any = None


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


def attend(
    scores: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    *,
    dropout: float = 0.0,
    training: bool = False,
) -> AttentionOutput:
    """One attend step: masked softmax of ``scores`` (..., t, s), then mix ``values`` (..., s, d_v).

    Dropout, when asked, is applied to the weights used for mixing; the
    returned weights are the ones before dropout (what the model "looks at").
    """
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError(f"scores have {scores.shape[-1]} keys but values have {values.shape[-2]} positions")
    weights = masked_softmax(scores, mask)
    mixing = F.dropout(weights, dropout, training) if dropout > 0.0 and training else weights
    return AttentionOutput(context=mixing @ values, weights=weights)


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


def dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    bias: Tensor | None = None,
    causal: bool = False,
    need_weights: bool = False,
    dropout: float = 0.0,
    training: bool = False,
) -> AttentionOutput:
    """Vaswani et al. 2017, eq. 1: softmax(Q K^T / sqrt(d_k) + bias) V.

    Args:
        q: (b, h, t, d); k: (b, h, s, d); v: (b, h, s, d_v).
        mask: bool, broadcastable to (b, h, t, s), True = may attend.
        bias: float, broadcastable to (b, h, t, s), added to the scaled scores
            (ALiBi, T5 buckets, relative keys).
        causal: also forbid keys after the query (bottom-right aligned, so it
            is right for a query block at the end of a cached sequence).
        need_weights: return (b, h, t, s) weights. Without them the fused
            ``F.scaled_dot_product_attention`` kernel runs (on CPU, for short
            inputs, two matmuls and a softmax: see ``SMALL_CPU_SCORES``); with
            them an explicit path computes the same numbers.
    """
    t, s = q.shape[-2], k.shape[-2]
    p = dropout if training else 0.0
    # one query per row (incremental decoding) has linear memory whatever s: always two matmuls
    small_cpu = q.is_cpu and not need_weights and (t * s <= SMALL_CPU_SCORES or t == 1)
    if causal:
        if mask is None and bias is None and t == s and not (need_weights or small_cpu):
            return AttentionOutput(F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True))
        causal_m = causal_mask(t, s, device=q.device)
        mask = causal_m if mask is None else mask & causal_m
    if small_cpu:
        return AttentionOutput(_small_cpu_attention(q, k, v, mask, bias, p))

    if not need_weights:
        attn_mask: Tensor | None = mask
        if bias is not None:
            attn_mask = bias.to(q.dtype) if mask is None else bias.to(q.dtype).masked_fill(~mask, float("-inf"))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        if mask is not None and not q.is_cpu:
            # CPU kernels return 0 for a query with no visible key; make every backend agree.
            context = context * mask.any(-1, keepdim=True).to(context.dtype)
        return AttentionOutput(context)

    scores = scaled_dot(q, k)  # (b, h, t, s)
    if bias is not None:
        scores = scores + bias
    return attend(scores, v, mask, dropout=p, training=training)
