"""Translate sentences with a trained model: tokenize -> batch -> search -> detokenize,
keeping each output's cross-attention (alignment) when asked.

On a CPU with several intra-op threads, the sentences are dealt to as many worker
threads, each decoding its share with single-threaded operations: decoding runs
many small operations per step, which parallelise worse inside one operation
than across independent batches (beam 5 over the Multi30k test set: 1.2x on 2
cores, BENCHMARKS.md; not yet measured on many-core machines, where ``workers``
sets the count). Outputs do not depend on it: batched decoding equals one-by-one
decoding.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch

from ..atomic import write_text
from ..data import Tokenizer, collate, inference_batches
from ..data.text import decode_lines, read_lines
from ..data.tokenizer import EOS_LABEL
from ..models.interface import Seq2SeqModel
from ..search import SearchOptions, beam_search, greedy_search, mbr_order
from ..search.beam import ensemble_members
from .score import score_pairs

MIN_SENTENCES_PER_WORKER = 32  # below this many sentences per worker thread, decode in fewer threads


R = TypeVar("R", bound="Reranker")


@dataclass(frozen=True)
class Reranker:
    """A model (or several, one vocabulary, scored as an ensemble) and its tokenizer, which gives
    each of a beam's outputs a second opinion: its mean log probability per token of one side of
    the pair given the other (``per_token``). ``Reverse`` and ``RightToLeft`` say which."""

    model: Seq2SeqModel | Sequence[Seq2SeqModel]
    tok: Tokenizer
    source_given_output: ClassVar[bool] = False  # True: the source is the scored side

    @classmethod
    def load(cls: type[R], paths: str | Path | Sequence[str | Path], **weights: Any) -> R:
        """The model(s) at ``paths`` (directories or installed names; several share one vocabulary
        and score as an ensemble), loaded with ``load_model``'s ``weights`` arguments."""
        from ..loading.model_dir import load_translators

        listed = [paths] if isinstance(paths, (str, Path)) else list(paths)
        models, tok, _ = load_translators(listed, **weights)
        cls.check(listed[0], tok)
        return cls(models if len(models) > 1 else models[0], tok)

    @classmethod
    def check(cls, path: str | Path, tok: Tokenizer) -> None:
        """Refuse a model that cannot give this opinion (every translator can, unless said)."""

    def per_token(self, sources: list[str], outputs: list[list[str]]) -> list[np.ndarray]:
        """For each of each source's outputs, ``score_pairs``' log probability of the scored side
        (the output, or the source when ``source_given_output``) per token (its subwords + 1)."""
        flat = [out for texts in outputs for out in texts]
        repeated = [src for src, texts in zip(sources, outputs) for _ in texts]
        pairs = (flat, repeated) if self.source_given_output else (repeated, flat)
        per_token = score_pairs(self.model, self.tok, *pairs).per_token
        return np.split(per_token, np.cumsum([len(texts) for texts in outputs])[:-1])


@dataclass(frozen=True)
class Reverse(Reranker):
    """A model of the opposite direction (German -> English for an English -> German
    translator), which reranks a beam's outputs (``SearchOptions.rerank``) by how probable it
    finds the source given each of them, log P(source | output) per source token: an output that
    leaves part of the source untranslated, or adds what the source does not say, explains the
    source badly."""

    source_given_output: ClassVar[bool] = True


@dataclass(frozen=True)
class RightToLeft(Reranker):
    """A model of the same direction that writes its output from the end (trained with
    ``tokenizer.right_to_left``), which reranks a beam's outputs (``SearchOptions.rerank_r2l``)
    by how probable it finds each of them read in the other order, log P(output | source) per
    output token: a left-to-right search commits to a sentence's start before it sees its end,
    and the other order judges the ends it chose (Sennrich et al. 2016, "Edinburgh Neural
    Machine Translation Systems for WMT 16")."""

    @classmethod
    def check(cls, path: str | Path, tok: Tokenizer) -> None:
        if not tok.right_to_left:
            raise ValueError(
                f"{path} writes left to right: a right-to-left reranker is a model trained with "
                "tokenizer.right_to_left=true"
            )


