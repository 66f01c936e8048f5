"""Inputs built for the head detectors, for any text model's tokenizer, from random words of its
own vocabulary (whole words it writes as one piece after a space; where it holds few, any token
it reads back alone), so that no model can predict them but by copying.

repeated   Olsson et al. 2022 and TransformerLens score induction heads on a random sequence
           repeated: n random words, then the same n again. In the repeat, an induction head
           attends to the word after the earlier copy of the current one (``induction``), and a
           model that copies predicts every word of it.
needle     Wu et al. 2024's needle in a haystack, teacher-forced: a haystack of filler (random
           words, or the words of a text given) with a needle of NEEDLE_WORDS words put in at a
           depth from near the start to near the end, then the needle again as the answer. The
           needle is random words; with a text, a run of its own words from elsewhere in it, so
           that it reads as the text does (a model trained on such text copies what it can
           read). A retrieval head attends, while the answer is written, to the needle's copy of
           the token being written (``retrieval``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

PROBES = ("repeated", "needle")
NEEDLE_WORDS = 10
DEFAULT_TOKENS = {"repeated": 100, "needle": 1024}  # TransformerLens' induction probe: 50 tokens, twice
SAMPLE = 64  # words measured to size a probe in tokens


def vocabulary_words(pieces: Iterable[str]) -> list[str]:
    """The whole lowercase words among a vocabulary's pieces: those marked as starting a word
    (SentencePiece's ``▁``, byte-level BPE's ``Ġ``) where the vocabulary marks word starts, else
    those not marked as continuing one (WordPiece's ``##``)."""
    pieces = list(pieces)
    starts = [p[1:] for p in pieces if p[:1] in ("▁", "Ġ")]
    found = starts if len(starts) > len(pieces) // 10 else [p for p in pieces if not p.startswith("##")]
    return sorted({w for w in found if len(w) >= 2 and w.isascii() and w.isalpha() and w.islower()})


def single_tokens(pieces: Iterable[str], count: Callable[[str], int], rng: random.Random, want: int = 512) -> list[str]:
    """Up to ``want`` of a vocabulary's pieces (word-start marks dropped; no special token, no
    space, no word continuation) that its tokenizer reads back as one token each, alone and after
    one another: what a probe may draw where the vocabulary holds few alphabetic words."""
    pool = sorted(
        {
            p.lstrip("▁Ġ")
            for p in pieces
            if not p.startswith("##") and not (p[:1] in "<[" and p[-1:] in ">]") and p.lstrip("▁Ġ").isprintable()
        }
        - {""}
    )
    pool = [p for p in pool if not any(c.isspace() for c in p)]
    rng.shuffle(pool)
    pool = pool[: 4 * want]
    if not pool:
        return []
    counts = [count(p) for p in pool]
    one = max(set(counts), key=counts.count)  # a single token and the specials around it
    return [p for p, c in zip(pool, counts) if c == one and count(f"{p} {p}") == one + 1][:want]


def _per_token(words: list[str], count: Callable[[str], int], rng: random.Random) -> float:
    """Tokens per word of ``words`` to the model (``count``: a text's tokens, specials included)."""
    sample = rng.choices(words, k=SAMPLE)
    return max(0.25, (count(" ".join(sample)) - count(sample[0]) + 1) / (SAMPLE - 1))


def repeated(words: list[str], tokens: int, count: Callable[[str], int], inputs: int, seed: int = 0) -> list[str]:
    """``inputs`` texts of about ``tokens`` tokens: random words, then the same words again."""
    rng = random.Random(seed)
    n = max(2, round(tokens / 2 / _per_token(words, count, rng)))
    out = []
    for _ in range(inputs):
        half = rng.choices(words, k=n)
        out.append(" ".join(half + half))
    return out


def needle(
    words: list[str],
    tokens: int,
    count: Callable[[str], int],
    inputs: int,
    seed: int = 0,
    haystack: list[str] | None = None,
) -> list[str]:
    """``inputs`` texts of about ``tokens`` tokens: a haystack (random words, or ``haystack``'s
    words in order, repeated as needed) with a needle put in at depths spread from near its start
    to near its end, then the needle again. The needle: random words of ``words``; with a
    ``haystack`` longer than the haystack and the needle together, the NEEDLE_WORDS of it that
    follow the haystack's own."""
    rng = random.Random(seed)
    filler = haystack or words
    per = _per_token(filler, count, rng)
    size = max(1, round((tokens - 2 * NEEDLE_WORDS * _per_token(words, count, rng)) / per))
    out = []
    for n in range(inputs):
        hay = (
            rng.choices(filler, k=size)
            if haystack is None
            else [filler[(n * 7919 + i) % len(filler)] for i in range(size)]
        )
        start = n * 7919 + size
        own = haystack is not None and len(filler) > size + NEEDLE_WORDS
        pin = (
            [filler[(start + i) % len(filler)] for i in range(NEEDLE_WORDS)]
            if own
            else rng.choices(words, k=NEEDLE_WORDS)
        )
        at = round(size * (n + 0.5) / inputs)
        out.append(" ".join(hay[:at] + pin + hay[at:] + pin))
    return out


def probe_inputs(
    model, probe: str, *, tokens: int | None = None, inputs: int = 8, seed: int = 0, haystack: list[str] | None = None
) -> list[str]:
    """The ``probe``'s inputs for ``model`` (a loaded attnkit model): ``inputs`` texts of about
    ``tokens`` tokens each (default ``DEFAULT_TOKENS``); ``haystack``: the needle probe's filler
    words."""
    if probe not in PROBES:
        raise ValueError(f"unknown probe {probe!r}; choose from {', '.join(PROBES)}")
    pieces = model.input_pieces()
    words = vocabulary_words(pieces)
    if len(words) < 2 * NEEDLE_WORDS:  # a vocabulary of other tokens (t0 .. t255, symbols): any it reads back
        words = single_tokens(pieces, model.token_count, random.Random(seed))
    if len(words) < 2 * NEEDLE_WORDS:
        raise ValueError(
            f"{model.name}'s vocabulary has {len(words)} tokens that its tokenizer reads back alone: too few to draw "
            "a probe from"
        )
    size = tokens or DEFAULT_TOKENS[probe]
    if probe == "repeated":
        return repeated(words, size, model.token_count, inputs, seed)
    return needle(words, size, model.token_count, inputs, seed, haystack)
