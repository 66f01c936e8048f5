"""attnkit: attention mechanisms, attention models, and tools that show what attention does.

``attnkit.load(NAME_OR_DIR)`` opens any model it reads (an installed or trained attnkit model,
a pretrained package, a Hugging Face model directory) as one ``LoadedModel``."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from .loaded import LoadedModel, load
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

# each name's module: imported when the name is first used, so that ``import attnkit`` (and the
# command line's --help) does not wait for torch
_HOME = {
    **dict.fromkeys(
        ("AttentionOutput", "GlobalAttention", "KVCache", "LocalAttention", "LocalAttentionOutput",
         "MultiHeadAttention", "attend", "build_recurrent_attention", "build_score", "dot_product_attention"),
        "attention",
    ),
    **dict.fromkeys(
        ("ALiBi", "FourierPositions", "LearnedPositionalEmbedding", "RelativePositions", "RotaryPositions",
         "SinusoidalPositionalEncoding", "T5RelativeBias", "build_positions"),
        "positions",
    ),
    "load": "loaded",
    "LoadedModel": "loaded",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """The public names, each imported from its module when first used."""
    import importlib
    import importlib.util

    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)  # a subpackage: attnkit.attention.record, ...
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