@dataclass(frozen=True)
class Rerankers:
    """The models a search's outputs are reranked by: ``reverse`` weighed by
    ``SearchOptions.rerank``, ``r2l`` by ``SearchOptions.rerank_r2l``. Each output's score is then
    the beam's score + rerank x the reverse score + rerank_r2l x the right-to-left score."""

    reverse: Reverse | None = None
    r2l: RightToLeft | None = None

    def check(self, options: SearchOptions) -> None:
        if options.rerank and self.reverse is None:
            raise ValueError("reranking needs a reverse model (target -> source language)")
        if options.rerank_r2l and self.r2l is None:
            raise ValueError("right-to-left reranking needs a right-to-left model (tokenizer.right_to_left)")

    def rescore(
        self, options: SearchOptions, sources: list[str], outputs: list[list[str]], scores: list[list[float]]
    ) -> list[list[float]]:
        """Each source's outputs' ``scores`` with the weighed rerankers' per-token scores added."""
        for weight, reranker in ((options.rerank, self.reverse), (options.rerank_r2l, self.r2l)):
            if weight and reranker is not None:
                opinion = reranker.per_token(sources, outputs)
                scores = [(np.array(s) + weight * b).tolist() for s, b in zip(scores, opinion)]
        return scores


def _order(options: SearchOptions, texts: list[str], score: list[float]) -> list[int]:
    """The order a source's n-best outputs are returned in: MBR's consensus first, then by expected
    BLEU; reranked by score (ties keep the beam's order); or the beam's own."""
    if options.mbr:
        return [j for j, _ in mbr_order(texts)][: options.n_best]
    if options.reranks:
        return sorted(range(len(texts)), key=lambda j: -score[j])[: options.n_best]
    return list(range(len(texts)))


