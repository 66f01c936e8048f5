"""Token-count batching with length bucketing (little padding) and deterministic order.

Examples are sorted by length (ties broken at random from the seed) and cut
into batches of at most ``batch_tokens`` padded tokens; the batch order is
shuffled with a generator seeded by (seed, epoch). So the batches of epoch e
are a pure function of the data, the seed and e, and a run can resume at
(epoch, batch index) and see exactly what an uninterrupted run would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .tokenizer import BOS, EOS, PAD


@dataclass
class Batch:
    """src (b, s) ids + EOS; src_mask (b, s); tgt_in = BOS + y; tgt_out = y + EOS (padded with PAD)."""

    src: Tensor
    src_mask: Tensor
    tgt_in: Tensor | None
    tgt_out: Tensor | None
    indices: np.ndarray  # positions of these examples in the corpus
    n_tgt_tokens: int = 0

    def to(self, device: torch.device) -> Batch:
        def move(x: Tensor | None) -> Tensor | None:
            return None if x is None else x.to(device, non_blocking=True)

        return Batch(
            self.src.to(device, non_blocking=True),
            self.src_mask.to(device, non_blocking=True),
            move(self.tgt_in),
            move(self.tgt_out),
            self.indices,
            self.n_tgt_tokens,
        )


def _pad(seqs: list[list[int]], prefix: int | None, suffix: int | None) -> np.ndarray:
    extra = (prefix is not None) + (suffix is not None)
    out = np.full((len(seqs), max(len(s) for s in seqs) + extra), PAD, dtype=np.int64)
    for i, s in enumerate(seqs):
        row = ([prefix] if prefix is not None else []) + s + ([suffix] if suffix is not None else [])
        out[i, : len(row)] = row
    return out


def _with_targets(src: Tensor, mask: Tensor, tgt: list[list[int]] | None, indices: np.ndarray) -> Batch:
    """A Batch of ``src`` and ``mask``, with BOS + y and y + EOS when targets are given."""
    if tgt is None:
        return Batch(src, mask, None, None, indices)
    tgt_in = torch.from_numpy(_pad(tgt, BOS, None))
    tgt_out = torch.from_numpy(_pad(tgt, None, EOS))
    return Batch(src, mask, tgt_in, tgt_out, indices, int(sum(len(t) + 1 for t in tgt)))


def collate(src: list[list[int]], tgt: list[list[int]] | None, indices: np.ndarray) -> Batch:
    s = torch.from_numpy(_pad(src, None, EOS))
    return _with_targets(s, s != PAD, tgt, indices)


def _cut(order: np.ndarray, lengths: np.ndarray, batch_tokens: int, max_sentences: int) -> list[np.ndarray]:
    """Cut sorted ``order`` into consecutive batches whose padded size fits ``batch_tokens``."""
    batches, start, longest = [], 0, 0
    for pos, i in enumerate(order):
        new_longest = max(longest, lengths[i])
        n = pos - start + 1
        if pos > start and (n * new_longest > batch_tokens or n > max_sentences):
            batches.append(order[start:pos])
            start, new_longest = pos, lengths[i]
        longest = new_longest
    if start < len(order):
        batches.append(order[start:])
    return batches


class BucketBatcher:
    """Training batches over tokenized pairs."""

    def __init__(
        self, src: list[list[int]], tgt: list[list[int]], *, batch_tokens: int, seed: int, max_sentences: int = 10_000
    ) -> None:
        if batch_tokens <= 0:
            raise ValueError(f"train.batch_tokens must be positive, got {batch_tokens}")
        self.src, self.tgt = src, tgt
        self.batch_tokens, self.seed, self.max_sentences = batch_tokens, seed, max_sentences
        self.src_len = np.fromiter((len(s) + 1 for s in src), dtype=np.int64, count=len(src))
        self.tgt_len = np.fromiter((len(t) + 1 for t in tgt), dtype=np.int64, count=len(tgt))
        longest = int(max(self.src_len.max(), self.tgt_len.max()))
        if longest > batch_tokens:
            raise ValueError(
                f"train.batch_tokens={batch_tokens} is smaller than the longest example ({longest} tokens)"
            )

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The batches (index arrays) of one epoch, in training order."""
        rng = np.random.default_rng([self.seed, epoch])
        order = np.lexsort((rng.random(len(self.src)), self.src_len, self.tgt_len))
        batches = _cut(order, np.maximum(self.src_len, self.tgt_len), self.batch_tokens, self.max_sentences)
        return [batches[i] for i in rng.permutation(len(batches))]

    def collate(self, indices: np.ndarray) -> Batch:
        return collate([self.src[i] for i in indices], [self.tgt[i] for i in indices], indices)

    def padding_fraction(self, epoch: int = 0) -> float:
        """Share of padded positions in the source and target tensors of an epoch."""
        real = padded = 0
        for b in self.epoch(epoch):
            real += int(self.src_len[b].sum() + self.tgt_len[b].sum())
            padded += len(b) * int(self.src_len[b].max() + self.tgt_len[b].max())
        return 1.0 - real / padded


def inference_batches(src: list[list[int]], batch_tokens: int, max_sentences: int = 256) -> list[np.ndarray]:
    """Batches for decoding, sorted by source length (restore order with ``Batch.indices``)."""
    lengths = np.fromiter((len(s) + 1 for s in src), dtype=np.int64, count=len(src))
    return _cut(np.argsort(lengths, kind="stable"), lengths, batch_tokens, max_sentences)


def collate_images(images: np.ndarray, tgt: list[list[int]] | None, indices: np.ndarray) -> Batch:
    """images (b, H, W) float32 -> Batch with src the images and src_mask (b, H, W) all True
    (every pixel real); targets as in ``collate``."""
    src = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    return _with_targets(src, torch.ones(src.shape, dtype=torch.bool), tgt, indices)


class ImageBatcher:
    """Training batches over (image, caption) pairs of one image size: shuffled by (seed, epoch)
    and cut into batches of at most ``batch_tokens`` padded target tokens."""

    def __init__(self, images: np.ndarray, tgt: list[list[int]], *, batch_tokens: int, seed: int) -> None:
        if len(images) != len(tgt):
            raise ValueError(f"{len(images)} images but {len(tgt)} captions")
        self.images, self.tgt, self.batch_tokens, self.seed = images, tgt, batch_tokens, seed
        self.tgt_len = np.fromiter((len(t) + 1 for t in tgt), dtype=np.int64, count=len(tgt))
        if int(self.tgt_len.max()) > batch_tokens:
            raise ValueError(
                f"train.batch_tokens={batch_tokens} is smaller than the longest caption "
                f"({int(self.tgt_len.max())} tokens)"
            )

    def epoch(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        return _cut(rng.permutation(len(self.tgt)), self.tgt_len, self.batch_tokens, 10_000)

    def collate(self, indices: np.ndarray) -> Batch:
        return collate_images(self.images[indices], [self.tgt[i] for i in indices], indices)
