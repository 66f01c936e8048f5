"""Raffel et al. 2020 (T5), sec. 2.1: a learned scalar bias per head and distance bucket.

Distances below ``num_buckets / 2`` (per direction) get their own bucket; longer
ones share logarithmically wider buckets up to ``max_distance``, beyond which
all distances share the last bucket.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import AttentionPositions


def t5_bucket(relative: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """Bucket index for relative distances ``relative = key_pos - query_pos``."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)  # only the past is visible to a causal decoder
    exact = num_buckets // 2
    # log-spaced buckets from `exact` up to `max_distance`
    log_ratio = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class T5RelativeBias(AttentionPositions):
    """Scalar bias b[head, bucket(j - i)] added to the attention scores."""

    def __init__(
        self, num_heads: int, *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
    ) -> None:
        super().__init__()
        if num_buckets < 4 or max_distance <= num_buckets // 4:
            raise ValueError(
                f"need num_buckets >= 4 and max_distance > num_buckets/4, got {num_buckets}, {max_distance}"
            )
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.bias = nn.Embedding(num_buckets, num_heads)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        buckets = t5_bucket(
            k_pos[None, :] - q_pos[:, None],
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (t, s)
        return self.bias(buckets).permute(2, 0, 1).unsqueeze(0).to(q.dtype)  # (1, h, t, s)