def _workers(workers: int | None, device: torch.device, sentences: int) -> int:
    """Decoding threads: ``workers`` checked, or by default one per intra-op thread on CPU with at
    least ``MIN_SENTENCES_PER_WORKER`` sentences each."""
    if workers is None:
        workers = torch.get_num_threads() if device.type == "cpu" else 1
        return max(1, min(workers, sentences // MIN_SENTENCES_PER_WORKER))
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers > 1 and device.type != "cpu":
        raise ValueError(f"workers > 1 is for CPU decoding; the model is on {device}")
    return workers


@dataclass
class Translation:
    """One output. ``alignment`` is (layers, heads, t, s) over ``out_pieces`` x ``src_pieces``
    (the source ends in </s>; the output too unless it hit the length limit);
    ``p_t`` the local-attention window centres (t,), if any. ``nbest`` holds
    (text, score) of the alternatives, best first, when more than one was asked for."""

    source: str
    output: str
    score: float
    src_pieces: list[str]
    out_pieces: list[str]
    alignment: np.ndarray | None = None
    p_t: np.ndarray | None = None
    nbest: list[tuple[str, float]] = field(default_factory=list)
    truncated: bool = False


def translate(
    model: Seq2SeqModel | Sequence[Seq2SeqModel],
    tok: Tokenizer,
    sentences: list[str],
    options: SearchOptions | None = None,
    *,
    batch_tokens: int = 4096,
    need_weights: bool = False,
    max_src_len: int | None = None,
    workers: int | None = None,
    rerankers: Rerankers | None = None,
) -> list[Translation]:
    """Translate ``sentences`` with ``options`` (default ``SearchOptions()``: beam 5, fairseq's
    length penalty; beam 1 runs greedy search). ``model``: one model, or several sharing ``tok``
    decoded as an ensemble (``search.beam_search``). Empty strings give empty outputs. Sources
    longer than ``max_src_len`` subwords are cut (``Translation.truncated`` says so).
    ``workers``: decoding threads on CPU (see the module docstring); None: one per
    intra-op thread (``torch.get_num_threads()``), given at least
    ``MIN_SENTENCES_PER_WORKER`` sentences each; 1: decode in the calling thread.
    ``rerankers``: the models ``options.rerank`` and ``options.rerank_r2l`` weigh (then each
    output's ``score`` and its n-best scores are the reranking's: ``Rerankers``)."""
    options = options or SearchOptions()
    rerankers = rerankers or Rerankers()
    rerankers.check(options)
    members = ensemble_members(model)
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    if max_src_len is not None and max_src_len < 1:
        raise ValueError(f"max_src_len must be >= 1, got {max_src_len}")
    device = next(members[0].parameters()).device
    src_ids = tok.encode_src(sentences)
    truncated = [max_src_len is not None and len(ids) > max_src_len for ids in src_ids]
    if max_src_len is not None:
        src_ids = [ids[:max_src_len] for ids in src_ids]
    results: list[Translation | None] = [None] * len(sentences)
    todo = [i for i, ids in enumerate(src_ids) if ids]
    for i in set(range(len(sentences))) - set(todo):
        results[i] = Translation(sentences[i], "", 0.0, [], [])
    workers = _workers(workers, device, len(todo))

    def decode(share: list[int]) -> None:  # sentences ``share``, in length-sorted batches
        for batch_idx in inference_batches([src_ids[i] for i in share], batch_tokens) if share else []:
            idx = [share[j] for j in batch_idx]
            batch = collate([src_ids[i] for i in idx], None, batch_idx).to(device)
            if options.greedy and len(members) == 1:
                found = greedy_search(members[0], batch.src, batch.src_mask, options, need_weights=need_weights)
            else:
                found = beam_search(members, batch.src, batch.src_mask, options, need_weights=need_weights)
            lists = [tok.decode_tgt([h.tokens for h in hyps]) for hyps in found.nbest]
            scores = [[h.score for h in hyps] for hyps in found.nbest]
            scores = rerankers.rescore(options, [sentences[i] for i in idx], lists, scores)
            for row, i in enumerate(idx):
                hyps, texts, score = found.nbest[row], lists[row], scores[row]
                order = _order(options, texts, score)
                hyps, texts, score = [hyps[j] for j in order], [texts[j] for j in order], [score[j] for j in order]
                best = hyps[0]
                out_pieces = tok.tgt_pieces(best.tokens) + ([EOS_LABEL] if best.finished else [])
                results[i] = Translation(
                    source=sentences[i],
                    output=texts[0],
                    score=score[0],
                    src_pieces=tok.src.id_to_piece(src_ids[i]) + [EOS_LABEL],
                    out_pieces=out_pieces,
                    alignment=None if best.attention is None else best.attention[..., : len(src_ids[i]) + 1],
                    p_t=best.p_t,
                    nbest=list(zip(texts, score)) if options.n_best > 1 else [],
                    truncated=truncated[i],
                )

    if workers == 1:
        decode(todo)
    else:  # deal the sentences by length, so every share has the same mix of lengths
        by_length = sorted(todo, key=lambda i: len(src_ids[i]))
        # each worker in a copy of the caller's context: what it set (gated heads) holds there too
        contexts = [contextvars.copy_context() for _ in range(workers)]
        with _intra_op_threads(1), ThreadPoolExecutor(workers) as pool:
            shares = [by_length[w::workers] for w in range(workers)]
            list(pool.map(lambda c, share: c.run(decode, share), contexts, shares))
    return results  # type: ignore[return-value]


@contextlib.contextmanager
def _intra_op_threads(n: int) -> Iterator[None]:
    """PyTorch's intra-op thread count is process-wide: set it for the block, then restore it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def format_translation(t: Translation, index: int, n_best: int) -> str:
    """One output line, or n-best lines 'index ||| text ||| score' (Moses' n-best format)."""
    if n_best > 1:
        return "".join(f"{index} ||| {text} ||| {score:.4f}\n" for text, score in t.nbest or [("", 0.0)])
    return t.output + "\n"


def translate_file(
    model: Seq2SeqModel | Sequence[Seq2SeqModel],
    tok: Tokenizer,
    input_path: str | Path | None,
    output_path: str | Path | None,
    options: SearchOptions | None = None,
    *,
    batch_tokens: int = 4096,
    max_src_len: int | None = None,
    workers: int | None = None,
    interactive: bool = False,
    rerankers: Rerankers | None = None,
) -> None:
    """Translate a file (or stdin) to a file (written whole, or not at all) or stdout, one output
    line per input line; a warning on stderr for each input cut at ``max_src_len``.
    ``interactive``: read stdin line by line with a prompt and answer each at once.
    ``rerankers``: see ``translate``."""
    options = options or SearchOptions()
    common: dict[str, Any] = dict(
        batch_tokens=batch_tokens, max_src_len=max_src_len, workers=workers, rerankers=rerankers
    )
    if interactive:
        print(f"attnkit translate: beam {options.beam}. One sentence per line; Ctrl-D ends.", file=sys.stderr)
        while True:
            try:
                line = input("> ")
            except EOFError:
                print(file=sys.stderr)
                return
            sys.stdout.write(format_translation(translate(model, tok, [line], options, **common)[0], 0, options.n_best))
            sys.stdout.flush()
    lines = read_lines(input_path) if input_path else decode_lines(sys.stdin.buffer.read(), "<stdin>")
    found = translate(model, tok, lines, options, **common)
    for i, t in enumerate(found):
        if t.truncated:
            print(
                f"attnkit translate: warning: line {i + 1} is longer than {max_src_len} subwords; "
                "translated its beginning only",
                file=sys.stderr,
            )
    text = "".join(format_translation(t, i, options.n_best) for i, t in enumerate(found))
    if output_path is None:
        sys.stdout.write(text)
    else:
        write_text(output_path, text)
