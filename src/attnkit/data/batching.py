"""Token-count batching with length bucketing (little padding) and deterministic order.

Examples are sorted by length (ties broken at random from the seed) and cut
into batches of at most ``batch_tokens`` padded tokens; the batch order is
shuffled with a generator seeded by (seed, epoch). So the batches of epoch e
are a pure function of the data, the seed and e, and a run can resume at
(epoch, batch index) and see exactly what an uninterrupted run would. With
subword sampling (``resample``) each epoch's pairs are segmented afresh; each
draw is kept in a folder (``draws``) until a checkpoint past its epoch, so a
resumed run reads back the segmentation it stopped in instead of drawing another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..atomic import atomic_open
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


Segmentation = Callable[[int], tuple[list[list[int]], list[list[int]]]]


def _flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in seqs], out=offsets[1:])
    return np.fromiter((i for x in seqs for i in x), dtype=np.int32, count=int(offsets[-1])), offsets


def _unflat(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    flat, cuts = ids.tolist(), offsets.tolist()
    return [flat[a:b] for a, b in pairwise(cuts)]


class BucketBatcher:
    """Training batches over tokenized pairs.

    ``resample(epoch)``, when given, segments the same pairs afresh for each epoch (subword
    sampling); a sampled side longer than ``max_len`` keeps its fixed segmentation. Set
    ``draws`` to a folder to keep each epoch's draw there (``epoch_<n>.npz``; ``prune_draws``
    removes the ones a checkpoint has passed): sentencepiece's sampler cannot be seeded to
    repeat itself in another process, so a resumed run (or another rank) reads the draw back."""

    def __init__(
        self,
        src: list[list[int]],
        tgt: list[list[int]],
        *,
        batch_tokens: int,
        seed: int,
        max_sentences: int = 10_000,
        resample: Segmentation | None = None,
        max_len: int | None = None,
    ) -> None:
        if batch_tokens <= 0:
            raise ValueError(f"train.batch_tokens must be positive, got {batch_tokens}")
        self.batch_tokens, self.seed, self.max_sentences = batch_tokens, seed, max_sentences
        self._set(src, tgt)
        longest = int(max(self.src_len.max(), self.tgt_len.max()))
        if longest > batch_tokens:
            raise ValueError(
                f"train.batch_tokens={batch_tokens} is smaller than the longest example ({longest} tokens)"
            )
        self.fixed, self.resample, self.segmented = (src, tgt), resample, -1
        self.max_len = min(max_len or batch_tokens, batch_tokens - 1)
        self.draws: Path | None = None

    @property
    def samples(self) -> bool:
        """Whether each epoch is segmented afresh."""
        return self.resample is not None

    def _set(self, src: list[list[int]], tgt: list[list[int]]) -> None:
        self.src, self.tgt = src, tgt
        self.src_len = np.fromiter((len(s) + 1 for s in src), dtype=np.int64, count=len(src))
        self.tgt_len = np.fromiter((len(t) + 1 for t in tgt), dtype=np.int64, count=len(tgt))

    def _segment(self, epoch: int) -> None:
        """Hold epoch ``epoch``'s segmentation (the fixed one without ``resample``): the kept
        draw when ``draws`` holds that epoch's, else a new draw, kept there."""
        if self.resample is None or self.segmented == epoch:
            return
        drawn = self._read_draw(epoch)
        if drawn is None:
            src, tgt = self.resample(epoch)
            fixed_src, fixed_tgt = self.fixed
            if len(src) != len(fixed_src) or len(tgt) != len(fixed_tgt):
                raise ValueError(f"resampling gave {len(src)}/{len(tgt)} sequences for {len(fixed_src)} pairs")
            fits = lambda new, old: [n if 0 < len(n) <= self.max_len else o for n, o in zip(new, old, strict=True)]
            drawn = fits(src, fixed_src), fits(tgt, fixed_tgt)
            self._keep_draw(epoch, *drawn)
        self._set(*drawn)
        self.segmented = epoch

    def kept_draw(self, epoch: int) -> Path | None:
        """The file of ``epoch``'s kept draw, if there is one."""
        path = None if self.draws is None else self.draws / f"epoch_{epoch}.npz"
        return path if path is not None and path.is_file() else None

    def prune_draws(self, before: int) -> None:
        """Remove the kept draws of the epochs before ``before``."""
        for path in [] if self.draws is None else self.draws.glob("epoch_*.npz"):
            if path.stem.removeprefix("epoch_").isdigit() and int(path.stem.removeprefix("epoch_")) < before:
                path.unlink(missing_ok=True)

    def _read_draw(self, epoch: int) -> tuple[list[list[int]], list[list[int]]] | None:
        path = self.kept_draw(epoch)
        if path is None:
            return None
        with np.load(path) as f:
            if len(f["src_offsets"]) != len(self.fixed[0]) + 1:
                raise ValueError(f"{path} holds a draw of {len(f['src_offsets']) - 1} pairs, not {len(self.fixed[0])}")
            return _unflat(f["src"], f["src_offsets"]), _unflat(f["tgt"], f["tgt_offsets"])

    def _keep_draw(self, epoch: int, src: list[list[int]], tgt: list[list[int]]) -> None:
        if self.draws is None:
            return
        (src_ids, src_offsets), (tgt_ids, tgt_offsets) = _flat(src), _flat(tgt)
        with atomic_open(self.draws / f"epoch_{epoch}.npz", "wb") as f:
            np.savez(f, src=src_ids, src_offsets=src_offsets, tgt=tgt_ids, tgt_offsets=tgt_offsets)

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The batches (index arrays) of one epoch, in training order; ``collate`` and the lengths
        then refer to that epoch's segmentation."""
        self._segment(epoch)
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
