"""Shaw, Uszkoreit & Vaswani 2018: relative position representations.

e_ij = q_i . (k_j + a^K_ij) / sqrt(d),  z_i = sum_j alpha_ij (v_j + a^V_ij),
with a_ij = w_{clip(j - i, -k, k)}: one learned vector per clipped distance,
shared by all heads of a layer (eqs. 3-5 of the paper).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import AttentionPositions


class RelativePositions(AttentionPositions):
    """Clipped relative key (and optionally value) embeddings."""

    def __init__(self, head_dim: int, max_distance: int = 16, *, values: bool = True) -> None:
        super().__init__()
        if head_dim <= 0 or max_distance <= 0:
            raise ValueError(f"head_dim and max_distance must be positive, got {head_dim}, {max_distance}")
        self.max_distance = max_distance
        self.key_table = nn.Parameter(torch.randn(2 * max_distance + 1, head_dim) * head_dim**-0.5)
        self.value_table = (
            nn.Parameter(torch.randn(2 * max_distance + 1, head_dim) * head_dim**-0.5) if values else None
        )
        self.needs_weights = values

    def relative_index(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """(t, s) index into the tables: clip(j - i, -k, k) + k."""
        k = self.max_distance
        return (k_pos[None, :] - q_pos[:, None]).clamp(-k, k) + k

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        rel = self.relative_index(q_pos, k_pos)  # (t, s)
        per_distance = q @ self.key_table.to(q.dtype).T  # (b, h, t, 2k+1): q_i . w_r for every r
        bias = per_distance.gather(-1, rel.expand(*q.shape[:-2], *rel.shape))  # (b, h, t, s)
        return bias * (1.0 / math.sqrt(q.shape[-1]))

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        if self.value_table is None:
            return None
        rel = self.relative_index(q_pos, k_pos).expand_as(weights)  # (b, h, t, s)
        per_distance = weights.new_zeros(*weights.shape[:-1], self.value_table.shape[0])
        per_distance.scatter_add_(-1, rel, weights)  # (b, h, t, 2k+1): weight mass per distance
        return per_distance @ self.value_table.to(weights.dtype)  # (b, h, t, d)
