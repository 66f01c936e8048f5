"""Search: from a trained model to output tokens. Greedy and beam search use only
the model interface (``models.Seq2SeqModel``), configured by one ``SearchOptions``;
``mbr_order`` ranks a beam's outputs by expected BLEU (minimum Bayes risk)."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .beam import beam_search
    from .greedy import greedy_search
    from .hypotheses import Hypothesis, SearchResult, length_penalty
    from .mbr import mbr_order
    from .options import PENALTIES, SearchOptions

exports(
    __name__,
    {
        "beam": ("beam_search",),
        "greedy": ("greedy_search",),
        "hypotheses": ("Hypothesis", "SearchResult", "length_penalty"),
        "mbr": ("mbr_order",),
        "options": ("PENALTIES", "SearchOptions"),
    },
)

__all__ = [
    "PENALTIES",
    "Hypothesis",
    "SearchOptions",
    "SearchResult",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "mbr_order",
]
