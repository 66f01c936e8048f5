"""Word-level knowledge distillation (Hinton et al. 2015; Kim & Rush 2016, section 3.1): a
teacher's next-word distribution at every target position of the training pairs, kept as its k
most likely words with their probabilities renormalised to sum to 1.

The teacher (one trained model, or several decoded together: their probabilities averaged, as
``attnkit translate --ensemble`` decodes) reads every training pair teacher-forced once, before
training starts. With a fixed segmentation the pairs do not change between epochs, so neither do
the teacher's outputs, and an update costs no teacher forward: the student's loss reads k words a
position (``training.loss``). Teacher and student share one vocabulary.

Shapes: P target positions over all pairs (each pair's words and its EOS), k words a position.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..atomic import atomic_path
from ..config import TokenizerConfig
from ..data.batching import collate, inference_batches
from ..data.tokenizer import PAD, Tokenizer
from ..loading.model_dir import load_model
from ..models import RNNSeq2Seq, TransformerSeq2Seq

TABLE = "teacher.npz"  # the teacher's words, kept in the training directory for a resumed run


def _positions(offsets: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Every row of pairs ``indices``, pair by pair: offsets[i]:offsets[i + 1] for each i."""
    indices = np.asarray(indices)
    starts, lengths = offsets[indices], offsets[indices + 1] - offsets[indices]
    before = np.cumsum(lengths) - lengths  # where each pair's rows begin in the result
    return np.repeat(starts - before, lengths) + np.arange(lengths.sum())


@dataclass
class TeacherWords:
    """The teacher's top-k words at every target position of N training pairs."""

    ids: np.ndarray  # (P, k) int32
    probs: np.ndarray  # (P, k) float32, each row summing to 1
    offsets: np.ndarray  # (N + 1,) int64: pair i's positions are rows offsets[i]:offsets[i + 1]

    def rows(self, indices: np.ndarray) -> tuple[Tensor, Tensor]:
        """The positions of pairs ``indices`` in order, as the loss reads a batch's non-padding
        targets (sentence by sentence): ids (n, k) int64, probs (n, k)."""
        rows = _positions(self.offsets, indices)
        return torch.from_numpy(self.ids[rows]).long(), torch.from_numpy(self.probs[rows])

    def fits(self, tgt: Sequence[Sequence[int]]) -> bool:
        """Whether these are the words of pairs whose targets are ``tgt`` (one row per word and EOS)."""
        lengths = np.fromiter((len(t) + 1 for t in tgt), dtype=np.int64, count=len(tgt))
        return len(self.offsets) == len(tgt) + 1 and bool((np.diff(self.offsets) == lengths).all())

    def save(self, path: Path) -> None:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, ids=self.ids, probs=self.probs, offsets=self.offsets)

    @classmethod
    def load(cls, path: Path) -> TeacherWords:
        with np.load(path) as z:
            return cls(z["ids"], z["probs"], z["offsets"])


@dataclass
class Teacher:
    """The models that teach (decoded together when several) and the vocabulary they share."""

    models: list[TransformerSeq2Seq | RNNSeq2Seq]
    tokenizer: Tokenizer
    tokenizer_config: TokenizerConfig


def teacher_names(spec: str) -> list[str]:
    """``train.teacher``'s models: comma-separated directories or installed names."""
    return [name.strip() for name in spec.split(",") if name.strip()]


def load_teacher(spec: str, device: torch.device | str = "cpu") -> Teacher:
    """The models ``spec`` names, checked: translation models that share one vocabulary."""
    models: list[TransformerSeq2Seq | RNNSeq2Seq] = []
    first: tuple[str, Tokenizer, TokenizerConfig] | None = None
    names = teacher_names(spec)
    if not names:
        raise ValueError(f"train.teacher={spec!r} names no model")
    for name in names:
        try:
            model, tok, cfg = load_model(name, device=device)
        except (FileNotFoundError, ValueError) as err:
            raise ValueError(f"train.teacher={name}: {err}") from None
        if not isinstance(model, TransformerSeq2Seq | RNNSeq2Seq):
            raise ValueError(f"train.teacher={name} does not translate: it is a {type(model).__name__}")
        if first is None:
            first = (name, tok, cfg.tokenizer)
        elif not tok.same_as(first[1]):
            raise ValueError(f"train.teacher: {first[0]} and {name} have different vocabularies; teachers need one")
        models.append(model)
    assert first is not None
    return Teacher(models, first[1], first[2])


@torch.inference_mode()
def teacher_words(
    models: Sequence[TransformerSeq2Seq | RNNSeq2Seq],
    src: Sequence[list[int]],
    tgt: Sequence[list[int]],
    *,
    top: int,
    batch_tokens: int = 4096,
    device: torch.device | str = "cpu",
) -> TeacherWords:
    """Each pair read teacher-forced by ``models`` (their next-word probabilities averaged): the
    ``top`` most likely words at each of its target positions, renormalised."""
    if top < 1:
        raise ValueError(f"the teacher's words per position must be >= 1, got {top}")
    vocab = models[0].output_projection.weight.shape[0]
    top = min(top, vocab)
    lengths = np.fromiter((len(t) + 1 for t in tgt), dtype=np.int64, count=len(tgt))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = np.zeros((int(offsets[-1]), top), dtype=np.int32)
    probs = np.zeros((int(offsets[-1]), top), dtype=np.float32)
    for idx in inference_batches(list(tgt), batch_tokens):  # pairs of similar target length together
        b = collate([src[i] for i in idx], [tgt[i] for i in idx], idx).to(torch.device(device))
        assert b.tgt_in is not None and b.tgt_out is not None
        p = sum(torch.softmax(m(b.src, b.src_mask, b.tgt_in).logits.float(), dim=-1) for m in models)
        assert isinstance(p, Tensor)
        best, words = (p / len(models)).topk(top, dim=-1)  # (b, t, k)
        best = best / best.sum(-1, keepdim=True)
        keep = (b.tgt_out != PAD).cpu()  # the pairs' words and EOS, in row-major order
        rows = _positions(offsets, idx)
        ids[rows] = words.cpu()[keep].numpy()
        probs[rows] = best.cpu()[keep].numpy()
    return TeacherWords(ids, probs, offsets)


def write_teacher_words(
    teacher: Teacher,
    src: Sequence[list[int]],
    tgt: Sequence[list[int]],
    path: Path,
    *,
    top: int,
    batch_tokens: int,
    device: torch.device,
    say=print,
) -> None:
    """The teacher's words at every target position of the pairs ``src``, ``tgt`` (``teacher_words``)
    saved to ``path``, saying what it does and how long it took."""
    began = time.perf_counter()
    say(f"the teacher reads the {len(tgt):,} training pairs")
    models = [m.to(device) for m in teacher.models]
    words = teacher_words(models, src, tgt, top=top, batch_tokens=batch_tokens, device=device)
    words.save(path)
    say(
        f"its {words.ids.shape[1]} most likely words at each of {len(words.ids):,} positions "
        f"({time.perf_counter() - began:.0f} s)"
    )
