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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .data import Tokenizer, collate, inference_batches
from .search import beam_search, greedy_search

EOS_LABEL = "</s>"
MIN_SENTENCES_PER_WORKER = 32  # below this many sentences per worker thread, decode in fewer threads


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
    model: nn.Module,
    tok: Tokenizer,
    sentences: list[str],
    *,
    beam: int = 1,
    alpha: float | None = None,
    penalty: str = "fairseq",
    n_best: int = 1,
    batch_tokens: int = 4096,
    need_weights: bool = False,
    max_len_ratio: float = 1.5,
    max_len_extra: int = 10,
    max_src_len: int | None = None,
    workers: int | None = None,
) -> list[Translation]:
    """Translate ``sentences``; empty strings give empty outputs. Sources longer than
    ``max_src_len`` subwords are cut (``Translation.truncated`` says so).
    ``workers``: decoding threads on CPU (see the module docstring); None: one per
    intra-op thread (``torch.get_num_threads()``), given at least
    ``MIN_SENTENCES_PER_WORKER`` sentences each; 1: decode in the calling thread.
    ``penalty``/``alpha``: beam search's length penalty (``search.PENALTIES``; alpha None = the
    style's default: fairseq's |Y|^1, as in the published Multi30k setup)."""
    device = next(model.parameters()).device
    src_ids = tok.encode_src(sentences)
    truncated = [max_src_len is not None and len(ids) > max_src_len for ids in src_ids]
    if max_src_len is not None:
        src_ids = [ids[:max_src_len] for ids in src_ids]
    results: list[Translation | None] = [None] * len(sentences)
    todo = [i for i, ids in enumerate(src_ids) if ids]
    for i in set(range(len(sentences))) - set(todo):
        results[i] = Translation(sentences[i], "", 0.0, [], [])
    if workers is None:
        workers = torch.get_num_threads() if device.type == "cpu" else 1
        workers = max(1, min(workers, len(todo) // MIN_SENTENCES_PER_WORKER))
    elif workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    elif workers > 1 and device.type != "cpu":
        raise ValueError(f"workers > 1 is for CPU decoding; the model is on {device}")

    common = dict(max_len_ratio=max_len_ratio, max_len_extra=max_len_extra, need_weights=need_weights)

    def decode(share: list[int]) -> None:  # sentences ``share``, in length-sorted batches
        for batch_idx in inference_batches([src_ids[i] for i in share], batch_tokens) if share else []:
            idx = [share[j] for j in batch_idx]
            batch = collate([src_ids[i] for i in idx], None, batch_idx).to(device)
            if beam == 1 and n_best == 1:
                found = greedy_search(model, batch.src, batch.src_mask, **common)
            else:
                found = beam_search(
                    model, batch.src, batch.src_mask, beam=beam, alpha=alpha, penalty=penalty, n_best=n_best, **common
                )
            for row, i in enumerate(idx):
                hyps = found.nbest[row]
                texts = tok.decode_tgt([h.tokens for h in hyps])
                best = hyps[0]
                out_pieces = tok.tgt_pieces(best.tokens) + ([EOS_LABEL] if best.finished else [])
                results[i] = Translation(
                    source=sentences[i],
                    output=texts[0],
                    score=best.score,
                    src_pieces=tok.src.id_to_piece(src_ids[i]) + [EOS_LABEL],
                    out_pieces=out_pieces,
                    alignment=None if best.attention is None else best.attention[..., : len(src_ids[i]) + 1],
                    p_t=best.p_t,
                    nbest=list(zip(texts, [h.score for h in hyps])) if n_best > 1 else [],
                    truncated=truncated[i],
                )

    if workers == 1:
        decode(todo)
    else:  # deal the sentences by length, so every share has the same mix of lengths
        by_length = sorted(todo, key=lambda i: len(src_ids[i]))
        with _intra_op_threads(1), ThreadPoolExecutor(workers) as pool:
            list(pool.map(decode, [by_length[w::workers] for w in range(workers)]))
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
