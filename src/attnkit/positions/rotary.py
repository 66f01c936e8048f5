"""Su et al. 2021 (RoFormer), eq. 34: rotary position embedding (RoPE).

Each pair of dimensions (2i, 2i+1) of a query or key at position m is rotated
by the angle m * theta_i, theta_i = base^(-2i/d). The dot product of a rotated
query at m and key at n then depends only on m - n.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import AttentionPositions


class RotaryPositions(AttentionPositions):
    """Rotate query/key dimension pairs by position-dependent angles (no parameters)."""

    inv_freq: Tensor  # (head_dim / 2,) float64, a non-persistent buffer

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"rotary embedding needs an even head_dim, got {head_dim}")
        self.head_dim = head_dim
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def angles(self, positions: Tensor) -> Tensor:
        """(t, d/2) rotation angles m * theta_i, float32 (computed in float64)."""
        return (positions.to(torch.float64)[:, None] * self.inv_freq.to(positions.device)).float()

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"rotary embedding built for head_dim {self.head_dim}, got {x.shape[-1]}")
        angle = self.angles(positions)  # (t, d/2)
        cos, sin = angle.cos(), angle.sin()
        pairs = x.float().unflatten(-1, (-1, 2))  # (..., t, d/2, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return rotated.flatten(-2).to(x.dtype)
