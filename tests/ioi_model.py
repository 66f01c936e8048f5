"""A model with a known answer to find: a tiny Llama (``induction_model``'s width) trained on an
indirect-object task in the manner of Wang et al. 2022, over ``tiny_hf``'s words:

    the A f f the B f f f the S f f the    ->  the name of A and B that S is not

Two names, then one of them again (the subject, S) after random fillers of random lengths, then
the end: the answer is the other name (the indirect object, IO). No position or single word
says which one: the model has to see which name came twice, so the heads that answer must read
it from the end; which heads do is found, not told."""

from __future__ import annotations

import random
from pathlib import Path

import induction_model

NAMES = ["man", "woman", "child", "dog", "car", "house", "ball", "city"]
FILLERS = ["red", "blue", "green", "yellow", "black", "white", "big", "small", "runs", "is", "on", "in", "water"]


def sentence(rng: random.Random, *, names: tuple[str, str] | None = None, subject: int | None = None) -> list[str]:
    """One sentence (its words, ending before the answer) and, as its last word, the answer."""
    a, b = names or rng.sample(NAMES, 2)
    s = [a, b][subject if subject is not None else rng.randint(0, 1)]
    io = b if s == a else a
    fill = lambda: [rng.choice(FILLERS) for _ in range(rng.randint(1, 3))]
    return ["the", a, *fill(), "the", b, *fill(), "the", s, *fill(), "the", io]


def training_sequence(rng: random.Random) -> list[str]:
    """Sentences one after another, to the training length."""
    words: list[str] = []
    while len(words) < induction_model.LENGTH:
        words += sentence(rng) + ["."]
    return words[: induction_model.LENGTH]


def pairs(n: int, seed: int = 0) -> list[tuple[str, str, str, str]]:
    """(clean, corrupt, answer, foil): the same sentence with its subject the other name, so the
    answer and the foil trade places; the fillers the same."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        names = tuple(rng.sample(NAMES, 2))
        state = rng.getstate()
        clean = sentence(rng, names=names, subject=1)  # type: ignore[arg-type]
        rng.setstate(state)
        corrupt = sentence(rng, names=names, subject=0)  # type: ignore[arg-type]
        out.append((" ".join(clean[:-1]), " ".join(corrupt[:-1]), " " + clean[-1], " " + corrupt[-1]))
    return out


def train(path: Path, *, steps: int = 800) -> Path:
    return induction_model.train(path, steps=steps, sequence=training_sequence)
