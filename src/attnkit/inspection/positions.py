"""The arrays behind the positional-encoding figures (seed 003 and the relative
schemes), computed from attnkit's own position modules, untrained or taken
from a trained model."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..positions import ALiBi, RelativePositions, RotaryPositions, T5RelativeBias, sinusoid_table, t5_bucket

SCHEMES = ("sinusoidal", "learned", "relative", "t5", "rope", "alibi")


def find_scheme(model: nn.Module, cls: type) -> nn.Module | None:
    """The first position module of type ``cls`` inside ``model`` (the encoder's, as built first)."""
    return next((m for m in model.modules() if isinstance(m, cls)), None)


def sinusoidal_matrix(length: int, d_model: int) -> np.ndarray:
    return sinusoid_table(torch.arange(length), d_model).numpy()


def alibi_bias(heads: int, length: int) -> np.ndarray:
    pos = torch.arange(length)
    return ALiBi(heads).score_bias(torch.zeros(1, heads, length, 1), pos, pos)[0].numpy()


def t5_bias(module: T5RelativeBias, length: int) -> np.ndarray:
    pos = torch.arange(length)
    with torch.no_grad():
        return module.score_bias(torch.zeros(1), pos, pos)[0].float().numpy()


def t5_buckets(length: int, *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> np.ndarray:
    pos = torch.arange(length)
    rel = pos[None, :] - pos[:, None]
    return t5_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance).numpy()


def shaw_index(length: int, max_distance: int = 16) -> np.ndarray:
    pos = torch.arange(length)
    return RelativePositions(1, max_distance).relative_index(pos, pos).numpy()


def rotary_views(head_dim: int, length: int, *, starts: tuple[int, ...] = (0, 17, 34), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(angles (length, head_dim/2), scores (len(starts), length - max(starts))): the
    score between one query vector at position m and one key vector at m + k."""
    rope = RotaryPositions(head_dim)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, head_dim, generator=g)
    k = torch.randn(1, 1, 1, head_dim, generator=g)
    span = length - max(starts)
    rows = []
    for m in starts:
        rq = rope.rotate(q, torch.tensor([m]))
        rk = rope.rotate(k.expand(1, 1, span, head_dim), torch.arange(m, m + span))
        rows.append((rq @ rk.transpose(-1, -2))[0, 0, 0].numpy())
    return rope.angles(torch.arange(length)).numpy(), np.stack(rows)
