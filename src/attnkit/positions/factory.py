"""``build_positions(name, ...)``: the one place a scheme name becomes a module."""

from __future__ import annotations

from ..errors import unknown_choice
from .alibi import ALiBi
from .base import AbsolutePositions, AttentionPositions
from .fourier import FourierPositions
from .learned import LearnedPositionalEmbedding
from .relative import RelativePositions
from .rotary import RotaryPositions
from .schemes import POSITION_SCHEMES
from .sinusoidal import SinusoidalPositionalEncoding
from .t5 import T5RelativeBias


def build_positions(
    name: str,
    *,
    d_model: int,
    num_heads: int,
    max_len: int = 1024,
    max_distance: int | None = None,
    causal: bool = False,
) -> AbsolutePositions | AttentionPositions | None:
    """Build a positional scheme by name; "none" gives None (no position information).

    ``max_distance`` is Shaw's clipping distance (default 16) or T5's largest
    bucketed distance (default 128); ``causal`` makes T5 buckets one-directional.
    """
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    head_dim = d_model // num_heads
    if name == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len)
    if name == "learned":
        return LearnedPositionalEmbedding(d_model, max_len)
    if name == "fourier":
        return FourierPositions(d_model, dims=1)
    if name == "relative":
        return RelativePositions(head_dim, max_distance or 16)
    if name == "t5":
        return T5RelativeBias(num_heads, max_distance=max_distance or 128, bidirectional=not causal)
    if name == "rope":
        return RotaryPositions(head_dim)
    if name == "alibi":
        return ALiBi(num_heads)
    if name == "none":
        return None
    raise unknown_choice("positional scheme", name, POSITION_SCHEMES)
