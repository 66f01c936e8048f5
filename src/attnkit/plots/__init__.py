"""Figures. Every function takes arrays (and labels) and returns a matplotlib Figure;
nothing here touches pyplot or global matplotlib state."""

from .attention import plot_alignment, plot_attention_grid, plot_attention_steps
from .positions import (
    plot_positional_encoding,
    plot_relative_index,
    plot_rotary,
    plot_score_bias,
)

__all__ = [
    "plot_alignment",
    "plot_attention_grid",
    "plot_attention_steps",
    "plot_positional_encoding",
    "plot_relative_index",
    "plot_rotary",
    "plot_score_bias",
]
