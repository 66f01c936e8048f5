"""Search: from a trained model to output tokens (greedy; beam search comes with issue 4)."""

from .greedy import Hypotheses, greedy_search

__all__ = ["Hypotheses", "greedy_search"]
