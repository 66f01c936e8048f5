"""Vaswani et al. 2017, sec. 3.5: fixed sinusoidal positional encoding."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import AbsolutePositions, as_positions


def sinusoid_table(positions: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).

    Computed in float64 so every position gets the same float32 vector however
    it is reached. Returns (t, d_model) float32.
    """
    if d_model <= 0:
        raise ValueError(f"d_model must be positive, got {d_model}")
    pos = positions.to(torch.float64)[:, None]  # (t, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)  # (ceil(d/2),)
    angle = pos * torch.exp(-two_i * (math.log(base) / d_model))  # (t, ceil(d/2))
    pe = torch.empty(len(positions), d_model, dtype=torch.float64, device=positions.device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(torch.float32)


class SinusoidalPositionalEncoding(AbsolutePositions):
    """Fixed sin/cos position vectors (no parameters), bounded in [-1, 1].

    ``forward(t)`` returns (t, d_model); ``forward(positions)`` the rows for
    those positions. Positions past ``max_len`` are computed on the fly, so the
    same position always gets the same vector whatever the sequence length.
    """

    table: Tensor  # (max_len, d_model), a non-persistent buffer

    def __init__(self, d_model: int, max_len: int = 1024, *, base: float = 10000.0) -> None:
        super().__init__(d_model)
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.base = base
        self.register_buffer("table", sinusoid_table(torch.arange(max_len), d_model, base), persistent=False)

    def forward(self, positions: int | Tensor) -> Tensor:
        if isinstance(positions, int) and 0 <= positions <= len(self.table):
            return self.table[:positions]  # the common case: a view, no copy
        pos = as_positions(positions, self.table.device)
        if len(pos) == 0 or int(pos.max()) < len(self.table):
            return self.table[pos]
        return sinusoid_table(pos, self.d_model, self.base).to(self.table.device)
