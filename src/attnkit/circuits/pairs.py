"""Contrastive inputs and the metrics read from them.

A ``Pair`` is a clean text and a corrupted one of the same length in tokens, an answer (the
token the clean text should make the model write next) and a foil (the one the corruption
favours). A translator's pair also holds ``target``, the output so far: the answer is the token
after it. Pairs come from a file (``read_pairs``: JSON lines) or are built for the model's
tokenizer: ``repeated_pairs`` (a random sequence repeated, its first copy replaced in the
corrupted text: the induction task) and ``name_swap_pairs`` (sentences in the manner of Wang et
al. 2022's indirect-object identification, the repeated name swapped).

Metrics are read from the logits at the last position: ``logit_diff`` (answer minus foil),
``prob`` (the answer's probability) and ``loss`` (minus its log-probability). Causal effects are
reported normalised: 0 is the corrupted run, 1 the clean one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

FIELDS = ("clean", "corrupt", "answer", "foil")


@dataclass(frozen=True)
class Pair:
    """A clean and a corrupted text, the answer the clean one should give and the foil the
    corrupted one favours; ``target``: a translator's output so far (the answer is its next token)."""

    clean: str
    corrupt: str
    answer: str
    foil: str
    target: str | None = None


def _logit_diff(logits: Tensor, answer: int, foil: int) -> Tensor:
    return logits[answer] - logits[foil]


def _prob(logits: Tensor, answer: int, foil: int) -> Tensor:
    return torch.softmax(logits.float(), -1)[answer]


def _loss(logits: Tensor, answer: int, foil: int) -> Tensor:
    return -torch.log_softmax(logits.float(), -1)[answer]


# metric(last position's logits (V,), answer id, foil id) -> a scalar
METRICS: dict[str, Callable[[Tensor, int, int], Tensor]] = {
    "logit_diff": _logit_diff,
    "prob": _prob,
    "loss": _loss,
}


def answer_token(model: Any, verb: str) -> Callable[[str], int]:
    """The model's answer-token reader; one line for a model that writes no tokens (``verb``: what
    the caller would do with its logits)."""
    token = getattr(model, "answer_token", None)
    if token is None:
        raise ValueError(f"{model.name} is {model.capabilities.a}: it writes no tokens, so it has no logits to {verb}")
    return token


def metric_of(name: str) -> Callable[[Tensor, int, int], Tensor]:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; choose from {', '.join(METRICS)}")
    return METRICS[name]


def read_pairs(path: str | Path) -> list[Pair]:
    """Pairs from a file of JSON lines, each {"clean", "corrupt", "answer", "foil"} and, for a
    translator, "target"; one line naming the line and what is wrong with it."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ValueError(f"{path}: cannot read the pairs ({err.strerror or err})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n}: not JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: a pair is an object with {', '.join(FIELDS)}")
        missing = [f for f in FIELDS if not isinstance(row.get(f), str) or not row[f]]
        extra = sorted(set(row) - {*FIELDS, "target"})
        if missing or extra:
            what = f"no {', '.join(missing)}" if missing else f"unknown field {', '.join(extra)}"
            raise ValueError(f"{path}:{n}: {what} (a pair has {', '.join(FIELDS)} and, for a translator, target)")
        if row.get("target") is not None and not isinstance(row["target"], str):
            raise ValueError(f"{path}:{n}: target is text")
        out.append(Pair(row["clean"], row["corrupt"], row["answer"], row["foil"], row.get("target")))
    if not out:
        raise ValueError(f"{path}: no pairs")
    return out


def _single_words(model: Any, words: list[str]) -> list[str]:
    """The words (each with its leading space, as it follows another word) that are one token to
    the model, in order."""
    out = []
    for w in words:
        try:
            model.answer_token(" " + w)
        except ValueError:
            continue
        out.append(w)
    return out


def _vocabulary_words(model: Any, rng: random.Random, want: int) -> list[str]:
    """Up to ``want`` alphabetic words of the model's vocabulary that are one token each."""
    pool = sorted({p.lstrip("Ġ▁") for p in model.input_pieces() if p.lstrip("Ġ▁").isalpha()})
    rng.shuffle(pool)
    out: list[str] = []
    for start in range(0, len(pool), want):
        out += _single_words(model, pool[start : start + want])
        if len(out) >= want:
            break
    return out[:want]


def repeated_pairs(
    model: Any, words: list[str] | None = None, n: int = 8, *, length: int = 10, seed: int = 0
) -> list[Pair]:
    """The induction task: ``length`` random words (one token each to the model; from ``words``,
    else from its vocabulary) then the same words again, cut before one of them (the answer: the
    word after the previous copy of the last one). The corrupted text replaces the first copy by
    other words, so nothing earlier says what comes next; its foil is the word the corrupted
    first copy has in the answer's place."""
    rng = random.Random(seed)
    vocab = _single_words(model, words) if words is not None else _vocabulary_words(model, rng, 8 * length)
    if len(vocab) < 2 * length:
        raise ValueError(f"repeated pairs of {length} words need {2 * length} one-token words; {len(vocab)} are")
    out = []
    for _ in range(n):
        picked = rng.sample(vocab, 2 * length)
        first, other = picked[:length], picked[length:]
        cut = rng.randint(length // 2, length - 1)  # the repeat runs to word ``cut`` - 1; the answer is word ``cut``
        repeat = first[:cut]
        out.append(
            Pair(
                " ".join(first + repeat),
                " ".join(other + repeat),
                " " + first[cut],
                " " + other[cut],
            )
        )
    return out


NAMES = ["Mary", "John", "Tom", "James", "Anna", "Paul", "Sarah", "David", "Lisa", "Mark", "Emma", "Peter"]
PLACES = ["store", "park", "school", "garden", "station", "market"]
OBJECTS = ["drink", "book", "ball", "letter", "gift", "key"]
TEMPLATES = [
    "When {a} and {b} went to the {place}, {s} gave a {obj} to",
    "After {a} and {b} met at the {place}, {s} handed a {obj} to",
    "Then {a} and {b} were at the {place}, and {s} passed a {obj} to",
]


def name_swap_pairs(model: Any, n: int = 8, *, seed: int = 0) -> list[Pair]:
    """Sentences in the manner of Wang et al. 2022's indirect-object identification: "When Mary
    and John went to the store, John gave a drink to" (answer " Mary", foil " John"). The
    corrupted text names the other one as the giver, so the answer and the foil trade places."""
    names = _single_words(model, NAMES)
    if len(names) < 2:
        raise ValueError(f"name-swapped pairs need two names of one token each; {model.name} has {len(names)}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        io, s = rng.sample(names, 2)
        a, b = (io, s) if rng.random() < 0.5 else (s, io)
        parts = {"a": a, "b": b, "place": rng.choice(PLACES), "obj": rng.choice(OBJECTS)}
        template = rng.choice(TEMPLATES)
        out.append(Pair(template.format(s=s, **parts), template.format(s=io, **parts), " " + io, " " + s))
    return out
