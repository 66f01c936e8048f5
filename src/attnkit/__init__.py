"""attnkit: attention mechanisms, attention models, and tools that show what attention does.

``attnkit.load(NAME_OR_DIR)`` opens any model it reads (an installed or trained attnkit model,
a pretrained package, a Hugging Face model directory) as one ``LoadedModel``."""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .loaded import LoadedModel, load

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``load`` and ``LoadedModel`` are imported when first used: ``import attnkit`` stays light."""
    if name in ("load", "LoadedModel"):
        from . import loaded

        return getattr(loaded, name)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")


__all__ = [
    "ALiBi",
    "AttentionOutput",
    "FourierPositions",
    "GlobalAttention",
    "KVCache",
    "LearnedPositionalEmbedding",
    "LoadedModel",
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
    "load",
]
