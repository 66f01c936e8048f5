"""Positional information: absolute (added to embeddings) and inside attention.

``build_positions(name, ...)`` (``factory``) is the one place a scheme name becomes a module.
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .alibi import ALiBi, alibi_slopes
    from .base import AbsolutePositions, AttentionPositions, as_positions
    from .factory import build_positions
    from .fourier import FourierPositions
    from .learned import LearnedPositionalEmbedding
    from .relative import RelativePositions
    from .rotary import RotaryPositions
    from .schemes import POSITION_ENCODINGS, POSITION_SCHEMES
    from .sinusoidal import SinusoidalPositionalEncoding, sinusoid_table
    from .t5 import T5RelativeBias, t5_bucket

exports(
    __name__,
    {
        "alibi": ("ALiBi", "alibi_slopes"),
        "base": ("AbsolutePositions", "AttentionPositions", "as_positions"),
        "factory": ("build_positions",),
        "fourier": ("FourierPositions",),
        "learned": ("LearnedPositionalEmbedding",),
        "relative": ("RelativePositions",),
        "rotary": ("RotaryPositions",),
        "schemes": ("POSITION_ENCODINGS", "POSITION_SCHEMES"),
        "sinusoidal": ("SinusoidalPositionalEncoding", "sinusoid_table"),
        "t5": ("T5RelativeBias", "t5_bucket"),
    },
)


__all__ = [
    "POSITION_ENCODINGS",
    "POSITION_SCHEMES",
    "ALiBi",
    "AbsolutePositions",
    "AttentionPositions",
    "FourierPositions",
    "LearnedPositionalEmbedding",
    "RelativePositions",
    "RotaryPositions",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "alibi_slopes",
    "as_positions",
    "build_positions",
    "sinusoid_table",
    "t5_bucket",
]
