"""Press, Smith & Lewis 2022 (ALiBi): a fixed linear distance penalty per head.

score_ij += -m_h * |i - j|, with head slopes m_h a geometric sequence starting
at 2^(-8/n) (sec. 3); no parameters, and it extrapolates to longer inputs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import AttentionPositions


def alibi_slopes(num_heads: int) -> Tensor:
    """Head slopes; for a non-power-of-two count, the paper's interleaving recipe."""
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")

    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = geometric(closest)
    if closest != num_heads:
        slopes += geometric(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes)


class ALiBi(AttentionPositions):
    """Linear biases: -slope_h * |j - i| added to head h's scores."""

    slopes: Tensor  # (h,), a non-persistent buffer

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        distance = (k_pos[None, :] - q_pos[:, None]).abs().to(q.dtype)  # (t, s)
        return -self.slopes.to(q.dtype)[None, :, None, None] * distance  # (1, h, t, s)
