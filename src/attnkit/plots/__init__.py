"""Figures. Every function takes arrays (and labels) and returns a matplotlib Figure;
nothing here touches pyplot or global matplotlib state."""

from .attention import plot_alignment, readable
from .positions import plot_positional_encoding

__all__ = ["plot_alignment", "plot_positional_encoding", "readable"]
