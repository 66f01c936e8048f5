"""Attention: score functions, the attend step, multi-head, global and local attention.

Shape legend used throughout attnkit:
    b  batch            t  query (target) positions    s  key (source) positions
    h  heads            d  feature size (per head inside multi-head attention)
Masks are boolean, True = may attend, broadcastable to (b, h, t, s).
"""

from .attend import AttentionOutput, attend, dot_product_attention, masked_softmax
from .masks import (
    as_attention_mask,
    causal_mask,
    combine,
    key_mask,
    padding_mask,
    window_mask,
)
from .multihead import KVCache, MultiHeadAttention
from .recurrent import (
    ATTENTION_TYPES,
    GlobalAttention,
    LocalAttention,
    LocalAttentionOutput,
    build_recurrent_attention,
)
from .scores import (
    SCORES,
    AdditiveScore,
    ConcatScore,
    DotScore,
    GeneralScore,
    ScaledDotScore,
    ScoreFunction,
    build_score,
    scaled_dot,
)

__all__ = [
    "ATTENTION_TYPES",
    "SCORES",
    "AdditiveScore",
    "AttentionOutput",
    "ConcatScore",
    "DotScore",
    "GeneralScore",
    "GlobalAttention",
    "KVCache",
    "LocalAttention",
    "LocalAttentionOutput",
    "MultiHeadAttention",
    "ScaledDotScore",
    "ScoreFunction",
    "as_attention_mask",
    "attend",
    "build_recurrent_attention",
    "build_score",
    "causal_mask",
    "combine",
    "dot_product_attention",
    "key_mask",
    "masked_softmax",
    "padding_mask",
    "scaled_dot",
    "window_mask",
]
