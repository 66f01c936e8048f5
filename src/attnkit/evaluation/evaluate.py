"""Translate a test set and score it: BLEU and chrF with signatures, and decoding speed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import BLEU_TOKENIZERS, DETOKENIZE_LANGS
from ..data import Tokenizer
from ..inference.translate import Rerankers, Reverse, RightToLeft, translate
from ..models.interface import Seq2SeqModel
from ..search import SearchOptions
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
    model: Seq2SeqModel | Sequence[Seq2SeqModel],
    tok: Tokenizer,
    sources: list[str],
    references: list[str],
    options: SearchOptions | None = None,
    *,
    batch_tokens: int = 4096,
    tokenize: str = "13a",
    lowercase: bool = False,
    detokenize_lang: str | None = None,
    max_src_len: int | None = None,
    workers: int | None = None,
    rerankers: Rerankers | None = None,
) -> Evaluation:
    """Translate ``sources`` and score against ``references`` (one per source).

    tokenize/lowercase are sacreBLEU's options: ``tokenize="none"`` for text that
    is already tokenized (Multi30k tok files, comparable to published figures),
    the default 13a for raw text. ``detokenize_lang`` Moses-detokenizes the outputs first.
    ``options``, ``workers`` and ``rerankers``: see ``translate``. Every setting is checked before any
    sentence is translated.
    """
    if tokenize not in BLEU_TOKENIZERS:
        raise ValueError(f"unknown sacreBLEU tokenizer {tokenize!r}; choose from {', '.join(BLEU_TOKENIZERS)}")
    if detokenize_lang is not None and detokenize_lang not in DETOKENIZE_LANGS:
        raise ValueError(
            f"cannot Moses-detokenize language {detokenize_lang!r}; choose from {', '.join(DETOKENIZE_LANGS)}"
        )
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source lines but {len(references)} reference lines")
    if not sources:
        raise ValueError("nothing to evaluate: the source file is empty")
    start = time.perf_counter()
    found = translate(
        model,
        tok,
        sources,
        options,
        batch_tokens=batch_tokens,
        max_src_len=max_src_len,
        workers=workers,
        rerankers=rerankers,
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


def evaluate_files(
    model_dir: str | Path,
    src: str | Path,
    ref: str | Path,
    options: SearchOptions | None = None,
    *,
    weights: dict | None = None,
    ensemble: Sequence[str | Path] = (),
    reverse: str | Path | Sequence[str | Path] | None = None,
    r2l: str | Path | Sequence[str | Path] | None = None,
    output: str | Path | None = None,
    batch_tokens: int = 4096,
    tokenize: str = "13a",
    lowercase: bool = False,
    detokenize_lang: str | None = None,
    workers: int | None = None,
) -> str:
    """`attnkit evaluate`: load a model directory (``weights``: ``load_model``'s keyword
    arguments), translate ``src``, score against ``ref``; write the translations to
    ``output`` (atomically) if given. ``ensemble``: more models, decoded together with the
    first; ``reverse``: the target -> source model (or models, an ensemble) that ``options.rerank``
    weighs, ``r2l`` the right-to-left model (or models) that ``options.rerank_r2l`` weighs (both
    loaded with the same ``weights``). Returns the report."""
    from ..atomic import write_text
    from ..data import read_lines
    from ..loading.model_dir import load_translators

    sources, references = read_lines(src), read_lines(ref)
    models, tok, limit = load_translators([model_dir, *ensemble], **(weights or {}))
    backward = Reverse.load(reverse, **(weights or {})) if reverse is not None else None
    other_way = RightToLeft.load(r2l, **(weights or {})) if r2l is not None else None
    result = evaluate(
        models,
        tok,
        sources,
        references,
        options,
        batch_tokens=batch_tokens,
        tokenize=tokenize,
        lowercase=lowercase,
        detokenize_lang=detokenize_lang,
        max_src_len=limit,
        workers=workers,
        rerankers=Rerankers(backward, other_way),
    )
    if output:
        write_text(output, "\n".join(result.hypotheses) + "\n")
    return result.report()
