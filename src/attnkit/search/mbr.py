"""Minimum Bayes risk (MBR) selection among a beam's outputs.

Beam search returns the output the model finds most probable; MBR returns the one expected
to score best. Each candidate's expected utility is its mean sentence BLEU against the other
candidates, which stand in for references the model could have produced (Kumar & Byrne 2004,
over an N-best list; every candidate weighs the same). The winner is the consensus: the output
that shares most with the rest of the list.

BLEU here is sacreBLEU's sentence BLEU (13a tokenization, exponential smoothing, effective
order): the n-gram counts are computed once per candidate and BLEU's formula is sacreBLEU's own,
so every pair scores exactly as ``BLEU(effective_order=True).sentence_score`` would, at a
fraction of its cost (clipped n-gram matches are symmetric, so each pair is counted once).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

MAX_ORDER = 4


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer13a:
    return Tokenizer13a()


def _ngrams(text: str) -> tuple[int, list[Counter]]:
    """(word count, n-gram counts of orders 1..4) of ``text`` after 13a tokenization."""
    words = _tokenizer()(text).split()
    return len(words), [
        Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1)) for n in range(1, MAX_ORDER + 1)
    ]


def _bleu(length: int, ref_length: int, matches: list[int]) -> float:
    totals = [max(0, length - n) for n in range(MAX_ORDER)]
    return BLEU.compute_bleu(matches, totals, length, ref_length, smooth_method="exp", effective_order=True).score


def pairwise_bleu(texts: Sequence[str]) -> list[list[float]]:
    """BLEU of ``texts[i]`` against ``texts[j]`` as the reference, for every i != j (0 on the
    diagonal): sacreBLEU's sentence BLEU with ``effective_order=True``."""
    stats = [_ngrams(t) for t in texts]
    n = len(texts)
    scores = [[0.0] * n for _ in range(n)]
    for i in range(n):
        len_i, grams_i = stats[i]
        for j in range(i + 1, n):
            len_j, grams_j = stats[j]
            matches = []
            for a, b in zip(grams_i, grams_j):
                small, large = (a, b) if len(a) <= len(b) else (b, a)
                matches.append(sum(min(count, large[g]) for g, count in small.items() if g in large))
            scores[i][j] = _bleu(len_i, len_j, matches)
            scores[j][i] = _bleu(len_j, len_i, matches)
    return scores


def mbr_order(texts: Sequence[str]) -> list[tuple[int, float]]:
    """(index, expected BLEU) of each of ``texts``, best first: its mean sentence BLEU against the
    others as references. Ties keep the given order (the model's ranking). One text: [(0, 0.0)]."""
    if not texts:
        return []
    others = max(1, len(texts) - 1)
    utility = [sum(row) / others for row in pairwise_bleu(texts)]
    return sorted(((i, u) for i, u in enumerate(utility)), key=lambda iu: -iu[1])
