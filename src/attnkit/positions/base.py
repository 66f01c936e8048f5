"""Two places position information can enter a Transformer.

* Absolute schemes (sinusoidal, learned, learnable Fourier features) give a vector per position that is
  added to the token embeddings: ``forward(positions) -> (t, d_model)``.
* Attention schemes (relative/Shaw, T5 buckets, RoPE, ALiBi) act inside
  self-attention through three hooks, each a no-op by default:
  ``rotate`` transforms queries and keys, ``score_bias`` adds to the scaled
  scores, ``value_term`` adds to the context (needs explicit weights).

Positions are integer tensors of absolute indices, so an incremental decoder
passes ``offset + arange(t)`` for its queries and the whole cache for its keys.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def as_positions(positions: int | Tensor, device: torch.device | None = None) -> Tensor:
    """``t`` -> arange(t); a 1-D integer tensor is returned as is."""
    if isinstance(positions, int):
        if positions < 0:
            raise ValueError(f"sequence length must be >= 0, got {positions}")
        return torch.arange(positions, device=device)
    if positions.dim() != 1 or positions.is_floating_point():
        raise ValueError(f"positions must be a 1-D integer tensor, got {positions.dtype} {tuple(positions.shape)}")
    return positions


class AbsolutePositions(nn.Module):
    """A vector per position, added to the token embeddings."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        if d_model <= 0:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.d_model = d_model


class AttentionPositions(nn.Module):
    """Position information applied inside self-attention.

    ``needs_weights`` is True when ``value_term`` is used: the fused kernel
    cannot add a per-weight term to the context, so the explicit path runs.
    """

    needs_weights: bool = False

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """Transform queries or keys (b, h, t, d) at ``positions`` (t,). Identity by default."""
        return x

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Additive bias broadcastable to (b, h, t, s), or None."""
        return None

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Term added to the per-head context (b, h, t, d), or None."""
        return None
