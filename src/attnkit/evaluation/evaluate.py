"""Translate a test set and score it: BLEU and chrF with signatures, and decoding speed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from torch import nn

from ..data import Tokenizer
from ..translate import translate
from .metrics import Score, bleu, chrf


@dataclass
class Evaluation:
    bleu: Score
    chrf: Score
    sentences: int
    seconds: float  # decoding wall time (tokenize -> search -> detokenize)
    hypotheses: list[str]

    @property
    def sentences_per_s(self) -> float:
        return self.sentences / self.seconds

    def report(self) -> str:
        return (
            f"{self.bleu}\n{self.chrf}\n"
            f"{self.sentences} sentences in {self.seconds:.2f} s = {self.sentences_per_s:.1f} sentences/s"
        )


def moses_detokenize(lines: list[str], lang: str) -> list[str]:
    """Undo Moses tokenization (for models trained on tokenized text, scored against raw text)."""
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split()) for line in lines]


def moses_tokenize_lc(lines: list[str], lang: str) -> list[str]:
    """Lowercase, normalise punctuation and Moses-tokenize: the preprocessing of the
    Multi30k tok files (it reproduces all 1,000 test_2016_flickr German references
    from the raw ones), so outputs of a model trained on raw text can be scored
    under the published tokenized-lowercased convention."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(normalizer.normalize(line.lower()), return_str=True, escape=True) for line in lines]


def evaluate(
    model: nn.Module,
    tok: Tokenizer,
    sources: list[str],
    references: list[str],
    *,
    beam: int = 5,
    alpha: float | None = None,
    penalty: str = "fairseq",
    batch_tokens: int = 4096,
    tokenize: str = "13a",
    lowercase: bool = False,
    detokenize_lang: str | None = None,
    max_src_len: int | None = None,
    workers: int | None = None,
) -> Evaluation:
    """Translate ``sources`` and score against ``references`` (one per source).

    tokenize/lowercase are sacreBLEU's options: ``tokenize="none"`` for text that
    is already tokenized (Multi30k tok files, comparable to published figures),
    the default 13a for raw text. ``detokenize_lang`` Moses-detokenizes the outputs first.
    ``workers``: decoding threads and ``penalty``/``alpha`` the length penalty, see ``translate``.
    """
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source lines but {len(references)} reference lines")
    if not sources:
        raise ValueError("nothing to evaluate: the source file is empty")
    start = time.perf_counter()
    found = translate(
        model, tok, sources, beam=beam, alpha=alpha, penalty=penalty, batch_tokens=batch_tokens, max_src_len=max_src_len,
        workers=workers,
    )
    outputs = [t.output for t in found]
    seconds = time.perf_counter() - start
    if detokenize_lang:
        outputs = moses_detokenize(outputs, detokenize_lang)
    return Evaluation(
        bleu=bleu(outputs, references, tokenize=tokenize, lowercase=lowercase),
        chrf=chrf(outputs, references),
        sentences=len(sources),
        seconds=seconds,
        hypotheses=outputs,
    )
