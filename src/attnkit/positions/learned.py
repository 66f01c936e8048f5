"""Learned absolute position embeddings (Gehring et al. 2017; BERT, GPT)."""

from __future__ import annotations

from torch import Tensor, nn

from .base import AbsolutePositions, as_positions


class LearnedPositionalEmbedding(AbsolutePositions):
    """One trained vector per position 0 .. max_len-1; longer inputs are an error."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__(d_model)
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, positions: int | Tensor) -> Tensor:
        pos = as_positions(positions, self.embedding.weight.device)
        if len(pos) and int(pos.max()) >= self.max_len:
            raise ValueError(
                f"position {int(pos.max())} is past the learned table (max_len={self.max_len}); "
                "truncate the input or use a larger max_len"
            )
        return self.embedding(pos)  # (t, d_model)
