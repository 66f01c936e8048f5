"""Search: from a trained model to output tokens. Greedy and beam search use only
the model interface (encode, init_state, decode_step, state.reorder)."""

from .beam import beam_search
from .greedy import greedy_search
from .hypotheses import PENALTIES, Hypothesis, SearchResult, length_penalty

__all__ = ["PENALTIES", "Hypothesis", "SearchResult", "beam_search", "greedy_search", "length_penalty"]
