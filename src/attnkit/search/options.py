"""How to search: one settings object carried from the command line to beam search."""

from __future__ import annotations

import math
from dataclasses import dataclass

# How beam search ranks finished hypotheses of different lengths: score = log P(Y) / lp(|Y|),
# |Y| counting the EOS token. Each style with its customary alpha (used when none is given).
PENALTIES: dict[str, float] = {
    "fairseq": 1.0,  # lp = |Y|^alpha, fairseq's --lenpen (default 1: mean log-probability per token)
    "gnmt": 0.6,  # lp = ((5 + |Y|) / 6)^alpha, Wu et al. 2016 (GNMT), eq. 14
}


@dataclass(frozen=True)
class SearchOptions:
    """Decoding settings, checked once when made.

    beam: hypotheses kept per sentence (1 with ``n_best`` 1: greedy search).
    n_best: outputs returned per sentence, best first (at most ``beam``).
    penalty, alpha: how finished hypotheses of different lengths are ranked,
        log P(Y) / lp(|Y|) (``hypotheses.PENALTIES``); alpha None = the style's default
        (fairseq's |Y|^1, as in the published Multi30k setup).
    max_len_ratio, max_len_extra: an output stops at ratio * source length + extra tokens.
    mbr: return, of the beam's ``beam`` finished outputs, the one with the highest expected
        BLEU against the others (minimum Bayes risk, ``search.mbr``) instead of the most
        probable; the n-best list comes in that order. Needs a beam of 2 or more.
    rerank: weight of a reverse model's opinion (``inference.translate.Reverse``): the beam's
        ``beam`` finished outputs are reranked by their score plus ``rerank`` times the reverse
        model's log P(source | output) per source token, and the n-best list comes in that order;
        0 = off. Needs a beam of 2 or more, and a reverse model where the search runs.
    rerank_r2l: the same for a right-to-left model's opinion (``inference.translate.RightToLeft``):
        plus ``rerank_r2l`` times its log P(output | source) per output token, the output read
        from its end. Both weights may be given; their terms add.
    """

    beam: int = 5
    n_best: int = 1
    penalty: str = "fairseq"
    alpha: float | None = None
    max_len_ratio: float = 1.5
    max_len_extra: int = 10
    mbr: bool = False
    rerank: float = 0.0
    rerank_r2l: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.beam, bool) or not isinstance(self.beam, int) or self.beam < 1:
            raise ValueError(f"beam size must be an integer >= 1, got {self.beam!r}")
        if not isinstance(self.n_best, int) or not 1 <= self.n_best <= self.beam:
            raise ValueError(f"n_best must be between 1 and the beam size {self.beam}, got {self.n_best!r}")
        if self.penalty not in PENALTIES:
            raise ValueError(f"unknown length penalty {self.penalty!r}; choose from {', '.join(PENALTIES)}")
        if self.alpha is not None and not float(self.alpha) >= 0:
            raise ValueError(f"length penalty alpha must be >= 0, got {self.alpha}")
        if not self.max_len_ratio >= 0:
            raise ValueError(f"max_len_ratio must be >= 0, got {self.max_len_ratio}")
        if not isinstance(self.max_len_extra, int) or self.max_len_extra < 1:
            raise ValueError(f"max_len_extra must be an integer >= 1, got {self.max_len_extra!r}")
        if self.mbr and self.beam < 2:
            raise ValueError("minimum Bayes risk chooses among the beam's outputs: it needs a beam of 2 or more")
        for weight, whose in ((self.rerank, "reverse"), (self.rerank_r2l, "right-to-left")):
            if isinstance(weight, bool) or not float(weight) >= 0 or not math.isfinite(weight):
                raise ValueError(f"the {whose} model's weight must be a number >= 0, got {weight!r}")
        if self.reranks and self.beam < 2:
            raise ValueError("reranking chooses among the beam's outputs: it needs a beam of 2 or more")
        if self.reranks and self.mbr:
            raise ValueError("choose one way to pick among the beam's outputs: minimum Bayes risk or reranking")

    @property
    def length_alpha(self) -> float:
        """alpha, or the penalty style's default when none was given."""
        return PENALTIES[self.penalty] if self.alpha is None else float(self.alpha)

    @property
    def reranks(self) -> bool:
        """Whether another model's opinion reorders the beam's outputs (``rerank``, ``rerank_r2l``)."""
        return bool(self.rerank or self.rerank_r2l)

    @property
    def greedy(self) -> bool:
        """One hypothesis, one output: greedy search gives the same result, faster."""
        return self.beam == 1 and self.n_best == 1

    @property
    def searched(self) -> int:
        """How many outputs per sentence the search itself returns: the whole beam for MBR."""
        return self.beam if self.mbr or self.reranks else self.n_best
