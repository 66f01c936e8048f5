"""attnkit: attention mechanisms, attention models, and tools that show what attention does."""

from .attention import (
    AttentionOutput,
    GlobalAttention,
    KVCache,
    LocalAttention,
    LocalAttentionOutput,
    MultiHeadAttention,
    attend,
    build_recurrent_attention,
    build_score,
    dot_product_attention,
)
from .positions import (
    ALiBi,
    FourierPositions,
    LearnedPositionalEmbedding,
    RelativePositions,
    RotaryPositions,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    build_positions,
)

__version__ = "0.1.0"

__all__ = [
    "ALiBi",
    "AttentionOutput",
    "FourierPositions",
    "GlobalAttention",
    "KVCache",
    "LearnedPositionalEmbedding",
    "LocalAttention",
    "LocalAttentionOutput",
    "MultiHeadAttention",
    "RelativePositions",
    "RotaryPositions",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "attend",
    "build_positions",
    "build_recurrent_attention",
    "build_score",
    "dot_product_attention",
]
