"""BERT's input layer (Devlin et al. 2019, sec. 3): token + learned position +
segment embeddings, LayerNorm, dropout. The rest of a BERT-style encoder is
attnkit's TransformerEncoder with post-norm layers and GELU."""

from __future__ import annotations

from torch import Tensor, nn

from ..positions.learned import LearnedPositionalEmbedding
from .dropout import Dropout


class BertEmbedding(nn.Module):
    """x_i = LayerNorm(E_tok[w_i] + E_pos[i] + E_seg[s_i]).

    ``use_positions=False`` leaves the position embeddings out, to see what
    self-attention does without position information (repeated words become identical).
    """

    def __init__(
        self,
        vocab: int,
        d_model: int,
        *,
        max_positions: int = 512,
        segments: int = 2,
        pad_id: int = 0,
        eps: float = 1e-12,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.positions = LearnedPositionalEmbedding(d_model, max_positions)  # E_pos, trained with the model
        self.segment = nn.Embedding(segments, d_model) if segments > 0 else None
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = Dropout(dropout)
        self.max_positions = max_positions

    def input_module(self) -> nn.Module:
        """What makes the input vectors before positions and segments: the word table."""
        return self.word

    def forward(self, tokens: Tensor, segments: Tensor | None = None, use_positions: bool = True) -> Tensor:
        """tokens (b, s) -> (b, s, d_model); segments (b, s) default all 0."""
        s = tokens.shape[1]
        if s > self.max_positions:
            raise ValueError(f"input of {s} tokens is longer than the model's {self.max_positions} positions")
        x = self.word(tokens)
        if use_positions:
            x = x + self.positions.embedding.weight[:s]
        if self.segment is not None:
            x = x + (self.segment.weight[0] if segments is None else self.segment(segments))
        return self.dropout(self.norm(x))

    def lookup(self, tokens: Tensor) -> Tensor:
        """The word table's rows for ``tokens``: no position, segment or LayerNorm."""
        return self.word(tokens)
