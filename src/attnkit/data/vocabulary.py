"""A word vocabulary for captions: whole words, no subwords (a caption's words name what
is in the image, so each must stay one token whose attention can be scored).

Ids as the subword tokenizer's: 0 pad, 1 unk, 2 bos, 3 eos, then the words in sorted
order. Saved as ``words.txt`` (one word per line) in the model directory.
"""

from __future__ import annotations

from pathlib import Path

from ..atomic import write_text
from .tokenizer import BOS, EOS, PAD, UNK

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # at ids PAD, UNK, BOS, EOS
FILE = "words.txt"
assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)


class WordVocabulary:
    """Target side of a captioning model: whitespace-separated words <-> ids."""

    joint = False

    def __init__(self, words: list[str]) -> None:
        if len(set(words)) != len(words) or any(not w or w.split() != [w] or w in SPECIALS for w in words):
            raise ValueError("vocabulary words must be distinct, non-empty, without spaces and not a special token")
        self.words = list(SPECIALS) + list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def from_captions(cls, captions: list[str]) -> WordVocabulary:
        return cls(sorted({w for c in captions for w in c.split()}))

    @property
    def tgt_vocab(self) -> int:
        return len(self.words)

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return [[self.ids.get(w, UNK) for w in line.split()] for line in lines]

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return [" ".join(self.tgt_pieces(row)) for row in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.words[i] if 0 <= i < len(self.words) else SPECIALS[UNK] for i in ids]

    def save(self, model_dir: str | Path) -> None:
        write_text(Path(model_dir) / FILE, "".join(w + "\n" for w in self.words[len(SPECIALS) :]))

    @classmethod
    def load(cls, model_dir: str | Path) -> WordVocabulary:
        path = Path(model_dir) / FILE
        if not path.is_file():
            raise FileNotFoundError(f"no caption vocabulary in {model_dir} (expected {FILE})")
        try:
            return cls(path.read_text(encoding="utf-8").split())
        except (UnicodeDecodeError, ValueError):
            raise ValueError(f"{path} is not a caption vocabulary (one distinct word per line)") from None
