"""Search: from a trained model to output tokens. Greedy and beam search use only
the model interface (``models.Seq2SeqModel``), configured by one ``SearchOptions``."""

from .beam import beam_search
from .greedy import greedy_search
from .hypotheses import PENALTIES, Hypothesis, SearchResult, length_penalty
from .options import SearchOptions

__all__ = ["PENALTIES", "Hypothesis", "SearchOptions", "SearchResult", "beam_search", "greedy_search", "length_penalty"]
