"""Attending: scores -> masked softmax -> weighted sum of values.

Shapes (one legend for the package): ``b`` batch, ``h`` heads, ``t`` queries
(target positions), ``s`` keys (source positions), ``d`` per-head or model
dimension. Masks are boolean, True = may attend, broadcastable to the scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor

from . import kernels
from .kernels import masked_softmax

__all__ = ["AttentionOutput", "attend", "dot_product_attention", "masked_softmax"]


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
            inputs, two matmuls and a softmax: see ``kernels.SMALL_CPU_SCORES``);
            with them an explicit path computes the same numbers. The rules are
            ``kernels.attention``'s, the one implementation of them.
    """
    context, weights = kernels.attention(
        q, k, v, mask, bias=bias, causal=causal, need_weights=need_weights, dropout=dropout if training else 0.0
    )
    return AttentionOutput(context, weights)
